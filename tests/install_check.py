"""Checks an installed brax-bridge the way a user meets it: run by ``make test`` in a fresh virtualenv after
``pip install <wheel>`` (no extras), then after adding each extra, from outside the checkout so that the installed
package is the one imported.

    python tests/install_check.py core --work DIR      # TorchEnv, both trainers, `brax-bridge train`
    python tests/install_check.py torchrl --work DIR   # one extra's adapter or feature on a tiny case
    python tests/install_check.py wandb --work DIR     # a logger: two reports logged and read back
    python tests/install_check.py docs --work DIR      # mkdocs.yml's theme and plugins load

Each check asserts what it ran; any failure exits non-zero with the traceback. ``DIR`` keeps what one check leaves
for a later one (the core check's run folder, which the export check exports).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable

# The smallest run both trainers accept: tiny networks, two evaluations.
TINY = dict(num_timesteps=400, num_envs=4, batch_size=4, num_minibatches=2, unroll_length=5, num_evals=2,
            num_eval_envs=4, episode_length=20)
NETWORKS = dict(policy_hidden_layer_sizes=(8, 8), value_hidden_layer_sizes=(8, 8))
TINY_FLAGS = ["--num-timesteps", "400", "--num-envs", "4", "--batch-size", "4", "--num-minibatches", "2",
              "--unroll-length", "5", "--num-evals", "2", "--num-eval-envs", "4", "--episode-length", "20",
              "--policy-hidden-layer-sizes", "8,8", "--value-hidden-layer-sizes", "8,8"]


def _installed(module: object) -> None:
    """``module`` comes from this environment's site-packages, not from a source checkout."""
    site = os.path.realpath(sysconfig.get_paths()["purelib"])
    where = os.path.realpath(module.__file__)
    assert where.startswith(site), f"{module.__name__} imported from {where}, not from the installed package ({site})"


def check_core(work: str) -> None:
    import torch

    import brax_bridge
    import brax_core
    import torch_ppo
    from brax_bridge import TorchEnv
    from brax_core import envs
    from brax_core.training.agents.ppo import networks as ppo_networks
    from brax_core.training.agents.ppo import train as ppo

    for module in (brax_core, brax_bridge, torch_ppo):
        _installed(module)
    env = TorchEnv("fast", 4)
    td = env.reset()
    assert td["observation"].shape == (4, env.observation_size)
    td["action"] = torch.zeros(4, env.action_size)
    td = env.step(td)
    assert td["next", "reward"].shape == (4, 1) and td["next", "done"].dtype == torch.bool

    network_factory = functools.partial(ppo_networks.make_ppo_networks, **NETWORKS)
    _, params, metrics = ppo.train(envs.get_environment("fast"), network_factory=network_factory, **TINY)
    assert "eval/episode_reward" in metrics and params is not None
    _, params, metrics = torch_ppo.train("fast", **TINY, **NETWORKS)
    assert "eval/episode_reward" in metrics and params is not None

    run = os.path.join(work, "run_jax")
    command = [os.path.join(os.path.dirname(sys.executable), "brax-bridge"), "train", "--env", "fast",
               "--out", run, *TINY_FLAGS]
    subprocess.run(command, check=True, timeout=600)
    with open(os.path.join(run, "summary.json"), encoding="utf-8") as file:
        summary = json.load(file)
    assert summary["status"] == "completed" and summary["env_steps"] >= 400, summary


def check_torchrl(work: str) -> None:
    from torchrl.envs.utils import check_env_specs

    from brax_bridge.torchrl import BraxBridgeEnv

    env = BraxBridgeEnv("fast", 4)
    check_env_specs(env)
    rollout = env.rollout(6)
    assert rollout.batch_size == (4, 6) and ("next", "reward") in rollout.keys(True)


def check_gymnasium(work: str) -> None:
    import numpy as np

    from brax_bridge.gymnasium import VectorEnv

    env = VectorEnv("fast", 4)
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
    assert obs.shape == (4, 2) and reward.shape == (4,) and terminated.dtype == np.bool_ and truncated.shape == (4,)


def check_sb3(work: str) -> None:
    from stable_baselines3 import PPO

    from brax_bridge.sb3 import VecEnv

    model = PPO("MlpPolicy", VecEnv("fast", 4), n_steps=8, batch_size=16, n_epochs=1, seed=0)
    model.learn(total_timesteps=32)
    assert model.num_timesteps >= 32


def check_rsl_rl(work: str) -> None:
    import torch

    from brax_bridge.rsl_rl import RslRlVecEnv

    env = RslRlVecEnv("fast", 4)
    observations = env.get_observations()
    observations, reward, done, extras = env.step(torch.zeros(4, env.num_actions))
    assert reward.shape == (4,) and done.shape == (4,) and "time_outs" in extras


def check_export(work: str) -> None:
    import numpy as np
    import onnxruntime
    import torch

    from torch_ppo import policy_transfer

    module = policy_transfer.jax_policy_to_torch(os.path.join(work, "run_jax", "checkpoint"))
    path = os.path.join(work, "policy.onnx")
    example = torch.zeros(3, 2)
    torch.onnx.export(module, (example,), path, input_names=["observation"], output_names=["action"],
                      dynamic_axes={"observation": {0: "batch"}}, dynamo=False)
    observation = np.linspace(-1, 1, 10, dtype=np.float32).reshape(5, 2)
    (actions,) = onnxruntime.InferenceSession(path).run(None, {"observation": observation})
    with torch.no_grad():
        expected = module(torch.from_numpy(observation)).numpy()
    np.testing.assert_allclose(actions, expected, atol=1e-5)


def check_playground(work: str) -> None:
    """A Playground task resolves by name and builds (its MJCF loaded and put on the device); stepping it compiles
    MJX, which the suite's Playground tests do in this same virtualenv."""
    from brax_core import envs

    env = envs.get_environment("playground:CartpoleBalance")
    assert env.observation_size == 5 and env.action_size == 1, (env.observation_size, env.action_size)


# Two evaluation reports as a trainer's progress_fn would pass them; the suite logs whole runs.
_REPORTS = [(0, {"eval/episode_reward": 1.5, "eval/avg_episode_length": 20.0}),
            (400, {"eval/episode_reward": 3.0, "eval/avg_episode_length": 20.0})]


def check_tensorboard(work: str) -> None:
    from tensorboard.backend.event_processing import event_accumulator

    from brax_bridge_app.loggers import TensorBoardLogger

    log_dir = os.path.join(work, "tensorboard")
    with TensorBoardLogger(log_dir, hyperparameters={"num_envs": TINY["num_envs"]}) as log:
        for step, metrics in _REPORTS:
            log(step, metrics)
    events = event_accumulator.EventAccumulator(log_dir)
    events.Reload()
    rewards = [(event.step, event.value) for event in events.Scalars("eval/episode_reward")]
    assert rewards == [(step, metrics["eval/episode_reward"]) for step, metrics in _REPORTS], rewards


def check_wandb(work: str) -> None:
    from wandb_records import offline_runs, read_run  # beside this script: the files W&B writes, read back

    from brax_bridge_app.loggers import WandbLogger

    os.environ["WANDB_MODE"] = "offline"
    os.environ.setdefault("WANDB_SILENT", "true")
    wandb_dir = os.path.join(work, "wandb_check")
    os.makedirs(wandb_dir, exist_ok=True)
    with WandbLogger(project="install-check", config=TINY, dir=wandb_dir) as log:
        for step, metrics in _REPORTS:
            log(step, metrics)
    (path,) = offline_runs(wandb_dir)
    config, history = read_run(path)
    rewards = [row["eval/episode_reward"] for row in history if "eval/episode_reward" in row]
    assert config["num_envs"] == TINY["num_envs"] and rewards == [1.5, 3.0], (config, history)


def check_docs(work: str) -> None:
    """The docs extra brings what the checkout's mkdocs.yml names: loading the configuration finds the theme and
    instantiates every plugin (mkdocstrings with its Python handler); the suite builds the site with --strict."""
    import mkdocs
    from mkdocs.config import load_config
    from mkdocstrings_handlers import python as python_handler

    _installed(mkdocs)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    config = load_config(os.path.join(root, "mkdocs.yml"))
    assert config["theme"].name == "material" and "mkdocstrings" in config["plugins"], config["plugins"]
    assert python_handler.__name__ == "mkdocstrings_handlers.python"


CHECKS: dict[str, Callable[[str], None]] = {
    "core": check_core,
    "torchrl": check_torchrl,
    "gymnasium": check_gymnasium,
    "sb3": check_sb3,
    "rsl-rl": check_rsl_rl,
    "export": check_export,
    "playground": check_playground,
    "tensorboard": check_tensorboard,
    "wandb": check_wandb,
    "docs": check_docs,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=sorted(CHECKS))
    parser.add_argument("--work", default=None, help="folder shared by the checks (default: a new temporary one)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="install-check-")
    os.makedirs(work, exist_ok=True)
    start = time.perf_counter()
    CHECKS[args.check](work)
    print(f"install check {args.check}: passed in {time.perf_counter() - start:.1f} s")
    gc.freeze()  # spares the exit the collector's walk over JAX's and torch's objects (seconds per check)


if __name__ == "__main__":
    main()
