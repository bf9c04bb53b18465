"""``compare``'s runs: every (trainer, seed) run in a fresh process of its own, in interleaved order; with
``--algos``, every (algorithm, trainer, seed) run.

A fresh process per run keeps one run's compiled programs, memory and threads from favouring or slowing the next,
and so does a fresh, empty compile cache per run (JAX's persistent cache with the program cache in it, inductor's and
Triton's, in a temporary folder removed afterwards): every run compiles as a first run would, so every time to the
threshold counts compiling alike (``COMPILE_CACHE``, recorded in each run's summary and in compare.json). The
interleaved order (jax then torch for the first seed, torch then jax for the second, ...) spreads a machine's drift
over time (other load, temperature) evenly over both. Each run is ``brax-bridge train --config <run
folder>/config.json --out <run folder>`` run with this Python, so it is the same run a user would get by hand; its
``summary.json`` records the process's ``pid`` and when the run started (``started_at``).

Ctrl-C reaches only this process (each run is started in its own process group) and is passed on to the running
one: once, it stops at its next progress report with a resumable checkpoint and no further run starts; twice, it
stops at once. A run whose process ends without its summary (killed, crashed) is reported as failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rich.console import Console

from brax_bridge_app import gradient_runs, hparams, plots, report, rundir, runs, runtime, stats
from brax_bridge_app.algorithms import GradientConfig
from brax_core.training.agents.ppo.config import PPOConfig

# The compile-cache condition every run of a comparison starts from, as compare.json and report.md state it.
COMPILE_CACHE = "empty"
_CACHE_VARIABLES = {"BRAX_BRIDGE_JAX_CACHE": "jax", "TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}


def interleaved(trainers: Sequence[str], seeds: Sequence[int]) -> list[tuple[str, int]]:
    """Every (trainer, seed) pair, seed by seed, the trainer that goes first alternating from seed to seed."""
    order = []
    for index, seed in enumerate(seeds):
        turn = trainers if index % 2 == 0 else list(reversed(trainers))
        order += [(trainer, seed) for trainer in turn]
    return order


class ForwardedInterrupts:
    """While active, each Ctrl-C (SIGINT) is passed on to the running run's process and stops the comparison
    from starting another."""

    def __init__(self, console: Console):
        self.console = console
        self.presses = 0
        self.child: subprocess.Popen | None = None
        self._previous: Any = None

    @property
    def requested(self) -> bool:
        return self.presses > 0

    def _handle(self, signum: int, frame: Any) -> None:
        self.presses += 1
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGINT)
        if self.presses == 1:
            self.console.print("[yellow]Ctrl-C: the current run stops at its next progress report and no further "
                               "run starts (Ctrl-C again to stop the run at once)[/]")

    def __enter__(self) -> ForwardedInterrupts:
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: signals cannot be handled here
            self._previous = None
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def train_command(run_dir: str, logger_args: Sequence[str]) -> list[str]:
    """The command that trains the run whose config.json is in ``run_dir``, with this Python."""
    config = os.path.join(run_dir, rundir.CONFIG)
    return [sys.executable, "-m", "brax_bridge_app.cli", "train", "--config", config, "--out", run_dir,
            *logger_args]


def _why_no_summary(returncode: int) -> str:
    if returncode < 0:
        return f"the run's process was ended by {signal.Signals(-returncode).name} before writing its summary"
    return f"the run's process exited with code {returncode} before writing its summary (its output says why)"


def gradient_train_command(config: GradientConfig, run_dir: str, logger_args: Sequence[str]) -> list[str]:
    """The command that trains the gradient run ``config`` into ``run_dir``, with this Python: its flags written out,
    as a user would type them."""
    return [sys.executable, "-m", "brax_bridge_app.cli", "train", *config.flags(), "--out", run_dir, *logger_args]


def run_one(run_dir: str, spec: Any, logger_args: Sequence[str], interrupts: ForwardedInterrupts,
            env: Mapping[str, str], contestant: str | None = None) -> dict[str, Any]:
    """Trains ``spec`` (a PPO run's ``RunSpec`` or a ``gradient_runs.GradientRun``) into ``run_dir`` in a new
    process and returns the run's summary (with ``contestant``, where given: what the run stands for)."""
    os.makedirs(run_dir, exist_ok=True)
    summary_path = os.path.join(run_dir, rundir.SUMMARY)
    if os.path.exists(summary_path):  # an earlier run's: it must not pass for this one's
        os.remove(summary_path)
    rundir.write_json(os.path.join(run_dir, rundir.CONFIG), spec.to_json())
    started_at = datetime.datetime.now().astimezone().isoformat(timespec="milliseconds")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="brax_bridge_compare_cache_") as cache:
        caches = {name: os.path.join(cache, folder) for name, folder in _CACHE_VARIABLES.items()}
        # Its own process group: a Ctrl-C in the terminal reaches this process alone, which passes it on once.
        command = (gradient_train_command(spec.config, run_dir, logger_args)
                   if isinstance(spec, gradient_runs.GradientRun) else train_command(run_dir, logger_args))
        child = subprocess.Popen(command, env={**env, **caches}, process_group=0)
        interrupts.child = child
        try:
            returncode = child.wait()
        finally:
            interrupts.child = None
    summary = rundir.read_json(summary_path) if os.path.isfile(summary_path) else None
    if summary is None or summary.get("pid") != child.pid:
        try:
            rows = rundir.read_metrics(run_dir)
        except rundir.RunDirError:
            rows = []
        summary = runs.summarize(spec, rows, "failed", round(time.perf_counter() - start, 3))
        summary.update(error=_why_no_summary(returncode), pid=child.pid, started_at=started_at)
    summary["compile_cache"] = COMPILE_CACHE
    if contestant is not None:
        summary["contestant"] = contestant
    rundir.write_json(summary_path, summary)
    return summary


@contextlib.contextmanager
def no_accelerator_memory_held() -> Iterator[dict[str, str]]:
    """This process's environment as the runs' processes get it (yielded), while this process, which only checks
    the device and waits, keeps JAX from taking most of a GPU's memory up front, as it would by default; that
    memory belongs to the runs."""
    child_env = dict(os.environ)
    previous = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    try:
        yield child_env
    finally:
        if previous is None:
            os.environ.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)
        else:
            os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = previous


@dataclasses.dataclass(frozen=True)
class Plan:
    """A comparison, checked: what to train, where, and what the report notes."""

    config: PPOConfig | None  # resolved: every PPO run's, with its trainer and seed set (None: no PPO run)
    out_dir: str
    trainers: Sequence[str]
    seeds: Sequence[int]
    device: str
    threshold: float | None
    logger_args: Sequence[str]  # passed on to every run's `train`
    notes: Sequence[str] = ()
    # With --algos: each gradient algorithm's resolved run (its trainer and seed set per run), and every
    # (algorithm, trainer) that runs; empty for a comparison of the PPO trainers.
    gradient: Mapping[str, GradientConfig] = dataclasses.field(default_factory=dict)
    contestants: Sequence[tuple[str, str]] = ()
    env_name: str = ""

    @property
    def labels(self) -> list[str]:
        """What each contestant is called: the trainer, or ``algo/trainer`` in a comparison of algorithms."""
        if not self.contestants:
            return list(self.trainers)
        return [f"{algo}/{trainer}" for algo, trainer in self.contestants]


def compare(plan: Plan, console: Console, env: dict[str, str]) -> tuple[list[dict], dict[str, Any], bool]:
    """Trains every run of ``plan``, each in a process of its own with environment ``env``, and writes
    compare.json, compare.png and report.md into ``plan.out_dir``. Returns ``(summaries, statistics, stopped)``:
    ``stopped`` when Ctrl-C ended the comparison early."""
    labels = plan.labels
    order = interleaved(labels, plan.seeds)
    env_name = plan.config.env.name if plan.config is not None else plan.env_name
    preset = plan.config.run.preset if plan.config is not None else None
    what = (f"{' vs '.join(plan.trainers)} PPO" if not plan.contestants else " vs ".join(labels))
    length = plan.config.run.num_timesteps if plan.config is not None else next(
        iter(plan.gradient.values())).settings["num_timesteps"]
    console.print(f"comparing {what} on [bold]{env_name}[/], seeds {list(plan.seeds)}, {length:,} env steps each "
                  f"(preset {preset}), {len(order)} runs each in a process of its own -> {plan.out_dir}")
    # W&B (--logger wandb) shows the runs of one comparison as one group.
    group = f"{os.path.basename(os.path.abspath(plan.out_dir))}-{time.strftime('%Y%m%d-%H%M%S')}"
    env.setdefault("WANDB_RUN_GROUP", group)
    summaries, curves = [], []
    start = time.perf_counter()
    with ForwardedInterrupts(console) as interrupts:
        for number, (label, seed) in enumerate(order, 1):
            if interrupts.requested:  # a Ctrl-C between two runs
                break
            algo, trainer = plan.contestants[labels.index(label)] if plan.contestants else ("ppo", label)
            folder = f"{trainer}-seed{seed}" if not plan.contestants else f"{algo}-{trainer}-seed{seed}"
            run_dir = os.path.join(plan.out_dir, folder)
            console.print(f"[bold]run {number}/{len(order)}[/]: {label}, seed {seed} -> {run_dir}")
            if algo == "ppo":
                spec: Any = runs.new_run(plan.config.replace(trainer=trainer, seed=seed))
            else:
                spec = gradient_runs.new_run(dataclasses.replace(plan.gradient[algo], trainer=trainer, seed=seed))
            contestant = label if plan.contestants else None
            summaries.append(run_one(run_dir, spec, plan.logger_args, interrupts, env, contestant))
            curves.append(rundir.read_metrics(run_dir))
    if interrupts.requested:
        console.print("[yellow]comparison stopped early; the report covers the runs so far[/]")
    total = time.perf_counter() - start
    # The probability is torch's over jax's (the schema's order); a comparison of algorithms keeps --algos' order.
    ranked = [t for t in hparams.TRAINERS if t in plan.trainers] if not plan.contestants else labels
    result = stats.comparison(summaries, curves, ranked, plan.threshold)
    by_trainer = {t: [rows for s, rows in zip(summaries, curves, strict=True) if stats.contestant(s) == t]
                  for t in ranked}
    title = f"{env_name}: {what}"
    plots.compare_iqm(by_trainer, os.path.join(plan.out_dir, "compare.png"), title=f"{title}, IQM over seeds")
    machine = runtime.machine(runtime.place(plan.device))
    # What every run shared: the config without the trainer and seed, which each run sets; with --algos, each
    # algorithm's (PPO's sections prefixed with "ppo").
    shared: dict[str, Any] = {}
    if plan.config is not None:
        shared = plan.config.to_json()
        for record in ("trainer", "seed"):
            shared["run"].pop(record)
        if plan.contestants:
            shared = {f"ppo {section}": fields for section, fields in shared.items()}
    for algo, gradient in plan.gradient.items():
        shared[algo] = gradient.to_json()["settings"]
    notes = [*plan.notes, "Every run started from an empty compile cache of its own (JAX's, inductor's, Triton's), "
             "as a first run does: start-up and the times to the threshold include compiling, alike for both trainers."]
    text = report.markdown(env_name, summaries, result, shared, machine, rundir.command_line(), total,
                           plan.threshold, notes)
    with open(os.path.join(plan.out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    rundir.write_json(os.path.join(plan.out_dir, "compare.json"), {
        "env": env_name, "preset": preset, "seeds": list(plan.seeds), "threshold": plan.threshold,
        "algos": sorted({algo for algo, _ in plan.contestants}, key=("ppo", "apg", "shac").index) or ["ppo"],
        "config": shared, "compile_cache": COMPILE_CACHE, "runs": summaries, **result,
        "total_wall_s": round(total, 3), "machine": machine,
    })
    console.print(f"total {total:.1f} s")
    return summaries, result, interrupts.requested
