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

from brax_bridge_app import algorithms, configuration, hparams, plots, report, rundir, runs, runtime, stats
from brax_bridge_app.configuration import RunSpec
from brax_core.training.config import Config

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


def run_one(run_dir: str, spec: RunSpec, logger_args: Sequence[str], interrupts: ForwardedInterrupts,
            env: Mapping[str, str], contestant: str | None = None) -> dict[str, Any]:
    """Trains ``spec`` into ``run_dir`` in a new process and returns the run's summary (with ``contestant``, where
    given: what the run stands for)."""
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
        child = subprocess.Popen(train_command(run_dir, logger_args), env={**env, **caches}, process_group=0)
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

    configs: Mapping[str, Config]  # each algorithm's resolved configuration (every run sets its trainer and seed)
    contestants: Sequence[tuple[str, str]]  # every (algorithm, trainer) that runs
    out_dir: str
    trainers: Sequence[str]
    seeds: Sequence[int]
    device: str
    threshold: float | None
    logger_args: Sequence[str]  # passed on to every run's `train`
    notes: Sequence[str] = ()
    env_name: str = ""

    @property
    def of_algorithms(self) -> bool:
        """A comparison of algorithms (``--algos`` other than PPO alone), whose contestants are ``algo/trainer``."""
        return list(self.configs) != ["ppo"]

    @property
    def labels(self) -> list[str]:
        """What each contestant is called: the trainer, or ``algo/trainer`` in a comparison of algorithms."""
        if not self.of_algorithms:
            return [trainer for _, trainer in self.contestants]
        return [f"{algo}/{trainer}" for algo, trainer in self.contestants]


def plan_algorithms(
    algos_text: str | None, trainers: Sequence[str], env: str, preset: str | None, flag_values: Mapping[str, Any],
    configured: Mapping[str, Any] | None, device: str,
) -> tuple[dict[str, Config], list[tuple[str, str]]]:
    """Each algorithm of ``algos_text`` (comma-separated; ``None``: ppo, or the config file's algorithm) resolved
    on ``env``, and every (algorithm, trainer of ``trainers`` it has) that runs.

    Every algorithm runs ``--num-timesteps`` env steps (PPO's, preset or flag, where PPO runs). A flag goes to every
    algorithm that has it; one that none of them has is refused. ``--preset`` names a preset every algorithm has.
    Raises ``AlgorithmError`` or ``HParamError`` naming the flag."""
    configured = dict(configured or {})
    file_algo = configured.pop("algo", None)
    text = algos_text or file_algo or "ppo"
    names = [a.strip() for a in text.split(",") if a.strip()]
    if not names or len(set(names)) != len(names) or any(a not in algorithms.ALGOS for a in names):
        raise algorithms.AlgorithmError(f"--algos must list distinct names from {', '.join(algorithms.ALGOS)}; "
                                        f"got {text!r}")
    contestants = [(a, t) for a in names for t in trainers if t in algorithms.TRAINERS_OF[a]]
    for algo in names:
        if not any(a == algo for a, _ in contestants):
            raise algorithms.AlgorithmError(
                f"--algos {algo} trains with --trainers {' or '.join(algorithms.TRAINERS_OF[algo])}; --trainers "
                f"gives {','.join(trainers)}")
    strays = sorted(algorithms.flag(k) for k, v in {**flag_values, **configured}.items()
                    if v is not None and not any(k in algorithms.command_line_fields(a) for a in names))
    if strays:
        raise algorithms.AlgorithmError(f"{', '.join(strays)}: flags of no algorithm of --algos {','.join(names)}")
    configs: dict[str, Config] = {}
    for algo in names:
        own = algorithms.command_line_fields(algo)
        flags = {k: v for k, v in flag_values.items() if k in own}
        if "ppo" in configs and flags.get("num_timesteps") is None:
            flags["num_timesteps"] = configs["ppo"].run.num_timesteps  # every algorithm at PPO's length
        configs[algo] = configuration.resolve(
            env, preset, flags, {k: v for k, v in configured.items() if k in own}, algo=algo, device=device)
    return configs, contestants


def compare(plan: Plan, console: Console, env: dict[str, str]) -> tuple[list[dict], dict[str, Any], bool]:
    """Trains every run of ``plan``, each in a process of its own with environment ``env``, and writes
    compare.json, compare.png and report.md into ``plan.out_dir``. Returns ``(summaries, statistics, stopped)``:
    ``stopped`` when Ctrl-C ended the comparison early."""
    labels = plan.labels
    order = interleaved(labels, plan.seeds)
    first = next(iter(plan.configs.values()))
    env_name, preset, length = first.env.name, first.run.preset, first.run.num_timesteps
    what = " vs ".join(labels) if plan.of_algorithms else f"{' vs '.join(labels)} PPO"
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
            algo, trainer = plan.contestants[labels.index(label)]
            folder = f"{algo}-{trainer}-seed{seed}" if plan.of_algorithms else f"{trainer}-seed{seed}"
            run_dir = os.path.join(plan.out_dir, folder)
            console.print(f"[bold]run {number}/{len(order)}[/]: {label}, seed {seed} -> {run_dir}")
            spec = runs.new_run(plan.configs[algo].replace(trainer=trainer, seed=seed))
            contestant = label if plan.of_algorithms else None
            summaries.append(run_one(run_dir, spec, plan.logger_args, interrupts, env, contestant))
            curves.append(rundir.read_metrics(run_dir))
    if interrupts.requested:
        console.print("[yellow]comparison stopped early; the report covers the runs so far[/]")
    total = time.perf_counter() - start
    # The probability is torch's over jax's (the schema's order); a comparison of algorithms keeps --algos' order.
    ranked = [t for t in hparams.TRAINERS if t in labels] if not plan.of_algorithms else labels
    result = stats.comparison(summaries, curves, ranked, plan.threshold)
    by_trainer = {t: [rows for s, rows in zip(summaries, curves, strict=True) if stats.contestant(s) == t]
                  for t in ranked}
    title = f"{env_name}: {what}"
    plots.compare_iqm(by_trainer, os.path.join(plan.out_dir, "compare.png"), title=f"{title}, IQM over seeds")
    machine = runtime.machine(runtime.place(plan.device))
    # What every run shared: the config without the trainer and seed, which each run sets; with --algos, each
    # algorithm's (PPO's sections prefixed with "ppo").
    shared: dict[str, Any] = {}
    for algo, config in plan.configs.items():
        sections = config.to_json()
        for record in ("trainer", "seed"):
            sections["run"].pop(record)
        shared.update({f"{algo} {section}": fields for section, fields in sections.items()}
                      if plan.of_algorithms else sections)
    notes = [*plan.notes, "Every run started from an empty compile cache of its own (JAX's, inductor's, Triton's), "
             "as a first run does: start-up and the times to the threshold include compiling, alike for both trainers."]
    text = report.markdown(env_name, summaries, result, shared, machine, rundir.command_line(), total,
                           plan.threshold, notes)
    with open(os.path.join(plan.out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    rundir.write_json(os.path.join(plan.out_dir, "compare.json"), {
        "env": env_name, "preset": preset, "seeds": list(plan.seeds), "threshold": plan.threshold,
        "algos": list(plan.configs),
        "config": shared, "compile_cache": COMPILE_CACHE, "runs": summaries, **result,
        "total_wall_s": round(total, 3), "machine": machine,
    })
    console.print(f"total {total:.1f} s")
    return summaries, result, interrupts.requested
