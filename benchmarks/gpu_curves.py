"""Figures and a table from the run folders a GPU check brings back (``gpu_locomotion.sh``, ``gpu_legged.sh``).

Reads every ``<folder>/<run>/metrics.jsonl`` of the folders given (with its ``config.json`` and, where the run ended
cleanly, ``summary.json``), writes ``<env>.png`` (eval reward against env steps and against wall time, one line per
run, coloured by trainer) into the last folder and prints a markdown table of that folder's runs: each run's first
evaluation, best and final reward, the first evaluation to pass ``--threshold ENV=VALUE`` and its training
throughput. Earlier folders only add their runs to the figures. Trainer ``brax`` is Brax's own PPO
(``benchmarks/brax_ppo_run.py``).

  python benchmarks/gpu_curves.py gpu_out/runs --threshold ant=3000
  python benchmarks/gpu_curves.py earlier_out/runs gpu_out/runs --threshold ant=3000 hopper=1000 walker2d=1000
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Any

from _results import first_reaching  # benchmarks/ is the script's directory, first on sys.path

from brax_bridge_app import configuration, plots, rundir


def load_run(folder: Path) -> dict[str, Any]:
    config = configuration.read_run(str(folder))
    rows = rundir.read_metrics(str(folder))
    summary_path = folder / rundir.SUMMARY
    summary = rundir.read_json(str(summary_path)) if summary_path.exists() else {}
    curve = [(r["step"], r[rundir.EVAL_REWARD], r["time_s"]) for r in rows if r.get(rundir.EVAL_REWARD) is not None]
    return {
        "name": folder.name,
        "env": config.env_name,
        "trainer": config.trainer,
        "rows": rows,
        "curve": curve,
        "summary": summary,
    }


def first_passing(curve: list[tuple[int, float, float]], threshold: float | None) -> str:
    if threshold is None:
        return "-"
    reached = first_reaching(curve, threshold)
    return f"{reached[0] / 1e6:.1f}M at {reached[1]:.0f} s" if reached else "not reached"


def table(runs: list[dict[str, Any]], thresholds: dict[str, float]) -> str:
    lines = [
        "| run | env | trainer | first evaluation (s) | best reward | final reward | env steps | wall (s) "
        "| threshold | first passing it | training steps/s |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for run in runs:
        curve, summary = run["curve"], run["summary"]
        threshold = thresholds.get(run["env"])
        sps = summary.get("trainer_sps")
        lines.append(
            f"| {run['name']} | {run['env']} | {run['trainer']} | {curve[0][2]:.1f} "
            f"| {max(reward for _, reward, _ in curve):,.0f} | {curve[-1][1]:,.0f} | {curve[-1][0]:,} "
            f"| {summary.get('wall_s', curve[-1][2]):.0f} | {f'{threshold:g}' if threshold is not None else '-'} "
            f"| {first_passing(curve, threshold)} | {f'{sps:,.0f}' if sps else '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", type=Path, nargs="+", help="folders holding one run folder per run")
    parser.add_argument("--threshold", nargs="*", default=[], metavar="ENV=VALUE", help="reward to report per env")
    args = parser.parse_args(argv)
    thresholds = {}
    for item in args.threshold:
        env, _, value = item.partition("=")
        try:
            thresholds[env] = float(value)
        except ValueError:
            parser.error(f"--threshold takes ENV=VALUE pairs like ant=3000; got {item!r}")
    folder = args.folders[-1]
    runs = [load_run(p) for p in sorted(folder.iterdir()) if (p / rundir.METRICS).exists()]
    if not runs:
        parser.error(f"no run folders (with {rundir.METRICS}) in {folder}")
    earlier = [load_run(p) for f in args.folders[:-1] for p in sorted(f.iterdir()) if (p / rundir.METRICS).exists()]
    by_env: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in earlier + runs:
        by_env[run["env"]].append(run)
    for env, env_runs in by_env.items():
        if not any(run["env"] == env for run in runs):
            continue
        labelled = [(f"{r['trainer']} {r['name']}", r["rows"]) for r in env_runs]
        print(plots.compare(labelled, str(folder / f"{env}.png"), title=f"{env}: Brax's PPO recipes on a GPU"))
    print(table(runs, thresholds))


if __name__ == "__main__":
    main()
