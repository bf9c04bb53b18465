"""Env stepping on one device, side by side: raw MJX physics, the fused JAX rollout, and torch driving the bridge.

For each env and batch size, in one process:

- ``raw``: a jitted ``lax.scan`` of ``jax.vmap(env.pipeline_step)`` (``n_frames`` MJX steps, no env logic);
- ``fused``: a jitted ``lax.scan`` of ``training.wrap(env).step`` with uniform random actions (episode bookkeeping
  and auto-reset included): the JAX trainer's way of stepping;
- ``fused_mlp``: the same fused rollout with the torch loops' policy (the same weights) run in JAX inside the scan;
- ``torchenv``: ``brax_bridge.TorchEnv`` driven from Python by a torch MLP (64 tanh) under ``inference_mode``;
- ``torchrl``, ``rsl_rl``, ``gymnasium``: the TorchRL adapter ``BraxBridgeEnv``, the RSL-RL adapter ``RslRlVecEnv``
  and the Gymnasium vector adapter with torch arrays (``VectorEnv(array="torch")``), with the same policy.

Each figure is env steps per second, the best of ``--repeats`` timed runs after a warm-up; the copies the bridge
made during the torch loops are counted. Ratios are against ``fused_mlp`` (the same policy in JAX), and ``fused``
against ``raw``. Made for a
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

    weights = [
        jax.numpy.asarray(p.detach().cpu().numpy())
        for p in _policy(env.observation_size, env.action_size, "cpu").parameters()
    ]

    @jax.jit
    def fused_mlp(state, key):
        def body(s, _):
            w1, b1, w2, b2 = weights
            action = jax.numpy.tanh(jax.numpy.tanh(s.obs @ w1.T + b1) @ w2.T + b2)
            return env.step(s, action), ()

        return jax.lax.scan(body, state, None, length=steps)[0]

    raw = raw_rollout(env, num_envs, steps)

    out = {}
    for label, fn, arg in (
        ("fused", fused, state),
        ("fused_mlp", fused_mlp, state),
        ("raw", raw, state.pipeline_state),
    ):
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


def _tensordict_loop(env, device):
    """TorchEnv's and TorchRL's own way: a TensorDict in, its ``"next"`` out."""
    td = env.reset()
    policy = _policy(td["observation"].shape[-1], env.action_spec.shape[-1], device)

    def loop(count):
        nonlocal td
        for _ in range(count):
            td["action"] = policy(td["observation"])
            td = env.step(td)["next"]

    return loop


def _rsl_rl_loop(env, device):
    obs = env.get_observations()["policy"]
    policy = _policy(obs.shape[-1], env.num_actions, device)

    def loop(count):
        nonlocal obs
        for _ in range(count):
            obs = env.step(policy(obs))[0]["policy"]

    return loop


def _gymnasium_loop(env, device):
    obs, _ = env.reset()
    policy = _policy(obs.shape[-1], env.single_action_space.shape[0], device)

    def loop(count):
        nonlocal obs
        for _ in range(count):
            obs = env.step(policy(obs))[0]

    return loop


def torch_rates(name: str, num_envs: int, steps: int, repeats: int, device: str) -> dict[str, float]:
    from brax_bridge.gymnasium import VectorEnv
    from brax_bridge.rsl_rl import RslRlVecEnv

    out = {}
    makers = {
        "torchenv": (lambda: brax_bridge.TorchEnv(name, num_envs=num_envs, device=device), _tensordict_loop),
        "torchrl": (lambda: BraxBridgeEnv(name, num_envs=num_envs, device=device), _tensordict_loop),
        "rsl_rl": (lambda: RslRlVecEnv(name, num_envs=num_envs, device=device), _rsl_rl_loop),
        "gymnasium": (lambda: VectorEnv(name, num_envs=num_envs, device=device, array="torch"), _gymnasium_loop),
    }
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for label, (make, make_loop) in makers.items():
        steps_of = make_loop(make(), device)

        def loop(count, steps_of=steps_of):
            with torch.inference_mode():
                steps_of(count)
            sync()

        loop(5)
        before = brax_bridge.stats().copies
        out[label] = _best_rate(lambda loop=loop: loop(steps), num_envs * steps, repeats)
        out[f"{label}_copies"] = brax_bridge.stats().copies - before
    return out


_TORCH_LOOPS = ("torchenv", "torchrl", "rsl_rl", "gymnasium")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["ant", "humanoid"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[4096])
    parser.add_argument(
        "--torch-num-envs",
        nargs="+",
        type=int,
        default=None,
        help="batch sizes also driven from torch (default: the first of --num-envs)",
    )
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
            parts = [f"{k} {v:,.0f}/s" for k, v in row.items() if k in ("raw", "fused", "fused_mlp", *_TORCH_LOOPS)]
            ratios = [f"fused/raw {row['fused'] / row['raw']:.2f}"] + [
                f"{k}/fused_mlp {row[k] / row['fused_mlp']:.2f}" for k in _TORCH_LOOPS if k in row
            ]
            copies = "".join(f", {k}_copies {row[f'{k}_copies']}" for k in _TORCH_LOOPS if f"{k}_copies" in row)
            print(f"{name} n={num_envs}: " + ", ".join(parts + ratios) + copies, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "device": name_of,
                    "jax": jax.__version__,
                    "torch": torch.__version__,
                    "steps": args.steps,
                    "rows": rows,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    sys.exit(main())
