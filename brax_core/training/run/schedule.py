"""A run's plan: its compiled calls, resets and evaluation points, planned from the *whole* run (``num_timesteps``)
so that a resumed run continues the same plan instead of planning its remainder anew (which would move the
evaluation points and overshoot the step budget)."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A run split into ``epochs`` (an evaluation after each), each into ``segments_per_epoch`` segments (an env
    reset between two, with ``num_resets_per_eval``), each into ``calls_per_segment`` calls of ``steps_per_call``
    training steps (a training-metrics report after each) of ``env_steps_per_training_step`` env steps each.
    ``calls_done`` calls ran before this process started (a restored checkpoint).

    Resets happen *before* a segment's first call, so the state after any call is the same whichever process
    ran it: a checkpoint saved after call ``c`` lets a resumed run continue with call ``c + 1`` exactly.
    """

    epochs: int
    steps_per_call: int
    calls_per_segment: int
    segments_per_epoch: int
    resets: bool
    calls_done: int = 0
    env_steps_per_training_step: int = 1

    @property
    def calls_per_epoch(self) -> int:
        return self.calls_per_segment * self.segments_per_epoch

    @property
    def training_steps(self) -> int:
        """Training steps of the whole planned run (the budget rounded up to whole calls)."""
        return self.epochs * self.calls_per_epoch * self.steps_per_call

    @property
    def env_steps_per_call(self) -> int:
        return self.steps_per_call * self.env_steps_per_training_step

    def calls(self) -> range:
        """Global indices of the calls this process runs."""
        return range(self.calls_done, self.epochs * self.calls_per_epoch)

    def resets_before(self, call: int) -> bool:
        """Whether the envs are reset before ``call`` (the first call of a segment other than the first)."""
        return self.resets and call > 0 and call % self.calls_per_segment == 0

    def ends_epoch(self, call: int) -> bool:
        return (call + 1) % self.calls_per_epoch == 0

    def evaluation_points(self, initial: bool) -> list[int]:
        """Call counts after which the unbroken run evaluates (``0``: before training, when ``initial``)."""
        first = 0 if initial else 1
        return [e * self.calls_per_epoch for e in range(first, self.epochs + 1)]

    def evaluates_at_start(self, initial: bool) -> bool:
        """Whether this process evaluates before its first call: at the start of a run with an initial
        evaluation, or when it resumes at an evaluation point (the unbroken run evaluated there)."""
        return self.calls_done in self.evaluation_points(initial)

    def evaluations_before_start(self, initial: bool) -> int:
        """How many evaluations the unbroken run made before this process's first one (to skip their keys)."""
        return sum(1 for p in self.evaluation_points(initial) if p < self.calls_done)


def plan_run(config: Any, env_steps: int, env_steps_per_training_step: int) -> Schedule:
    """The schedule of the run the hyperparameters ``config`` (a ``PPOConfig``: ``num_timesteps``, ``num_evals``,
    ``num_resets_per_eval``, ``log_training_metrics``, ``training_metrics_steps``) ask for, starting at
    ``env_steps`` (a restored checkpoint's).

    The whole run is planned, not its remainder, so that a resumed run continues the unbroken plan. A count
    between training steps comes from another batch size: then the remaining steps are planned on their own.
    """
    done, rest = divmod(env_steps, env_steps_per_training_step)
    steps_to_plan = config.run.num_timesteps if rest == 0 else config.run.num_timesteps - env_steps
    steps_between_reports = None
    if config.run.log_training_metrics:
        steps_between_reports = max(1, (config.run.training_metrics_steps or 0) // env_steps_per_training_step)
    schedule = make_schedule(
        -(-steps_to_plan // env_steps_per_training_step),
        num_evals=config.run.num_evals,
        num_resets_per_eval=config.env.num_resets_per_eval,
        steps_between_reports=steps_between_reports,
        steps_done=done if rest == 0 else 0,
    )
    return dataclasses.replace(schedule, env_steps_per_training_step=env_steps_per_training_step)


def make_schedule(
    training_steps: int,
    *,
    num_evals: int,
    num_resets_per_eval: int,
    steps_between_reports: int | None,
    steps_done: int = 0,
) -> Schedule:
    """The schedule of a run of ``training_steps`` training steps, of which ``steps_done`` already ran.

    The plan is the unbroken run's whenever ``steps_done`` ends one of its calls (any checkpoint the trainers
    write with the same ``num_timesteps``, ``num_evals``, ``num_resets_per_eval`` and ``training_metrics_steps``);
    otherwise (those changed) the remaining steps are planned as a run of their own.
    """
    schedule = _plan(training_steps, num_evals, num_resets_per_eval, steps_between_reports)
    if steps_done == 0:
        return schedule
    if steps_done % schedule.steps_per_call == 0 and steps_done < schedule.training_steps:
        return dataclasses.replace(schedule, calls_done=steps_done // schedule.steps_per_call)
    remaining = max(training_steps - steps_done, 1)
    return _plan(remaining, num_evals, num_resets_per_eval, steps_between_reports)


def _plan(training_steps: int, num_evals: int, num_resets_per_eval: int, steps_between_reports: int | None) -> Schedule:
    epochs = max(num_evals - 1, 1)
    segments = max(num_resets_per_eval, 1)
    steps_per_segment = -(-training_steps // (epochs * segments))
    steps_per_call = steps_per_segment
    if steps_between_reports is not None:
        steps_per_call = min(max(steps_between_reports, 1), steps_per_segment)
        steps_per_segment = -(-steps_per_segment // steps_per_call) * steps_per_call
    return Schedule(epochs, steps_per_call, steps_per_segment // steps_per_call, segments, num_resets_per_eval > 0)


def plan_updates(policy_updates: int, num_evals: int, updates_done: int, env_steps_per_update: int) -> Schedule:
    """The schedule of a gradient run (APG, SHAC): ``max(num_evals - 1, 1)`` epochs of Brax's share of
    ``policy_updates`` each (rounded, halves to even), one call of one-update training steps per epoch. Resumed after
    ``updates_done``: the unbroken run's plan where that count ends one of its epochs, else (a run resumed with another
    length) the updates left planned as a run of their own; none left, no call."""
    epochs = max(num_evals - 1, 1)
    per_epoch = max(round(policy_updates / epochs), 1)
    plan = Schedule(epochs, per_epoch, 1, 1, False, 0, env_steps_per_update)
    if updates_done % per_epoch == 0 and updates_done <= plan.training_steps:
        return dataclasses.replace(plan, calls_done=updates_done // per_epoch)
    remaining = plan.training_steps - updates_done
    if remaining <= 0:
        return dataclasses.replace(plan, calls_done=epochs)
    return Schedule(epochs, -(-remaining // epochs), 1, 1, False, 0, env_steps_per_update)
