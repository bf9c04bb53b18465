"""The JAX APG's start-up and step speed at each CPU compile level, with empty caches and then warm, in fresh processes.

    python benchmarks/apg_startup.py --env reacher --num-timesteps 122880
    python benchmarks/apg_startup.py --env halfcheetah --num-timesteps 40960 --levels 0 1

Each run is a process of its own: the env's APG preset (``brax_core.training.agents.apg.presets``, else the APG
defaults with 64 envs) trained for ``--num-timesteps`` with 4 evaluations. "Start-up" is launch to the evaluation
before training, by which time every program is compiled (the three programs compile side by side first); "steps/s"
is the median of the epochs' ``training/sps``. Per level: one run with empty JAX and program caches (a folder of its
own), then ``--warm`` runs on the caches it filled. Level ``default`` with ``BRAX_BRIDGE_PROGRAM_CACHE=0`` is how the
APG compiled before it chose levels and kept its programs (every run traced, XLA's own level).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_CHILD = r"""
import json, sys, time
start = float(sys.argv[1])
from brax_core.training.agents.apg import train as apg
from brax_core.training.agents.apg.config import APGConfig
from brax_core.training.agents.apg.presets import PRESETS
env, steps = sys.argv[2], int(sys.argv[3])
config = PRESETS.get(env) or APGConfig.from_flat({"num_timesteps": steps, "num_envs": 64})
config = config.replace(num_timesteps=steps, num_evals=4)
reports = []
apg.train_from_config(config, env, progress_fn=lambda step, m: reports.append(
    (time.time() - start, float(m["eval/episode_reward"]), float(m.get("training/sps", 0.0)))))
print(json.dumps(reports))
"""


def run(env: str, steps: int, level: str, cache: str, program_cache: bool) -> dict[str, float]:
    environ = dict(os.environ, BRAX_CORE_CPU_OPT_LEVEL=level, BRAX_BRIDGE_JAX_CACHE=cache,
                   BRAX_BRIDGE_PROGRAM_CACHE="1" if program_cache else "0")
    out = subprocess.run([sys.executable, "-c", _CHILD, str(time.time()), env, str(steps)], env=environ,
                         check=True, capture_output=True, text=True).stdout
    reports = json.loads(out.strip().splitlines()[-1])
    return {"startup": reports[0][0], "sps": statistics.median(r[2] for r in reports[1:]), "wall": reports[-1][0],
            "final": reports[-1][1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="reacher")
    parser.add_argument("--num-timesteps", type=int, default=122_880)
    parser.add_argument("--levels", nargs="+", default=["auto", "0", "1", "default"])
    parser.add_argument("--warm", type=int, default=1, help="warm runs after each cold one")
    parser.add_argument("--before", action="store_true", help="also XLA's default level without the program cache")
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.2f}", flush=True)
    print("| env | level | program cache | caches | start-up (s) | steps/s (median epoch) | wall (s) | final reward |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    settings = [(level, True) for level in args.levels] + ([("default", False)] if args.before else [])
    for level, program_cache in settings:
        with tempfile.TemporaryDirectory() as cache:
            for warm in range(args.warm + 1):
                r = run(args.env, args.num_timesteps, level, cache, program_cache)
                state = "warm" if warm else "empty"
                print(f"| `{args.env}` | {level} | {'on' if program_cache else 'off'} | {state} | {r['startup']:.1f} | "
                      f"{r['sps']:,.0f} | {r['wall']:.1f} | {r['final']:.1f} |", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
