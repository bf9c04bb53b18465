"""Soft Actor-Critic and replay buffers by Brax's module paths (``brax_core.training.agents.sac``,
``brax_core.training.replay_buffers``).

Brax 0.14.2's own tests of these modules run in a subprocess with their imports rewritten (``tests/data/brax_*``),
as for APG: the replay buffers' and SAC's checkpoint tests in the default suite, SAC's training test (Brax's sizes,
about a minute) in the slow tier. Its domain randomisation test writes Brax-physics fields (``sys.link``), so its
counterpart over the MJX model's masses is here. The rest: truncated transitions bootstrapping from the observation
they reached, the policy's kernel-initialiser keywords reaching it, and bad arguments refused by name before
anything compiles.
"""

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_ars import _scale_body_mass  # each env's masses scaled by a factor in [0.8, 1.2]

from brax_core import envs
from brax_core.training import replay_buffers, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.sac import losses as sac_losses
from brax_core.training.agents.sac import networks as sac_networks
from brax_core.training.agents.sac import train as sac

ROOT = Path(__file__).resolve().parents[1]


def _run_brax_test(tmp_path: Path, name: str, *extra: str) -> str:
    """Brax's test file ``name`` run by pytest with its imports rewritten; its output (the run must pass)."""
    text = (ROOT / "tests" / "data" / f"brax_{name}.py.txt").read_text()
    text = re.sub(r"^from brax(?=[ .])", "from brax_core", text, flags=re.MULTILINE)
    text = re.sub(r"^import brax(?=[ .]|$)", "import brax_core", text, flags=re.MULTILINE)
    assert not re.search(r"^(from|import) brax\b(?!_core)", text, flags=re.MULTILINE)
    (tmp_path / f"brax_{name}.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", f"brax_{name}.py", *extra]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout


def test_brax_replay_buffers_test_passes_with_the_import_prefix_changed(tmp_path):
    assert "68 passed" in _run_brax_test(tmp_path, "replay_buffers_test")


def test_brax_sac_checkpoint_test_passes_with_the_import_prefix_changed(tmp_path):
    assert "2 passed" in _run_brax_test(tmp_path, "sac_checkpoint_test")


@pytest.mark.slow
def test_brax_sac_train_test_passes_with_the_import_prefix_changed(tmp_path):
    # testTrain (fast, 2**15 env steps, eval reward > 139.3, Brax's trace counts) and testNetworkEncoding.
    output = _run_brax_test(tmp_path, "sac_train_test", "-k", "not testTrainDomainRandomize")
    assert "3 passed, 1 deselected" in output


def test_train_domain_randomize():  # Brax's testTrainDomainRandomize, over the MJX model's masses
    seen = []

    def randomize(sys_, rng):
        seen.append(rng.shape[0])
        return _scale_body_mass(sys_, rng)

    _, (_, policy_params), metrics = sac.train(
        envs.get_environment("inverted_pendulum"), num_timesteps=64, num_envs=8, episode_length=16,
        randomization_fn=randomize, num_eval_envs=4, batch_size=8,
        network_factory=functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=(8,)),
    )
    assert seen == [8, 4]  # the training envs, then the evaluation envs
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(policy_params))
    assert np.isfinite(metrics["eval/episode_reward"])


def test_sac_learns_fast_at_a_small_size():
    rewards = {}
    sac.train(
        envs.get_environment("fast"), num_timesteps=2**13, episode_length=128, num_envs=64, learning_rate=3e-4,
        discounting=0.99, batch_size=64, normalize_observations=True, reward_scaling=10, grad_updates_per_step=32,
        num_evals=2, seed=0, deterministic_eval=True,
        progress_fn=lambda steps, metrics: rewards.update({steps: metrics["eval/episode_reward"]}),
    )
    (start, untrained), (end, trained) = sorted(rewards.items())
    # Pushing at every step of the 128 scores about 140; the untrained policy's mode pushes at none.
    assert start == 0 and end >= 2**13
    assert trained > untrained + 100 and trained > 130, rewards


def _transitions(truncation: float, discount: float) -> types.Transition:
    obs = jnp.asarray([[0.5, -0.5]], jnp.float32)
    return types.Transition(
        observation=obs, action=jnp.asarray([[0.3]], jnp.float32), reward=jnp.asarray([1.0], jnp.float32),
        discount=jnp.asarray([discount], jnp.float32), next_observation=obs + 1.0,
        extras={"state_extras": {"truncation": jnp.asarray([truncation], jnp.float32)}, "policy_extras": {}},
    )


@pytest.mark.parametrize("bootstrap_on_timeout", [True, False])
def test_a_truncated_transition_bootstraps_from_the_observation_it_reached(bootstrap_on_timeout):
    network = sac_networks.make_sac_networks(2, 1, hidden_layer_sizes=(8,))
    key = jax.random.PRNGKey(1)
    q_params = network.q_network.init(key)
    target_params = jax.tree.map(lambda x: x + 0.1, q_params)
    policy_params = network.policy_network.init(jax.random.PRNGKey(2))
    _, critic_loss, _ = sac_losses.make_losses(network, reward_scaling=2.0, discounting=0.9, action_size=1,
                                               bootstrap_on_timeout=bootstrap_on_timeout)
    alpha = jnp.asarray(0.2)
    loss = lambda t: float(critic_loss(q_params, policy_params, None, target_params, alpha, t, key))  # noqa: E731
    # The value the target bootstraps: the target critics' smaller value of the policy's action at the observation
    # the step reached, minus alpha times its log-probability (the same key draws the same action).
    logits = network.policy_network.apply(None, policy_params, _transitions(0, 1).next_observation)
    dist = network.parametric_action_distribution
    raw = dist.sample_no_postprocessing(logits, key)
    next_q = network.q_network.apply(None, target_params, _transitions(0, 1).next_observation, dist.postprocess(raw))
    next_value = float(jnp.min(next_q, -1)[0] - alpha * dist.log_prob(logits, raw)[0])
    q = np.asarray(network.q_network.apply(None, q_params, _transitions(0, 1).observation, jnp.asarray([[0.3]])))[0]

    def expected(target):
        return 0.5 * float(np.mean((q - target) ** 2))

    # An episode going on and one that ended on its own are the same either way.
    assert loss(_transitions(0.0, 1.0)) == pytest.approx(expected(2.0 + 0.9 * next_value), rel=1e-5)
    assert loss(_transitions(0.0, 0.0)) == pytest.approx(expected(2.0), rel=1e-5)
    # Cut by the time limit (done, so discount 0, and truncation 1): bootstrapped as if it went on, or (Brax's) not
    # learned from at all.
    truncated = loss(_transitions(1.0, 0.0))
    if bootstrap_on_timeout:
        assert truncated == pytest.approx(expected(2.0 + 0.9 * next_value), rel=1e-5)
        assert truncated != pytest.approx(expected(2.0), rel=1e-3)
    else:
        assert truncated == 0.0


def test_the_policy_kernel_initialiser_keywords_reach_the_policy():
    network = sac_networks.make_sac_networks(
        3, 2, hidden_layer_sizes=(4,),
        policy_network_kernel_init_fn=jax.nn.initializers.constant,
        policy_network_kernel_init_kwargs={"value": 0.25},
        q_network_kernel_init_fn=jax.nn.initializers.constant, q_network_kernel_init_kwargs={"value": -0.5},
    )
    policy_kernels = [x for p, x in jax.tree_util.tree_flatten_with_path(network.policy_network.init(
        jax.random.PRNGKey(0)))[0] if "kernel" in jax.tree_util.keystr(p)]
    q_kernels = [x for p, x in jax.tree_util.tree_flatten_with_path(network.q_network.init(
        jax.random.PRNGKey(0)))[0] if "kernel" in jax.tree_util.keystr(p)]
    assert policy_kernels and all(np.all(np.asarray(k) == 0.25) for k in policy_kernels)
    assert q_kernels and all(np.all(np.asarray(k) == -0.5) for k in q_kernels)


def test_twin_critics_have_brax_layout():
    network = sac_networks.make_sac_networks(3, 2, hidden_layer_sizes=(4, 5))
    params = network.q_network.init(jax.random.PRNGKey(0))
    assert sorted(params["params"]) == ["MLP_0", "MLP_1"]
    assert params["params"]["MLP_0"]["hidden_0"]["kernel"].shape == (5, 4)
    normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((3,), jnp.float32))
    out = network.q_network.apply(normalizer, params, jnp.ones((7, 3)), jnp.ones((7, 2)))
    assert out.shape == (7, 2)


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (dict(min_replay_size=64), r"min_replay_size \(64\) must be less than num_timesteps \(64\)"),
        (dict(min_replay_size=60, num_envs=32), r"min_replay_size \(60\) takes 64 env steps"),
        (dict(tau=0.0), "tau"),
        (dict(tau=1.5), "tau"),
        (dict(max_replay_size=16, batch_size=32), r"max_replay_size \(16\) is smaller than one batch: batch_size = 32"),
        (dict(max_replay_size=8, batch_size=4, num_envs=16), r"max_replay_size \(8\) must hold one step of every env"),
        (dict(min_replay_size=40, max_replay_size=32, batch_size=4), r"min_replay_size \(40\) must be at most max"),
        (dict(batch_size=0), "batch_size"),
        (dict(grad_updates_per_step=1.5), "grad_updates_per_step"),
        (dict(learning_rate=-1.0), "learning_rate"),
        (dict(discounting=1.5), "discounting"),
        (dict(num_evals=-1), "num_evals"),
        (dict(progress_fn="print"), "progress_fn"),
        (dict(network_factory="mlp"), "network_factory"),
    ],
)
def test_bad_arguments_are_refused_by_name_before_anything_compiles(arguments, words, monkeypatch):
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises((ValueError, TypeError), match=words):
        sac.train(envs.get_environment("fast"), **{"num_timesteps": 64, "episode_length": 16, **arguments})


def test_dict_observations_are_refused_by_name(monkeypatch):
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(ValueError, match="environment: SAC's networks take a flat observation vector"):
        sac.train(envs.get_environment("fast", obs_mode="dict_state"), num_timesteps=64, episode_length=16)


def test_a_replay_buffer_refuses_leaves_its_one_dtype_cannot_hold():
    with pytest.raises(ValueError, match=r"dummy_data_sample: .* cannot hold \['count'\] \(int32\) exactly"):
        replay_buffers.UniformSamplingQueue(
            max_replay_size=4, dummy_data_sample={"count": jnp.zeros((), jnp.int32), "x": jnp.zeros((2,))},
            sample_batch_size=2,
        )


def test_a_replay_buffer_refuses_samples_that_are_not_its_samples():
    buffer = replay_buffers.Queue(max_replay_size=8, dummy_data_sample={"x": jnp.zeros((2,))}, sample_batch_size=2)
    state = buffer.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="structured as"):
        buffer.insert(state, {"y": jnp.zeros((3, 2))})
    with pytest.raises(ValueError, match=r"samples\['x'\] has shape \(3, 4\); expected \(batch, 2\)"):
        buffer.insert(state, {"x": jnp.zeros((3, 4))})
    with pytest.raises(ValueError, match=r"samples\['x'\] has dtype int32; the buffer holds float32"):
        buffer.insert(state, {"x": jnp.zeros((3, 2), jnp.int32)})
    state = buffer.insert(state, {"x": jnp.arange(6, dtype=jnp.float32).reshape(3, 2)})
    state, batch = buffer.sample(state)
    np.testing.assert_array_equal(np.asarray(batch["x"]), [[0, 1], [2, 3]])


def test_a_checkpoint_of_a_sac_run_loads_its_policy(tmp_path):
    from brax_core.training.agents.sac import checkpoint

    settings = dict(num_timesteps=256, episode_length=32, num_envs=16, batch_size=16, num_evals=2,
                    normalize_observations=True, deterministic_eval=True,
                    network_factory=functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=(8,)))
    finals = []
    make_policy, params, _ = sac.train(envs.get_environment("fast"), checkpoint_logdir=str(tmp_path),
                                       progress_fn=lambda step, m: finals.append(m["eval/episode_reward"]),
                                       **settings)
    assert float(np.abs(np.asarray(params[0].mean)).sum()) > 0  # the normaliser has statistics to restore
    obs = jnp.asarray([0.1, -0.2])
    loaded = checkpoint.load_policy(str(tmp_path))
    expected = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(0))[0]
    np.testing.assert_allclose(np.asarray(loaded(obs, jax.random.PRNGKey(0))[0]), np.asarray(expected), rtol=1e-6)
    config = checkpoint.load_config(str(tmp_path))
    assert config.network_factory_kwargs["hidden_layer_sizes"] == (8,)
    # A run restored from it starts from that policy and normaliser: its first evaluation (deterministic, on the
    # deterministic `fast`) scores what the saved run's last did.
    restarted = []
    sac.train(envs.get_environment("fast"), restore_checkpoint_path=str(tmp_path),
              progress_fn=lambda step, m: restarted.append(m["eval/episode_reward"]), **settings)
    assert restarted[0] == pytest.approx(finals[-1])
    wider = {**settings, "network_factory": functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=(4,))}
    mismatch = r"params\[1\]\['params'\]\['hidden_0'\]\['bias'\] was saved with shape \(8,\), expected \(4,\)"
    with pytest.raises(ValueError, match=mismatch):
        sac.train(envs.get_environment("fast"), restore_checkpoint_path=str(tmp_path), **wider)


def test_bootstrapping_on_timeout_needs_the_final_observation():
    from brax_core.envs import training as env_training

    def no_auto_reset(env, episode_length, action_repeat, randomization_fn=None):
        return env_training.VmapWrapper(env_training.EpisodeWrapper(env, episode_length, action_repeat))

    with pytest.raises(ValueError, match=r"bootstrap_on_timeout=True .* keep none"):
        sac.train(envs.get_environment("fast"), num_timesteps=64, episode_length=16, num_envs=4, batch_size=4,
                  wrap_env_fn=no_auto_reset)


# ---- the configuration


def test_sac_config_is_built_and_checked_like_every_configuration():
    from brax_core.training.agents.sac.config import SACConfig
    from brax_core.training.config import ConfigError

    config = SACConfig.from_flat({"num_timesteps": 4096, "num_envs": 16, "batch_size": 64, "tau": 0.01,
                                  "policy_hidden_layer_sizes": (32, 32)})
    assert SACConfig.from_json(config.to_json()) == config
    assert config.replace(seed=3).run.seed == 3 and config.algorithm.tau == 0.01
    assert config.replay_capacity == 4096 and config.num_epochs == 1 and config.steps_per_epoch == 256
    with pytest.raises(ConfigError, match=r"algorithm\.tau must be <= 1\.0, got 1\.5"):
        config.replace(tau=1.5)
    with pytest.raises(ConfigError, match="did you mean 'batch_size'"):
        SACConfig.from_json({**config.to_json(), "algorithm": {"batch_sise": 8}})


def test_train_translates_brax_keywords_onto_one_config(monkeypatch):
    seen = {}
    monkeypatch.setattr(sac, "train_from_config", lambda config, env, **options: seen.update(config=config,
                                                                                              options=options))
    factory = functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=(8, 8), activation=jax.nn.tanh)
    sac.train("fast", num_timesteps=512, episode_length=64, num_envs=8, tau=0.02, network_factory=factory)
    config = seen["config"]
    assert (config.env.name, config.env.num_envs, config.algorithm.tau) == ("fast", 8, 0.02)
    assert config.network.policy_hidden_layer_sizes == config.network.value_hidden_layer_sizes == (8, 8)
    assert config.network.activation == "tanh" and seen["options"]["network_factory"] is factory


def test_the_presets_are_configurations():
    from brax_core.training.agents.sac.config import SACConfig
    from brax_core.training.agents.sac.presets import PRESET_FIELDS, PRESETS

    assert set(PRESETS) == set(PRESET_FIELDS) and "inverted_pendulum" in PRESETS
    for name, config in PRESETS.items():
        assert isinstance(config, SACConfig) and config.env.name is None
        assert config.flat()["num_envs"] == PRESET_FIELDS[name]["num_envs"]


@pytest.mark.slow
def test_the_inverted_pendulum_preset_balances():
    # About four minutes on a 2-core CPU; the preset's runs and their times: results/learning.md, "SAC".
    from brax_core.training.agents.sac import presets

    _, _, metrics = sac.train_from_config(presets.PRESETS["inverted_pendulum"], "inverted_pendulum")
    assert metrics["eval/episode_reward"] >= 900


def test_a_config_runs_on_its_device_and_an_absent_device_is_refused_by_name(monkeypatch):
    from brax_core.training.agents.sac.config import SACConfig

    config = SACConfig.from_flat({"num_timesteps": 64, "episode_length": 16, "num_envs": 8, "batch_size": 8,
                                  "num_eval_envs": 4, "device": "cpu", "policy_hidden_layer_sizes": (8,),
                                  "value_hidden_layer_sizes": (8,)})
    _, (_, policy_params), _ = sac.train_from_config(config, "fast")
    assert {d.platform for leaf in jax.tree.leaves(policy_params) for d in leaf.devices()} == {"cpu"}
    if any(d.platform == "gpu" for d in jax.devices()):
        return  # the refusal below needs a machine without CUDA devices
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises((ValueError, RuntimeError), match="config.run.device"):
        sac.train_from_config(config.replace(device="cuda"), "fast")


def test_an_interrupted_run_resumed_from_its_checkpoint_ends_as_the_unbroken_run(tmp_path):
    """``save_checkpoint_path`` saves the whole run (training state, replay buffer, key, envs) at each epoch's end;
    ``restore_checkpoint_path`` continues it exactly; ``policy_params_fn`` sees each epoch's end."""
    kwargs = dict(num_timesteps=2_048, episode_length=100, num_envs=16, num_eval_envs=16, batch_size=64,
                  grad_updates_per_step=2, min_replay_size=256, num_evals=3,
                  network_factory=functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=(32, 32)))
    ends = []
    _, unbroken, _ = sac.train("inverted_pendulum", save_checkpoint_path=tmp_path / "a",
                               policy_params_fn=lambda step, make_policy, params: ends.append(step), **kwargs)
    assert ends == [256, 1152, 2048]

    def stop_after_first(step, metrics):
        if step > 256:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sac.train("inverted_pendulum", save_checkpoint_path=tmp_path / "b", progress_fn=stop_after_first, **kwargs)
    _, resumed, _ = sac.train("inverted_pendulum", save_checkpoint_path=tmp_path / "b",
                              restore_checkpoint_path=tmp_path / "b", **kwargs)
    for a, b in zip(jax.tree.leaves(unbroken), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="batch_size: 64 in the checkpoint, 32 requested"):
        sac.train("inverted_pendulum", restore_checkpoint_path=tmp_path / "a", **{**kwargs, "batch_size": 32})
