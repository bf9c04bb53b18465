"""Both SAC trainers from a preset, seed by seed: each evaluation's reward, when it first reached ``--mark``, the final
and best rewards, wall time and training steps/s, as Markdown rows (the "SAC" section of
benchmarks/results/learning.md), and the torch / JAX ratio of training steps/s per seed.

    python benchmarks/sac_learning.py --env inverted_pendulum --seeds 0 1 2 --trainers jax torch

Each run is a process of its own, the trainers alternating seed by seed, from the preset
``brax_core.training.agents.sac.presets.PRESETS[--env]`` with only the seed changed: the JAX SAC
(``brax_core.training.agents.sac.train``) and the torch SAC (``torch_sac``) train the same ``SACConfig``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def one_run(env: str, seed: int, trainer: str) -> dict:
    from brax_core.training.agents.sac import presets

    if trainer == "torch":
        import torch_sac as sac
    else:
        from brax_core.training.agents.sac import train as sac

    evaluations, start = [], time.perf_counter()

    def progress(steps: int, metrics: dict) -> None:
        evaluations.append({"env_steps": int(steps), "seconds": round(time.perf_counter() - start, 1),
                            "reward": float(metrics["eval/episode_reward"]),
                            "sps": float(metrics.get("training/sps", 0.0))})

    sac.train_from_config(presets.PRESETS[env].replace(seed=seed), env, progress_fn=progress)
    return {"seed": seed, "trainer": trainer, "evaluations": evaluations,
            "wall_s": round(time.perf_counter() - start, 1)}


def row(env: str, run: dict, mark: float) -> str:
    evaluations = run["evaluations"]
    best = max(evaluations, key=lambda e: e["reward"])
    first = next((e for e in evaluations if e["reward"] >= mark), None)
    reached = f"{first['env_steps']:,} ({first['seconds']:.0f} s)" if first else "-"
    return (f"| `{env}` | {run['trainer']} | {run['seed']} | {evaluations[0]['reward']:,.1f} | "
            f"{evaluations[-1]['reward']:,.1f} | {best['reward']:,.1f} | {reached} | {run['wall_s']:.0f} | "
            f"{evaluations[-1]['sps']:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="inverted_pendulum")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--trainers", nargs="+", choices=("jax", "torch"), default=["jax", "torch"])
    parser.add_argument("--mark", type=float, default=900.0)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--trainer", choices=("jax", "torch"), default="jax", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(one_run(args.env, args.worker, args.trainer)))
        return
    print(f"started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f}")
    print("| env | trainer | seed | before training | final reward | best reward | first at the mark (env steps, s) "
          "| wall (s) | training steps/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    speeds: dict[int, dict[str, float]] = {}
    for seed in args.seeds:
        for trainer in args.trainers:
            command = [sys.executable, __file__, "--env", args.env, "--worker", str(seed), "--trainer", trainer]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            run = json.loads(out.strip().splitlines()[-1])
            print(row(args.env, run, args.mark), flush=True)
            # The training steps/s of every epoch but the first (which compiles), their median.
            rates = sorted(e["sps"] for e in run["evaluations"][2:]) or [run["evaluations"][-1]["sps"]]
            speeds.setdefault(seed, {})[trainer] = rates[len(rates) // 2]
    if len(args.trainers) == 2:
        ratios = [f"seed {seed}: {s['torch'] / s['jax']:.2f} ({s['torch']:,.0f} / {s['jax']:,.0f})"
                  for seed, s in speeds.items()]
        print("torch / JAX training steps/s (median over the epochs after the first): " + "; ".join(ratios))
    print(f"finished {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
