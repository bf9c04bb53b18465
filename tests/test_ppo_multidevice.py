"""Data-parallel PPO on two (virtual CPU) devices, in a subprocess so the device count can be set."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from session_once import once_per_session

from brax_core.training.agents.ppo import checkpoint

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import jax
    import numpy as np
    sys.path.insert(0, os.environ["PPO_TESTS_DIR"])
    import conftest  # noqa: F401  (shared compile cache)
    from test_ppo_train import STEP, TINY
    from brax_core.training.agents.ppo import train as ppo

    assert jax.device_count() == 2, jax.devices()
    try:
        ppo.train("fast", num_timesteps=STEP, **{**TINY, "num_envs": 1})
    except ValueError as e:
        device_error = str(e)
    reports = []
    _, params, metrics = ppo.train(
        "fast", num_timesteps=4 * STEP, num_evals=0, log_training_metrics=True, training_metrics_steps=2 * STEP,
        progress_fn=lambda s, m: reports.append((s, m["episode/sum_reward"])), **TINY)
    leaves = jax.tree.leaves(params)
    spread = [len(leaf.addressable_shards) for leaf in leaves]
    same = all(
        np.array_equal(np.asarray(leaf.addressable_shards[0].data), np.asarray(leaf.addressable_shards[1].data))
        for leaf in leaves)
    train_result = {"spread": sorted(set(spread)), "same": same, "reports": reports,
                    "count": float(params.normalizer_params.count), "device_error": device_error,
                    "params": [np.asarray(leaf.addressable_shards[0].data).tolist() for leaf in leaves]}

    # One PPO update of the same global batch, on one device and split over two. Whole `train()` runs cannot be
    # compared: every device collects its own rollouts from its own keys (as in Brax), so the two runs see different
    # data by construction. The update itself is where data parallelism must not change the result: gradients and
    # observation statistics are averaged over the devices. Three parts of PPO stay per device by design (as in Brax)
    # and are set here so that they cannot differ: one minibatch per pass (the per-device shuffle then only reorders
    # a mean), no advantage normalisation (its statistics are per minibatch and device) and no entropy bonus (its
    # estimate samples per device). Plain SGD keeps the update linear in the gradient, so rounding differences in
    # the cross-device mean stay rounding-sized (Adam's first step is about lr * sign(g) and would amplify them).
    import functools
    import jax.numpy as jnp, optax
    from jax.sharding import Mesh, PartitionSpec as P
    from brax_core.training import types
    from brax_core.training.acme import running_statistics
    from brax_core.training.agents.ppo import losses, networks

    obs_size, action_size, batch, horizon = 5, 2, 8, 6
    net = networks.make_ppo_networks(
        obs_size, action_size, preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=(16,), value_hidden_layer_sizes=(16,))
    optimizer = optax.sgd(0.05)
    loss_fn = functools.partial(
        losses.compute_ppo_loss, ppo_network=net, entropy_cost=0.0, discounting=0.97, reward_scaling=1.0,
        gae_lambda=0.95, clipping_epsilon=0.3, normalize_advantage=False)
    update = ppo.make_ppo_update(
        net, optimizer, loss_fn, num_minibatches=1, num_updates_per_batch=3,
        normalizer_update=functools.partial(running_statistics.update, pmap_axis_name="i"))

    keys = jax.random.split(jax.random.PRNGKey(3), 8)
    start = losses.PPONetworkParams(policy=net.policy_network.init(keys[0]), value=net.value_network.init(keys[1]))
    ts = ppo.TrainingState(
        optimizer_state=optimizer.init(start), params=start,
        normalizer_params=running_statistics.init_state(jax.ShapeDtypeStruct((obs_size,), jnp.float32)),
        env_steps=jnp.zeros((2,), jnp.uint32), training_step=jnp.zeros((), jnp.int32))
    obs = 2.0 + 3.0 * jax.random.normal(keys[2], (batch, horizon + 1, obs_size))
    data = types.Transition(
        observation=obs[:, :-1], next_observation=obs[:, 1:],
        action=jax.random.normal(keys[3], (batch, horizon, action_size)),
        reward=jax.random.normal(keys[4], (batch, horizon)),
        discount=(jax.random.uniform(keys[5], (batch, horizon)) > 0.1).astype(jnp.float32),
        extras={"policy_extras": {"raw_action": jax.random.normal(keys[6], (batch, horizon, action_size)),
                                  "log_prob": -jax.random.uniform(keys[7], (batch, horizon))},
                "state_extras": {"truncation": jnp.zeros((batch, horizon))}})

    def run(n_devices):
        mesh = Mesh(np.asarray(jax.devices()[:n_devices]), ("i",))
        f = jax.shard_map(lambda ts, d, k: update(ts, d, k)[0], mesh=mesh, in_specs=(P(), P("i"), P()),
                          out_specs=P(), check_vma=False)
        out = jax.jit(f)(ts, data, jax.random.PRNGKey(11))
        return [np.asarray(x.addressable_shards[0].data).tolist()
                for x in jax.tree.leaves((out.params, out.normalizer_params))]

    update_result = {"one": run(1), "two": run(2), "start": [
        np.asarray(x).tolist() for x in jax.tree.leaves((ts.params, ts.normalizer_params))]}

    print("RESULT" + json.dumps({"train": train_result, "update": update_result}))
    """
)


# The same run as the script's first, on two processes of one CPU device each, joined by JAX's multi-controller
# runtime (jax.distributed: a coordinator on localhost, gloo collectives between the CPU processes).
MULTI_PROCESS_SCRIPT = textwrap.dedent(
    """
    import faulthandler, json, os, sys
    import jax
    import numpy as np
    faulthandler.dump_traceback_later(240, exit=True)  # a process stuck in a collective names where, and exits
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=os.environ["COORDINATOR"], num_processes=2, process_id=int(sys.argv[1]))
    sys.path.insert(0, os.environ["PPO_TESTS_DIR"])
    import conftest  # noqa: F401  (shared compile cache)
    from test_ppo_train import STEP, TINY
    from brax_core.training.agents.ppo import train as ppo

    assert jax.process_count() == 2 and jax.device_count() == 2 and jax.local_device_count() == 1
    # One folder both processes see, as a shared filesystem would be across machines.
    saved, interrupted = (os.path.join(os.environ["CHECKPOINTS"], name) for name in ("saved", "interrupted"))
    run = dict(num_timesteps=4 * STEP, num_evals=0, log_training_metrics=True, training_metrics_steps=2 * STEP, **TINY)
    reports = []
    _, params, metrics = ppo.train(
        "fast", progress_fn=lambda s, m: reports.append((s, m["episode/sum_reward"])), save_checkpoint_path=saved,
        **run)

    # The same run stopped by its callback at the first report (saved there) and resumed from that checkpoint.
    class Stop(Exception):
        pass

    def stop(s, m):
        resumed_reports.append((s, m["episode/sum_reward"]))
        raise Stop

    resumed_reports = []
    try:
        ppo.train("fast", progress_fn=stop, save_checkpoint_path=interrupted, **run)
    except Stop:
        pass
    _, resumed, _ = ppo.train(
        "fast", progress_fn=lambda s, m: resumed_reports.append((s, m["episode/sum_reward"])),
        restore_checkpoint_path=interrupted, save_checkpoint_path=interrupted, **run)

    def local(tree):
        return [np.asarray(leaf.addressable_shards[0].data).tolist() for leaf in jax.tree.leaves(tree)]

    print("RESULT" + json.dumps({
        "process": jax.process_index(), "reports": reports, "count": float(params.normalizer_params.count),
        "params": local(params), "resumed_reports": resumed_reports, "resumed": local(resumed)}))
    jax.distributed.shutdown()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_checkpoints(tmp_path_factory):
    """The folder the two processes save their checkpoints into."""
    return tmp_path_factory.mktemp("two_process_checkpoints")


@pytest.fixture(scope="module")
def two_processes(two_process_checkpoints):
    """Both processes' results, launched side by side as two hosts would be."""
    env = dict(os.environ)
    env["CHECKPOINTS"] = str(two_process_checkpoints)
    env["JAX_PLATFORMS"] = "cpu"
    env["PPO_TESTS_DIR"] = os.path.dirname(__file__)
    env["COORDINATOR"] = f"localhost:{_free_port()}"
    env["XLA_FLAGS"] = env.get("XLA_FLAGS", "").replace("--xla_force_host_platform_device_count=2", "")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MULTI_PROCESS_SCRIPT, str(rank)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, err[-3000:]
        line = [x for x in out.splitlines() if x.startswith("RESULT")][-1]
        results.append(json.loads(line[len("RESULT") :]))
    return results


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory):
    """The script's results; one subprocess (one JAX start-up and compile cache load) per test session serves every
    test."""
    return once_per_session(tmp_path_factory, "two_devices", lambda folder: _run_two_devices())


def _run_two_devices() -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PPO_TESTS_DIR"] = os.path.dirname(__file__)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT") :])


def test_two_devices_train_with_identical_parameters(two_devices):
    result = two_devices["train"]
    assert result["spread"] == [2]  # every parameter lives on both devices ...
    assert result["same"]  # ... with bit-identical copies (averaged gradients, shared normaliser)
    # 4 training steps of 1280 env steps, split over the devices: the normaliser saw every one of them.
    assert result["count"] == 4 * 1280
    assert [s for s, _ in result["reports"]] == [2 * 1280, 4 * 1280]
    assert result["device_error"] == "num_envs (1) must be divisible by the number of devices (2)"


def test_two_device_update_equals_one_device_update_of_the_same_batch(two_devices):
    # Whole runs differ by construction; see the script's comment on why the update is compared instead.
    result = two_devices["update"]
    assert len(result["one"]) == len(result["two"]) == len(result["start"])
    moved = 0
    for one, two, start in zip(result["one"], result["two"], result["start"], strict=True):
        np.testing.assert_allclose(np.asarray(two), np.asarray(one), rtol=1e-5, atol=1e-5)
        moved += int(not np.allclose(np.asarray(one), np.asarray(start)))
    # The update did something to check: most parameter leaves and the normaliser's statistics changed.
    assert moved >= len(result["start"]) // 2, moved


@pytest.mark.slow
def test_two_processes_train_as_two_devices_of_one_process(two_processes, two_devices):
    """Multi-host data parallelism is JAX's: the same global computation, whichever process holds a device."""
    one_process = two_devices["train"]
    assert [r["process"] for r in two_processes] == [0, 1]
    for result in two_processes:
        # Every process reports (Brax reports on process 0 only), with the global run's figures.
        assert result["reports"] == one_process["reports"]
        assert result["count"] == 4 * 1280
        assert len(result["params"]) == len(one_process["params"])
        for mine, reference in zip(result["params"], one_process["params"], strict=True):
            np.testing.assert_allclose(np.asarray(mine), np.asarray(reference), rtol=1e-6, atol=1e-7)
    for a, b in zip(two_processes[0]["params"], two_processes[1]["params"], strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_two_processes_write_one_loadable_checkpoint_and_resume_exactly(
    two_processes, two_devices, two_process_checkpoints
):
    """Each process writes its shards into the shared folder; the checkpoint is written once, complete, and loads
    as the parameters both processes trained; a run stopped and resumed by both processes is the unbroken one."""
    saved, interrupted = two_process_checkpoints / "saved", two_process_checkpoints / "interrupted"
    # Only finished step directories (no temporary ones left behind), each with its file digests.
    assert sorted(os.listdir(saved)) == ["000000005120"]
    assert sorted(os.listdir(interrupted)) == ["000000002560", "000000005120"]
    for step_dir in (saved / "000000005120", interrupted / "000000002560", interrupted / "000000005120"):
        assert {"config", "params", "state", "env_state", "manifest.json"} <= set(os.listdir(step_dir))
        manifest = json.loads((step_dir / "manifest.json").read_text())
        digests = manifest["files"]  # by path inside the step directory
        assert {name.split("/")[0] for name in digests} == {"params", "state", "env_state"}, manifest
        assert all(digests.values()) and manifest["env_steps"] == int(step_dir.name), manifest
        assert checkpoint.load_config_json(step_dir)["env_steps"] == int(step_dir.name)
    # Loaded here, in a third process of one device (files verified against their digests on the way).
    loaded = [np.asarray(leaf) for leaf in jax.tree.leaves(checkpoint.load_params(saved))]
    one_process = two_devices["train"]
    for result in two_processes:
        assert len(loaded) == len(result["params"])
        for mine, stored in zip(result["params"], loaded, strict=True):
            np.testing.assert_array_equal(np.asarray(mine), stored)
        # Stopped at 2560 steps and resumed by both processes: the unbroken run's reports and parameters.
        assert result["resumed_reports"] == one_process["reports"]
        for mine, reference in zip(result["resumed"], one_process["params"], strict=True):
            np.testing.assert_allclose(np.asarray(mine), np.asarray(reference), rtol=1e-6, atol=1e-7)
    resumed = jax.tree.leaves(checkpoint.load_params(interrupted))
    for mine, stored in zip(two_processes[0]["resumed"], resumed, strict=True):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(stored))
