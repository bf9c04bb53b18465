"""The command line's view of the algorithms' configurations (``algorithms.CONFIGS``: PPO's, APG's, SHAC's, SAC's).

Every configuration field with ``command_line`` set is a flag of the same name (``num_envs`` -> ``--num-envs``),
one flag per name across the algorithms, with the field's help text (``flag_help``: without the schema's note on
what ``None`` means, which a flag cannot be given; a flag writes it as 0 or a word instead); ``seed`` is the
commands' own ``--seed``/``--seeds``. Values are checked by the chosen algorithm's configuration, and its errors are
reported with flag names.

Plain Python on purpose, like the schema: the command line builds its flags from here before any command runs,
so ``brax-bridge --help`` answers without importing JAX or torch. Presets and the trainers' keyword arguments are
in ``configuration``.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from typing import Any

from brax_bridge_app import algorithms
from brax_core.training.agents.ppo import config as schema
from brax_core.training.validation import TRAINERS, FieldSpec  # noqa: F401  (TRAINERS: the commands' names)


# Every algorithm's flags, each name once (the first algorithm's spec for the help; values are checked by the
# chosen algorithm's own: ``check``).
def _union() -> tuple[FieldSpec, ...]:
    first: dict[str, FieldSpec] = {}
    for config in algorithms.CONFIGS.values():
        for spec in config.specs():
            if spec.command_line:
                first.setdefault(spec.name, spec)
    return tuple(first.values())


FIELDS: tuple[FieldSpec, ...] = _union()
BY_NAME: dict[str, FieldSpec] = {spec.name: spec for spec in FIELDS}


# The sections of `--help` that list the hyperparameter flags, in order, each with its fields in order. A field
# missing here is listed under OTHER.
GROUPS: dict[str, tuple[str, ...]] = {
    "run length and batch sizes": (
        "num_timesteps", "episode_length", "training_episode_length", "action_repeat", "num_envs", "unroll_length",
        "horizon_length", "batch_size", "num_minibatches", "num_updates_per_batch", "num_resets_per_eval",
    ),
    "optimisation": (
        "learning_rate", "actor_learning_rate", "critic_learning_rate", "adam_b", "max_grad_norm",
        "learning_rate_schedule", "use_schedule", "schedule_decay", "desired_kl", "learning_rate_schedule_min_lr",
        "learning_rate_schedule_max_lr",
    ),
    "losses": (
        "discounting", "gae_lambda", "td_lambda", "reward_scaling", "entropy_cost", "clipping_epsilon",
        "clipping_epsilon_value", "vf_loss_coefficient", "normalize_advantage", "bootstrap_on_timeout",
        "use_distributional_critic",
    ),
    "SAC: replay buffer and targets": ("grad_updates_per_step", "tau", "min_replay_size", "max_replay_size"),
    "SHAC: critic and horizon": (
        "critic_iterations", "num_critic_batches", "target_critic_alpha", "adaptive_horizon", "horizon_min",
        "horizon_learning_rate", "horizon_dual_learning_rate",
    ),
    "observation normalisation": (
        "normalize_observations", "normalize_observations_std_eps", "normalize_observations_mode",
        "normalize_until_count", "use_float64",
    ),
    "networks": (
        "policy_hidden_layer_sizes", "value_hidden_layer_sizes", "activation", "layer_norm", "num_quantiles",
        "policy_obs_key", "value_obs_key",
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


def default(name: str, algo: str = "ppo") -> Any:
    """The value a command-line run of ``algo`` gets without a preset or flag setting ``name``."""
    return algorithms.default(algo, name)


def defaults(algo: str = "ppo") -> dict[str, Any]:
    """Every flag's value for ``algo`` without a preset or flag."""
    return algorithms.defaults(algo)


def spec_of(name: str, algo: str) -> FieldSpec:
    """``name``'s spec in ``algo``'s configuration (the union's where ``algo`` has no such field)."""
    return algorithms.CONFIGS[algo].by_name().get(name, BY_NAME[name])


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


def from_flags(values: Mapping[str, Any], algo: str = "ppo") -> dict[str, Any]:
    """Flag values in ``algo``'s configuration's terms: sizes and Adam's betas text parsed, 0 as None where
    ``ZERO_MEANS_NONE`` and the field takes None, the word of ``NONE_WORDS`` as None (and an integer written as text
    as the integer)."""
    out = dict(values)
    for name, value in values.items():
        spec = BY_NAME.get(name)
        if spec is not None and spec.kind == "sizes":
            out[name] = parse_sizes(value, name)
        elif spec is not None and spec.kind == "betas" and isinstance(value, str):
            out[name] = _parse_betas(value, name)
    for name in ZERO_MEANS_NONE:
        if out.get(name) == 0 and name in BY_NAME and spec_of(name, algo).optional:
            out[name] = None
    for name in NONE_WORDS:
        if name in out:
            out[name] = _none_word(name, out[name])
    return out


def _parse_betas(text: str, name: str) -> Any:
    parts = [p.strip() for p in text.replace(" ", ",").split(",") if p.strip()]
    try:
        return tuple(float(p) for p in parts)
    except ValueError:
        raise HParamError(f"{BY_NAME[name].flag} must be two numbers in [0, 1) like 0.9,0.999; got {text!r}") from None


def check(name: str, value: Any, algo: str = "ppo") -> Any:
    """Validates (and normalises) one value as ``algo``'s configuration takes it, raising ``HParamError`` naming the
    flag and the accepted range."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise HParamError(f"unknown hyperparameter {name!r}; known: {', '.join(BY_NAME)}")
    try:
        return schema.check(spec_of(name, algo), from_flags({name: value}, algo)[name])
    except schema.ConfigError as err:
        raise HParamError(err.flag_message) from None


def to_json(flag_values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in flag_values.items()}
