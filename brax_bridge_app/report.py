"""The ``compare`` report: per trainer the interquartile mean (IQM) of its runs with a 95 % bootstrap interval, a
one-line verdict, and every run; printed with rich and saved as Markdown (``stats`` computes the numbers)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.table import Table

from brax_bridge_app import stats


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _iqm(aggregate: Mapping[str, Any] | None, digits: int) -> str:
    """``"950.2 [901.0, 990.5]"``: the IQM and its 95 % interval (the IQM alone with a single run)."""
    if aggregate is None:
        return "-"
    interval = aggregate["ci95"]
    shown = _number(aggregate["iqm"], digits)
    return shown if interval is None else f"{shown} [{_number(interval[0], digits)}, {_number(interval[1], digits)}]"


def _mean(values: Sequence[float | None], digits: int) -> str:
    numbers = [v for v in values if v is not None]
    return _number(statistics.fmean(numbers), digits) if numbers else "-"


def trainer_rows(summaries: Sequence[Mapping[str, Any]], result: Mapping[str, Any],
                 threshold: float | None = None) -> list[dict[str, str]]:
    """Formatted rows, one per trainer of ``result`` (``stats.comparison``)."""
    table = []
    for trainer, entry in result["trainers"].items():
        group = [s for s in summaries if stats.contestant(s) == trainer]
        row = {
            "trainer": trainer,
            "runs": f"{len(entry['runs'])} of {len(group)}",
            "final_iqm": _iqm(entry["final_reward"], 1),
            "final_mean": _number(entry["final_reward"]["mean"], 1) if entry["final_reward"] else "-",
            "best_reward": _mean([s["best_reward"] for s in group], 1),
            "steps_per_s": _iqm(entry["steps_per_s"], 0),
            "wall_s": _mean([s["wall_s"] for s in group], 1),
            "first_report_s": _mean([s["first_report_s"] for s in group], 1),
            "status": ",".join(sorted({s["status"] for s in group})),
        }
        if threshold is not None:
            reached = sum(run["seconds_to_threshold"] is not None for run in entry["runs"])
            row["to_threshold"] = f"{_iqm(entry['seconds_to_threshold'], 1)} ({reached} of {len(entry['runs'])})"
        table.append(row)
    return table


def _columns(threshold: float | None) -> list[tuple[str, str | None, str]]:
    """(key, terminal header or None, Markdown header): the terminal table must fit 80 columns."""
    columns = [
        ("trainer", "trainer", "trainer"),
        ("runs", "runs", "completed runs"),
        ("final_iqm", "final reward IQM [95% CI]", "final eval reward: IQM [95 % CI]"),
        ("final_mean", None, "final reward: mean"),
        ("best_reward", None, "best reward (mean)"),
        ("steps_per_s", "steps/s IQM", "steps/s (training): IQM [95 % CI]"),
    ]
    if threshold is not None:
        columns.append(("to_threshold", None, f"seconds to {threshold:g}: IQM [95 % CI] (runs reaching it)"))
    columns += [
        ("wall_s", "wall s", "wall time (s, mean)"),
        ("first_report_s", None, "start-up: first report (s, mean)"),
        ("status", "status", "status"),
    ]
    return columns


def rich_table(summaries: Sequence[Mapping[str, Any]], result: Mapping[str, Any], title: str = "",
               threshold: float | None = None) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    shown = [(key, header) for key, header, _ in _columns(threshold) if header is not None]
    for key, header in shown:
        table.add_column(header, justify="left" if key in ("trainer", "status") else "right")
    for row in trainer_rows(summaries, result, threshold):
        table.add_row(*(row[key] for key, _ in shown))
    return table


def _run_lines(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["| # | trainer | seed | status | final reward | best reward | env steps | steps/s | wall (s) | pid | "
             "started at |", "|" + "---|" * 11]
    for number, s in enumerate(summaries, 1):
        status = s["status"] + (f": {s['error']}" if s.get("error") else "")
        lines.append(
            f"| {number} | {stats.contestant(s)} | {s['seed']} | {status} | {_number(s['final_reward'], 1)} | "
            f"{_number(s['best_reward'], 1)} | {_number(s['env_steps'], 0)} | {_number(s['steps_per_s'], 0)} | "
            f"{_number(s['wall_s'], 1)} | {s.get('pid', '-')} | {s.get('started_at', '-')} |"
        )
    return lines


def markdown(env: str, summaries: Sequence[Mapping[str, Any]], result: Mapping[str, Any],
             config: Mapping[str, Mapping[str, Any]], machine: str, command: str, total_wall_s: float | None = None,
             threshold: float | None = None, notes: Sequence[str] = ()) -> str:
    """The whole ``report.md``: the verdict, the per-trainer table, every run, how it was made, and the
    configuration both trainers shared (``config``: its sections, as ``PPOConfig.to_json`` gives them)."""
    columns = _columns(threshold)
    lines = [f"# brax-bridge compare: `{env}`", "", f"**Verdict:** {stats.verdict(result)}", ""]
    lines += [f"> {note}" for note in notes] + ([""] if notes else [])
    lines += ["| " + " | ".join(h for _, _, h in columns) + " |", "|" + "---|" * len(columns)]
    for row in trainer_rows(summaries, result, threshold):
        lines.append("| " + " | ".join(row[key] for key, _, _ in columns) + " |")
    lines += ["", "![IQM reward vs env steps and wall time](compare.png)", "", "## Runs", "", *_run_lines(summaries)]
    lines += [
        "",
        f"- Command: `{command}`",
        f"- Machine: {machine}",
    ]
    if total_wall_s is not None:
        lines.append(f"- Total wall time of the comparison: {total_wall_s:.1f} s")
    lines += [
        "- Both trainers ran the same environment, hyperparameters and seeds; every run in a fresh process of its "
        "own, in interleaved order (the trainer that goes first alternates from seed to seed).",
        "- IQM: the mean of the middle half of the completed runs; 95 % CI: percentile bootstrap of the IQM over "
        "each trainer's runs; the verdict reads the probability that a run of one trainer ends above a run of the "
        f"other, with its bootstrap interval (no verdict below {stats.MIN_SEEDS} completed runs per trainer).",
        "- steps/s: env steps between the first and last training report divided by the time between them "
        "(start-up excluded); start-up: seconds from calling train to the first report after training began "
        "(compilation plus one training interval).",
        "",
        "## Configuration (every run's)",
        "",
        "| section | name | value |",
        "|---|---|---|",
    ]
    for section, fields in config.items():
        for key, value in fields.items():
            shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
            lines.append(f"| {section} | {key} | {shown} |")
    return "\n".join(lines) + "\n"
