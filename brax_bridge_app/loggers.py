"""Experiment loggers: TensorBoard and Weights & Biases, each one object that either trainer takes as ``progress_fn``.

    from brax_bridge_app.loggers import TensorBoardLogger, WandbLogger

    with TensorBoardLogger("runs/ip", hyperparameters={"learning_rate": 3e-4}) as log:
        ppo.train(environment, ..., progress_fn=log)            # brax_core's JAX PPO
    with WandbLogger(project="ip", config={"learning_rate": 3e-4}) as log:
        torch_ppo.train("inverted_pendulum", ..., progress_fn=log)

A logger is called as ``progress_fn(env_steps, metrics)``: every scalar metric is written under its own name
(``eval/episode_reward``, ``training/...``) against env steps. The hyperparameters become the run's TensorBoard
hparams or W&B config. W&B reads its own environment (``WANDB_MODE=offline``, ``WANDB_DIR``, ``WANDB_PROJECT``,
``WANDB_RUN_GROUP``, ...); arguments given here take precedence, as in ``wandb.init``.

TensorBoard and W&B are optional extras (``pip install ".[tensorboard]"``, ``".[wandb]"``); each is imported
when its logger is made, and ``require`` checks for it beforehand so the command line refuses a missing one before
anything compiles.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from brax_bridge_app import rundir
from brax_core.extras import install_line

# The command line's --logger names; jsonl is the run folder's metrics.jsonl.
NAMES = ("jsonl", "tensorboard", "wandb")
# Logger name -> (the module it needs, the extra that installs it).
_EXTRAS = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb")}
# W&B's x-axis for every metric: the env steps a report was made at (W&B's own step counts log calls).
WANDB_STEP = "env_steps"


class MissingExtraError(ImportError):
    """A logger's library is not installed; the message names the extra that installs it."""


class LoggerError(RuntimeError):
    """A logger could not start (W&B without credentials, say); the message says which and why."""


def require(name: str) -> types.ModuleType | None:
    """The library logger ``name`` needs, imported; ``MissingExtraError`` naming the extra when it is missing.
    ``None`` for jsonl, which needs nothing."""
    if name not in _EXTRAS:
        return None
    module, extra = _EXTRAS[name]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(
            f"the {name} logger needs the {extra} extra ({err}): {install_line(extra)}"
        ) from None


def parse(text: str) -> tuple[str, ...]:
    """``--logger`` text (``"jsonl,tensorboard"``) as names, each checked (and its extra present); ``ValueError``
    naming the flag and the accepted names otherwise."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in NAMES]
    if not names or unknown:
        raise ValueError(f"--logger takes one or more of {', '.join(NAMES)}, comma-separated; got {text!r}")
    for name in names:
        try:
            require(name)
        except MissingExtraError as err:
            raise ValueError(f"--logger {name}: {err}") from None
    return names


def tensorboard_hparams(hyperparameters: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """Hyperparameters as values TensorBoard's hparams take (numbers, booleans, text): layer sizes as ``"64,64"``,
    ``None`` as ``"none"``."""
    shown = {}
    for key, value in hyperparameters.items():
        if isinstance(value, bool | int | float | str):
            shown[key] = value
        elif value is None:
            shown[key] = "none"
        elif isinstance(value, Sequence):
            shown[key] = ",".join(map(str, value))
        else:
            shown[key] = str(value)
    return shown


class TensorBoardLogger:
    """Writes every report's scalar metrics to TensorBoard event files in ``log_dir``, against env steps.

    ``hyperparameters`` go in as the run's hparams (TensorBoard's HParams tab, with ``eval/episode_reward`` as its
    metric). ``purge_step``: a run resumed from a checkpoint at step S passes S + 1, so TensorBoard hides what an
    earlier part logged past the checkpoint (the resumed run reports those steps again). The event file is opened
    at the first report and flushed after every report, so TensorBoard shows a run while it trains.
    """

    def __init__(self, log_dir: str, hyperparameters: Mapping[str, Any] | None = None,
                 purge_step: int | None = None):
        require("tensorboard")
        self.log_dir = log_dir
        self.hyperparameters = dict(hyperparameters or {})
        self.purge_step = purge_step
        self._writer: Any = None  # opened at the first report: a run that fails before it leaves no empty file

    def _open(self) -> Any:
        from tensorboard.plugins.hparams import summary_v2
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(self.log_dir, purge_step=self.purge_step)
        if self.hyperparameters:
            shown = tensorboard_hparams(self.hyperparameters)
            config = summary_v2.hparams_config_pb(
                hparams=[summary_v2.HParam(name) for name in shown],
                metrics=[summary_v2.Metric(rundir.EVAL_REWARD)],
            )
            writer.file_writer.add_summary(config)
            writer.file_writer.add_summary(summary_v2.hparams_pb(shown))
        return writer

    def __call__(self, step: int, metrics: Mapping[str, Any]) -> None:
        if self._writer is None:
            self._writer = self._open()
        for key, value in rundir.scalar_metrics(metrics).items():
            self._writer.add_scalar(key, value, global_step=int(step))
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def __enter__(self) -> TensorBoardLogger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class WandbLogger:
    """Logs every report's scalar metrics to a Weights & Biases run, against env steps (``env_steps``, W&B's x-axis
    for every metric here).

    ``config`` (the hyperparameters) becomes the run's W&B config. ``project``, ``entity``, ``name``, ``dir`` and
    ``init_kwargs`` go to ``wandb.init``; left out, W&B takes them from its environment (``WANDB_PROJECT``,
    ``WANDB_ENTITY``, ``WANDB_DIR``, and ``WANDB_MODE=offline`` to write the run locally for ``wandb sync``).
    ``close`` finishes the run.
    """

    def __init__(self, project: str | None = None, entity: str | None = None, name: str | None = None,
                 config: Mapping[str, Any] | None = None, dir: str | None = None, **init_kwargs: Any):
        wandb = require("wandb")
        self.run = wandb.init(project=project, entity=entity, name=name, config=dict(config or {}), dir=dir,
                              **init_kwargs)
        self.run.define_metric(WANDB_STEP)
        self.run.define_metric("*", step_metric=WANDB_STEP)

    def __call__(self, step: int, metrics: Mapping[str, Any]) -> None:
        self.run.log({WANDB_STEP: int(step), **rundir.scalar_metrics(metrics)})

    def close(self) -> None:
        self.run.finish()

    def __enter__(self) -> WandbLogger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def run_parameters(spec: Any) -> dict[str, Any]:
    """What a run's loggers record as its configuration: every field of its config (a ``configuration.RunSpec``'s),
    flat, the env's name as ``env`` and the device ``auto`` where the config leaves it to the device rule."""
    fields = {"algo": spec.algo, **spec.config.flat()}
    fields["env"] = fields.pop("name")
    fields["device"] = fields["device"] or "auto"
    return {key: list(value) if isinstance(value, tuple) else value for key, value in fields.items()}


def wandb_run_id(run_dir: str, spec: Any) -> str:
    """One W&B run id per run folder and run (its ``created`` time), so a resumed run logs into the same W&B run."""
    key = f"{os.path.abspath(run_dir)}|{spec.records.get('created')}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@contextlib.contextmanager
def opened(names: Sequence[str], run_dir: str, spec: Any, resume_step: int | None = None,
           wandb_project: str | None = None, wandb_entity: str | None = None) -> Iterator[list[Any]]:
    """The loggers ``names`` asks for besides the run folder's metrics.jsonl, for the run in ``run_dir``; closed on
    leaving. TensorBoard writes into ``<run_dir>/tensorboard``; W&B into ``WANDB_DIR`` when set, else the run
    folder, named after the folder (``WANDB_RUN_GROUP`` groups the runs of a comparison)."""
    made: list[Any] = []
    try:
        parameters = run_parameters(spec)
        if "tensorboard" in names:
            purge = None if resume_step is None else resume_step + 1
            made.append(TensorBoardLogger(os.path.join(run_dir, rundir.TENSORBOARD), parameters, purge_step=purge))
        if "wandb" in names:
            try:
                made.append(WandbLogger(
                    project=wandb_project, entity=wandb_entity, name=os.path.basename(os.path.abspath(run_dir)),
                    config=parameters, dir=None if os.environ.get("WANDB_DIR") else run_dir,
                    id=wandb_run_id(run_dir, spec), resume="allow",
                ))
            except Exception as err:  # wandb raises its own kinds (no API key, no network, a bad entity)
                raise LoggerError(f"--logger wandb: W&B could not start a run ({type(err).__name__}: {err}); "
                                  "WANDB_MODE=offline writes the run locally for a later `wandb sync`") from err
        yield made
    finally:
        for logger in made:
            logger.close()
