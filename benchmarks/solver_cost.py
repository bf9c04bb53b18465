"""What MJX's constraint solver costs per env step, and what fewer solver iterations would change.

For each env, each solver setting (``model``: the shipped model's Newton iterations / line-search steps; ``I/L``:
``iterations=I``, ``ls_iterations=L``) and each batch size, in one process:

- ``rate``: env steps per second of a jitted ``lax.scan`` of ``jax.vmap(env.pipeline_step)`` (``n_frames`` MJX
  steps, no env logic) with small uniform random controls, the best of ``--repeats`` timed runs after the one that
  compiles;
- ``loops``: the solver's loop bodies per env step that a batch runs at most, ``n_frames * iterations *
  (1 + ls_iterations)``. Under ``vmap`` MJX's line search is a ``scan`` of exactly ``ls_iterations`` steps and the
  Newton loop runs until the slowest env of the batch has converged, so on a GPU, where each loop body is a few
  small kernels, this count sets the step's latency;
- ``qpos_error`` / ``qvel_error``: what the setting gives up in accuracy. Native MuJoCo (float64) steps the model
  with uniform random control in ``[-1, 1]`` for ``--check-steps`` env steps, solved to convergence (100 iterations,
  50 line-search steps, tolerance 1e-10); from each state of that trajectory the same model with the setting takes
  the same env step, and the largest ``|qpos|`` and ``|qvel|`` differences to the converged step are reported (over
  ``--check-rollouts`` rollouts). One step from a shared state, so chaos does not inflate the figure. MJX follows
  native MuJoCo with the same options (``tests/test_envs_planar.py``).

Made for a GPU (``JAX_PLATFORMS=cuda``) but runs anywhere:

    python benchmarks/solver_cost.py --envs hopper walker2d ant --settings model 2/4 1/4 --num-envs 2048 32768
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import mujoco
import numpy as np
from _physics import raw_rollout  # benchmarks/ is the script's directory, first on sys.path

from brax_core import envs
from brax_core.envs import _assets
from brax_core.io import mjcf


def _parse_setting(text: str) -> tuple[int, int] | None:
    if text == "model":
        return None
    try:
        iterations, ls_iterations = (int(part) for part in text.split("/"))
    except ValueError:
        raise SystemExit(f"--settings: expected 'model' or ITERATIONS/LS_ITERATIONS like 2/4, got {text!r}") from None
    if iterations < 1 or ls_iterations < 1:
        raise SystemExit(f"--settings: iterations and line-search steps must be >= 1, got {text!r}")
    return iterations, ls_iterations


def _native_model(name: str, setting: tuple[int, int] | None) -> mujoco.MjModel:
    _, mj_model = _assets.load(name)
    if setting is not None:
        mj_model.opt.iterations, mj_model.opt.ls_iterations = setting
    return mj_model


def step_error(
    name: str, setting: tuple[int, int] | None, n_frames: int, steps: int, rollouts: int
) -> tuple[float, float]:
    """Largest |qpos| and |qvel| gaps of one env step with ``setting`` to the converged env step, same state."""
    reference = _native_model(name, (100, 50))
    reference.opt.tolerance = 1e-10
    model = _native_model(name, setting)
    rng = np.random.default_rng(0)
    qpos_gap = qvel_gap = 0.0
    for _ in range(rollouts):
        ref_data, data = mujoco.MjData(reference), mujoco.MjData(model)
        ref_data.qpos[:] = model.qpos0 + rng.uniform(-5e-3, 5e-3, model.nq)
        mujoco.mj_forward(reference, ref_data)
        for _ in range(steps):
            ref_data.ctrl[:] = rng.uniform(-1.0, 1.0, model.nu)
            data.qpos[:], data.qvel[:], data.ctrl[:] = ref_data.qpos, ref_data.qvel, ref_data.ctrl
            data.qacc_warmstart[:] = ref_data.qacc_warmstart
            data.time = ref_data.time
            mujoco.mj_step(reference, ref_data, nstep=n_frames)
            mujoco.mj_step(model, data, nstep=n_frames)
            qpos_gap = max(qpos_gap, float(np.max(np.abs(ref_data.qpos - data.qpos))))
            qvel_gap = max(qvel_gap, float(np.max(np.abs(ref_data.qvel - data.qvel))))
    return qpos_gap, qvel_gap


def rate(name: str, setting: tuple[int, int] | None, num_envs: int, steps: int, repeats: int) -> dict[str, float]:
    env = envs.get_environment(name)
    if setting is not None:
        env.sys = mjcf.put(_native_model(name, setting))
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    data = jax.jit(jax.vmap(env.reset))(keys).pipeline_state

    rollout = raw_rollout(env, num_envs, steps)
    start = time.perf_counter()
    jax.block_until_ready(rollout(data, jax.random.PRNGKey(1)))
    compile_s = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(rollout(data, jax.random.PRNGKey(2)))
        best = min(best, time.perf_counter() - start)
    return {"rate": num_envs * steps / best, "compile_s": compile_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["hopper", "walker2d", "ant"])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["model", "2/4", "1/4"],
        help="'model' (the shipped model's) or ITERATIONS/LS_ITERATIONS",
    )
    parser.add_argument("--num-envs", nargs="+", type=int, default=[2048])
    parser.add_argument("--steps", type=int, default=50, help="env steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check-steps", type=int, default=200, help="env steps per accuracy rollout")
    parser.add_argument("--check-rollouts", type=int, default=5)
    parser.add_argument("--label", default="", help="a tag for these rows (e.g. the XLA flags of the run)")
    parser.add_argument("--json", default=None, help="append the rows to this JSON-lines file")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.envs) - set(envs.registered_names()))
    if unknown:
        raise SystemExit(f"--envs: unknown {unknown}; choose from {envs.registered_names()}")
    for name, value in (("--num-envs", min(args.num_envs)), ("--steps", args.steps), ("--repeats", args.repeats)):
        if value < 1:
            raise SystemExit(f"{name} must be >= 1, got {value}")
    settings = [(text, _parse_setting(text)) for text in args.settings]
    device = jax.devices()[0].device_kind if jax.default_backend() == "gpu" else platform.machine()
    print(
        f"device: {device}; jax {jax.__version__}, mujoco {mujoco.__version__}; XLA_FLAGS="
        f"{os.environ.get('XLA_FLAGS', '')!r}; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    for name in args.envs:
        n_frames = envs.get_environment(name)._n_frames
        for text, setting in settings:
            opt = _native_model(name, setting).opt
            loops = n_frames * opt.iterations * (1 + opt.ls_iterations)
            qpos_error, qvel_error = step_error(name, setting, n_frames, args.check_steps, args.check_rollouts)
            for num_envs in args.num_envs:
                row = {
                    "env": name,
                    "setting": text,
                    "iterations": int(opt.iterations),
                    "ls_iterations": int(opt.ls_iterations),
                    "n_frames": n_frames,
                    "loops": loops,
                    "qpos_error": qpos_error,
                    "qvel_error": qvel_error,
                    "num_envs": num_envs,
                    "device": device,
                    "label": args.label,
                    **rate(name, setting, num_envs, args.steps, args.repeats),
                }
                print(
                    f"{name} {text} ({opt.iterations}/{opt.ls_iterations}, {loops} loops) n={num_envs}: "
                    f"{row['rate']:,.0f} env steps/s, compile {row['compile_s']:.1f} s, "
                    f"one-step error qpos {qpos_error:.1e} qvel {qvel_error:.1e}",
                    flush=True,
                )
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
