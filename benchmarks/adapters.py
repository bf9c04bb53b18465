"""Steps/s of each library adapter against ``TorchEnv`` itself, and against what Gymnasium users run today.

One process, side by side: the same torch MLP (64 tanh units, two layers) drives ``inverted_pendulum`` through

* ``brax_bridge.TorchEnv`` (the reference),
* the TorchRL adapter (``BraxBridgeEnv.step_and_maybe_reset``, a TorchRL collector's step: it resets the envs
  whose episode ended), the Gymnasium adapter (torch and NumPy arrays), the SB3 adapter and
  the RSL-RL adapter,

at ``--num-envs`` envs; and Gymnasium's own ``InvertedPendulum-v5`` (native MuJoCo) in ``SyncVectorEnv`` and
``AsyncVectorEnv`` at 16 and 128 envs. Repetitions alternate between the contenders so load hits all alike; the
median of ``--repeats`` is reported.

    pip install -e ".[gymnasium,sb3,rsl-rl,torchrl,bench]"
    python benchmarks/adapters.py [--num-envs 1024] [--steps 200] [--repeats 3] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import torch  # noqa: E402
from _results import add_write_option, replace_section  # noqa: E402  (benchmarks/ is first on sys.path)

import brax_bridge  # noqa: E402
from brax_bridge import gymnasium as bridge_gym  # noqa: E402
from brax_bridge import rsl_rl as bridge_rsl  # noqa: E402
from brax_bridge import sb3 as bridge_sb3  # noqa: E402
from brax_bridge.torchrl import BraxBridgeEnv  # noqa: E402

SECTION = "## Adapters"
ENV = "inverted_pendulum"


def _policy(obs_size: int, action_size: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(obs_size, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, action_size),
        torch.nn.Tanh(),
    )


def contenders(num_envs: int) -> dict[str, Callable[[int], None]]:
    """name -> ``run(steps)``; each is built (and compiled) here, so timing covers stepping only."""
    policy = _policy(4, 1)
    out: dict[str, Callable[[int], None]] = {}

    torch_env = brax_bridge.TorchEnv(ENV, num_envs, seed=0)
    state = {"obs": torch_env.reset().get("observation")}

    def run_torch_env(steps: int) -> None:
        obs = state["obs"]
        for _ in range(steps):
            obs = torch_env.step(policy(obs)).get(("next", "observation"))
        state["obs"] = obs

    out["TorchEnv"] = run_torch_env

    rl_env = BraxBridgeEnv(ENV, num_envs, seed=0)
    rl_state = {"td": rl_env.reset()}

    def run_torchrl(steps: int) -> None:
        td = rl_state["td"]
        for _ in range(steps):
            td["action"] = policy(td["observation"])
            _, td = rl_env.step_and_maybe_reset(td)
        rl_state["td"] = td

    out["TorchRL adapter"] = run_torchrl

    for array in ("torch", "numpy"):
        gym_env = bridge_gym.VectorEnv(ENV, num_envs, array=array, seed=0)
        holder = {"obs": gym_env.reset(seed=0)[0]}

        def run_gym(steps: int, env=gym_env, holder=holder, array=array) -> None:
            obs = holder["obs"]
            for _ in range(steps):
                x = obs if array == "torch" else torch.from_numpy(obs)
                action = policy(x)
                obs = env.step(action if array == "torch" else action.numpy())[0]
            holder["obs"] = obs

        out[f"Gymnasium adapter ({array})"] = run_gym

    sb3_env = bridge_sb3.VecEnv(ENV, num_envs, seed=0)
    sb3_state = {"obs": sb3_env.reset()}

    def run_sb3(steps: int) -> None:
        obs = sb3_state["obs"]
        for _ in range(steps):
            obs = sb3_env.step(policy(torch.from_numpy(obs)).numpy())[0]
        sb3_state["obs"] = obs

    out["SB3 adapter"] = run_sb3

    rsl_env = bridge_rsl.RslRlVecEnv(ENV, num_envs, seed=0)
    rsl_state = {"obs": rsl_env.get_observations()}

    def run_rsl(steps: int) -> None:
        obs = rsl_state["obs"]
        for _ in range(steps):
            obs = rsl_env.step(policy(obs["policy"]))[0]
        rsl_state["obs"] = obs

    out["RSL-RL adapter"] = run_rsl
    return out


NATIVE_SCRIPT = """
import json, statistics, sys, time
import gymnasium, numpy as np
steps, repeats = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
w1, w2, w3 = rng.normal(size=(4, 64)) / 2, rng.normal(size=(64, 64)) / 8, rng.normal(size=(64, 1)) / 8
out = {}
for n in (16, 128):
    for kind in ("sync", "async"):
        kwargs = {"vector_kwargs": {"context": "fork"}} if kind == "async" else {}
        env = gymnasium.make_vec("InvertedPendulum-v5", num_envs=n, vectorization_mode=kind, **kwargs)
        obs = env.reset(seed=0)[0]
        times = []
        for r in range(repeats + 1):
            start = time.perf_counter()
            for _ in range(steps):
                action = 3.0 * np.tanh(np.tanh(np.tanh(obs @ w1) @ w2) @ w3)  # the motor's range is [-3, 3]
                obs = env.step(action.astype(np.float32))[0]
            if r:
                times.append((time.perf_counter() - start) / steps)
        env.close()
        out[f"Gymnasium InvertedPendulum-v5, {kind.capitalize()}VectorEnv, {n} envs"] = statistics.median(times)
print("RESULT" + json.dumps(out))
"""


def native_contenders(steps: int, repeats: int) -> dict[str, float]:
    """Seconds per step of Gymnasium's own vector envs, measured in a process without JAX or torch (its
    ``AsyncVectorEnv`` workers fork from it, so they stay small)."""
    done = subprocess.run(
        [sys.executable, "-c", NATIVE_SCRIPT, str(steps), str(repeats)], capture_output=True, text=True, check=True
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT") :])


def measure(runs: dict[str, Callable[[int], None]], steps: int, repeats: int) -> dict[str, float]:
    """Median seconds per step of each contender over ``repeats`` alternating rounds (after one warm-up)."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    with torch.inference_mode():
        for run in runs.values():
            run(5)
        for _ in range(repeats):
            for name, run in runs.items():
                start = time.perf_counter()
                run(steps)
                times[name].append((time.perf_counter() - start) / steps)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    add_write_option(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    load_before = os.getloadavg()[0]
    bridge = contenders(args.num_envs)
    copies = brax_bridge.stats().copies
    per_step = measure(bridge, args.steps, args.repeats)
    copies = brax_bridge.stats().copies - copies
    native = native_contenders(max(args.steps // 4, 20), args.repeats)
    load_after = os.getloadavg()[0]

    reference = args.num_envs / per_step["TorchEnv"]
    lines = [
        f"Command: `python benchmarks/adapters.py --num-envs {args.num_envs} --steps {args.steps} "
        f"--repeats {args.repeats}`",
        "",
        f"Machine: {platform.machine()} CPU, {os.cpu_count()} cores, no GPU; 1-minute load average "
        f"{load_before:.1f} before, {load_after:.1f} after. Policy: torch MLP 4-64-64-1 (tanh), one torch thread. "
        f"Copies made by the bridge during the timed bridge loops: {copies} (the NumPy adapters copy actions that "
        "are not 64-byte aligned into torch memory themselves, outside this count).",
        "",
        "| driver | envs | steps/s | vs TorchEnv |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, seconds in per_step.items():
        rate = args.num_envs / seconds
        lines.append(f"| {name} | {args.num_envs} | {rate:,.0f} | {rate / reference:.2f}x |")
    for name, seconds in native.items():
        n = int(re.search(r"(\d+) envs", name).group(1))
        rate = n / seconds
        lines.append(f"| {name} | {n} | {rate:,.0f} | {rate / reference:.2f}x |")
    body = "\n".join(lines)
    print(body)
    if args.write is not None:
        print(f"wrote {SECTION!r} to {replace_section(args.write, SECTION, body)}")


if __name__ == "__main__":
    main()
