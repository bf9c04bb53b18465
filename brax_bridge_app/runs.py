"""One training run into a run folder, for every algorithm and trainer, with a live progress bar and clean Ctrl-C.

Ctrl-C once: training stops at the next progress report, which is logged first; the trainer saves its checkpoint
at that report's step before the stop leaves it (atomically), the folder is finalised and marked ``interrupted``, and
``--resume`` continues from exactly there: the resumed run reaches the same final step count, with the same
evaluation points, as an unbroken one. Ctrl-C twice: stop immediately; the last completed checkpoint is still
intact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from brax_bridge_app import envinfo, hparams, plots, rundir, runtime, trainers
from brax_bridge_app.configuration import RunSpec
from brax_core.training.config import Config

# Files in a run folder that describe the run's policy, written after training (`eval`) or at its end: a fresh run
# in the same folder removes them first (and the rendered episode, `rundir.EPISODE` in any format).
EARLIER_RUN_OUTPUTS = (rundir.EVAL, rundir.SUMMARY, rundir.CURVE)


class StopTraining(Exception):
    """Raised from the progress callback to leave the trainer between two compiled steps."""


@dataclasses.dataclass
class StopFlag:
    """Set by the SIGINT handler (or by a caller) to request a stop at the next report."""

    requested: bool = False


@contextlib.contextmanager
def sigint_stops(flag: StopFlag, console: Console) -> Iterator[StopFlag]:
    """While active, the first Ctrl-C sets ``flag``; a second one raises ``KeyboardInterrupt`` at once."""
    try:
        previous = signal.getsignal(signal.SIGINT)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield flag
        return

    def handler(signum, frame):
        if flag.requested:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        flag.requested = True
        console.print("[yellow]Ctrl-C: stopping at the next progress report (Ctrl-C again to abort now)[/]")

    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:
        yield flag
        return
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def progress_bar(console: Console) -> Progress:
    """The live progress bar of a run: steps, speed, reward, time and the time left."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=24),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
        TextColumn("{task.fields[sps]}"),
        TextColumn("reward {task.fields[reward]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def format_reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def new_run(config: Config) -> RunSpec:
    """A new run of ``config`` (with its env's name and trainer), with what its folder records: where a user's env
    module was imported from, the versions, the command line and the time."""
    return RunSpec(config, new_run_records(config.env.name))


def new_run_records(env_name: str) -> dict[str, Any]:
    """What a new run's folder records besides its configuration: where a user's env module was imported from, the
    versions, the command line and the time."""
    return {
        **envinfo.recorded(env_name),
        "versions": rundir.versions(),
        "command": rundir.command_line(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def now_iso() -> str:
    """The time now, with its zone, to the millisecond (``summary.json``'s ``started_at``)."""
    return datetime.datetime.now().astimezone().isoformat(timespec="milliseconds")


def open_run_folder(
    run_dir: str, log: rundir.MetricsLog, ckpt: str, console: Console, resume: bool, checkpoint_at: int | None
) -> list[dict[str, Any]]:
    """Readies ``run_dir`` for a run and returns the rows of ``metrics.jsonl`` the run continues from.

    With ``resume``: the rows up to the checkpoint's step ``checkpoint_at`` (reports past it will be made again by the
    resumed run), refused when there is no checkpoint. Otherwise a fresh run in a reused folder replaces the earlier
    run: its log and its checkpoints (which the trainer would otherwise mix with, or refuse to overwrite, its own), its
    TensorBoard files, and what `eval` wrote of its policy (which would otherwise sit beside the new run as if it were
    the new policy's)."""
    if resume:
        if checkpoint_at is None:
            raise rundir.RunDirError(f"cannot resume: {ckpt} holds no checkpoint (the run stopped before its first)")
        earlier = [r for r in rundir.read_metrics(run_dir) if r["step"] <= checkpoint_at]
        log.rewrite(earlier)
        return earlier
    for folder in (ckpt, os.path.join(run_dir, rundir.TENSORBOARD)):
        if os.path.exists(folder):
            console.print(f"[yellow]replacing the earlier run's {os.path.basename(folder)} in {folder}[/]")
            shutil.rmtree(folder)
    clear_earlier_run(run_dir, log, console)
    return []


class ReportLog:
    """A run's reports as ``metrics.jsonl`` and the loggers get them, ``rows`` in order (the earlier part's first).

    A run resumed at an evaluation point evaluates it again: a report is logged only if the earlier part had not
    logged one of its kind (evaluation or training) at that step."""

    def __init__(
        self, log: rundir.MetricsLog, earlier: Sequence[dict[str, Any]],
        loggers: Sequence[Callable[[int, Mapping[str, float]], None]],
    ):
        self._log, self._loggers = log, loggers
        self.rows = list(earlier)
        self._logged = {self._kind(row) for row in earlier}

    @staticmethod
    def _kind(row: Mapping[str, Any]) -> tuple[int, bool]:
        return row["step"], rundir.EVAL_REWARD in row

    def add(self, row: dict[str, Any], scalars: Mapping[str, float]) -> None:
        if self._kind(row) in self._logged:
            return
        self._logged.add(self._kind(row))
        self._log.append(row)
        self.rows.append(row)
        for logger in self._loggers:
            logger(row["step"], scalars)


def clear_earlier_run(run_dir: str, log: rundir.MetricsLog, console: Console) -> None:
    """Removes what an earlier run in ``run_dir`` left that a new run would otherwise sit beside: its metrics log
    and what ``eval`` wrote of its policy (its checkpoints and TensorBoard files are the caller's)."""
    if os.path.exists(log.path):
        os.remove(log.path)
    episode = [name for name in os.listdir(run_dir) if name.startswith(f"{rundir.EPISODE}.")]
    removed = [name for name in (*EARLIER_RUN_OUTPUTS, *episode) if os.path.isfile(os.path.join(run_dir, name))]
    for name in removed:
        os.remove(os.path.join(run_dir, name))
    if removed:
        console.print(f"[yellow]removed the earlier run's {', '.join(removed)} from {run_dir}[/]")


def checkpoint_step(spec: RunSpec, path: str) -> int | None:
    """Env steps of the newest complete checkpoint of ``spec``'s run under ``path`` (from its name; nothing is
    loaded)."""
    return trainers.get(spec.algo, spec.trainer).latest_step(path)


def _call_trainer(
    spec: RunSpec,
    progress_fn: Callable,
    ckpt: str,
    restore: str | None,
    allow_changes: bool = False,
    policy_params_fn: Callable[..., None] = lambda *args: None,
) -> Any:
    trainer = trainers.get(spec.algo, spec.trainer)
    # Both trainers on the same device: JAX's default device and torch's device of the same place.
    placement = runtime.place(spec.config.run.device)
    return trainer.train(
        spec,
        placement,
        progress_fn=progress_fn,
        policy_params_fn=policy_params_fn,
        save_checkpoint_path=ckpt,
        restore_checkpoint_path=restore,
        allow_config_changes=bool(allow_changes and restore),
    )


def planned_env_steps(config: Config) -> int:
    """The env steps a run of ``config`` trains: ``num_timesteps``, for a gradient algorithm in whole epochs of
    whole updates (Brax's share of updates per epoch)."""
    if not hasattr(config, "updates_per_epoch"):
        return config.run.num_timesteps
    return max(config.num_epochs * config.updates_per_epoch * config.env_steps_per_update, 1)


def summarize(
    spec: RunSpec,
    rows: list[dict],
    status: str,
    wall_s: float | None,
    epoch_ends: Sequence[tuple[int, float]] = (),
) -> dict[str, Any]:
    """Final and best reward, env steps, speed and start-up time of one run, from its metrics rows and the
    ``(env steps, time_s)`` at the end of each training epoch (all a run without reports has)."""
    rewarded = [r for r in rows if rundir.reward_of(r) is not None]
    evals = [r for r in rows if r.get(rundir.EVAL_REWARD) is not None]
    final = (evals or rewarded or [None])[-1]
    moving = [(r["step"], r["time_s"]) for r in rows if r.get("step", 0) > 0]
    if len(moving) < 2:
        moving = [(step, time_s) for step, time_s in epoch_ends if step > 0] or moving
    # Steps per second between the first and last training report: start-up (compilation) excluded.
    sps = None
    if len(moving) >= 2 and moving[-1][1] > moving[0][1]:
        sps = (moving[-1][0] - moving[0][0]) / (moving[-1][1] - moving[0][1])
    elif moving and moving[0][1] > 0:
        sps = moving[0][0] / moving[0][1]
    trainer_sps = [r[rundir.TRAIN_SPS] for r in rows if r.get(rundir.TRAIN_SPS)]
    return {
        "env": spec.env_name,
        "algo": spec.algo,
        "trainer": spec.trainer,
        "seed": spec.seed,
        "status": status,
        "env_steps": max([rows[-1]["step"] if rows else 0, *(step for step, _ in epoch_ends)]),
        "final_reward": rundir.reward_of(final) if final else None,
        "final_reward_std": final.get(rundir.EVAL_REWARD_STD) if final else None,
        "best_reward": max((rundir.reward_of(r) for r in rewarded), default=None),
        "wall_s": wall_s,
        "first_report_s": moving[0][1] if moving else None,
        "steps_per_s": sps,
        "trainer_sps": trainer_sps[-1] if trainer_sps else None,
    }


def train_run(
    run_dir: str,
    spec: RunSpec,
    console: Console,
    resume: bool = False,
    stop: StopFlag | None = None,
    on_report: Callable[[int, dict], None] | None = None,
    allow_changes: bool = False,
    loggers: Sequence[Callable[[int, Mapping[str, float]], None]] = (),
) -> dict[str, Any]:
    """Trains one run into ``run_dir`` and returns its summary (also written to ``summary.json``, with the
    process's ``pid`` and the time the run started, ``started_at``).

    With ``resume`` the trainer restores ``run_dir/checkpoint`` and the metrics file is continued; times keep
    counting from the earlier part's end so the curve against wall time stays monotone. The trainer refuses a
    ``spec`` whose config differs from the checkpoint's unless ``allow_changes``. Each report logged
    to metrics.jsonl also goes to every one of ``loggers`` (``loggers.TensorBoardLogger``, ...), as its metrics.
    """
    started_at = now_iso()
    os.makedirs(run_dir, exist_ok=True)
    ckpt = os.path.abspath(os.path.join(run_dir, rundir.CHECKPOINT))
    stop = stop or StopFlag()
    log = rundir.MetricsLog(run_dir)
    restore = ckpt if resume else None
    saved_at = checkpoint_step(spec, ckpt) if resume else None
    earlier = open_run_folder(run_dir, log, ckpt, console, resume, saved_at)
    time_offset = earlier[-1]["time_s"] if earlier else 0.0
    rundir.write_json(os.path.join(run_dir, rundir.CONFIG), spec.to_json())

    total = planned_env_steps(spec.config)
    label = f"{spec.trainer}/{spec.env_name}/seed {spec.seed}"
    if spec.algo != "ppo":
        label = f"{spec.algo}/{label}"
    start = time.perf_counter()
    reports = ReportLog(log, earlier, loggers)

    with progress_bar(console) as bar:
        task = bar.add_task(label, total=max(total, 1), sps="", reward="-")

        def progress_fn(step: int, metrics: Mapping[str, Any]) -> None:
            elapsed = time.perf_counter() - start
            scalars = rundir.scalar_metrics(metrics)
            words = {key: value for key, value in metrics.items() if isinstance(value, str)}  # training/collection
            row = {"step": int(step), "time_s": round(time_offset + elapsed, 4), **scalars, **words}
            reports.add(row, scalars)
            speed = row.get(rundir.TRAIN_SPS)
            bar.update(task, completed=min(int(step), total), reward=format_reward(rundir.reward_of(row)),
                       sps=f"{speed:,.0f} steps/s" if speed else "")
            if on_report is not None:
                on_report(int(step), row)
            # Stop after logging: the trainer saves its checkpoint at this step before the exception leaves it,
            # so the log and the checkpoint end at the same step.
            if stop.requested:
                raise StopTraining

        epoch_ends: list[tuple[int, float]] = []

        def policy_params_fn(step: int, make_policy: Any, params: Any) -> None:
            # Called once before training and after every epoch, evaluated or not: the summary's env steps and speed
            # without reports.
            epoch_ends.append((int(step), round(time_offset + time.perf_counter() - start, 4)))

        status, error = "completed", None
        try:
            _call_trainer(spec, progress_fn, ckpt, restore, allow_changes, policy_params_fn)
        except StopTraining:
            status = "interrupted"
        except KeyboardInterrupt:
            status = "aborted"
        except hparams.HParamError:
            raise
        except Exception as err:  # the run folder still gets its summary and curve; the caller decides the exit
            status, error = "failed", f"{type(err).__name__}: {err}"
            console.print_exception(max_frames=4)
        if status == "completed":
            bar.update(task, completed=total)
    wall_s = round(time_offset + time.perf_counter() - start, 3)
    rows = reports.rows
    summary = summarize(spec, rows, status, wall_s, epoch_ends)
    if error is not None:
        summary["error"] = error
    summary["checkpoint_step"] = checkpoint_step(spec, ckpt)
    summary["checkpoint"] = ckpt if summary["checkpoint_step"] is not None else None
    summary["pid"] = os.getpid()
    summary["started_at"] = started_at
    rundir.write_json(os.path.join(run_dir, rundir.SUMMARY), summary)
    plots.learning_curve(rows, os.path.join(run_dir, rundir.CURVE), title=label)
    return summary


def print_summary(summary: dict[str, Any], run_dir: str, console: Console) -> None:
    """A finished run's summary as the terminal shows it, with how to resume a stopped one."""

    def fmt(value: Any, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    status_style = {"completed": "green", "interrupted": "yellow"}.get(summary["status"], "red")
    if summary.get("error"):
        console.print(f"[red]training failed: {summary['error']}[/]")
    algo = summary.get("algo", "ppo").upper()
    console.print(
        f"[{status_style}]{summary['status']}[/]: {summary['trainer']} {algo} on {summary['env']} (seed "
        f"{summary['seed']}) — "
        f"final reward {fmt(summary['final_reward'], '.1f')}, {fmt(summary['env_steps'], ',')} env steps, "
        f"{fmt(summary['steps_per_s'], ',.0f')} steps/s, wall {fmt(summary['wall_s'], '.1f')} s "
        f"(first report after {fmt(summary['first_report_s'], '.1f')} s)"
    )
    console.print(f"run folder: {run_dir}  (config.json, metrics.jsonl, checkpoint/, learning_curve.png)")
    if summary["status"] != "completed":
        if summary.get("checkpoint"):
            console.print(f"checkpoint at {summary['checkpoint_step']:,} env steps; "
                          f"resume with: brax-bridge train --resume {run_dir}")
        else:
            console.print("no checkpoint was saved before the stop (one is written at every evaluation)")
