"""Environment throughput: MJX env steps per second beside native MuJoCo on the same model.

For every registered environment and batch size, a jitted ``lax.scan`` rollout of ``training.wrap(env)`` with
uniform random actions in ``[-1, 1]`` is compiled (compile time reported on its own), run once to warm up, then
timed. The native reference is ``mujoco.rollout`` (one thread, one environment) on the very ``MjModel`` the env
was built from, with the same number of physics frames per env step; ``ratio`` is MJX steps/s over native.

An env step is ``n_frames`` physics steps plus the env's reward/observation code and the training wrappers
(episode bookkeeping, auto-reset). Environments whose module is not importable yet are reported, not fatal.

``--tuning`` instead measures the model options chosen in ``brax_core/envs/assets`` against alternatives
(physics steps/s of a raw ``mjx.step`` scan at one batch size), so every speed choice there is measured.

Usage::

    python benchmarks/env_throughput.py --markdown
    python benchmarks/env_throughput.py --envs ant humanoid --batch-sizes 1 128 --steps 50
    python benchmarks/env_throughput.py --tuning --envs halfcheetah ant humanoid --batch-sizes 128
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from brax_core import _quiet  # noqa: E402, F401, I001
from brax_core import envs as brax_envs  # noqa: E402
from brax_core.envs import training  # noqa: E402

DEFAULT_BATCH_SIZES = (1, 128, 1024)
# Caps batch * steps so that large batches of big models finish in seconds on two CPU cores.
DEFAULT_MAX_ENV_STEPS = 20_000
MIN_STEPS = 4


def steps_for(batch_size: int, steps: int, max_env_steps: int = DEFAULT_MAX_ENV_STEPS) -> int:
    """Rollout length for one batch size: ``steps``, shortened so ``batch * steps <= max_env_steps``."""
    return max(MIN_STEPS, min(steps, max_env_steps // batch_size))


def _rollout_fn(env: brax_envs.Env, length: int) -> Callable[[brax_envs.State, jax.Array], brax_envs.State]:
    def rollout(state: brax_envs.State, key: jax.Array) -> brax_envs.State:
        def body(carry, _):
            state, key = carry
            key, sub = jax.random.split(key)
            action = jax.random.uniform(sub, state.done.shape + (env.action_size,), jnp.float32, -1.0, 1.0)
            return (env.step(state, action), key), None

        return jax.lax.scan(body, (state, key), None, length=length)[0][0]

    return rollout


def _initial_state(env: brax_envs.Env, batch_size: int) -> brax_envs.State:
    """A batch of initial states from one reset compiled at batch 1 (reset time is not measured).

    Every slot starts from the same state; random actions separate them on the first step. Compiling the reset
    once per environment, with XLA's cheapest optimisation level, keeps the benchmark's wall time down.
    """
    keys = jax.random.split(jax.random.PRNGKey(0), 1)
    reset = jax.jit(env.reset).lower(keys).compile({"xla_backend_optimization_level": 0})
    state = reset(keys)
    return jax.tree_util.tree_map(functools.partial(jnp.repeat, repeats=batch_size, axis=0), state)


def mjx_throughput(env: brax_envs.Env, batch_sizes: Sequence[int], steps: int, max_env_steps: int) -> list[dict]:
    """Env steps/s of the wrapped env at each batch size, with compile times."""
    wrapped = training.wrap(env, episode_length=int(getattr(env, "default_episode_length", 1000)))
    one = _initial_state(wrapped, 1)
    rows = []
    for batch_size in batch_sizes:
        state = jax.tree_util.tree_map(functools.partial(jnp.repeat, repeats=batch_size, axis=0), one)
        length = steps_for(batch_size, steps, max_env_steps)
        key = jax.random.PRNGKey(1)
        start = time.perf_counter()
        rollout = jax.jit(_rollout_fn(wrapped, length)).lower(state, key).compile()
        compile_s = time.perf_counter() - start
        jax.block_until_ready(rollout(state, key))  # warm-up: first-call allocations
        start = time.perf_counter()
        jax.block_until_ready(rollout(state, jax.random.PRNGKey(2)).obs)
        elapsed = time.perf_counter() - start
        rows.append(
            {"batch": batch_size, "steps": length, "mjx_steps_per_s": batch_size * length / elapsed,
             "compile_s": compile_s}
        )
    return rows


def native_throughput(mj_model: mujoco.MjModel, n_frames: int, env_steps: int = 1000, seed: int = 0) -> float:
    """Env steps/s of native MuJoCo on one thread (``mujoco.rollout``, else an ``mj_step`` loop)."""
    data = mujoco.MjData(mj_model)
    if mj_model.nkey:
        mujoco.mj_resetDataKeyframe(mj_model, data, 0)
    mujoco.mj_forward(mj_model, data)
    rng = np.random.default_rng(seed)
    low, high = mj_model.actuator_ctrlrange[:, 0], mj_model.actuator_ctrlrange[:, 1]
    # one random control per env step, held for n_frames physics steps as the MJX env does
    ctrl = np.repeat(rng.uniform(low, high, (env_steps, mj_model.nu)), n_frames, axis=0)
    try:
        from mujoco import rollout as mj_rollout
    except ImportError:
        mj_rollout = None
    if mj_rollout is not None:
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        state0 = np.empty((1, mujoco.mj_stateSize(mj_model, spec)))
        mujoco.mj_getState(mj_model, data, state0[0], spec)
        mj_rollout.rollout(mj_model, data, state0, ctrl[None, :10])  # warm-up
        start = time.perf_counter()
        mj_rollout.rollout(mj_model, data, state0, ctrl[None])
        elapsed = time.perf_counter() - start
    else:
        start = time.perf_counter()
        for u in ctrl:
            data.ctrl[:] = u
            mujoco.mj_step(mj_model, data)
        elapsed = time.perf_counter() - start
    return env_steps / elapsed


def run(
    envs: Sequence[str] | None = None,
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    steps: int = 100,
    max_env_steps: int = DEFAULT_MAX_ENV_STEPS,
) -> list[dict[str, Any]]:
    """One row per (environment, batch size); environments that cannot be built get one ``status`` row."""
    names = list(envs) if envs else brax_envs.registered_names()
    _check(names, batch_sizes, steps)
    rows: list[dict[str, Any]] = []
    for name in names:
        try:
            env = brax_envs.get_environment(name)
        except (ImportError, AttributeError) as err:  # one env that fails to build must not stop the others
            rows.append({"env": name, "status": f"not available: {err}"})
            _progress(rows[-1])
            continue
        mj_model = getattr(env, "mj_model", None)
        native = native_throughput(mj_model, env.n_frames) if mj_model is not None else None
        for row in mjx_throughput(env, batch_sizes, steps, max_env_steps):
            ratio = row["mjx_steps_per_s"] / native if native else None
            rows.append({"env": name, **row, "native_1thread_steps_per_s": native, "mjx_over_native": ratio,
                         "status": "ok"})
            _progress(rows[-1])
    return rows


# ---------------------------------------------------------------------------------------------------------------
# Model tuning: each speed choice in the shipped MJCF against the alternative it replaced.


def _variants() -> dict[str, Callable[[mujoco.MjModel], None]]:
    def all_geoms_touch_floor(m: mujoco.MjModel) -> None:
        # as the standard models do: every body geom collides with the floor (body pairs still excluded)
        floor = m.geom_bodyid == 0
        m.geom_contype[~floor] = 1

    def iterations(n: int) -> Callable[[mujoco.MjModel], None]:
        def apply(m: mujoco.MjModel) -> None:
            m.opt.iterations = n

        return apply

    def eulerdamp_on(m: mujoco.MjModel) -> None:
        m.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)

    def cg_solver(m: mujoco.MjModel) -> None:
        m.opt.solver = mujoco.mjtSolver.mjSOL_CG

    return {
        "as shipped": lambda m: None,
        "all body geoms touch floor": all_geoms_touch_floor,
        "solver iterations 4": iterations(4),
        "eulerdamp on": eulerdamp_on,
        "CG solver": cg_solver,
    }


def tuning(
    names: Sequence[str], batch_size: int = 128, steps: int = 50, variants: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Physics steps/s of a raw batched ``mjx.step`` scan for each model variant (same controls, same start)."""
    from mujoco import mjx

    from brax_core.envs import _assets

    chosen = _variants()
    if variants:
        unknown = [v for v in variants if v not in chosen]
        if unknown:
            raise ValueError(f"variants: unknown {unknown}; choose from {list(chosen)}")
        chosen = {v: chosen[v] for v in variants}
    rows = []
    for name in names:
        for label, edit in chosen.items():
            mj_model = _assets.load(name)[1]
            edit(mj_model)
            sys_ = mjx.put_model(mj_model)
            data = mujoco.MjData(mj_model)
            if mj_model.nkey:
                mujoco.mj_resetDataKeyframe(mj_model, data, 0)
            mujoco.mj_forward(mj_model, data)
            one = mjx.put_data(mj_model, data)
            batch = jax.tree_util.tree_map(lambda x, n=batch_size: jnp.repeat(x[None], n, axis=0), one)
            ctrl = jax.random.uniform(jax.random.PRNGKey(0), (steps, batch_size, mj_model.nu), jnp.float32, -1, 1)

            def roll(d, ctrl, sys_=sys_):
                step = jax.vmap(lambda d, u: mjx.step(sys_, d.replace(ctrl=u)))
                return jax.lax.scan(lambda d, u: (step(d, u), None), d, ctrl)[0]

            start = time.perf_counter()
            compiled = jax.jit(roll).lower(batch, ctrl).compile()
            compile_s = time.perf_counter() - start
            jax.block_until_ready(compiled(batch, ctrl))
            start = time.perf_counter()
            out = jax.block_until_ready(compiled(batch, ctrl))
            elapsed = time.perf_counter() - start
            finite = bool(jnp.all(jnp.isfinite(out.qpos)))
            rows.append({"env": name, "variant": label, "batch": batch_size,
                         "physics_steps_per_s": batch_size * steps / elapsed, "compile_s": compile_s,
                         "finite": finite})
            _progress(rows[-1])
    return rows


# ---------------------------------------------------------------------------------------------------------------


def _progress(row: dict[str, Any]) -> None:
    print({k: _fmt(v) for k, v in row.items()}, file=sys.stderr, flush=True)


def _check(names: Sequence[str], batch_sizes: Sequence[int], steps: int) -> None:
    known = brax_envs.registered_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"envs: unknown {unknown}; registered environments: {', '.join(known)}")
    if not batch_sizes or any(not isinstance(b, int) or b < 1 for b in batch_sizes):
        raise ValueError(f"batch_sizes must be positive integers, got {list(batch_sizes)!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.0f}"
    return str(value)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=None, help="environment names (default: all registered)")
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=list(DEFAULT_BATCH_SIZES))
    parser.add_argument("--steps", type=int, default=100, help="rollout length (shortened for big batches)")
    parser.add_argument("--max-env-steps", type=int, default=DEFAULT_MAX_ENV_STEPS,
                        help="cap on batch * steps per timed rollout")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--tuning", action="store_true", help="measure model option variants instead")
    parser.add_argument("--variants", nargs="+", default=None, help="with --tuning: the variants to measure")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.tuning:
        names = args.envs or ["halfcheetah", "ant", "humanoid"]
        _check(names, args.batch_sizes, args.steps)
        rows = [r for b in args.batch_sizes for r in tuning(names, b, args.steps, args.variants)]
    else:
        rows = run(args.envs, args.batch_sizes, args.steps, args.max_env_steps)
    if args.markdown:
        print(markdown(rows))
    else:
        for row in rows:
            print({k: _fmt(v) for k, v in row.items()})
    wall = time.perf_counter() - start
    print(f"\n(total wall time {wall:.0f} s; jax {jax.__version__}, mujoco {mujoco.__version__}, "
          f"{os.cpu_count()} CPU cores)", file=sys.stderr)


if __name__ == "__main__":
    main()
