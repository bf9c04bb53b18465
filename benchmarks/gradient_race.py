"""Gradient trainers against torch_ppo, each on its own preset, in wall time: when does each run first reach torch_ppo's
final reward, against half of torch_ppo's wall time?

    python benchmarks/gradient_race.py --env reacher --contestants ppo/torch apg/jax --seeds 0 1 2 3

Every run is ``brax-bridge train --algo ALGO --trainer TRAINER --env ENV --seed K`` (the env's preset of that algorithm;
a contestant ``ALGO/TRAINER@PRESET`` adds ``--preset PRESET``) in a process of its own, seed by seed, the contestants
alternating (which goes first alternates too), into ``<out>/<name>/<algo>-<trainer>-seed<k>`` (``name``: the env's,
or NAME of a task ``FILE.py:NAME``). All runs share the machine's compile caches: the seeds of ``--cold`` (default:
the first) run first, with the caches as they are (empty on a fresh machine, ``--clear`` empties them first), and the
others are the warm runs a user's second run of a configuration sees. The table is read from each run's
``metrics.jsonl`` (evaluation reward, env steps and seconds since the run's start), put on the process's clock (launch
to exit, imports included) by the time before the run's start: the process's wall time less the run's own
(``summary.json``'s ``wall_s``), the time after the run's end being a fraction of a second. torch_ppo's final reward is
the IQM of its warm runs' last evaluations; "half" is half of their median process wall time. Curves:
``<out>/<name>.png`` (reward against env steps and against seconds, every run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from brax_bridge_app.stats import iqm


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")


def run_one(env: str, contestant: str, seed: int, out: str) -> dict:
    """One run of ``contestant`` (``ALGO/TRAINER``, or ``ALGO/TRAINER@PRESET`` for a preset other than the env's)."""
    algo_trainer, _, preset = contestant.partition("@")
    algo, trainer = algo_trainer.split("/")
    folder = os.path.join(out, f"{algo}-{trainer}-seed{seed}")
    shutil.rmtree(folder, ignore_errors=True)
    command = [sys.executable, "-m", "brax_bridge_app.cli", "train", "--algo", algo, "--trainer", trainer,
               "--env", env, "--seed", str(seed), "--out", folder]
    if preset:
        command += ["--preset", preset]
    start = time.time()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.time() - start
    with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as f:
        evals = [row for row in map(json.loads, filter(str.strip, f)) if "eval/episode_reward" in row]
    with open(os.path.join(folder, "summary.json"), encoding="utf-8") as f:
        before_start = wall - json.load(f)["wall_s"]
    return {"contestant": contestant, "seed": seed, "process_wall_s": round(wall, 1),
            "before_start_s": round(before_start, 1),
            "evals": [(row["step"], row["time_s"] + before_start, row["eval/episode_reward"]) for row in evals]}


def plot(runs: list[dict], path: str, env: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    colours = {}
    for run in runs:
        colour = colours.setdefault(run["contestant"], f"C{len(colours)}")
        steps, seconds, rewards = zip(*run["evals"], strict=True)
        label = run["contestant"] if run["seed"] == min(r["seed"] for r in runs) else None
        axes[0].plot(steps, rewards, color=colour, label=label, alpha=0.8)
        axes[1].plot(seconds, rewards, color=colour, label=label, alpha=0.8)
    axes[0].set_xlabel("env steps")
    axes[1].set_xlabel("seconds since the process's launch")
    for axis in axes:
        axis.set_ylabel("eval reward")
        axis.set_yscale("symlog")
        axis.legend()
    fig.suptitle(env)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="reacher", help="a registered env, or FILE.py:NAME (a task of a file)")
    parser.add_argument("--contestants", nargs="+", default=["ppo/torch", "apg/jax"],
                        help="ALGO/TRAINER (the env's preset) or ALGO/TRAINER@PRESET")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--cold", nargs="*", type=int, default=None, help="seeds run first (default: the first)")
    parser.add_argument("--out", default="benchmarks/gradient_race")
    parser.add_argument("--reuse", action="store_true", help="read runs.json instead of running")
    args = parser.parse_args()
    cold = args.seeds[:1] if args.cold is None else args.cold
    name = args.env.rsplit(":", 1)[-1]  # a task of a file is named by its function
    out = os.path.join(args.out, name)
    os.makedirs(out, exist_ok=True)
    record = os.path.join(out, "runs.json")
    if args.reuse:
        with open(record, encoding="utf-8") as f:
            report = json.load(f)
    else:
        code = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout
        report = {"command": "python benchmarks/gradient_race.py " + " ".join(sys.argv[1:]), "code": code.strip(),
                  "started_utc": _now(), "load_average_at_start": round(os.getloadavg()[0], 2), "cold": cold,
                  "runs": []}
        for i, seed in enumerate(cold + [s for s in args.seeds if s not in cold]):
            order = args.contestants if i % 2 == 0 else list(reversed(args.contestants))
            for contestant in order:
                report["runs"].append(run_one(args.env, contestant, seed, out))
                print(json.dumps(report["runs"][-1]), flush=True)
        report["finished_utc"] = _now()
        report["load_average_at_end"] = round(os.getloadavg()[0], 2)
        with open(record, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    runs = report["runs"]
    plot(runs, os.path.join(args.out, f"{name}.png"), name)
    warm = [r for r in runs if r["seed"] not in report["cold"]]
    ppo = [r for r in warm if r["contestant"].startswith("ppo/")]
    target = iqm([r["evals"][-1][2] for r in ppo])
    half = statistics.median(r["process_wall_s"] for r in ppo) / 2
    print(f"\n{report['command']}, {report['started_utc']} to {report['finished_utc']} UTC, load average "
          f"{report['load_average_at_start']} at the start and {report['load_average_at_end']} at the end; code "
          f"{report['code']}; torch_ppo's final reward (IQM of its warm runs) {target:.2f}, half its median process "
          f"wall time {half:.0f} s.\n")
    print("| run | caches | final reward | best reward | first at torch_ppo's final reward (env steps, s since launch) "
          "| before the run's start (s) | process wall (s) | within half of torch_ppo's time |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for run in sorted(runs, key=lambda r: (r["contestant"], r["seed"])):
        final, best = run["evals"][-1][2], max(e[2] for e in run["evals"])
        first = next((e for e in run["evals"] if e[2] >= target), None)
        reached = "-" if first is None else f"{first[0]:,}, {first[1]:.0f}"
        within = "" if run["contestant"].startswith("ppo/") else (
            "yes" if first is not None and first[1] <= half else "no")
        print(f"| `{name}` {run['contestant']}, seed {run['seed']} | "
              f"{'cold' if run['seed'] in report['cold'] else 'warm'} | {final:.1f} | {best:.1f} | {reached} | "
              f"{run['before_start_s']:.0f} | {run['process_wall_s']:.0f} | {within} |")
    for contestant in args.contestants:
        mine = [r for r in warm if r["contestant"] == contestant]
        print(f"\n{contestant}: warm final reward IQM {iqm([r['evals'][-1][2] for r in mine]):.1f}, median process "
              f"wall {statistics.median(r['process_wall_s'] for r in mine):.0f} s")


if __name__ == "__main__":
    main()
