"""Evaluating a trained run: N episodes of its checkpointed policy, and a recording of the first one."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from brax_bridge.app import rundir


@dataclasses.dataclass
class Episodes:
    returns: np.ndarray  # [episodes]
    lengths: np.ndarray  # [episodes], env steps
    # First episode's poses (None for envs without a MuJoCo model): qpos [T, nq], xpos/xquat [T, nbody, k].
    qpos: np.ndarray | None = None
    xpos: np.ndarray | None = None
    xquat: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """What the HTML viewer and the video renderer read (body poses and joint positions per frame)."""

    qpos: np.ndarray
    xpos: np.ndarray
    xquat: np.ndarray


def load_policy(
    run_dir: str, config: Mapping[str, Any], deterministic: bool
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The run's policy as ``(obs [N, obs], key) -> action [N, act]`` on JAX arrays, for either trainer."""
    ckpt = os.path.abspath(os.path.join(run_dir, rundir.CHECKPOINT))
    if not os.path.exists(ckpt):
        raise rundir.RunDirError(f"{ckpt} does not exist; train (or resume) the run until its first checkpoint")
    if config["trainer"] == "jax":
        from brax_core.training.agents.ppo import checkpoint

        policy = jax.jit(checkpoint.load_policy(ckpt, deterministic=deterministic))
        return lambda obs, key: policy(obs, key)[0]
    if config["trainer"] == "torch":
        import torch

        from brax_bridge.app.training import default_device
        from torch_ppo import checkpoint

        # The policy runs where JAX keeps the observations, so DLPack hands them over without a copy.
        device = "cuda" if jax.default_backend() == "gpu" and default_device() == "cuda" else "cpu"
        policy = checkpoint.load_policy(ckpt, deterministic=deterministic, device=device)

        def act(obs: jax.Array, key: jax.Array) -> jax.Array:
            del key  # torch samples from its own generator
            with torch.inference_mode():
                action = policy(torch.from_dlpack(obs))
            action = action[0] if isinstance(action, tuple) else action
            return jnp.from_dlpack(action.contiguous())

        return act
    raise rundir.RunDirError(f"config.json names an unknown trainer {config['trainer']!r}")


def run_episodes(config: Mapping[str, Any], policy: Callable, episodes: int, seed: int, record: bool) -> Episodes:
    """Runs ``episodes`` environments in parallel for one episode each (until the time limit)."""
    from brax_core import envs
    from brax_core.envs import training

    hp = config["hyperparameters"]
    base = envs.get_environment(config["env"])
    env = training.VmapWrapper(training.EpisodeWrapper(base, int(hp["episode_length"]), int(hp["action_repeat"])))
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    keys = jax.random.split(jax.random.PRNGKey(seed), episodes + 1)
    state = reset(keys[1:])
    key = keys[0]
    steps = -(-int(hp["episode_length"]) // int(hp["action_repeat"]))
    returns = jnp.zeros((episodes,), jnp.float32)
    lengths = jnp.zeros((episodes,), jnp.float32)
    alive = jnp.ones((episodes,), jnp.float32)
    recordable = record and hasattr(state.pipeline_state, "xpos")
    poses = []
    if recordable:
        poses.append(_pose(state.pipeline_state))
    for _ in range(steps):
        key, sub = jax.random.split(key)
        state = step(state, policy(state.obs, sub))
        returns = returns + state.reward * alive
        lengths = lengths + alive * int(hp["action_repeat"])
        if recordable:
            poses.append(_pose(state.pipeline_state))
        alive = alive * (1.0 - state.done)
    result = Episodes(np.asarray(returns), np.asarray(lengths))
    if recordable:
        first_len = int(result.lengths[0] // int(hp["action_repeat"])) + 1
        qpos, xpos, xquat = (np.stack([np.asarray(p[i]) for p in poses[:first_len]]) for i in range(3))
        result.qpos, result.xpos, result.xquat = qpos, xpos, xquat
    return result


def _pose(pipeline_state: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    return pipeline_state.qpos[0], pipeline_state.xpos[0], pipeline_state.xquat[0]


def env_dt(config: Mapping[str, Any]) -> float:
    from brax_core import envs

    return float(envs.get_environment(config["env"]).dt) * int(config["hyperparameters"]["action_repeat"])
