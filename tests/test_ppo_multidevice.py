"""Data-parallel PPO on two (virtual CPU) devices, in a subprocess so the device count can be set."""

import json
import os
import subprocess
import sys
import textwrap

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
    print("RESULT" + json.dumps({"spread": sorted(set(spread)), "same": same, "reports": reports,
                                 "count": float(params.normalizer_params.count),
                                 "device_error": device_error}))
    """
)


def test_two_devices_train_with_identical_parameters():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PPO_TESTS_DIR"] = os.path.dirname(__file__)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")][-1]
    result = json.loads(line[len("RESULT") :])
    assert result["spread"] == [2]  # every parameter lives on both devices ...
    assert result["same"]  # ... with bit-identical copies (averaged gradients, shared normaliser)
    # 4 training steps of 1280 env steps, split over the devices: the normaliser saw every one of them.
    assert result["count"] == 4 * 1280
    assert [s for s, _ in result["reports"]] == [2 * 1280, 4 * 1280]
    assert result["device_error"] == "num_envs (1) must be divisible by the number of devices (2)"
