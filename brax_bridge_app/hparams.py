"""The command line's view of the PPO hyperparameter schema (``brax_core.training.agents.ppo.config``).

Every ``PPOConfig`` field with ``command_line`` set is a flag of the same name (``num_envs`` -> ``--num-envs``),
with the field's help text (``flag_help``: without the schema's note on what ``None`` means, which a flag cannot
be given; a flag writes it as 0 or a word instead); ``seed`` is the commands' own ``--seed``/``--seeds``. Values
are checked by the schema, and its errors are reported with flag names.

Plain Python on purpose, like the schema: the command line builds its flags from here before any command runs,
so ``brax-bridge --help`` answers without importing JAX or torch. Presets and the trainers' keyword arguments are
in ``configuration``.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from typing import Any

from brax_core.training.agents.ppo import config as schema
from brax_core.training.agents.ppo.config import FieldSpec

TRAINERS = schema.TRAINERS
FIELDS: tuple[FieldSpec, ...] = tuple(spec for spec in schema.SPECS if spec.command_line)
BY_NAME: dict[str, FieldSpec] = {spec.name: spec for spec in FIELDS}

# Where a preset leaves a field unset, the command line starts from Brax's locomotion recipe rather than
# ppo.train's defaults (one env, batches of 32: right for a library call, too small for a command-line run),
# and keeps the newest few checkpoints (enough to resume, bounded on disk). A preset replaces these; a flag both.
COMMAND_LINE_DEFAULTS: dict[str, Any] = {
    "num_timesteps": 1_000_000,
    "num_envs": 2048,
    "num_evals": 10,
    "learning_rate": 3e-4,
    "entropy_cost": 1e-2,
    "discounting": 0.97,
    "unroll_length": 5,
    "batch_size": 1024,
    "num_minibatches": 32,
    "num_updates_per_batch": 4,
    "reward_scaling": 10.0,
    "normalize_observations": True,
    "deterministic_eval": True,
    "max_to_keep": 3,
}


# The sections of `--help` that list the hyperparameter flags, in order, each with its fields in order. A field
# missing here is listed under OTHER.
GROUPS: dict[str, tuple[str, ...]] = {
    "run length and batch sizes": (
        "num_timesteps", "episode_length", "action_repeat", "num_envs", "unroll_length", "batch_size",
        "num_minibatches", "num_updates_per_batch", "num_resets_per_eval",
    ),
    "optimisation": (
        "learning_rate", "max_grad_norm", "learning_rate_schedule", "desired_kl", "learning_rate_schedule_min_lr",
        "learning_rate_schedule_max_lr",
    ),
    "losses": (
        "discounting", "gae_lambda", "reward_scaling", "entropy_cost", "clipping_epsilon", "clipping_epsilon_value",
        "vf_loss_coefficient", "normalize_advantage", "bootstrap_on_timeout", "use_distributional_critic",
    ),
    "observation normalisation": (
        "normalize_observations", "normalize_observations_std_eps", "normalize_observations_mode",
        "normalize_until_count",
    ),
    "networks": (
        "policy_hidden_layer_sizes", "value_hidden_layer_sizes", "activation", "num_quantiles", "policy_obs_key",
        "value_obs_key",
    ),
    "policy distribution": (
        "distribution_type", "noise_std_type", "init_noise_std", "state_dependent_std", "mean_clip_scale",
    ),
    "evaluation": ("num_evals", "num_eval_envs", "deterministic_eval"),
    "logging and checkpoints": ("log_training_metrics", "training_metrics_steps", "max_to_keep"),
    "execution": ("use_pmap_on_reset", "torch_compile"),
}
OTHER = "other"


def grouped() -> dict[str, list[FieldSpec]]:
    """Every flag's field under its group (``GROUPS``'s order, then ``OTHER`` for fields no group names)."""
    groups: dict[str, list[FieldSpec]] = {group: [BY_NAME[name] for name in names if name in BY_NAME]
                                          for group, names in GROUPS.items()}
    named = {name for names in GROUPS.values() for name in names}
    groups[OTHER] = [spec for spec in FIELDS if spec.name not in named]
    return {group: specs for group, specs in groups.items() if specs}


# Optional numbers whose flag takes 0 for None (a flag cannot be given "None").
ZERO_MEANS_NONE = ("max_grad_norm", "clipping_epsilon_value", "normalize_until_count", "mean_clip_scale")
# Optional integers whose flag takes a word for None, where 0 would read as a number (no checkpoints kept).
NONE_WORDS: dict[str, str] = {"max_to_keep": "all"}
# The schema's note on what None (or, for a switch, leaving it unset) means: "(None: no clipping)".
_UNSET_NOTE = re.compile(r" \((?:None|unset): ([^()]*)\)")


class HParamError(ValueError):
    """A bad hyperparameter; the message names the flag and what it accepts."""


def default(name: str) -> Any:
    """The value a run gets without a preset or flag setting ``name``."""
    return COMMAND_LINE_DEFAULTS.get(name, schema.defaults().get(name))


def defaults() -> dict[str, Any]:
    """Every flag's value without a preset or flag."""
    return {name: default(name) for name in BY_NAME}


def flag_help(spec: FieldSpec) -> str:
    """The field's help as its flag shows it: the schema's text without its note on what ``None`` means (the flag
    says that with the value it takes instead: ``unset_meaning``)."""
    return _UNSET_NOTE.sub("", spec.help)


def unset_meaning(spec: FieldSpec) -> str | None:
    """What ``None`` means for the field, from the schema's help ("no clipping"), or ``None`` if it says nothing."""
    match = _UNSET_NOTE.search(spec.help)
    return match.group(1) if match else None


def _none_word(name: str, value: Any) -> Any:
    """A ``NONE_WORDS`` field's value: its word (any case) -> ``None``; an integer, or its text, at least the field's
    minimum; anything else refused, naming the flag and both accepted forms."""
    spec, word = BY_NAME[name], NONE_WORDS[name]
    given = value
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == word:
            return None
        try:
            value = int(text)
        except ValueError:
            pass
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= (spec.minimum or 0):
        return int(value)
    raise HParamError(f"{spec.flag} must be an integer {spec.accepted(flags=True)} or {word}; got {given!r}")


def parse_sizes(text: str | Any, name: str = "sizes") -> tuple[int, ...]:
    """``"64,64"`` (or a sequence of ints) -> ``(64, 64)``, refusing empty, non-integer and non-positive sizes."""
    flag = BY_NAME[name].flag if name in BY_NAME else name
    if isinstance(text, str):
        parts = [p.strip() for p in text.replace(" ", ",").split(",") if p.strip()]
        try:
            sizes = tuple(int(p) for p in parts)
        except ValueError:
            raise HParamError(f"{flag} must be comma-separated positive integers like 64,64; got {text!r}") from None
        if not sizes:  # the schema allows no hidden layers; an empty flag is far more likely a typo
            raise HParamError(f"{flag} must be one or more positive integers like 64,64; got {text!r}")
        return sizes
    return text


def from_flags(values: Mapping[str, Any]) -> dict[str, Any]:
    """Flag values in the schema's terms: sizes text parsed, 0 as None where ``ZERO_MEANS_NONE``, the word of
    ``NONE_WORDS`` as None (and an integer written as text as the integer)."""
    out = dict(values)
    for name in schema.NETWORK_FIELDS[:2]:
        if name in out:
            out[name] = parse_sizes(out[name], name)
    for name in ZERO_MEANS_NONE:
        if out.get(name) == 0:
            out[name] = None
    for name in NONE_WORDS:
        if name in out:
            out[name] = _none_word(name, out[name])
    return out


def check(name: str, value: Any) -> Any:
    """Validates (and normalises) one value, raising ``HParamError`` naming the flag and the accepted range."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise HParamError(f"unknown hyperparameter {name!r}; known: {', '.join(BY_NAME)}")
    try:
        return schema.check(spec, from_flags({name: value})[name])
    except schema.ConfigError as err:
        raise HParamError(err.flag_message) from None


def to_json(hp: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in hp.items()}
