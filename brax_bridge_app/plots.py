"""Learning-curve and comparison figures (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from brax_bridge_app import rundir, stats  # noqa: E402

COLORS = {"jax": "tab:blue", "torch": "tab:orange", "brax": "tab:green"}  # brax: Brax's own PPO, for comparison


def _series(rows: Sequence[Mapping[str, Any]], x_key: str) -> tuple[list[float], list[float], list[float | None]]:
    xs, ys, stds = [], [], []
    eval_rows = [r for r in rows if r.get(rundir.EVAL_REWARD) is not None]
    for row in eval_rows or rows:
        reward = rundir.reward_of(row)
        if reward is None or row.get(x_key) is None:
            continue
        xs.append(float(row[x_key]))
        ys.append(reward)
        stds.append(row.get(rundir.EVAL_REWARD_STD) if eval_rows else None)
    return xs, ys, stds


def _label_for(rows: Sequence[Mapping[str, Any]]) -> str:
    evaluated = any(r.get(rundir.EVAL_REWARD) is not None for r in rows)
    return "eval episode reward" if evaluated else "training episode reward"


def learning_curve(rows: Sequence[Mapping[str, Any]], path: str, title: str = "") -> str:
    """Reward vs env steps (with the evaluation std as a band), written to ``path``."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    xs, ys, stds = _series(rows, "step")
    ax.plot(xs, ys, marker="o", markersize=3)
    if xs and all(s is not None for s in stds):
        low = [y - s for y, s in zip(ys, stds, strict=True)]
        high = [y + s for y, s in zip(ys, stds, strict=True)]
        ax.fill_between(xs, low, high, alpha=0.2)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(_label_for(rows))
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if not xs:
        ax.text(0.5, 0.5, "no reward reported yet", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def compare(runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], path: str, title: str = "") -> str:
    """Reward vs env steps and reward vs wall-clock time for every run; ``runs`` holds ``(label, rows)``.

    Labels start with the trainer name ("jax", "torch"), which picks the colour, so seeds of one trainer
    share a colour.
    """
    fig, (ax_steps, ax_time) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=100)
    seen = set()
    for label, rows in runs:
        trainer = label.split()[0]
        color = COLORS.get(trainer)
        legend = trainer if trainer not in seen else None
        seen.add(trainer)
        for ax, key in ((ax_steps, "step"), (ax_time, "time_s")):
            xs, ys, _ = _series(rows, key)
            ax.plot(xs, ys, marker="o", markersize=3, color=color, label=legend, alpha=0.85)
    ylabel = _label_for([r for _, rows in runs for r in rows])
    return _save_pair(fig, ylabel, "wall-clock time (s, from the start of train)", title, path)


def _save_pair(fig: Any, ylabel: str, time_label: str, title: str, path: str) -> str:
    """Labels the two panels (env steps, wall time) of ``fig``, then writes it to ``path``."""
    ax_steps, ax_time = fig.axes
    ax_steps.set_xlabel("environment steps")
    ax_time.set_xlabel(time_label)
    for ax in (ax_steps, ax_time):
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def compare_iqm(runs: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], path: str, title: str = "") -> str:
    """Per trainer, the IQM of its runs' rewards with the 95 % bootstrap band, against env steps and against wall
    time (the median time the runs reached each step), over each run's own curve drawn faintly; ``runs`` maps a
    trainer to its runs' metrics rows."""
    fig, (ax_steps, ax_time) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=100)
    for trainer, trainer_runs in runs.items():
        color = COLORS.get(trainer)
        for ax, key in ((ax_steps, "step"), (ax_time, "time_s")):
            for rows in trainer_runs:
                xs, ys, _ = _series(rows, key)
                ax.plot(xs, ys, color=color, alpha=0.25, linewidth=0.8)
            line = stats.curve(trainer_runs, key)
            if line["x"].size:
                ax.plot(line["x"], line["iqm"], marker="o", markersize=3, color=color,
                        label=f"{trainer} IQM ({len(trainer_runs)} runs)")
                ax.fill_between(line["x"], line["low"], line["high"], color=color, alpha=0.2, linewidth=0)
    ylabel = _label_for([r for trainer_runs in runs.values() for rows in trainer_runs for r in rows])
    return _save_pair(fig, f"{ylabel} (band: 95 % CI)", "wall-clock time (s, from the start of train; median over "
                      "runs)", title, path)
