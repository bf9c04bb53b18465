"""A run of a gradient algorithm (``--algo apg|shac``) into a run folder, as ``runs.train_run`` does for PPO: the
resolved configuration in ``config.json``, one line per evaluation in ``metrics.jsonl`` (its ``step`` in env steps,
so runs of every algorithm share an axis), the loggers, a live progress bar, Ctrl-C stopping at the next
evaluation, ``summary.json`` and ``learning_curve.png``.

The trainers: ``torch_analytic.apg.train`` and ``torch_analytic.shac.train`` (``--trainer torch``) and Brax's APG,
``brax_core.training.agents.apg.train.train`` (``--trainer jax``). The torch trainers save a checkpoint into the
folder's ``checkpoint/`` at every evaluation, so a run stopped by Ctrl-C continues exactly with ``brax-bridge train
--resume DIR``; Brax's APG keeps none.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console

from brax_bridge import TorchEnv
from brax_bridge_app import envinfo, plots, rundir, runs, runtime
from brax_bridge_app.algorithms import GradientConfig
from brax_core.training import networks as jax_networks
from brax_core.training.agents.apg import networks as apg_networks
from brax_core.training.agents.apg import train as jax_apg
from brax_core.training.agents.apg.arguments import updates_per_epoch
from brax_core.training.run import checkpoints
from torch_analytic import apg, shac


@dataclasses.dataclass(frozen=True)
class GradientRun:
    """A gradient run's ``config.json``: its ``GradientConfig`` and what the folder records (``rundir.RECORDS``)."""

    config: GradientConfig
    records: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def env_name(self) -> str:
        return self.config.env

    @property
    def trainer(self) -> str:
        return self.config.trainer

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def import_dir(self) -> str | None:
        return self.records.get(envinfo.IMPORT_DIR)

    def to_json(self) -> dict[str, Any]:
        return {**self.config.to_json(), **self.records}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GradientRun:
        """The run of a gradient run folder's ``config.json``."""
        settings = {k: tuple(v) if isinstance(v, list) else v for k, v in data["settings"].items()}
        config = GradientConfig(data["algo"], data["trainer"], data["env"], data["seed"], data["device"], settings)
        return cls(config, {k: v for k, v in data.items() if k in rundir.RECORDS})


def new_run(config: GradientConfig) -> GradientRun:
    """A new run of ``config``, with the records a PPO run's folder keeps (``runs.new_run``)."""
    return GradientRun(config, runs.new_run_records(config.env))


def checkpoint_step(run_dir: str) -> int | None:
    """Env steps of the newest checkpoint in a run folder's ``checkpoint/`` (nothing is loaded)."""
    return checkpoints.latest_step(os.path.join(run_dir, rundir.CHECKPOINT))


def check_differentiable(config: GradientConfig) -> None:
    """Refuses an env whose step JAX cannot differentiate in reverse mode, as ``TorchEnv(differentiable=True)`` does:
    from shapes, before anything compiles; its message names the envs that differentiate and the change that makes a
    model do so."""
    TorchEnv(_environment(config), 1, episode_length=config.settings["episode_length"], differentiable=True)


def _environment(config: GradientConfig, import_dir: str | None = None) -> Any:
    """The env as the trainers take it: a registered name stays a name; a user's env is built."""
    return envinfo.make(config.env, import_dir) if envinfo.is_user_env(config.env) else config.env


def _train(
    run: GradientRun, progress_fn: Callable[[int, Mapping[str, float]], None], ckpt: str, restore: str | None
) -> Any:
    config, s = run.config, run.config.settings
    placement = runtime.place(config.device)
    common = {
        "episode_length": s["episode_length"], "policy_updates": config.policy_updates,
        "horizon_length": s["horizon_length"], "num_envs": s["num_envs"], "num_evals": s["num_evals"],
        "action_repeat": s["action_repeat"], "num_eval_envs": s["num_eval_envs"], "seed": config.seed,
        "max_gradient_norm": s["max_gradient_norm"], "normalize_observations": s["normalize_observations"],
        "deterministic_eval": s["deterministic_eval"], "progress_fn": progress_fn,
    }
    environment = _environment(config, run.import_dir)
    apg_settings = {name: s[name] for name in ("learning_rate", "use_schedule", "schedule_decay")} if (
        config.algo == "apg") else {}
    with runtime.placed(placement):
        if config.algo == "apg" and config.trainer == "jax":
            network_factory = functools.partial(
                apg_networks.make_apg_networks, hidden_layer_sizes=tuple(s["hidden_layer_sizes"]),
                activation=jax_networks.ACTIVATIONS[s["activation"]], layer_norm=s["layer_norm"],
            )
            if isinstance(environment, str):
                environment = envinfo.make(environment)
            return jax_apg.train(environment, network_factory=network_factory, **common, **apg_settings)
        saving = {"save_checkpoint_path": ckpt, "restore_checkpoint_path": restore}
        if config.algo == "apg":
            return apg.train(
                environment, **common, **apg_settings, hidden_layer_sizes=tuple(s["hidden_layer_sizes"]),
                activation=s["activation"], layer_norm=s["layer_norm"], device=placement.torch_device, **saving,
            )
        shac_settings = {name: s[name] for name in (
            "actor_learning_rate", "critic_learning_rate", "lr_schedule", "gamma", "td_lambda", "critic_iterations",
            "num_critic_batches", "target_critic_alpha", "reward_scaling", "activation", "layer_norm",
        )}
        return shac.train(
            environment, **common, **shac_settings, actor_hidden_layer_sizes=tuple(s["actor_hidden_layer_sizes"]),
            critic_hidden_layer_sizes=tuple(s["critic_hidden_layer_sizes"]), device=placement.torch_device, **saving,
        )


def train_run(
    run_dir: str,
    run: GradientRun,
    console: Console,
    stop: runs.StopFlag | None = None,
    loggers: Sequence[Callable[[int, Mapping[str, float]], None]] = (),
    resume: bool = False,
) -> dict[str, Any]:
    """Trains ``run`` into ``run_dir`` and returns its summary (also written to ``summary.json``, with ``algo``);
    with ``resume``, continues it from the folder's checkpoint, its metrics log kept up to the checkpoint's step."""
    started_at = runs.now_iso()
    os.makedirs(run_dir, exist_ok=True)
    stop = stop or runs.StopFlag()
    log = rundir.MetricsLog(run_dir)
    ckpt = os.path.abspath(os.path.join(run_dir, rundir.CHECKPOINT))
    saved_at = checkpoints.latest_step(ckpt) if resume else None
    earlier = runs.open_run_folder(run_dir, log, ckpt, console, resume, saved_at)
    rundir.write_json(os.path.join(run_dir, rundir.CONFIG), run.to_json())
    time_offset = earlier[-1]["time_s"] if earlier else 0.0

    config = run.config
    per_epoch = updates_per_epoch(config.policy_updates, config.settings["num_evals"])
    total = max(config.policy_updates * config.env_steps_per_update, 1)
    label = f"{config.algo}/{config.trainer}/{config.env}/seed {config.seed}"
    reports = runs.ReportLog(log, earlier, loggers)
    start = time.perf_counter()
    with runs.progress_bar(console) as bar:
        task = bar.add_task(label, total=total, sps="", reward="-")

        def progress_fn(epoch: int, metrics: Mapping[str, Any]) -> None:
            step = epoch * per_epoch * config.env_steps_per_update
            scalars = rundir.scalar_metrics(metrics)
            row = {"step": step, "time_s": round(time_offset + time.perf_counter() - start, 4), **scalars}
            reports.add(row, scalars)
            speed = row.get(rundir.TRAIN_SPS)
            bar.update(task, completed=min(step, total), reward=runs.format_reward(rundir.reward_of(row)),
                       sps=f"{speed:,.0f} steps/s" if speed else "")
            if stop.requested:
                raise runs.StopTraining

        status, error = "completed", None
        try:
            _train(run, progress_fn, ckpt if config.trainer == "torch" else None, ckpt if resume else None)
        except runs.StopTraining:
            status = "interrupted"
        except KeyboardInterrupt:
            status = "aborted"
        except Exception as err:  # the run folder still gets its summary and curve; the caller decides the exit
            status, error = "failed", f"{type(err).__name__}: {err}"
            console.print_exception(max_frames=4)
        if status == "completed":
            bar.update(task, completed=total)
    wall_s = round(time_offset + time.perf_counter() - start, 3)
    rows = reports.rows
    summary = {"algo": config.algo, **runs.summarize(run, rows, status, wall_s)}
    if error is not None:
        summary["error"] = error
    summary["checkpoint_step"] = checkpoints.latest_step(ckpt)
    summary["checkpoint"] = ckpt if summary["checkpoint_step"] is not None else None
    summary["pid"] = os.getpid()
    summary["started_at"] = started_at
    rundir.write_json(os.path.join(run_dir, rundir.SUMMARY), summary)
    plots.learning_curve(rows, os.path.join(run_dir, rundir.CURVE), title=label)
    return summary
