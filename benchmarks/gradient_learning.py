"""SHAC against torch_ppo on the same envs, seeds and env-step budget: evaluation reward against wall time.

For each env, one ``brax-bridge compare --algos ppo,shac --trainers torch`` (every run in a process of its own with
an empty compile cache, interleaved, each at ``--num-timesteps`` env steps; PPO with the env's preset, SHAC with its
defaults), then, from its ``compare.json`` and each run's ``metrics.jsonl``: a table of each algorithm's final
reward (IQM and median), the wall time of its runs and the wall time at which each run first reached
``--threshold``; a table of every run's evaluations (final, best, first at ``--mark``, and SHAC's actor gradient
norm, the lowest and highest epoch mean); and the curves, ``<out>/<env>.png`` (reward against env steps and wall
time, the IQM over seeds).

    python benchmarks/gradient_learning.py --envs halfcheetah ant --seeds 0 1 2 --num-timesteps 200000
    python benchmarks/gradient_learning.py ... --write     # also rewrites its section of its results page
    python benchmarks/gradient_learning.py --envs ant --reuse halfcheetah ... --write  # halfcheetah's earlier run

``--reuse ENV``: that env's comparison is read from its folder (``invocation.json`` records when and how it ran)
instead of run again; the page names each env's invocation.

``--settings FLAG=VALUE|FLAG ...``: instead, SHAC alone on each env of ``--envs`` with each setting changed (a flag
of ``train --algo shac`` with its value, or a switch such as ``no-normalize-observations``; every other setting its
default), into ``<out>/<env>-<flag><value>``, against the SHAC runs of the env's comparison above (its defaults):
what a shorter window or a smaller step does to the final reward and the actor's gradient norm (section "SHAC's
settings"). ``--ablation``: SHAC's defaults and each of the pieces they are made of taken away in turn, seed by seed,
each a ``train`` run sharing the machine's compile cache (what is compared is reward and gradient norm, not time),
into ``<out>/ablation-<env>/<setting>/seed<k>`` (section "SHAC's pieces"):

    python benchmarks/gradient_learning.py --envs halfcheetah --settings horizon-length=16 \\
        actor-learning-rate=5e-4 --write
    python benchmarks/gradient_learning.py --envs halfcheetah --ablation --num-timesteps 40000 --write

An env of ``--envs`` may be a file's task (``benchmarks/gradient_tasks.py:inverted_pendulum_upright``); its folder is
named after the task, and ``--preset`` gives every algorithm the registered env's preset it is a variant of.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
from typing import Any

from _results import replace_section

from brax_bridge_app.stats import iqm

SECTION = "## Gradients through the physics, learning against PPO"
SECTION_SETTINGS = "## Gradients through the physics, SHAC's settings"
SECTION_ABLATION = "## Gradients through the physics, SHAC's pieces"
# Each of SHAC's stabilisers taken away in turn (the flag that does it): what its reference configuration is built of.
ABLATION = {
    "defaults": None,
    "no observation normalisation": "no-normalize-observations",
    "one-step TD targets (lambda 0)": "td-lambda=0",
    "no target critic (alpha 0)": "target-critic-alpha=0",
    "one critic pass (of 16)": "critic-iterations=1",
    "Adam betas 0.9, 0.999 (of 0.7, 0.95)": "adam-b=0.9,0.999",
    "constant learning rates (no linear decay)": "learning-rate-schedule=constant",
    "no gradient clipping": "max-grad-norm=1e9",
    "AHAC's adaptive horizon (added)": "adaptive-horizon",
    # AHAC's windows start at its horizon_min (4) and stay near it over a short run: a fixed window of that length
    # tells the adaptation apart from the shorter window alone.
    "a fixed 4-step window (AHAC's first)": "horizon-length=4",
}


def _shell_words(words: list[str]) -> str:
    """``words`` as a shell reads them back: quoted where needed, in double quotes where a word holds a ``'``."""
    quoted = [f'"{w}"' if "'" in w and not any(c in w for c in '"$`\\!') else shlex.quote(w) for w in words]
    return " ".join(quoted)


def env_label(env: str) -> str:
    """A folder name for ``env``: a registered name as it is, a file's task by its name."""
    return env.rpartition(":")[2] if ":" in env else env


def setting_flags(setting: str) -> list[str]:
    """``FLAG=VALUE`` as ``--FLAG VALUE``, a switch ``FLAG`` as ``--FLAG``."""
    flag, _, value = setting.partition("=")
    return [f"--{flag}", value] if "=" in setting else [f"--{flag}"]


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")


def run_compare(env: str, args: argparse.Namespace, out: str, setting: str | None = None) -> dict[str, Any]:
    """One comparison of ppo and shac (torch) on ``env`` (with ``setting``, ``FLAG=VALUE``: SHAC alone with that
    flag), recorded in ``out/invocation.json``; its ``compare.json``."""
    algos = ["--algos", args.algos] if setting is None else ["--algos", "shac", *([] if setting == "defaults" else
                                                                                   setting_flags(setting))]
    preset = ["--preset", args.preset] if args.preset else []
    preset += ["--num-evals", str(args.num_evals)] if args.num_evals else []
    command = [sys.executable, "-m", "brax_bridge_app.cli", "compare", *algos, *preset, "--trainers", "torch",
               "--env", env, "--seeds", ",".join(map(str, args.seeds)), "--num-timesteps", str(args.num_timesteps),
               "--threshold", str(args.threshold), "--out", out]
    started, load = _now(), os.getloadavg()[0]
    code = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False)
    subprocess.run(command, check=False)
    invocation = {
        "command": "python benchmarks/gradient_learning.py " + _shell_words(sys.argv[1:]),
        "code": code.stdout.strip() or "unknown",
        "started_utc": started, "finished_utc": _now(), "load_average_at_start": round(load, 2),
        "num_timesteps": args.num_timesteps,
    }
    with open(os.path.join(out, "invocation.json"), "w", encoding="utf-8") as f:
        json.dump(invocation, f, indent=2)
    return read_compare(out)


def read_compare(out: str) -> dict[str, Any]:
    with open(os.path.join(out, "compare.json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(os.path.join(out, "invocation.json"), encoding="utf-8") as f:
        report["invocation"] = json.load(f)
    return report


def rows_of(report: dict[str, Any]) -> list[str]:
    """Table rows, one per algorithm, from a ``compare.json``."""
    rows = []
    for label, entry in report["trainers"].items():
        runs = [run for run in report["runs"] if run.get("contestant") == label]
        finals = [run["final_reward"] for run in runs if run["final_reward"] is not None]
        walls = [run["wall_s"] for run in runs if run["wall_s"] is not None]
        reached = [r["seconds_to_threshold"] for r in entry["runs"] if r["seconds_to_threshold"] is not None]
        iqm = entry["final_reward"]["iqm"] if entry["final_reward"] else None
        rows.append(
            f"| `{env_label(report['env'])}` | {label} | {len(runs)} | {_num(iqm)} | {_num(_median(finals))} "
            f"| {_num(_median(walls), 0)} | {len(reached)} of {len(runs)} | {_num(_median(reached), 0)} |"
        )
    return rows


def run_rows(report: dict[str, Any], out: str, mark: float) -> list[str]:
    """One row per run, from its ``metrics.jsonl``: final and best evaluation, the first at ``mark`` or more, the
    wall time, and the lowest and highest epoch mean of the gradient norm (SHAC: the actor's, before its clip)."""
    rows = []
    for run in sorted(report["runs"], key=lambda run: (run["contestant"], run["seed"])):
        label = run["contestant"]
        folder = os.path.join(out, f"{label.replace('/', '-')}-seed{run['seed']}")
        with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as f:
            evals = [json.loads(line) for line in f if line.strip()]
        evals = [row for row in evals if "eval/episode_reward" in row]
        best = max(evals, key=lambda row: row["eval/episode_reward"])
        first = next((row for row in evals if row["eval/episode_reward"] >= mark), None)
        norms = [row["training/grad_norm"] for row in evals if row.get("training/grad_norm") is not None]
        spread = f"{_sig(min(norms))} to {_sig(max(norms))}" if norms and label.startswith(("shac", "apg")) else "-"
        reached = "-" if first is None else f"{first['step']:,}, {first['time_s']:.0f}"
        rows.append(
            f"| `{env_label(report['env'])}` {label}, seed {run['seed']} | {_num(evals[-1]['eval/episode_reward'])} "
            f"| {_num(best['eval/episode_reward'])} ({best['step']:,}, {best['time_s']:.0f}) "
            f"| {reached} | {_num(run['wall_s'], 0)} "
            f"| {spread} |"
        )
    return rows


def against_ppo(report: dict[str, Any], out: str) -> str | None:
    """The goal's test, as a sentence: torch_ppo's final reward (IQM) and half its median wall time, and when each
    run of every other algorithm first reached that reward (None without a PPO contestant)."""
    if "ppo/torch" not in report["trainers"] or report["trainers"]["ppo/torch"]["final_reward"] is None:
        return None
    target = report["trainers"]["ppo/torch"]["final_reward"]["iqm"]
    ppo_walls = [run["wall_s"] for run in report["runs"] if run["contestant"] == "ppo/torch" and run["wall_s"]]
    parts = []
    for run in sorted(report["runs"], key=lambda run: (run["contestant"], run["seed"])):
        if run["contestant"] == "ppo/torch":
            continue
        folder = os.path.join(out, f"{run['contestant'].replace('/', '-')}-seed{run['seed']}")
        with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as f:
            evals = [row for row in map(json.loads, filter(str.strip, f)) if "eval/episode_reward" in row]
        first = next((row for row in evals if row["eval/episode_reward"] >= target), None)
        parts.append(f"{run['contestant']} seed {run['seed']} " + ("never" if first is None else
                                                                     f"at {first['time_s']:.0f} s"))
    return (f"`{env_label(report['env'])}`: torch_ppo's final reward IQM {_num(target)} in a median "
            f"{_num(_median(ppo_walls), 0)} s per run (half: {_num(_median(ppo_walls) / 2, 0)} s); first reached by "
            + "; ".join(parts) + ".")


def setting_row(report: dict[str, Any], out: str, setting: str, spread: bool = False) -> str:
    """One row of the settings table: SHAC's runs in ``report``, with ``setting`` (``spread``: the highest epoch mean
    of the actor's gradient norm over the lowest, per seed, besides the highest)."""
    runs = sorted((run for run in report["runs"] if run["contestant"] == "shac/torch"), key=lambda run: run["seed"])
    entry = report["trainers"]["shac/torch"]
    highest, finals, bests, ratios = [], [], [], []
    for run in runs:
        with open(os.path.join(out, f"shac-torch-seed{run['seed']}", "metrics.jsonl"), encoding="utf-8") as f:
            evals = [row for row in map(json.loads, filter(str.strip, f)) if "eval/episode_reward" in row]
        finals.append(evals[-1]["eval/episode_reward"])
        bests.append(max(row["eval/episode_reward"] for row in evals))
        norms = [row["training/grad_norm"] for row in evals if "training/grad_norm" in row]
        highest.append(max(norms, default=0.0))
        ratios.append(max(norms) / min(norms) if norms and min(norms) > 0 else None)
    iqm = entry["final_reward"]["iqm"] if entry["final_reward"] else None
    row = (
        f"| `{env_label(report['env'])}` | {setting} | {len(runs)} | {_num(iqm)} "
        f"| {', '.join(_num(v) for v in finals)} | {', '.join(_num(v) for v in bests)} "
        f"| {_num(_median([r['wall_s'] for r in runs]), 0)} | {', '.join(_sig(v) for v in highest)} |"
    )
    return row + f" {', '.join('-' if r is None else _sig(r) for r in ratios)} |" if spread else row


def settings(args: argparse.Namespace) -> str:
    """Runs (or, with ``--reuse``, reads) SHAC with each of ``--settings`` on each env; the section's text."""
    lines = [
        f"{platform.machine()}; SHAC (torch) alone with one setting changed, every other its default, each run in a "
        "process of its own with an empty compile cache; \"defaults\" is the SHAC side of the comparison above "
        "(horizon-length 32, actor-learning-rate 0.002, max-gradient-norm 1). One invocation per row:",
        "",
    ]
    rows = []
    for env in args.envs:
        found = [("defaults", read_compare(os.path.join(args.out, env)), os.path.join(args.out, env))]
        for setting in args.settings:
            key = f"{env}-{setting.replace('=', '')}"
            out = os.path.join(args.out, key)
            found.append((setting, read_compare(out) if key in args.reuse else run_compare(env, args, out, setting),
                          out))
        for setting, report, out in found:
            run = report["invocation"]
            note = f" ({run['note']})" if "note" in run else ""
            lines.append(f"- `{env}`, {setting}: `{run['command']}`{note}, {run['started_utc']} to "
                         f"{run['finished_utc'][-5:]} UTC, load average {run['load_average_at_start']} at the start; "
                         f"code {run['code']}; {run['num_timesteps']:,} env steps per run.")
            rows.append(setting_row(report, out, setting))
    lines += [
        "",
        "| env | SHAC setting | runs | final reward IQM | final reward, each seed | best reward, each seed "
        "| wall per run (s, median) | actor gradient norm, highest epoch mean, each seed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ]
    return "\n".join(lines)


def ablation_run(env: str, setting: str | None, seed: int, args: argparse.Namespace, out: str) -> None:
    """One SHAC run of the ablation: ``train --algo shac`` with ``setting`` (None: the defaults) into ``out``."""
    command = [sys.executable, "-m", "brax_bridge_app.cli", "train", "--algo", "shac", "--trainer", "torch",
               "--env", env, "--seed", str(seed), "--num-timesteps", str(args.num_timesteps), "--out", out,
               *(["--preset", args.preset] if args.preset else []),
               *(["--num-evals", str(args.num_evals)] if args.num_evals else []),
               *([] if setting is None else setting_flags(setting))]
    subprocess.run(command, check=False)


def ablation_rows(env: str, folders: dict[str, list[str]]) -> list[str]:
    """One row per setting from its runs' ``metrics.jsonl``: final and best reward per seed, and the actor's gradient
    norm (each epoch's mean, before the clip): the highest, and the highest over the lowest, per seed."""
    rows = []
    for name, runs in folders.items():
        finals, bests, highest, spreads = [], [], [], []
        for folder in runs:
            with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as f:
                evals = [row for row in map(json.loads, filter(str.strip, f)) if "eval/episode_reward" in row]
            finals.append(evals[-1]["eval/episode_reward"])
            bests.append(max(row["eval/episode_reward"] for row in evals))
            norms = [row["training/grad_norm"] for row in evals if row.get("training/grad_norm") is not None]
            highest.append(max(norms, default=float("nan")))
            spreads.append(max(norms) / min(norms) if norms and min(norms) > 0 else float("nan"))
        rows.append(
            f"| `{env_label(env)}` | {name} | {len(runs)} | {_num(iqm(finals))} | {', '.join(map(_num, finals))} "
            f"| {', '.join(map(_num, bests))} | {', '.join(map(_sig, highest))} | {', '.join(map(_sig, spreads))} |"
        )
    return rows


def ablation(args: argparse.Namespace) -> str:
    """Runs (or, with ``--reuse ENV``, reads) SHAC with its defaults and with each of its pieces taken away, seed by
    seed (every setting of a seed before the next seed), on each env; the section's text."""
    lines = [
        f"{platform.machine()}; SHAC (torch) with its defaults and with one of its stabilisers taken away or AHAC's "
        "adaptive horizon added (the flag in the folder's name), each run a process of its own, seed by seed with "
        "every setting of a seed before the next; the runs share the machine's compile cache, so their wall times are "
        "not compared here. The gradient norm is the actor's before its clip, each epoch's mean. The invocations "
        "that ran the rows' runs:",
        "",
    ]
    rows = []
    for env in args.envs:
        started, load = _now(), os.getloadavg()[0]
        code = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                              check=False).stdout.strip()
        chosen = {name: setting for name, setting in ABLATION.items() if not args.only or name in args.only}
        folders: dict[str, list[str]] = {name: [] for name in chosen}
        base = os.path.join(args.out, f"ablation-{env_label(env)}")
        settings = {name: os.path.join(base, (setting or "defaults").replace("=", ""))
                    for name, setting in chosen.items()}
        for seed in args.seeds:
            for name, setting in chosen.items():
                out = os.path.join(settings[name], f"seed{seed}")
                if env not in args.reuse:
                    ablation_run(env, setting, seed, args, out)
                folders[name].append(out)
        if env not in args.reuse:
            record = {"command": "python benchmarks/gradient_learning.py " + _shell_words(sys.argv[1:]), "code": code,
                      "started_utc": started, "finished_utc": _now(), "load_average_at_start": round(load, 2),
                      "num_timesteps": args.num_timesteps}
            for folder in settings.values():  # each setting's runs name the invocation that ran them
                with open(os.path.join(folder, "invocation.json"), "w", encoding="utf-8") as f:
                    json.dump(record, f, indent=2)
        invocations = []
        for folder in settings.values():  # a setting's own record, else the env's (runs before per-setting records)
            own = os.path.join(folder, "invocation.json")
            with open(own if os.path.exists(own) else os.path.join(base, "invocation.json"), encoding="utf-8") as f:
                run = json.load(f)
            if run not in invocations:
                invocations.append(run)
        for run in invocations:
            lines.append(f"- `{env_label(env)}`: `{run['command']}`, {run['started_utc']} to "
                         f"{run['finished_utc'][-5:]} UTC, load average {run['load_average_at_start']} at the start; "
                         f"code {run['code']}; {run['num_timesteps']:,} env steps per run.")
        rows += ablation_rows(env, folders)
    lines += [
        "",
        "| env | SHAC | runs | final reward IQM | final reward, each seed | best reward, each seed "
        "| actor gradient norm, highest epoch mean, each seed | highest over lowest epoch mean, each seed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ]
    return "\n".join(lines)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _sig(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="*", default=["halfcheetah", "ant"])
    parser.add_argument("--reuse", nargs="*", default=[], help="envs whose comparison in --out is read, not rerun")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--num-timesteps", type=int, default=200_000)
    parser.add_argument("--threshold", type=float, default=200.0)
    parser.add_argument("--mark", type=float, default=1000.0, help="the reward level of the per-run table's column")
    parser.add_argument("--out", default="benchmarks/gradient_learning")
    parser.add_argument("--settings", nargs="*", default=[], help="SHAC alone with each FLAG=VALUE or switch FLAG")
    parser.add_argument("--ablation", action="store_true", help="SHAC with each of its pieces taken away in turn")
    parser.add_argument("--only", nargs="*", default=[], choices=list(ABLATION),
                        help="with --ablation: these settings alone (their rows, by name)")
    parser.add_argument("--algos", default="ppo,shac", help="the algorithms each env's comparison runs")
    parser.add_argument("--preset", default=None, help="every algorithm's preset (for a file's task)")
    parser.add_argument("--num-evals", type=int, default=None, help="evaluations per run (else the preset's)")
    parser.add_argument("--section", default=SECTION, help="the results section a comparison writes")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    malformed = [setting for setting in args.settings if setting.startswith(("=", "-"))]
    if malformed:
        parser.error(f"--settings takes FLAG=VALUE or FLAG (a flag of train --algo shac without its dashes, e.g. "
                     f"horizon-length=16 or no-normalize-observations), got {', '.join(map(repr, malformed))}")
    if args.ablation:
        body = ablation(args)
        print(body)
        if args.write:
            section = SECTION_ABLATION if args.section == SECTION else args.section
            replace_section(None, section, body, keep=("Reading",))
        return
    if args.settings:
        body = settings(args)
        print(body)
        if args.write:
            replace_section(None, SECTION_SETTINGS, body, keep=("Reading",))
        return
    reports = []
    for env in [*args.reuse, *args.envs]:
        out = os.path.join(args.out, env_label(env))
        reports.append((read_compare(out) if env in args.reuse else run_compare(env, args, out), out))
        shutil.copyfile(os.path.join(out, "compare.png"), os.path.join(args.out, f"{env_label(env)}.png"))
    lines = [
        f"{platform.machine()}, {reports[0][0]['machine']}; each run in a process of its own "
        f"with an empty compile cache, the algorithms ({args.algos}) interleaved; each with the env's preset (or "
        "--preset's), SHAC's and APG's 64 envs and a horizon of 32. One invocation per env:",
        "",
    ]
    for report, _ in reports:
        run = report["invocation"]
        label = env_label(report["env"])
        lines.append(
            f"- `{label}`: `{run['command']}`, {run['started_utc']} to {run['finished_utc'][-5:]} UTC, load "
            f"average {run['load_average_at_start']} at the start, nothing else running; code {run['code']}; "
            f"{run['num_timesteps']:,} env steps per run; curves `benchmarks/gradient_learning/{label}.png`."
        )
    threshold = f"{reports[0][0]['threshold']:g}"
    lines += [
        "",
        f"| env | algorithm | runs | final reward IQM | final reward median | wall per run (s, median) | runs reaching "
        f"{threshold} | wall to {threshold} (s, median) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for report, _ in reports:
        lines += rows_of(report)
    lines += [
        "",
        "Each run's evaluations (from its `metrics.jsonl`):",
        "",
        f"| run | final reward | best reward (env steps, s) | first at {args.mark:,.0f} or more (env steps, s) "
        "| wall (s) | gradient norm, epoch means (lowest to highest) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for report, out in reports:
        lines += run_rows(report, out, args.mark)
    goals = [sentence for sentence in (against_ppo(report, out) for report, out in reports) if sentence]
    if goals:
        lines += ["", "Against torch_ppo's final reward:", "", *[f"- {sentence}" for sentence in goals]]
    body = "\n".join(lines)
    print(body)
    if args.write:
        replace_section(None, args.section, body, keep=("Reading",))


if __name__ == "__main__":
    main()
