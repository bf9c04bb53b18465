"""The ``compare`` report: one row per trainer (mean over seeds), printed with rich and saved as Markdown."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.table import Table

# (key, terminal header or None, Markdown header): the terminal table must fit 80 columns.
COLUMNS = (
    ("trainer", "trainer", "trainer"),
    ("seeds", "seeds", "seeds"),
    ("final_reward", "final reward", "final eval reward"),
    ("best_reward", None, "best reward"),  # Markdown only
    ("env_steps", "env steps", "env steps"),
    ("steps_per_s", "steps/s", "steps/s (training)"),
    ("wall_s", "wall s", "wall time (s)"),
    ("first_report_s", "startup s", "start-up: first report (s)"),
    ("status", "status", "status"),
)


def _mean_std(values: Sequence[float | None], digits: int) -> str:
    numbers = [v for v in values if v is not None]
    if not numbers:
        return "-"
    mean = statistics.fmean(numbers)
    if len(numbers) == 1:
        return f"{mean:,.{digits}f}"
    return f"{mean:,.{digits}f} ± {statistics.stdev(numbers):,.{digits}f}"


def rows(summaries: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Formatted table rows, one per trainer in first-seen order."""
    trainers = list(dict.fromkeys(s["trainer"] for s in summaries))
    table = []
    for trainer in trainers:
        group = [s for s in summaries if s["trainer"] == trainer]
        table.append({
            "trainer": trainer,
            "seeds": ",".join(str(s["seed"]) for s in group),
            "final_reward": _mean_std([s["final_reward"] for s in group], 1),
            "best_reward": _mean_std([s["best_reward"] for s in group], 1),
            "env_steps": _mean_std([s["env_steps"] for s in group], 0),
            "steps_per_s": _mean_std([s["steps_per_s"] for s in group], 0),
            "wall_s": _mean_std([s["wall_s"] for s in group], 1),
            "first_report_s": _mean_std([s["first_report_s"] for s in group], 1),
            "status": ",".join(sorted({s["status"] for s in group})),
        })
    return table


def rich_table(summaries: Sequence[Mapping[str, Any]], title: str = "") -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    shown = [(key, header) for key, header, _ in COLUMNS if header is not None]
    for key, header in shown:
        table.add_column(header, justify="left" if key in ("trainer", "seeds", "status") else "right")
    for row in rows(summaries):
        table.add_row(*(row[key] for key, _ in shown))
    return table


def markdown(env: str, summaries: Sequence[Mapping[str, Any]], hyperparameters: Mapping[str, Any], machine: str,
             command: str, total_wall_s: float | None = None) -> str:
    """The whole ``report.md``: the table, how it was made, and the hyperparameters both trainers shared."""
    lines = [f"# brax-bridge compare: `{env}`", ""]
    lines += ["| " + " | ".join(h for _, _, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows(summaries):
        lines.append("| " + " | ".join(row[key] for key, _, _ in COLUMNS) + " |")
    lines += [
        "",
        "![reward vs env steps and wall time](compare.png)",
        "",
        f"- Command: `{command}`",
        f"- Machine: {machine}",
    ]
    if total_wall_s is not None:
        lines.append(f"- Total wall time of the comparison: {total_wall_s:.1f} s")
    lines += [
        "- Both trainers ran the same environment, hyperparameters and seeds, one after the other.",
        "- steps/s: env steps between the first and last training report divided by the time between them "
        "(start-up excluded); start-up: seconds from calling train to the first report after training began "
        "(compilation plus one training interval).",
        "",
        "## Hyperparameters (both trainers)",
        "",
        "| name | value |",
        "|---|---|",
    ]
    for key, value in hyperparameters.items():
        shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        lines.append(f"| {key} | {shown} |")
    return "\n".join(lines) + "\n"
