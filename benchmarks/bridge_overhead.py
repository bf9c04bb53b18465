"""What does driving brax_core physics from torch cost? One run, same env and batch, side by side.

(a) JAX: the jitted training-env step in a Python loop with a jitted JAX MLP policy (two dispatches per step).
(b) torch: ``brax_bridge.TorchEnv`` with the same MLP (same weights) in torch under ``inference_mode``.
(c) per-call cost of each conversion the bridge makes (and of the public DLPack entry points it avoids).

Repetitions of (a) and (b) alternate so that load from other processes hits both alike; the median is reported.
The copy counter (``brax_bridge.stats()``) is read around (b)'s timed loop.

    python benchmarks/bridge_overhead.py                     # inverted_pendulum and ant, 1024 envs, CPU
    python benchmarks/bridge_overhead.py --write-results     # also rewrites its section of its results page
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
import timeit

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _results import replace_section  # noqa: E402  (benchmarks/ is first on sys.path)
from tensordict import TensorDict  # noqa: E402

import brax_bridge  # noqa: E402  (first: configures GPU memory sharing before JAX starts)
from brax_bridge import convert  # noqa: E402
from brax_bridge import env as bridge_env  # noqa: E402
from brax_core import envs  # noqa: E402
from brax_core.envs.wrappers import training  # noqa: E402

SECTION = "## Bridge overhead"


def _mlp_params(key: jax.Array, sizes: list[int]) -> list[tuple[jax.Array, jax.Array]]:
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (fan_in, fan_out), jnp.float32) / fan_in**0.5, jnp.zeros(fan_out)))
    return params


def _jax_policy(params, obs: jax.Array) -> jax.Array:
    x = obs
    for w, b in params:
        x = jnp.tanh(x @ w + b)  # hidden activations and the final squashing both use tanh
    return x


def _torch_policy(params) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for w, b in params:
        linear = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(np.asarray(w)).T)
            linear.bias.copy_(torch.tensor(np.asarray(b)))
        layers += [linear, torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def _time_jax(step, policy, params, state, steps: int) -> tuple[float, object]:
    start = time.perf_counter()
    for _ in range(steps):
        state = step(state, policy(params, state.obs))
    jax.block_until_ready(state.obs)
    return time.perf_counter() - start, state


def _time_torch(env: brax_bridge.TorchEnv, policy: torch.nn.Module, obs: torch.Tensor, steps: int):
    start = time.perf_counter()
    with torch.inference_mode():
        for _ in range(steps):
            obs = env.step(policy(obs))["next", "observation"]
    return time.perf_counter() - start, obs


def _per_call_us(fn, number: int) -> float:
    return timeit.timeit(fn, number=number) / number * 1e6


def conversion_costs(num_envs: int, obs_size: int, action_size: int) -> dict[str, float]:
    """Microseconds per call of each conversion on (num_envs, obs) / (num_envs, act) float32 buffers."""
    obs = jnp.zeros((num_envs, obs_size), jnp.float32)
    action = torch.zeros(num_envs, action_size)
    t = convert.array_to_tensor(obs)
    n = 5000
    return {
        "JAX -> torch, bridge (obs)": _per_call_us(lambda: convert.array_to_tensor(obs), n),
        "JAX -> torch, torch.from_dlpack": _per_call_us(lambda: torch.from_dlpack(obs), n),
        "torch -> JAX, bridge (action)": _per_call_us(lambda: convert.tensor_to_array(action), n),
        "torch -> JAX, jax.dlpack.from_dlpack": _per_call_us(lambda: jax.dlpack.from_dlpack(action), n),
        "TensorDict of one step's outputs": _per_call_us(
            lambda: TensorDict._new_unsafe(
                {"observation": t, "action": action, "next": TensorDict._new_unsafe(
                    {"observation": t, "final_observation": t, "reward": action, "done": action,
                     "terminated": action, "truncated": action}, batch_size=torch.Size([num_envs]))},
                batch_size=torch.Size([num_envs])), n),
        "NaN check of the action": _per_call_us(lambda: bool(torch.isnan(action).any()), n),
    }


def bench_env(name: str, num_envs: int, steps: int, reps: int, hidden: list[int]) -> dict:
    """Runs (a) and (b) alternately ``reps`` times on ``name``; returns medians and the copy count of (b)."""
    torch_env = brax_bridge.TorchEnv(name, num_envs=num_envs, seed=0)
    obs = torch_env.reset()["observation"]
    wrapped = training.wrap(envs.get_environment(name), episode_length=torch_env.episode_length)
    # (a) compiles with the same XLA options as the bridge's step, so only the bridge itself differs.
    jit = functools.partial(jax.jit, compiler_options=bridge_env.compiler_options(torch_env.jax_device))
    step = jit(wrapped.step)
    policy = jit(_jax_policy)
    sizes = [torch_env.observation_size, *hidden, torch_env.action_size]
    params = _mlp_params(jax.random.PRNGKey(1), sizes)
    tpolicy = _torch_policy(params)
    state = wrapped.reset(jax.random.split(jax.random.PRNGKey(0), num_envs))

    compile_start = time.perf_counter()
    _, state = _time_jax(step, policy, params, state, 2)  # compiles (a)
    _, obs = _time_torch(torch_env, tpolicy, obs, 2)  # compiles (b)
    compile_s = time.perf_counter() - compile_start

    jax_times, torch_times, copies = [], [], 0
    for _ in range(reps):
        seconds, state = _time_jax(step, policy, params, state, steps)
        jax_times.append(seconds)
        before = brax_bridge.stats()
        seconds, obs = _time_torch(torch_env, tpolicy, obs, steps)
        torch_times.append(seconds)
        copies += brax_bridge.stats().copies - before.copies
    jax_sps = num_envs * steps / statistics.median(jax_times)
    torch_sps = num_envs * steps / statistics.median(torch_times)
    return {
        "env": name,
        "num_envs": num_envs,
        "steps": steps,
        "reps": reps,
        "jax_sps": jax_sps,
        "torch_sps": torch_sps,
        "ratio": torch_sps / jax_sps,
        "copies": copies,
        "compiles": torch_env.num_compiles,
        "compile_s": compile_s,
        "obs_size": torch_env.observation_size,
        "action_size": torch_env.action_size,
    }


def _available(name: str) -> str | None:
    try:
        envs.get_environment_class(name)
    except (ImportError, ValueError, AttributeError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def render(rows: list[dict], missing: dict[str, str], costs: dict[str, float], command: str, hidden: list[int],
           torch_threads: int) -> str:
    machine = f"{os.cpu_count()}-core CPU ({platform.processor() or platform.machine()}), no GPU"
    lines = [
        SECTION,
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}; jax {jax.__version__}, torch {torch.__version__}. "
        f"Policy: MLP {hidden} tanh, identical weights in JAX and torch; torch intra-op threads: {torch_threads}. "
        "(a) and (b) alternate; medians shown.",
        "",
        "| env | envs | (a) JAX step + JAX policy, steps/s | (b) TorchEnv + torch policy, steps/s | (b)/(a) "
        "| copies on (b)'s hot path | compiles of (b)'s step |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['env']} | {r['num_envs']} | {r['jax_sps']:,.0f} | {r['torch_sps']:,.0f} | {r['ratio']:.2f}x "
            f"| {r['copies']} (over {r['reps'] * r['steps']} steps) | {r['compiles']} |"
        )
    for name, why in missing.items():
        lines.append(f"| {name} | - | not measured: env unavailable ({why}) | | | | |")
    lines += ["", "Per-call conversion cost (c), µs, at the first env's batch:", "", "| conversion | µs/call |",
              "| --- | ---: |"]
    lines += [f"| {k} | {v:.1f} |" for k, v in costs.items()]
    lines += ["", "GPU: none on the measuring machine, not measured.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["inverted_pendulum", "ant"])
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=100, help="timed steps per repetition (ant: a quarter)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch intra-op threads; OpenMP workers spin against XLA's threads on few cores")
    parser.add_argument(
        "--write-results", action="store_true", help="replace this benchmark's section of its results page"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.torch_threads)

    rows, missing = [], {}
    for name in args.envs:
        why = _available(name)
        if why is not None:
            missing[name] = why
            print(f"{name}: skipped ({why})", flush=True)
            continue
        steps = args.steps if name in ("inverted_pendulum", "fast") else max(4, args.steps // 4)
        row = bench_env(name, args.num_envs, steps, args.reps, args.hidden)
        rows.append(row)
        print(f"{name}: (a) {row['jax_sps']:,.0f} steps/s  (b) {row['torch_sps']:,.0f} steps/s  "
              f"ratio {row['ratio']:.2f}  copies {row['copies']}  compile {row['compile_s']:.0f}s", flush=True)
    first = rows[0] if rows else {"obs_size": 4, "action_size": 1}
    costs = conversion_costs(args.num_envs, int(first["obs_size"]), int(first["action_size"]))
    for k, v in costs.items():
        print(f"  {k}: {v:.1f} µs", flush=True)
    command = "python benchmarks/bridge_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(rows, missing, costs, command.strip(), args.hidden, args.torch_threads)
    if args.write_results:
        print(f"wrote {SECTION!r} to {replace_section(None, SECTION, text.removeprefix(SECTION))}")
    print(text)
    return rows


if __name__ == "__main__":
    main()
