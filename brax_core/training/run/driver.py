"""The loop every trainer runs around its training steps, over a ``Backend`` each supplies.

For every compiled call of the ``Schedule``: reset the envs where a segment starts, train, and read the call's
training metrics. At the end of an epoch the checkpoint is saved *before* any user callback sees the step, so a
failing callback costs no work; then ``policy_params_fn`` gets a copy of the parameters and the run is evaluated
and reported. A callback that raises has the run saved first (where the trainer can save at that moment) and its
exception carries a note naming it and the checkpoint. ``policy_params_fn`` is also called once before training, at
the step the run starts from, as Brax does.

The PPO trainers report ``progress_fn`` at env-step counts; the gradient trainers (the JAX APG and
``torch_analytic``) run the same driver with one training step per update and report at epochs, as Brax's APG
(``report_step``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from brax_core.training.run import checkpoints
from brax_core.training.run.schedule import Schedule

# The host-side metrics every trainer reports: ``progress_fn``'s and ``train``'s last ones.
ReportedMetrics = dict[str, float]


def ignore(*args: Any) -> None:
    """The default callback: does nothing."""


class Backend(Protocol):
    """What a trainer supplies to the driver: its training state and how to step, evaluate and save it."""

    def skip_evaluations(self, count: int) -> None:
        """Moves the evaluation's random stream past the ``count`` evaluations an unbroken run made before this
        process started."""

    def train(self, num_steps: int) -> None:
        """Runs ``num_steps`` training steps; returns once they have finished, so the time around it is theirs."""

    def training_metrics(self) -> Mapping[str, float]:
        """The update's metrics since the last read (means over its minibatches, e.g. ``total_loss``) and, when
        training episodes are tracked, ``episode_count`` and ``episode_sum/<name>``: how many ended and the sums
        of their metrics."""

    def evaluate(self, training_metrics: Mapping[str, float]) -> ReportedMetrics:
        """Evaluates the current policy; the ``eval/*`` metrics together with ``training_metrics``."""

    def save(self, env_steps: int) -> None:
        """Writes the checkpoint of the run as it stands, at ``env_steps``."""

    def params(self) -> Any:
        """The current parameters as ``make_policy`` takes them: copies that later training leaves alone."""


class ResettingBackend(Backend, Protocol):
    """A backend whose schedules may reset the training envs between evaluations (PPO's ``num_resets_per_eval``);
    a backend without ``reset_envs`` runs only schedules without resets."""

    def reset_envs(self, env_steps: int) -> None:
        """Resets the training envs (a new segment of the schedule starts at ``env_steps``)."""


def training_metrics(
    step_metrics: Mapping[str, Any], sps: float, walltime: float, last_episode: dict[str, float]
) -> ReportedMetrics:
    """Host-side training metrics of one call: ``training/<name>`` for the update's metrics, ``training/sps`` and
    ``training/walltime``, and ``episode/<name>``, the means over the training episodes that ended since the last
    report (the previous means are kept in ``last_episode`` while none ends; until the first ends they are 0.0, and
    ``episode/count`` says how many ended)."""
    out = {
        f"training/{k}": v if isinstance(v, str) else float(v)  # a word names how the step ran (collection)
        for k, v in step_metrics.items() if not k.startswith("episode")
    }
    out["training/sps"] = sps
    out["training/walltime"] = walltime
    count = float(step_metrics.get("episode_count", 0.0))
    for k, v in step_metrics.items():
        if k.startswith("episode_sum/"):
            name = f"episode/{k.split('/', 1)[1]}"
            if count > 0:
                last_episode[name] = float(v) / count
            else:
                last_episode.setdefault(name, 0.0)
    if "episode_count" in step_metrics:
        out.update(last_episode)
        out["episode/count"] = count
    return out


class RunDriver:
    """Runs a trainer's ``Backend`` through a ``Schedule`` (see the module docstring).

    Args:
      backend: the trainer's training state and operations.
      num_evals: the run's evaluations (one before training when more than one).
      progress_fn: ``progress_fn(step, metrics)`` at every report.
      make_policy: what ``policy_params_fn`` gets to build a policy from the parameters.
      env_steps: the env-step count the run starts from (a restored checkpoint's, else 0).
      main: whether this process runs the callbacks (every process of the JAX trainer; rank 0 of torch_ppo).
      save_before_failing_callback: whether a failing callback has the run saved first (not where saving needs
        every process, which a callback on one process cannot ask for).
      report_step: what ``progress_fn`` is told for a count of env steps (default: the count itself).
      log_training_metrics: every call's training metrics go to ``progress_fn`` too.
      policy_params_fn: ``policy_params_fn(current_step, make_policy, params)`` before training and after every
        epoch.
      save_checkpoint_path: where the backend saves checkpoints (``None``: nowhere).
      restore_checkpoint_path: the checkpoint the run resumed from (whose step is saved already when it lies in
        the save path).
    """

    def __init__(
        self,
        backend: Backend | ResettingBackend,
        *,
        num_evals: int,
        progress_fn: Callable[[int, Mapping[str, Any]], None],
        make_policy: Callable[..., Any],
        env_steps: int,
        main: bool = True,
        save_before_failing_callback: bool = True,
        report_step: Callable[[int], int] = int,
        log_training_metrics: bool = False,
        policy_params_fn: Callable[..., None] = ignore,
        save_checkpoint_path: str | os.PathLike | None = None,
        restore_checkpoint_path: str | os.PathLike | None = None,
    ):
        self.backend = backend
        self._num_evals, self._log_training_metrics = num_evals, log_training_metrics
        self._report_step = report_step
        self.env_steps = env_steps
        self._progress_fn, self._policy_params_fn = progress_fn, policy_params_fn
        self._make_policy = make_policy
        self._save_path = save_checkpoint_path
        resumed_here = checkpoints.holds(save_checkpoint_path, restore_checkpoint_path)
        self._saved_at = env_steps if resumed_here else None
        self._main = main
        self._save_before_failing_callback = save_before_failing_callback
        self._last_episode: dict[str, float] = {}

    def save(self) -> str | None:
        """Saves the run at the current step count (once per count); returns the step directory, or ``None``
        without a save path."""
        if self._save_path is None:
            return None
        if self._saved_at != self.env_steps:
            self.backend.save(self.env_steps)
            self._saved_at = self.env_steps
        return checkpoints.step_directory(self._save_path, self.env_steps)

    def run(
        self, schedule: Schedule, *, evaluate: bool, report_training_at_evaluation_points: bool = False
    ) -> ReportedMetrics:
        """Runs the calls of ``schedule`` this process has left; returns the last metrics reported.

        ``evaluate``: this process evaluates at the evaluation points (also before training when ``num_evals > 1``).
        With ``log_training_metrics`` every call's training metrics go to ``progress_fn``;
        ``report_training_at_evaluation_points``: where nothing is evaluated, an evaluation point reports the
        training metrics instead.
        """
        if schedule.resets and not hasattr(self.backend, "reset_envs"):
            raise TypeError(f"{type(self.backend).__name__} cannot reset its envs; its schedule must have no resets")
        initial_evaluation, log_training_metrics = self._num_evals > 1, self._log_training_metrics
        env_steps_per_call = schedule.env_steps_per_call
        start = time.time()
        if evaluate:
            self.backend.skip_evaluations(schedule.evaluations_before_start(initial_evaluation))
        metrics: ReportedMetrics = {}
        if evaluate and schedule.evaluates_at_start(initial_evaluation):
            metrics = self._evaluate({"eval/walltime": 0.0})
        if self._main:
            self._call("policy_params_fn", self._policy_params_fn, self.env_steps, self._make_policy,
                       self.backend.params())  # fmt: skip
        walltime = 0.0
        for call in schedule.calls():
            if schedule.resets_before(call):
                self.backend.reset_envs(self.env_steps)
            started = time.perf_counter()
            self.backend.train(schedule.steps_per_call)
            elapsed = time.perf_counter() - started
            walltime += elapsed
            self.env_steps += env_steps_per_call
            sps = env_steps_per_call / max(elapsed, 1e-9)
            call_metrics = training_metrics(self.backend.training_metrics(), sps, walltime, self._last_episode)
            if schedule.ends_epoch(call):
                self.save()  # before any user callback sees the step
            if log_training_metrics:
                metrics = call_metrics
                if self._main:
                    logging.info(call_metrics)
                    self._call("progress_fn", self._progress_fn, self._report_step(self.env_steps), dict(call_metrics))
            if not schedule.ends_epoch(call):
                continue
            if self._main:
                self._call("policy_params_fn", self._policy_params_fn, self.env_steps, self._make_policy,
                           self.backend.params())  # fmt: skip
            if evaluate:
                metrics = self._evaluate(call_metrics)
            elif report_training_at_evaluation_points and not log_training_metrics and self._main:
                metrics = call_metrics
                self._call("progress_fn", self._progress_fn, self._report_step(self.env_steps), dict(metrics))
        logging.info("total steps: %s, wall time %.1f s", self.env_steps, time.time() - start)
        return metrics

    def _evaluate(self, training_metrics: Mapping[str, float]) -> ReportedMetrics:
        metrics = self.backend.evaluate(training_metrics)
        logging.info(metrics)
        self._call("progress_fn", self._progress_fn, self._report_step(self.env_steps), metrics)
        return metrics

    def _call(self, name: str, fn: Callable[..., Any], *args: Any) -> None:
        """Calls a user callback; one that raises has the run saved first, and its exception names it."""
        try:
            fn(*args)
        except Exception as e:
            saved = self.save() if self._save_before_failing_callback else None
            where = f"the run was saved first, at {saved}" if saved else "no checkpoint path was given"
            e.add_note(f"raised by the {name} callback {getattr(fn, '__qualname__', fn)!r} ({where})")
            raise
