"""Env stepping on one device, side by side: raw MJX physics, the fused JAX rollout, and torch driving the bridge.

For each env and batch size, in one process:

- ``raw``: a jitted ``lax.scan`` of ``jax.vmap(env.pipeline_step)`` (``n_frames`` MJX steps, no env logic);
- ``fused``: a jitted ``lax.scan`` of ``training.wrap(env).step`` with uniform random actions (episode bookkeeping
  and auto-reset included): the JAX trainer's way of stepping;
- ``torchenv``: ``brax_bridge.TorchEnv`` driven from Python by a torch MLP (64 tanh) under ``inference_mode``;
- ``torchrl``: the TorchRL adapter ``BraxBridgeEnv`` with the same policy.

Each figure is env steps per second, the best of ``--repeats`` timed runs after a warm-up; the copies the bridge
made during the torch loops are counted. Ratios are against ``fused`` (and ``fused`` against ``raw``). Made for a
GPU (run with ``JAX_PLATFORMS=cuda``) but runs anywhere:

    JAX_PLATFORMS=cuda python benchmarks/gpu_throughput.py --envs ant humanoid --num-envs 4096 32768 --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import jax
import torch
from _physics import raw_rollout  # benchmarks/ is the script's directory, first on sys.path

import brax_bridge  # before any JAX computation: GPU memory sharing is set when JAX's backend starts
from brax_bridge.torchrl import BraxBridgeEnv
from brax_core import envs
from brax_core.envs import training


def _best_rate(run, steps: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return steps / best


def jax_rates(name: str, num_envs: int, steps: int, repeats: int) -> dict[str, float]:
    env = training.wrap(envs.get_environment(name), episode_length=1000)
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    state = jax.jit(env.reset)(keys)

    @jax.jit
    def fused(state, key):
        def body(s, k):
            action = jax.random.uniform(k, (num_envs, env.action_size), minval=-1.0, maxval=1.0)
            return env.step(s, action), ()

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    raw = raw_rollout(env, num_envs, steps)

    out = {}
    for label, fn, arg in (("fused", fused, state), ("raw", raw, state.pipeline_state)):
        start = time.perf_counter()
        jax.block_until_ready(fn(arg, jax.random.PRNGKey(1)))
        out[f"{label}_compile_s"] = time.perf_counter() - start
        key = jax.random.PRNGKey(2)
        run = lambda fn=fn, arg=arg, key=key: jax.block_until_ready(fn(arg, key))
        out[label] = _best_rate(run, num_envs * steps, repeats)
    return out


def _policy(obs_size: int, action_size: int, device) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(obs_size, 64), torch.nn.Tanh(), torch.nn.Linear(64, action_size), torch.nn.Tanh()
    ).to(device)


def torch_rates(name: str, num_envs: int, steps: int, repeats: int, device: str) -> dict[str, float]:
    out = {}
    makers = {
        "torchenv": lambda: brax_bridge.TorchEnv(name, num_envs=num_envs, device=device),
        "torchrl": lambda: BraxBridgeEnv(name, num_envs=num_envs, device=device),
    }
    for label, make in makers.items():
        env = make()
        td = env.reset()
        policy = _policy(td["observation"].shape[-1], env.action_spec.shape[-1], td["observation"].device)
        sync = torch.cuda.synchronize if td["observation"].is_cuda else (lambda: None)

        def loop(count, td=td, env=env, policy=policy, sync=sync):
            with torch.inference_mode():
                for _ in range(count):
                    td["action"] = policy(td["observation"])
                    td = env.step(td)["next"]
            sync()

        loop(5)
        before = brax_bridge.stats().copies
        out[label] = _best_rate(lambda loop=loop: loop(steps), num_envs * steps, repeats)
        out[f"{label}_copies"] = brax_bridge.stats().copies - before
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["ant", "humanoid"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[4096])
    parser.add_argument("--torch-num-envs", nargs="+", type=int, default=None,
                        help="batch sizes also driven from torch (default: the first of --num-envs)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    device = "cuda" if jax.default_backend() == "gpu" else "cpu"
    torch_sizes = args.torch_num_envs if args.torch_num_envs is not None else args.num_envs[:1]
    name_of = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine()
    print(f"device: {name_of}; jax {jax.__version__} ({jax.default_backend()}), torch {torch.__version__}", flush=True)
    rows = []
    for name in args.envs:
        for num_envs in args.num_envs:
            row = {"env": name, "num_envs": num_envs, **jax_rates(name, num_envs, args.steps, args.repeats)}
            if num_envs in torch_sizes:
                row.update(torch_rates(name, num_envs, args.steps, args.repeats, device))
            rows.append(row)
            parts = [f"{k} {v:,.0f}/s" for k, v in row.items() if k in ("raw", "fused", "torchenv", "torchrl")]
            ratios = [f"fused/raw {row['fused'] / row['raw']:.2f}"] + [
                f"{k}/fused {row[k] / row['fused']:.2f}" for k in ("torchenv", "torchrl") if k in row
            ]
            print(f"{name} n={num_envs}: " + ", ".join(parts + ratios)
                  + "".join(f", {k} {row[k]}" for k in ("torchenv_copies", "torchrl_copies") if k in row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name_of, "jax": jax.__version__, "torch": torch.__version__, "steps": args.steps,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
