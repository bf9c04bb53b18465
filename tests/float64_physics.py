"""MJX in float64 against native MuJoCo: the same physics, step for step, on an env's own model.

Run as a script in its own process (``JAX_ENABLE_X64`` is process-wide and must be set before JAX starts):

    JAX_ENABLE_X64=1 python tests/float64_physics.py ENV ENV_STEPS [--start-height H] [--iterations N]

prints one JSON line ``{"worst_qpos", "worst_qvel", "contacts"}``: the largest absolute differences over the run and
the native contacts seen. The env's own ``sys`` (its MJX model, float32 as shipped) is widened to float64 and
stepped with the env's ``pipeline_step``, so ``n_frames``, the action mapping and the solver settings are the env's
own; ``--iterations`` sets the constraint solver's Newton iterations on both sides.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_core import envs


def _widen(tree):
    return jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float64) if getattr(x, "dtype", None) == jnp.float32 else x, tree
    )


def compare(
    name: str, env_steps: int, start_height: float | None = None, iterations: int | None = None, seed: int = 3
) -> dict[str, float]:
    if not jax.config.jax_enable_x64:
        raise SystemExit("run with JAX_ENABLE_X64=1: this compares MJX in float64 with native MuJoCo")
    env = envs.get_environment(name)
    model = env.mj_model  # this env's own copy
    if iterations is not None:
        model.opt.iterations = iterations
        env.sys = env.sys.replace(opt=env.sys.opt.replace(iterations=iterations))
    rng = np.random.default_rng(seed)
    native = mujoco.MjData(model)
    native.qpos[:] = model.qpos0 + rng.uniform(-0.1, 0.1, model.nq)
    native.qvel[:] = rng.uniform(-0.1, 0.1, model.nv)
    if start_height is not None:
        native.qpos[2] = start_height
    mujoco.mj_forward(model, native)
    env.sys = _widen(env.sys)
    state = env.pipeline_init(jnp.asarray(native.qpos), jnp.asarray(native.qvel))
    step = jax.jit(lambda s, a: env.pipeline_step(s, env.action_to_ctrl(a)))
    actions = rng.uniform(-1.0, 1.0, (env_steps, env.action_size))
    worst_q = worst_v = 0.0
    contacts = 0
    for action in actions:
        state = step(state, jnp.asarray(action))
        native.ctrl[:] = np.asarray(env.action_to_ctrl(jnp.asarray(action)))
        for _ in range(env.n_frames):
            mujoco.mj_step(model, native)
            contacts += native.ncon
        worst_q = max(worst_q, float(np.max(np.abs(np.asarray(state.qpos) - native.qpos))))
        worst_v = max(worst_v, float(np.max(np.abs(np.asarray(state.qvel) - native.qvel))))
    return {"worst_qpos": worst_q, "worst_qvel": worst_v, "contacts": contacts}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env")
    parser.add_argument("env_steps", type=int)
    parser.add_argument("--start-height", type=float, default=None)
    parser.add_argument("--iterations", type=int, default=None)
    args = parser.parse_args()
    print(json.dumps(compare(args.env, args.env_steps, args.start_height, args.iterations)))
