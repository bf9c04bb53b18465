"""What both PPO trainers share so that a run interrupted at any report and resumed does what an unbroken one does.

* ``Schedule``: the run's compiled calls, resets and evaluation points, planned from the *whole* run
  (``num_timesteps``), so that a resumed run continues the same plan instead of planning its remainder anew (which
  moved the evaluation points and overshot the step budget).
* ``check_config``: the configuration a checkpoint was saved with against the one asked for now; differences are
  refused with every differing field listed, unless the caller allows them by name.
* ``user_callback``: a user callback checked for its signature before anything runs and called so that its
  failure never costs saved work (the trainer saves first) and names the callback.

Standard library only: the schema module and the command line import nothing heavier either.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# Training hyperparameters that a checkpoint records and a resumed run must share with it (both trainers).
RESUME_FIELDS = (
    "episode_length",
    "action_repeat",
    "num_envs",
    "learning_rate",
    "entropy_cost",
    "discounting",
    "unroll_length",
    "batch_size",
    "num_minibatches",
    "num_updates_per_batch",
    "reward_scaling",
    "clipping_epsilon",
    "gae_lambda",
    "max_grad_norm",
    "normalize_advantage",
    "vf_loss_coefficient",
    "bootstrap_on_timeout",
    "normalize_observations_std_eps",
    "normalize_observations_mode",
    "normalize_until_count",
    "clipping_epsilon_value",
    "use_distributional_critic",
    "desired_kl",
    "learning_rate_schedule",
    "learning_rate_schedule_min_lr",
    "learning_rate_schedule_max_lr",
    "seed",
)
# What the shapes of a checkpoint's parameters follow: no override can change them (the parameters would not fit).
_FIXED = (
    "observation_size",
    "action_size",
    "policy_hidden_layer_sizes",
    "value_hidden_layer_sizes",
    "use_distributional_critic",
    "num_quantiles",
    "distribution_type",
    "state_dependent_std",
    "layer_norm",
)
_SIZES = ("observation_size", "action_size")
# Nested sections of a saved configuration whose entries are fields of their own.
_SECTIONS = ("training", "network", "network_factory_kwargs")
_NOT_COMPARED = ("format", "env_steps")


# ------------------------------------------------------------------------------------------------ schedule


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A run split into ``epochs`` (an evaluation after each), each into ``segments_per_epoch`` segments (an env
    reset between two, with ``num_resets_per_eval``), each into ``calls_per_segment`` calls of ``steps_per_call``
    training steps (a training-metrics report after each). ``calls_done`` calls ran before this process started
    (a restored checkpoint).

    Resets happen *before* a segment's first call, so the state after any call is the same whichever process
    ran it: a checkpoint saved after call ``c`` lets a resumed run continue with call ``c + 1`` exactly.
    """

    epochs: int
    steps_per_call: int
    calls_per_segment: int
    segments_per_epoch: int
    resets: bool
    calls_done: int = 0

    @property
    def calls_per_epoch(self) -> int:
        return self.calls_per_segment * self.segments_per_epoch

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
    total = schedule.epochs * schedule.calls_per_epoch * schedule.steps_per_call
    if steps_done % schedule.steps_per_call == 0 and steps_done < total:
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


# ------------------------------------------------------------------------------------------ configuration


def _fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """A saved configuration as ``{field: value}``: the entries of its sections as fields of their own."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in _NOT_COMPARED:
            continue
        if key in _SECTIONS and isinstance(value, Mapping):
            out.update(value)
        else:
            out[key] = value
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (type(a) is type(b) and a == b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return a == b


def config_differences(saved: Mapping[str, Any], requested: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{field: (saved value, requested value)}`` for every field both configurations hold and that differs
    (a field an older checkpoint lacks is not compared)."""
    a, b = _fields(saved), _fields(requested)
    return {k: (a[k], b[k]) for k in sorted(a.keys() & b.keys()) if not _same(a[k], b[k])}


def check_config(
    where: str,
    saved: Mapping[str, Any],
    requested: Mapping[str, Any],
    allow: bool | Iterable[str] = (),
    argument: str = "allow_config_changes",
) -> dict[str, tuple[Any, Any]]:
    """Refuses to resume from the checkpoint at ``where`` with a configuration other than the saved one.

    What the parameters' shapes follow (observation and action sizes, hidden layer sizes, the critic's and the
    distribution's layout) must always agree; any other differing field must be named in ``allow`` (``True`` allows
    all). Returns the allowed differences; raises ``ValueError`` listing each refused
    field with both values and how to allow it.
    """
    differences = config_differences(saved, requested)
    fixed = {k: v for k, v in differences.items() if k in _FIXED}
    if fixed:
        listed = "; ".join(f"{k} {s!r} in the checkpoint, {r!r} here" for k, (s, r) in fixed.items())
        why = (
            "it belongs to another environment or observation layout"
            if fixed.keys() & set(_SIZES)
            else f"its parameters do not fit other networks, so {argument} cannot change these"
        )
        raise ValueError(f"checkpoint {where!r} was saved for networks of other shapes ({listed}): {why}")
    allowed = set() if allow is False else (set(differences) if allow is True else set(allow))
    refused = {k: v for k, v in differences.items() if k not in allowed}
    if refused:
        listed = "; ".join(f"{k}: {s!r} in the checkpoint, {r!r} requested" for k, (s, r) in refused.items())
        raise ValueError(
            f"cannot resume from {where!r} with another configuration ({listed}). Resume with the checkpoint's "
            f"values, or allow the change deliberately with {argument}={sorted(refused)!r} (True allows any)"
        )
    return differences


def check_allow(argument: str, allow: Any) -> bool | tuple[str, ...]:
    """``allow_config_changes``: ``True``/``False`` or field names (a string or an iterable of strings)."""
    if isinstance(allow, bool):
        return allow
    if isinstance(allow, str):
        return (allow,)
    try:
        names = tuple(allow)
    except TypeError:
        names = None
    if names is None or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{argument} must be True, False or a sequence of field names, got {allow!r}")
    return names


# ----------------------------------------------------------------------------------------------- callbacks


def user_callback(
    name: str, fn: Callable[..., Any], signature: str, on_error: Callable[[], str | None]
) -> Callable[..., Any]:
    """``fn`` checked now against ``signature`` (e.g. ``"(num_steps, metrics)"``) and wrapped so that an
    exception it raises first calls ``on_error`` (which saves a checkpoint and returns where, or ``None``) and
    then propagates unchanged with a note naming the callback and the checkpoint."""
    arity = signature.count(",") + 1
    try:
        params = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some C callables have no signature to check
        params = None
    if params is not None:
        try:
            params.bind(*range(arity))
        except TypeError as e:
            raise TypeError(
                f"{name} must accept {arity} positional arguments {signature}; {fn!r} takes {params} ({e})"
            ) from None

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as e:
            saved = on_error()
            where = f"the run was saved first, at {saved}" if saved else "no checkpoint path was given"
            e.add_note(f"raised by the {name} callback {getattr(fn, '__qualname__', fn)!r} ({where})")
            raise

    return call
