"""APG's configuration as one typed object, for both trainers of the analytic policy gradient: the JAX APG
(``brax_core.training.agents.apg.train``) and the torch one (``torch_analytic.apg``).

``APGConfig(run=RunSection(num_timesteps=...), env=..., algorithm=APGAlgorithm(...), network=APGNetwork(...))``,
built and checked as every configuration of this library (``brax_core.training.config``). A run's length is
``num_timesteps`` env steps, as for every algorithm, so runs of different algorithms compare at equal env steps; an
update takes ``env_steps_per_update`` of them and the run makes ``policy_updates``. Brax's keyword signature
(``policy_updates``, ``max_gradient_norm``, a ``network_factory`` partial of ``make_apg_networks``) translates onto
it in ``from_train_kwargs``.

Standard library only, as every configuration: ``brax-bridge --help`` reads it without JAX or torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from brax_core.training.config import (
    ACTIVATIONS,
    Config,
    ConfigError,
    EnvSection,
    RunSection,
    Section,
    boolean,
    field,
    integer,
    real,
)

__all__ = ["APGAlgorithm", "APGConfig", "APGNetwork", "epochs_of", "from_updates", "updates_per_epoch"]


@dataclasses.dataclass(frozen=True)
class APGAlgorithm(Section):
    """APG's hyperparameters: the unroll the gradient flows through, Adam and its schedule, clipping."""

    SECTION: ClassVar[str] = "algorithm"

    horizon_length: int = integer(32, "env steps per policy update: the unroll the gradient flows through")
    learning_rate: float = real(1e-4, "Adam learning rate (the initial one with use_schedule)", min_open=True)
    adam_b: tuple[float, float] = field((0.7, 0.95), "Adam's decay rates (b1, b2)", "betas")
    use_schedule: bool = boolean(True, "decay the learning rate by schedule_decay at every policy update")
    schedule_decay: float = real(
        0.997, "the learning rate's factor per policy update with use_schedule", maximum=1.0, min_open=True
    )
    max_grad_norm: float = real(
        1e9, "the policy gradient is scaled down to this global norm where it reaches it; each component is then "
        "clipped to [-1, 1]", min_open=True,
    )
    normalize_observations: bool = boolean(False, "keep a running mean/std of observations and normalise the "
                                           "policy's inputs")
    use_float64: bool = boolean(False, "keep the observation statistics in float64 (needs jax_enable_x64)",
                                trainers=("jax",))
    training_episode_length: int | None = integer(
        None, "the training envs' time limit in env steps (None: episode_length); evaluations always run episodes "
        "of episode_length. Shorter training episodes start more updates' unrolls near an episode's start",
        optional=True,
    )


@dataclasses.dataclass(frozen=True)
class APGNetwork(Section):
    """The APG policy: ``make_apg_networks``' arguments."""

    SECTION: ClassVar[str] = "network"

    policy_hidden_layer_sizes: tuple[int, ...] = field((32,) * 4, "policy MLP hidden sizes, e.g. 32,32,32,32",
                                                       "sizes")
    activation: str = field("elu", "hidden-layer activation", "activation", choices=ACTIVATIONS)
    layer_norm: bool = boolean(True, "layer normalisation after each hidden layer")


def epochs_of(num_evals: int) -> int:
    """Training epochs, each followed by an evaluation (Brax's ``num_evals_after_init``)."""
    return max(num_evals - 1, 1)


def updates_per_epoch(policy_updates: int, num_evals: int) -> int:
    """Brax's share of updates per epoch: rounded to the nearest integer, halves to even."""
    return round(policy_updates / epochs_of(num_evals))


class UnrolledUpdates:
    """What a gradient algorithm's run length and sizes make, for a config whose update differentiates through an
    unroll of ``algorithm.horizon_length`` env steps of every env (APG's update, SHAC's window)."""

    @property
    def policy_steps_per_update(self) -> int:
        """Policy steps in the unroll of one update (each repeated ``action_repeat`` times in the env)."""
        return self.algorithm.horizon_length // self.env.action_repeat

    @property
    def env_steps_per_update(self) -> int:
        return self.env.num_envs * self.policy_steps_per_update * self.env.action_repeat

    @property
    def policy_updates(self) -> int:
        """Updates the run's ``num_timesteps`` pay for (at least one)."""
        return max(self.run.num_timesteps // self.env_steps_per_update, 1)

    @property
    def num_epochs(self) -> int:
        return epochs_of(self.run.num_evals)

    @property
    def updates_per_epoch(self) -> int:
        return updates_per_epoch(self.policy_updates, self.run.num_evals)

    def check_together(self) -> None:
        check_horizon(self.algorithm.horizon_length, self.env.action_repeat)
        check_updates(self.policy_updates, self.run.num_evals)


@dataclasses.dataclass(frozen=True)
class APGConfig(UnrolledUpdates, Config):
    """An APG run's configuration by concern, validated on construction (``ConfigError`` names what is wrong)."""

    ALGO: ClassVar[str] = "apg"

    run: RunSection
    env: EnvSection = dataclasses.field(default_factory=EnvSection)
    algorithm: APGAlgorithm = dataclasses.field(default_factory=APGAlgorithm)
    network: APGNetwork = dataclasses.field(default_factory=APGNetwork)

    # ---- Brax's keyword signature

    @classmethod
    def from_train_kwargs(cls, kwargs: Mapping[str, Any]) -> APGConfig:
        """A config from Brax's ``apg.train`` keywords (``policy_updates`` as ``num_timesteps`` of that many
        updates, ``max_gradient_norm`` as ``max_grad_norm``, ``hidden_layer_sizes`` as
        ``policy_hidden_layer_sizes``); other names are the config's own. Errors speak of the keywords given."""
        values = dict(kwargs)
        renamed = {"max_gradient_norm": "max_grad_norm", "hidden_layer_sizes": "policy_hidden_layer_sizes"}
        given = {new: old for old, new in renamed.items() if old in values}
        for new, old in given.items():
            values[new] = values.pop(old)
        try:
            if "policy_updates" in values:
                return from_updates(cls, values, values.pop("policy_updates"))
            return cls.from_flat(values)
        except ConfigError as err:
            message = str(err)
            for new, old in given.items():
                message = message.replace(new, old)
            raise ConfigError(message, err.flag_message, err.fields) from None


C = TypeVar("C", bound=Config)


def from_updates(config_type: type[C], values: Mapping[str, Any], policy_updates: int) -> C:
    """A configuration of a gradient algorithm (``config_type``: ``APGConfig``, ``SHACConfig``) from its fields by
    name and the run's length in ``policy_updates`` (Brax's APG's unit), as ``num_timesteps`` of that many
    updates."""
    if isinstance(policy_updates, bool) or not isinstance(policy_updates, int) or policy_updates < 1:
        raise ConfigError(f"policy_updates must be a positive integer, got {policy_updates!r}",
                          f"policy_updates must be a positive integer; got {policy_updates!r}", ("policy_updates",))
    num_evals = values.get("num_evals", 1)
    if isinstance(num_evals, int) and updates_per_epoch(policy_updates, num_evals) < 1:
        epochs = epochs_of(num_evals)
        message = (
            f"policy_updates ({policy_updates}) leaves no update for each of the {epochs} epochs that "
            f"num_evals={num_evals} makes (round(policy_updates / max(num_evals - 1, 1)) must be at least 1): pass "
            f"policy_updates >= {epochs // 2 + 1} or fewer num_evals"
        )
        raise ConfigError(message, message, ("policy_updates", "num_evals"))
    # The sizes first, checked, for the env steps of one update.
    probe = config_type.from_flat({**values, "num_timesteps": 1, "num_evals": 1})
    return config_type.from_flat({**values, "num_timesteps": policy_updates * probe.env_steps_per_update})


def check_horizon(horizon_length: int, action_repeat: int) -> None:
    if horizon_length < action_repeat:
        raise ConfigError(
            f"horizon_length ({horizon_length}) must be at least action_repeat ({action_repeat}): an update unrolls "
            "horizon_length // action_repeat policy steps",
            f"--horizon-length ({horizon_length}) must be at least --action-repeat ({action_repeat})",
            ("horizon_length", "action_repeat"),
        )


def check_updates(policy_updates: int, num_evals: int) -> None:
    """Every epoch between two evaluations needs an update of its own."""
    if updates_per_epoch(policy_updates, num_evals) < 1:
        epochs = epochs_of(num_evals)
        raise ConfigError(
            f"the run's {policy_updates} policy update(s) (num_timesteps // (num_envs * horizon_length)) leave no "
            f"update for each of the {epochs} epochs that num_evals={num_evals} makes: train longer or evaluate "
            "less often",
            f"--num-timesteps pays for {policy_updates} update(s), fewer than one per epoch of --num-evals "
            f"{num_evals} ({epochs} epochs): train longer or evaluate less often",
            ("num_timesteps", "num_evals"),
        )
