"""The statistics of a comparison: interquartile mean, 95 % stratified bootstrap intervals and the probability of
improvement over seeds (Agarwal et al. 2021, "Deep RL at the edge of the statistical precipice"), computed with
SciPy (``scipy.stats.trim_mean``, ``mannwhitneyu``, ``bootstrap``).

* IQM: the mean of the middle half of the runs (``trim_mean`` cutting a quarter at each end), robust to one
  outlying seed yet using more of the runs than the median.
* Intervals: percentile bootstrap, 95 %, resampling the runs of each trainer on their own (stratified by trainer:
  one stratum per trainer, as rliable stratifies by task), with a fixed seed so a report is reproducible.
* Probability of improvement: P(X > Y) + P(X = Y) / 2 for the final reward X of a random run of one trainer and Y
  of the other, the Mann-Whitney U statistic divided by the number of pairs; 0.5 means neither is better.

A trainer's statistics count its completed runs only: a run that failed or was stopped never reached the final
step. Seconds and env steps to a threshold count the runs that reached it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from brax_bridge_app import rundir

CONFIDENCE = 0.95
RESAMPLES = 10_000
# With fewer runs per trainer the bootstrap interval is too narrow to trust (it cannot see what few runs never
# showed), so no verdict is given; the compare command's default seeds are this many.
MIN_SEEDS = 5
METRICS = ("final_reward", "seconds_to_threshold", "steps_per_s")
_SEED = 0


def _trimmed(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return scipy_stats.trim_mean(values, 0.25, axis=axis)


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean: the mean of the middle half of ``values``."""
    return float(_trimmed(np.asarray(values, dtype=np.float64)))


def _interval(samples: tuple[np.ndarray, ...], statistic: Any) -> list[float] | None:
    """95 % percentile bootstrap interval of ``statistic``, each sample resampled on its own; None when a sample
    has fewer than two values (nothing to resample)."""
    if any(len(sample) < 2 for sample in samples):
        return None
    result = scipy_stats.bootstrap(
        samples, statistic, n_resamples=RESAMPLES, confidence_level=CONFIDENCE, method="percentile",
        vectorized=True, rng=np.random.default_rng(_SEED),
    )
    return [float(result.confidence_interval.low), float(result.confidence_interval.high)]


def aggregate(values: Sequence[float | None]) -> dict[str, Any] | None:
    """``{"iqm", "mean", "median", "ci95": [low, high]}`` of the values given (``None`` ones left out); the interval
    is that of the IQM, ``None`` with fewer than two values; the whole is ``None`` without any value."""
    numbers = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if numbers.size == 0:
        return None
    return {
        "iqm": iqm(numbers),
        "mean": float(numbers.mean()),
        "median": float(np.median(numbers)),
        "ci95": _interval((numbers,), _trimmed),
    }


def _improvement(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    u = scipy_stats.mannwhitneyu(x, y, axis=axis, method="asymptotic").statistic
    return u / (x.shape[axis] * y.shape[axis])


def probability_of_improvement(x: Sequence[float], y: Sequence[float]) -> float:
    """P(X > Y) + P(X = Y) / 2 for X drawn from ``x`` and Y from ``y``."""
    return float(_improvement(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)))


def first_reaching(rows: Sequence[Mapping[str, Any]], threshold: float | None) -> tuple[int | None, float | None]:
    """``(env steps, seconds)`` of the first report whose reward (the evaluation's, or the training episodes' in a
    run without evaluations) reaches ``threshold``; ``(None, None)`` when none does or there is no threshold."""
    if threshold is None:
        return None, None
    evaluated = [r for r in rows if r.get(rundir.EVAL_REWARD) is not None]
    for row in evaluated or rows:
        reward = rundir.reward_of(row)
        if reward is not None and reward >= threshold:
            return int(row["step"]), float(row["time_s"])
    return None, None


def run_entry(summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], threshold: float | None) -> dict:
    """One run in a trainer's list of ``compare.json``."""
    steps, seconds = first_reaching(rows, threshold)
    return {
        "seed": summary["seed"],
        "final_reward": summary["final_reward"],
        "best_reward": summary["best_reward"],
        "wall_s": summary["wall_s"],
        "steps_to_threshold": steps,
        "seconds_to_threshold": seconds,
        "steps_per_s": summary["steps_per_s"],
    }


def contestant(summary: Mapping[str, Any]) -> str:
    """What a run stands for in a comparison: its trainer, or in a comparison of algorithms ``algo/trainer``
    (``contestant`` in its summary)."""
    return summary.get("contestant") or summary["trainer"]


def comparison(
    summaries: Sequence[Mapping[str, Any]],
    rows: Sequence[Sequence[Mapping[str, Any]]],
    trainers: Sequence[str],
    threshold: float | None = None,
) -> dict[str, Any]:
    """``{"trainers": ..., "probability_of_improvement": ...}`` of ``compare.json`` from every run's summary and
    metrics rows (in the same order). ``trainers`` in the schema's order (jax, torch): the probability is the
    second's over the first's."""
    by_trainer: dict[str, Any] = {}
    finals: dict[str, np.ndarray] = {}
    for trainer in trainers:
        entries = [run_entry(s, r, threshold) for s, r in zip(summaries, rows, strict=True)
                   if contestant(s) == trainer and s["status"] == "completed" and s["final_reward"] is not None]
        by_trainer[trainer] = {"runs": entries}
        for metric in METRICS:
            measured = metric != "seconds_to_threshold" or threshold is not None
            by_trainer[trainer][metric] = aggregate([e[metric] for e in entries]) if measured else None
        finals[trainer] = np.asarray([e["final_reward"] for e in entries], dtype=np.float64)
    improvement = None
    if len(trainers) == 2 and all(finals[t].size for t in trainers):
        baseline, other = trainers
        improvement = {
            "metric": "final_reward",
            f"{other}_over_{baseline}": probability_of_improvement(finals[other], finals[baseline]),
            "ci95": _interval((finals[other], finals[baseline]), _improvement),
        }
    return {"trainers": by_trainer, "probability_of_improvement": improvement}


def verdict(result: Mapping[str, Any]) -> str:
    """One line: which trainer ends with the higher reward, or that the seeds given do not resolve it."""
    improvement = result["probability_of_improvement"]
    counts = {trainer: len(entry["runs"]) for trainer, entry in result["trainers"].items()}
    if improvement is None:
        return ("No verdict: it needs two trainers with completed runs; completed runs: "
                + ", ".join(f"{t} {n}" for t, n in counts.items()) + ".")
    key = next(k for k in improvement if "_over_" in k)
    other, baseline = key.split("_over_")
    p, interval = improvement[key], improvement["ci95"]
    shown = f"P({other} > {baseline}) = {p:.2f}" + (
        f", 95 % CI [{interval[0]:.2f}, {interval[1]:.2f}]" if interval is not None else "")
    runs = " and ".join(f"{n} {t}" for t, n in counts.items())
    if min(counts.values()) < MIN_SEEDS:
        return (f"Not resolved by the seeds given: {runs} completed runs, fewer than the {MIN_SEEDS} per trainer a "
                f"verdict needs ({shown}).")
    if interval[0] == interval[1] == 0.5:
        return f"No difference: every run of both trainers ends at the same final reward ({shown}, {runs} runs)."
    if interval[0] > 0.5:
        return f"{other} ends with the higher final reward: {shown} over {runs} runs."
    if interval[1] < 0.5:
        return f"{baseline} ends with the higher final reward: {shown} over {runs} runs."
    return (f"Not resolved by the seeds given: {shown} holds 0.5 (no difference) over {runs} runs; more seeds "
            "would narrow it.")


def curve(runs: Sequence[Sequence[Mapping[str, Any]]], x_key: str) -> dict[str, np.ndarray]:
    """The IQM learning curve over ``runs`` (each a run's metrics rows): at each env step some run evaluated at,
    the IQM of the rewards there and its 95 % interval (NaN where fewer than two runs reached it); ``x`` is the
    step, or for ``x_key="time_s"`` the median time the runs reached it."""
    points: dict[int, list[tuple[float, float]]] = {}
    for rows in runs:
        evaluated = [r for r in rows if r.get(rundir.EVAL_REWARD) is not None]
        for row in evaluated or rows:
            reward = rundir.reward_of(row)
            if reward is not None:
                points.setdefault(int(row["step"]), []).append((reward, float(row["time_s"])))
    steps = sorted(points)
    x, center, low, high = [], [], [], []
    for step in steps:
        rewards = np.asarray([reward for reward, _ in points[step]])
        x.append(step if x_key == "step" else float(np.median([t for _, t in points[step]])))
        center.append(iqm(rewards))
        interval = _interval((rewards,), _trimmed)
        low.append(np.nan if interval is None else interval[0])
        high.append(np.nan if interval is None else interval[1])
    return {name: np.asarray(values, dtype=np.float64)
            for name, values in (("x", x), ("iqm", center), ("low", low), ("high", high))}
