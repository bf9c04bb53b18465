"""PPO's configuration as one typed object: ``PPOConfig``, four frozen sections by concern, validated on
construction.

``PPOConfig(env=EnvConfig(...), algorithm=AlgorithmConfig(...), network=NetworkConfig(...), run=RunConfig(...))``:

- ``env``: what is trained on and how many of it (the env's name, episode length, action repeat, env counts);
- ``algorithm``: PPO's hyperparameters (optimiser, losses, batch sizes, observation normalisation);
- ``network``: the policy and value networks (``make_ppo_networks``' arguments);
- ``run``: how a run goes (its length, seed, evaluations, checkpoints, which trainer, on which device).

This one object is what the command line parses its flags into, what a run folder's ``config.json`` and a
``--config`` file hold (``to_json`` / ``from_json``) and what both trainers train (``ppo.train.train_from_config``,
``torch_ppo.train_from_config``). Brax's keyword signature (``ppo.train.train(num_envs=..., learning_rate=...)``)
and torch_ppo's are thin translations onto it (``from_flat``): every field name is unique across the sections, so a
flat keyword names one field.

Each field carries Brax's default (the JAX ``train`` default), a help text and a ``FieldSpec`` (kind, range,
whether ``None`` is allowed, choices, which trainers take it) in its metadata. Each section checks its fields in
``__post_init__`` and ``PPOConfig`` the rules between fields, so a config that exists is valid.

Standard library only on purpose: the command line imports this module to build ``brax-bridge --help``, which
must answer without loading JAX or torch.

Errors name the field and what it accepts in two vocabularies: ``str(error)`` speaks of Python keyword
arguments (``num_envs must be a positive integer, got 0``); ``error.flag_message`` of command-line flags
(``--num-envs must be >= 1; got 0``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from brax_core.training.agents.ppo import adaptive_kl
from brax_core.training.config import (
    ACTIVATIONS,
    Config,
    EnvSection,
    RunSection,
    Section,
    boolean,
    choice,
    field,
    integer,
    real,
)
from brax_core.training.validation import TRAINERS, ConfigError, FieldSpec, check

# make_ppo_networks' distribution_type and noise_std_type values (both trainers build the same policies).
DISTRIBUTION_TYPES = ("normal", "tanh_normal")
NOISE_STD_TYPES = ("scalar", "log")
# Running-statistics algorithms (brax_core.training.acme.running_statistics, torch_training.normalizer).
NORMALIZATION_MODES = ("welford", "ema")
# PPO's learning-rate schedules ('NONE' is the same as None: the constant learning_rate).
PPO_LR_SCHEDULES = (adaptive_kl.NAME, "NONE")

__all__ = [
    "ACTIVATIONS", "BY_NAME", "DISTRIBUTION_TYPES", "KEYWORD_FIELDS", "NETWORK_FIELDS", "NOISE_STD_TYPES",
    "NORMALIZATION_MODES", "PPO_LR_SCHEDULES", "SECTIONS", "SECTION_OF", "SPECS", "TRAINERS", "AlgorithmConfig",
    "ConfigError", "EnvConfig", "FieldSpec", "NetworkConfig", "PPOConfig", "RunConfig", "check", "defaults",
    "fields_of_train_kwargs",
]

_int, _real, _bool, _choice, _field = integer, real, boolean, choice, field


@dataclasses.dataclass(frozen=True)
class EnvConfig(EnvSection):
    """What is trained on: the environment and how many of it run at once."""

    num_resets_per_eval: int = _int(0, "environment resets between evaluations (0: never reset)", minimum=0,
                                    trainers=("jax",))


@dataclasses.dataclass(frozen=True)
class AlgorithmConfig(Section):
    """PPO's hyperparameters: optimiser, losses, batch sizes and observation normalisation."""

    SECTION: ClassVar[str] = "algorithm"

    learning_rate: float = _real(1e-4, "Adam learning rate", min_open=True)
    entropy_cost: float = _real(1e-4, "weight of the entropy bonus")
    discounting: float = _real(0.9, "discount factor gamma", maximum=1.0)
    unroll_length: int = _int(10, "steps per unroll of every environment (the PPO loss uses unrolls this long)")
    batch_size: int = _int(32, "unrolls per minibatch SGD step")
    num_minibatches: int = _int(16, "minibatches per pass over a batch (a training step collects batch_size * "
                                    "num_minibatches unrolls)")
    num_updates_per_batch: int = _int(2, "passes (update epochs) over each collected batch")
    normalize_observations: bool = _bool(False, "keep a running mean/std of observations and normalise network inputs")
    normalize_observations_std_eps: float = _real(
        0.0, "added to the observation variance under the square root of the normaliser's std"
    )
    normalize_observations_mode: str = _choice(
        "welford", "running-statistics algorithm: welford (summed squared deviations) or ema (the variance itself, "
        "merged at rate batch/count; steadier over long runs)", NORMALIZATION_MODES,
    )
    normalize_until_count: int | None = _int(
        None, "stop updating the observation statistics once a batch would take their count past this many "
        "observations (None: never stop)", optional=True,
    )
    reward_scaling: float = _real(1.0, "multiplier applied to rewards in the loss", min_open=True)
    clipping_epsilon: float = _real(0.3, "PPO ratio clipping", min_open=True)
    clipping_epsilon_value: float | None = _real(
        None, "clip the value update to this distance from the collection-time value (the larger of the clipped "
        "and unclipped squared errors is used); with the distributional critic, the quantile Huber loss's kappa "
        "(None: no clipping)", min_open=True, optional=True,
    )
    gae_lambda: float = _real(0.95, "GAE lambda", maximum=1.0)
    max_grad_norm: float | None = _real(
        None, "clip gradients to this global norm (None: no clipping)", min_open=True,
        optional=True,
    )
    normalize_advantage: bool = _bool(True, "standardise advantages per minibatch")
    vf_loss_coefficient: float = _real(0.5, "value-loss weight")
    bootstrap_on_timeout: bool = _bool(False, "bootstrap time-limit steps from the true final observation")
    use_distributional_critic: bool = _bool(
        False, "quantile critic: the value network outputs num_quantiles quantiles trained with the quantile "
        "Huber loss (needs clipping_epsilon_value as kappa); their mean is the value"
    )
    desired_kl: float = _real(0.01, "target KL(behaviour || current policy) of the ADAPTIVE_KL schedule", min_open=True)
    learning_rate_schedule: str | None = _choice(
        None, f"learning-rate schedule: ADAPTIVE_KL (per minibatch, divide the rate by {adaptive_kl.FACTOR} when the "
        f"KL exceeds 2 * desired_kl, multiply by {adaptive_kl.FACTOR} when it is positive and below desired_kl / 2) or "
        "NONE (constant)",
        PPO_LR_SCHEDULES, optional=True,
    )
    learning_rate_schedule_min_lr: float = _real(
        1e-5, "the ADAPTIVE_KL schedule's lowest learning rate", min_open=True
    )
    learning_rate_schedule_max_lr: float = _real(
        1e-2, "the ADAPTIVE_KL schedule's highest learning rate", min_open=True
    )


@dataclasses.dataclass(frozen=True)
class NetworkConfig(Section):
    """The policy and value networks: ``make_ppo_networks``' arguments (the JAX trainer builds them in a
    ``network_factory``; torch_ppo takes them by name)."""

    SECTION: ClassVar[str] = "network"

    policy_hidden_layer_sizes: tuple[int, ...] = _field((32,) * 4, "policy MLP hidden sizes, e.g. 32,32,32,32", "sizes")
    value_hidden_layer_sizes: tuple[int, ...] = _field((256,) * 5, "value MLP hidden sizes, e.g. 256,256,256", "sizes")
    activation: str | Callable[..., Any] = _field("swish", "hidden-layer activation", "activation", choices=ACTIVATIONS)
    num_quantiles: int = _int(32, "quantiles the distributional critic outputs (with use_distributional_critic)")
    distribution_type: str = _field(
        "tanh_normal", "policy distribution: tanh-squashed normal, or normal with a learned std", "choice",
        choices=DISTRIBUTION_TYPES,
    )
    noise_std_type: str = _field(
        "scalar", "normal policy: learn the std itself (scalar) or its log", "choice", choices=NOISE_STD_TYPES
    )
    init_noise_std: float = _real(1.0, "normal policy: the std its parameter starts at", min_open=True)
    state_dependent_std: bool = _bool(False, "normal policy: the std is a linear head on the hidden features")
    mean_clip_scale: float | None = _real(
        None, "normal policy: squash the mean into (-s, s) (None: unclipped)", min_open=True, optional=True
    )
    policy_obs_key: str = _field("state", "dict observations: the key the policy reads", "name")
    value_obs_key: str = _field(
        "state", "dict observations: the key the value network reads (e.g. privileged_state)", "name"
    )


@dataclasses.dataclass(frozen=True)
class RunConfig(RunSection):
    """How a run goes: its length and seed, evaluations, metrics, checkpoints, and where it runs."""

    log_training_metrics: bool = _bool(False, "stream training metrics between evaluations")
    training_metrics_steps: int | None = _int(
        None, "env steps between training-metric reports (None: every training step)", optional=True
    )
    use_pmap_on_reset: bool = _bool(
        True, "Brax's choice of pmap over jit(vmap) for resets; resets here always run as one compiled call per "
        "device, so both values train the same"
    )
    torch_compile: bool | None = _bool(
        None,
        "compile torch_ppo's minibatch step with torch.compile (unset: when the run is long enough to repay it)",
        optional=True,
        trainers=("torch",),
    )


@dataclasses.dataclass(frozen=True)
class PPOConfig(Config):
    """A PPO run's configuration by concern, validated on construction (``ConfigError`` names what is wrong).

    Field names, meanings and defaults are those of ``brax_core.training.agents.ppo.train.train``'s keyword
    arguments (the network fields: ``make_ppo_networks``'), each in one section; ``run`` is required because its
    ``num_timesteps`` is. ``from_flat`` builds one from those keywords, ``flat`` gives them back (the methods of
    ``brax_core.training.config.Config``).
    """

    ALGO: ClassVar[str] = "ppo"

    run: RunConfig
    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    algorithm: AlgorithmConfig = dataclasses.field(default_factory=AlgorithmConfig)
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)

    def check_together(self) -> None:
        _check_together(self)

    @classmethod
    def from_train_kwargs(cls, kwargs: Mapping[str, Any]) -> PPOConfig:
        """A config from ``ppo.train`` keyword arguments, e.g. a preset (see ``fields_of_train_kwargs``)."""
        return cls.from_flat(fields_of_train_kwargs(kwargs))


SECTIONS: dict[str, type] = PPOConfig.sections()
SPECS: tuple[FieldSpec, ...] = PPOConfig.specs()
BY_NAME: dict[str, FieldSpec] = PPOConfig.by_name()
SECTION_OF: dict[str, str] = {spec.name: spec.section for spec in SPECS}
NETWORK_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(NetworkConfig))
# The fields the trainers' keyword signatures take (Brax's and torch_ppo's); the rest are the command line's own
# settings (its --env, --trainer, --device, --preset), which a trainer receives in a PPOConfig.
KEYWORD_FIELDS: tuple[str, ...] = tuple(
    spec.name for spec in SPECS if spec.name not in ("name", "trainer", "device", "preset")
)


def fields_of_train_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``ppo.train`` keyword arguments (e.g. a preset) as schema fields, not yet validated: a ``network_factory``
    partial is unpacked into the network fields. Keywords the schema does not hold are refused, naming them,
    since a setting that a config cannot carry would be lost silently."""
    values = dict(kwargs)
    factory = values.pop("network_factory", None)
    if factory is not None:
        keywords = dict(getattr(factory, "keywords", None) or {})
        # Brax sets the distributional critic twice (train and make_ppo_networks); here it is one train field.
        if "use_distributional_critic" in keywords:
            in_factory = keywords.pop("use_distributional_critic")
            given = values.setdefault("use_distributional_critic", in_factory)
            if given != in_factory:
                raise ConfigError(
                    f"use_distributional_critic={given!r} but network_factory sets use_distributional_critic="
                    f"{in_factory!r}; they must agree",
                    f"the preset sets use_distributional_critic to {given!r} and {in_factory!r} in its "
                    "network_factory; they must agree",
                    ("use_distributional_critic",),
                )
        extra = sorted(set(keywords) - set(NETWORK_FIELDS))
        if extra:
            raise ConfigError(
                f"network_factory sets {extra}; PPOConfig holds only {', '.join(NETWORK_FIELDS)}",
                f"the preset's network_factory sets {extra}; the command line handles {', '.join(NETWORK_FIELDS)}",
                ("network_factory",),
            )
        values.update(keywords)
    PPOConfig.refuse_unknown(values)
    return values


def defaults() -> dict[str, Any]:
    """Each field's default by name (``num_timesteps`` has none: it is absent)."""
    return PPOConfig.defaults()


def _check_together(config: PPOConfig) -> None:
    """Rules between fields, each in one place."""
    algorithm, env = config.algorithm, config.env
    if algorithm.use_distributional_critic and algorithm.clipping_epsilon_value is None:
        raise ConfigError(
            "use_distributional_critic=True needs clipping_epsilon_value (the quantile Huber loss's kappa), "
            "got None",
            "--use-distributional-critic needs --clipping-epsilon-value (the quantile Huber loss's kappa)",
            ("use_distributional_critic", "clipping_epsilon_value"),
        )
    low, high = algorithm.learning_rate_schedule_min_lr, algorithm.learning_rate_schedule_max_lr
    if low > high:
        raise ConfigError(
            f"learning_rate_schedule_min_lr ({low}) must not exceed learning_rate_schedule_max_lr ({high})",
            f"--learning-rate-schedule-min-lr ({low:g}) must not exceed --learning-rate-schedule-max-lr ({high:g})",
            ("learning_rate_schedule_min_lr", "learning_rate_schedule_max_lr"),
        )
    product = algorithm.batch_size * algorithm.num_minibatches
    if product % env.num_envs != 0:
        raise ConfigError(
            f"batch_size * num_minibatches ({algorithm.batch_size} * {algorithm.num_minibatches} = {product}) must "
            f"be divisible by num_envs ({env.num_envs})",
            f"--batch-size x --num-minibatches ({algorithm.batch_size} x {algorithm.num_minibatches} = {product}) "
            f"must be divisible by --num-envs ({env.num_envs})",
            ("batch_size", "num_minibatches", "num_envs"),
        )
    # One training step's env steps are counted in a uint32 pair's low word.
    steps = product * algorithm.unroll_length * env.action_repeat
    if steps >= 1 << 32:
        raise ConfigError(
            f"one training step would take {steps} env steps (batch_size * num_minibatches * unroll_length * "
            "action_repeat); keep it below 2**32",
            f"one training step would take {steps} env steps (--batch-size x --num-minibatches x --unroll-length x "
            "--action-repeat); keep it below 2**32",
            ("batch_size", "num_minibatches", "unroll_length", "action_repeat"),
        )
