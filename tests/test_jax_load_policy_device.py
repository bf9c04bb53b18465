"""Each JAX trainer's ``load_policy`` (PPO, APG, SAC) restores its checkpoint onto JAX's default device: the first
device where none is set, the one ``jax.default_device`` names where one is. Checkpoints saved here (one device);
loaded in a subprocess with two (virtual CPU) devices, so that the device the parameters landed on decides where
the policy's action is computed: the observation and key are uncommitted, the parameters committed."""

import functools
import json
import os
import subprocess
import sys
import textwrap

import pytest
from test_ppo_train import STEP, TINY

from brax_core.training.agents.apg import train as apg
from brax_core.training.agents.ppo import train as ppo
from brax_core.training.agents.sac import networks as sac_networks
from brax_core.training.agents.sac import train as sac

LOAD = textwrap.dedent(
    """
    import json, sys
    import jax
    import numpy as np
    from brax_core.training.agents.apg import checkpoint as apg
    from brax_core.training.agents.ppo import checkpoint as ppo
    from brax_core.training.agents.sac import checkpoint as sac

    assert jax.device_count() == 2, jax.devices()
    paths = json.loads(sys.argv[1])
    loaders = {"ppo": ppo.load_policy, "apg": apg.load_policy, "sac": sac.load_policy}
    observation = np.zeros((3, 2), np.float32)  # `fast`'s observation

    def action_device(algo):
        policy = loaders[algo](paths[algo])
        action, _ = policy(observation, jax.random.PRNGKey(0))
        return sorted(d.id for d in action.devices())

    devices = {}
    for algo in paths:
        devices[algo] = {"unset": action_device(algo)}
        with jax.default_device(jax.devices()[1]):
            devices[algo]["second"] = action_device(algo)
    print("RESULT" + json.dumps(devices))
    """
)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One small checkpoint of each JAX trainer on ``fast``."""
    folder = tmp_path_factory.mktemp("jax_checkpoints")
    ppo.train("fast", num_timesteps=STEP, num_evals=0, save_checkpoint_path=folder / "ppo", **TINY)
    apg.train("fast", policy_updates=2, horizon_length=4, num_envs=4, num_evals=0, episode_length=20,
              save_checkpoint_path=folder / "apg")
    sac.train("fast", num_timesteps=256, episode_length=32, num_envs=16, batch_size=16, num_evals=0,
              save_checkpoint_path=folder / "sac",
              network_factory=functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=(8,)))
    return {algo: str(folder / algo) for algo in ("ppo", "apg", "sac")}


def test_every_jax_load_policy_restores_onto_the_default_device(checkpoints):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, "-c", LOAD, json.dumps(checkpoints)], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    devices = json.loads([line for line in proc.stdout.splitlines() if line.startswith("RESULT")][-1][6:])
    assert devices == {algo: {"unset": [0], "second": [1]} for algo in ("ppo", "apg", "sac")}
