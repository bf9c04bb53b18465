"""What the trainers check before a run resumes from a checkpoint or calls back (the run itself, its schedule
and its callbacks: ``brax_core.training.run``).

* ``check_config``: the configuration a checkpoint was saved with against the one asked for now; differences are
  refused with every differing field listed, unless the caller allows them by name (PPO);
  ``check_same_settings`` (``check_same_config`` for a saved configuration) refuses every difference but the run's
  length (the gradient algorithms and SAC).
* ``checked_callbacks``: ``progress_fn`` and ``policy_params_fn`` checked for their signatures before anything runs.

Standard library only: the schema module and the command line import nothing heavier either.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from brax_core.training.validation import callable_arg

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
    (a field the saved configuration lacks is not compared)."""
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


# What a resumed run of the gradient algorithms may change: its length (a larger num_timesteps trains on), what it
# keeps and where it runs; the env's name is compared where both runs name one.
RESUME_MAY_CHANGE = ("num_timesteps", "max_to_keep", "device", "preset", "trainer")


def check_same_settings(where: str, saved: Mapping[str, Any], requested: Mapping[str, Any]) -> None:
    """Refuses to continue the run saved at ``where`` with settings (a configuration's fields by name) other than its
    saved ones, but for ``RESUME_MAY_CHANGE``; the error names each field that differs, with both values."""
    skip = set(RESUME_MAY_CHANGE)
    if saved.get("name") is None or requested.get("name") is None:
        skip.add("name")
    differences = {k: v for k, v in config_differences(saved, requested).items() if k not in skip}
    if differences:
        listed = "; ".join(f"{k}: {s!r} in the checkpoint, {r!r} requested" for k, (s, r) in differences.items())
        raise ValueError(
            f"cannot resume from {where!r} with other settings ({listed}): a resumed run continues the saved one "
            f"exactly, so only {', '.join(RESUME_MAY_CHANGE[:1])} may change (a larger one trains on)"
        )


def check_same_config(where: str, saved: Mapping[str, Any], config: Any) -> Any:
    """The configuration ``saved`` (``to_json``'s form) of the run at ``where``, as ``config``'s type, refused by
    ``check_same_settings`` unless it has ``config``'s settings."""
    saved_config = type(config).from_json(saved)
    check_same_settings(where, saved_config.flat(), config.flat())
    return saved_config


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


def checked_callbacks(
    progress_fn: Any, policy_params_fn: Any
) -> tuple[Callable[[int, Mapping[str, Any]], None], Callable[..., None]]:
    """A trainer's ``progress_fn`` and ``policy_params_fn``, refused now if they cannot take their arguments (the run
    driver calls them, saving the run first should one raise)."""
    return (
        check_callback("progress_fn", callable_arg("progress_fn", progress_fn), "(num_steps, metrics)"),
        check_callback(
            "policy_params_fn",
            callable_arg("policy_params_fn", policy_params_fn),
            "(current_step, make_policy, params)",
        ),
    )


def check_callback(name: str, fn: Callable[..., Any], signature: str) -> Callable[..., Any]:
    """``fn``, checked now against ``signature`` (e.g. ``"(num_steps, metrics)"``)."""
    arity = signature.count(",") + 1
    try:
        params = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some C callables have no signature to check
        return fn
    try:
        params.bind(*range(arity))
    except TypeError as e:
        raise TypeError(
            f"{name} must accept {arity} positional arguments {signature}; {fn!r} takes {params} ({e})"
        ) from None
    return fn
