"""Evaluating a trained run: N episodes of its checkpointed policy, and a recording of the first one."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console

from brax_bridge_app import envinfo, rundir, runtime, trainers
from brax_bridge_app.configuration import RunSpec
from brax_core import compile as compile_options
from brax_core.envs import training
from brax_core.io import html, image


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
    run_dir: str, spec: RunSpec, deterministic: bool, placement: runtime.Placement | None = None
) -> trainers.Policy:
    """The run's checkpointed policy, of every algorithm and trainer, on ``placement`` (default: auto's)."""
    ckpt = os.path.abspath(os.path.join(run_dir, rundir.CHECKPOINT))
    if not os.path.exists(ckpt):
        raise rundir.RunDirError(f"{ckpt} does not exist; train (or resume) the run until its first checkpoint")
    return trainers.get(spec.algo, spec.trainer).load_policy(ckpt, deterministic, placement or runtime.place("auto"))


def run_episodes(
    spec: RunSpec, policy: trainers.Policy, episodes: int, seed: int, record: bool
) -> Episodes:
    """Runs ``episodes`` environments in parallel for one episode each (until the time limit).

    A JAX policy runs with the env inside one compiled scan (one compile, no per-step dispatch); a torch
    policy alternates with the jitted env step from Python.
    """
    repeat, episode_length = spec.config.env.action_repeat, spec.config.env.episode_length
    base = envinfo.of_run(spec)
    env = training.VmapWrapper(training.EpisodeWrapper(base, episode_length, repeat))
    steps = -(-episode_length // repeat)
    keys = jax.random.split(jax.random.PRNGKey(seed), episodes + 1)
    recordable = record and hasattr(jax.eval_shape(env.reset, keys[1:]).pipeline_state, "xpos")
    jit = functools.partial(jax.jit, compiler_options=compiler_options())

    def advance(carry, state, action):
        returns, lengths, alive = carry
        state = env.step(state, action)
        returns = returns + state.reward * alive
        lengths = lengths + alive * repeat
        return (returns, lengths, alive * (1.0 - state.done)), state

    zeros = jnp.zeros((episodes,), jnp.float32)
    start = (zeros, zeros, jnp.ones((episodes,), jnp.float32))
    if policy.traceable:

        def rollout(reset_keys, step_keys):
            state = env.reset(reset_keys)

            def body(carry, key):
                totals, state = carry
                totals, state = advance(totals, state, policy.act(state.obs, key))
                return (totals, state), (_pose(state.pipeline_state) if recordable else None)

            (totals, _), poses = jax.lax.scan(body, (start, state), step_keys)
            first = _pose(state.pipeline_state) if recordable else None
            return totals, first, poses

        totals, first, poses = jit(rollout)(keys[1:], jax.random.split(keys[0], steps))
        if recordable:
            poses = tuple(jnp.concatenate([f[None], p]) for f, p in zip(first, poses, strict=True))
    else:
        reset, step_fn = jit(env.reset), jit(advance)
        state, totals, collected = reset(keys[1:]), start, []
        if recordable:
            collected.append(_pose(state.pipeline_state))
        for key in jax.random.split(keys[0], steps):
            totals, state = step_fn(totals, state, policy.act(state.obs, key))
            if recordable:
                collected.append(_pose(state.pipeline_state))
        poses = tuple(jnp.stack([p[i] for p in collected]) for i in range(3)) if recordable else None
    result = Episodes(np.asarray(totals[0]), np.asarray(totals[1]))
    if recordable:
        frames = int(result.lengths[0] // repeat) + 1  # the first state, then one per step of episode 0
        result.qpos, result.xpos, result.xquat = (np.asarray(p[:frames]) for p in poses)
    return result


def compiler_options() -> dict[str, Any] | None:
    """The trainers' CPU compile setting (see ``brax_core.compile``): MJX compiles dominate short runs."""
    default = jax.config.jax_default_device  # set by ``runtime.placed`` to the run's device
    platform = default.platform if isinstance(default, jax.Device) else default or jax.default_backend()
    return compile_options.compiler_options(platform, auto_level=1)


def _pose(pipeline_state: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    return pipeline_state.qpos[0], pipeline_state.xpos[0], pipeline_state.xquat[0]


def render(run_dir: str, spec: RunSpec, result: Episodes, video: str, console: Console) -> dict:
    """Writes the first episode as ``episode.html`` and, unless ``video`` is ``none``, ``episode.<video>``.

    Returns the written paths (None where nothing was written); a missing OpenGL backend only skips the video.
    """
    written: dict[str, str | None] = {"html": None, "video": None}
    if result.xpos is None:
        console.print(f"[yellow]--render: {spec.env_name} has no MuJoCo model, so there is nothing to draw[/]")
        return written
    base = envinfo.of_run(spec)
    model = base.mj_model
    trajectory = Trajectory(result.qpos, result.xpos, result.xquat)
    dt = float(base.dt) * spec.config.env.action_repeat
    written["html"] = html.save(os.path.join(run_dir, f"{rundir.EPISODE}.html"), model, trajectory, dt=dt)
    console.print(f"HTML viewer: {written['html']} (open in a browser; works offline)")
    if video != "none":
        path = os.path.join(run_dir, f"{rundir.EPISODE}.{video}")
        try:
            frames = image.render_array(model, trajectory, height=240, width=320)
            written["video"] = image.save_video(path, frames, fps=1.0 / dt)
            console.print(f"video: {written['video']} ({len(frames)} frames)")
        except image.RenderingUnavailable as err:
            console.print(f"[yellow]no video: {err}[/]")
    return written
