"""SHAC against torch_ppo on the same envs, seeds and env-step budget: evaluation reward against wall time.

For each env, one ``brax-bridge compare --algos ppo,shac --trainers torch`` (every run in a process of its own with
an empty compile cache, interleaved, each at ``--num-timesteps`` env steps; PPO with the env's preset, SHAC with its
defaults), then a table per env from its ``compare.json``: each algorithm's final reward (IQM and median), the wall
time of its runs, and the wall time at which each run first reached ``--threshold`` (median over the runs that did),
with the evaluation points of every run for the curves.

    python benchmarks/gradient_learning.py --envs halfcheetah --seeds 0 1 2 --num-timesteps 300000 --threshold 500
    python benchmarks/gradient_learning.py ... --write     # also rewrites its section of its results page
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from typing import Any

from _results import replace_section

SECTION = "## Gradients through the physics, learning against PPO"


def run_compare(env: str, seeds: list[int], num_timesteps: int, threshold: float, out: str) -> dict[str, Any]:
    """One comparison of ppo and shac (torch) on ``env``; its ``compare.json``."""
    command = [sys.executable, "-m", "brax_bridge_app.cli", "compare", "--algos", "ppo,shac", "--trainers", "torch",
               "--env", env, "--seeds", ",".join(map(str, seeds)), "--num-timesteps", str(num_timesteps),
               "--threshold", str(threshold), "--out", out]
    subprocess.run(command, check=False)
    with open(os.path.join(out, "compare.json"), encoding="utf-8") as f:
        return json.load(f)


def rows_of(report: dict[str, Any]) -> list[str]:
    """Table rows, one per algorithm, from a ``compare.json``."""
    rows = []
    for label, entry in report["trainers"].items():
        runs = [run for run in report["runs"] if run.get("contestant") == label]
        finals = [run["final_reward"] for run in runs if run["final_reward"] is not None]
        walls = [run["wall_s"] for run in runs if run["wall_s"] is not None]
        reached = [r["seconds_to_threshold"] for r in entry["runs"] if r["seconds_to_threshold"] is not None]
        iqm = entry["final_reward"]["iqm"] if entry["final_reward"] else None
        median = lambda values: statistics.median(values) if values else None  # noqa: E731
        rows.append(
            f"| `{report['env']}` | {label} | {len(runs)} | {_num(iqm)} | {_num(median(finals))} "
            f"| {_num(median(walls), 0)} | {len(reached)} of {len(runs)} | {_num(median(reached), 0)} |"
        )
    return rows


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["halfcheetah", "ant"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--num-timesteps", type=int, default=300_000)
    parser.add_argument("--threshold", type=float, default=500.0)
    parser.add_argument("--out", default="benchmarks/gradient_learning")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    reports = [
        run_compare(env, args.seeds, args.num_timesteps, args.threshold, os.path.join(args.out, env))
        for env in args.envs
    ]
    command = "python benchmarks/gradient_learning.py " + " ".join(sys.argv[1:])
    lines = [
        f"`{command}`; {os.cpu_count()}-core {platform.machine()} CPU; "
        f"{reports[0]['machine']}; each run in a process of its own with an empty compile cache, the two algorithms "
        f"interleaved, {args.num_timesteps:,} env steps each; torch_ppo with the env's preset, SHAC with its defaults "
        "(64 envs, a horizon of 32).",
        "",
        f"| env | algorithm | runs | final reward IQM | final reward median | wall per run (s, median) | runs reaching "
        f"{args.threshold:g} | wall to {args.threshold:g} (s, median) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for report in reports:
        lines += rows_of(report)
    body = "\n".join(lines)
    print(body)
    if args.write:
        replace_section(None, SECTION, body, keep=("Reading",))


if __name__ == "__main__":
    main()
