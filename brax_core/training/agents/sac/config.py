"""SAC's configuration as one typed object (``brax_core.training.config``): ``SACConfig(run=RunSection(
num_timesteps=...), env=EnvSection(...), algorithm=SACAlgorithm(...), network=SACNetwork(...))``, checked on
construction. Defaults are Brax 0.14.2's ``sac.train``'s; Brax's keyword signature (``hidden_layer_sizes`` for both
networks, a ``network_factory`` partial of ``make_sac_networks``) translates onto it in ``from_train_kwargs``.

What a run's sizes make (``prefill_actor_steps``, ``num_epochs``, ``steps_per_epoch``) is Brax's arithmetic: the
prefill collects ``min_replay_size`` transitions in whole steps of every env, then ``max(num_evals - 1, 1)`` epochs of
``steps_per_epoch`` training steps (each one env step of every env and ``grad_updates_per_step`` SGD steps) cover the
rest of ``num_timesteps``.

Standard library only, as every configuration: ``brax-bridge --help`` reads it without JAX or torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

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

__all__ = ["SACAlgorithm", "SACConfig", "SACNetwork", "check_flat_observations"]


def check_flat_observations(name: str, observation_size: Any) -> None:
    """Both SAC trainers' refusal of an env with dict observations, in the same words (``name``: the argument)."""
    if isinstance(observation_size, Mapping):
        raise ValueError(
            f"{name}: SAC's networks take a flat observation vector; this env's observations are a dict with "
            f"keys {sorted(observation_size)}"
        )


@dataclasses.dataclass(frozen=True)
class SACAlgorithm(Section):
    """SAC's hyperparameters: the optimisers, the critics' targets, the replay buffer and the SGD per env step."""

    SECTION: ClassVar[str] = "algorithm"

    learning_rate: float = real(1e-4, "the actor's and the critics' Adam learning rate (the temperature's is "
                                "3e-4)", min_open=True)
    discounting: float = real(0.9, "discount factor gamma of the critics' targets", maximum=1.0)
    batch_size: int = integer(256, "transitions per SGD step, drawn uniformly from the replay buffer")
    grad_updates_per_step: int = integer(1, "SGD steps per training step (one env step of every env)")
    reward_scaling: float = real(1.0, "multiplier applied to rewards in the critics' targets", min_open=True)
    tau: float = real(0.005, "the share of the critics the target critics take per SGD step (Polyak averaging)",
                      maximum=1.0, min_open=True)
    min_replay_size: int = integer(0, "transitions the initial policy collects before training starts", minimum=0)
    max_replay_size: int | None = integer(None, "the replay buffer's capacity in transitions (None: num_timesteps)",
                                          optional=True)
    normalize_observations: bool = boolean(False, "keep a running mean/std of observations and normalise both "
                                           "networks' inputs")
    bootstrap_on_timeout: bool = boolean(True, "targets of transitions cut by the time limit bootstrap from the "
                                         "observation reached (False: they are left out of the critics' loss)")


@dataclasses.dataclass(frozen=True)
class SACNetwork(Section):
    """The policy (tanh-normal) and the twin critics: MLPs (``make_sac_networks``' arguments)."""

    SECTION: ClassVar[str] = "network"

    policy_hidden_layer_sizes: tuple[int, ...] = field((256, 256), "policy MLP hidden sizes, e.g. 256,256", "sizes")
    value_hidden_layer_sizes: tuple[int, ...] = field((256, 256), "each critic's hidden sizes, e.g. 256,256",
                                                      "sizes")
    activation: str = field("relu", "hidden-layer activation of both networks", "activation", choices=ACTIVATIONS)
    layer_norm: bool = boolean(False, "layer normalisation after each hidden layer of both networks")


@dataclasses.dataclass(frozen=True)
class SACConfig(Config):
    """A SAC run's configuration by concern, validated on construction (``ConfigError`` names what is wrong)."""

    ALGO: ClassVar[str] = "sac"

    run: RunSection
    env: EnvSection = dataclasses.field(default_factory=EnvSection)
    algorithm: SACAlgorithm = dataclasses.field(default_factory=SACAlgorithm)
    network: SACNetwork = dataclasses.field(default_factory=SACNetwork)

    # ---- what the sizes make

    @property
    def replay_capacity(self) -> int:
        """``max_replay_size``, or the run's length where it is left unset."""
        size = self.algorithm.max_replay_size
        return self.run.num_timesteps if size is None else size

    @property
    def env_steps_per_training_step(self) -> int:
        return self.env.num_envs * self.env.action_repeat

    @property
    def prefill_actor_steps(self) -> int:
        """Steps of every env that collect ``min_replay_size`` transitions (rounded up)."""
        return -(-self.algorithm.min_replay_size // self.env.num_envs)

    @property
    def num_epochs(self) -> int:
        return max(self.run.num_evals - 1, 1)

    @property
    def steps_per_epoch(self) -> int:
        """Training steps per epoch, rounded up so the run covers ``num_timesteps``."""
        remaining = self.run.num_timesteps - self.prefill_actor_steps * self.env_steps_per_training_step
        return -(-remaining // (self.num_epochs * self.env_steps_per_training_step))

    def check_together(self) -> None:
        algorithm, num_timesteps = self.algorithm, self.run.num_timesteps
        if algorithm.min_replay_size >= num_timesteps:
            raise ConfigError(
                f"min_replay_size ({algorithm.min_replay_size}) must be less than num_timesteps ({num_timesteps}): "
                "the run would only fill the replay buffer, and no training would happen",
                f"--min-replay-size ({algorithm.min_replay_size}) must be less than --num-timesteps "
                f"({num_timesteps})",
                ("min_replay_size", "num_timesteps"),
            )
        prefill = self.prefill_actor_steps * self.env_steps_per_training_step
        if prefill >= num_timesteps:
            raise ConfigError(
                f"min_replay_size ({algorithm.min_replay_size}) takes {prefill} env steps to collect (whole steps of "
                f"num_envs = {self.env.num_envs} envs, action_repeat = {self.env.action_repeat}), not less than "
                f"num_timesteps ({num_timesteps}): no training would happen",
                f"--min-replay-size ({algorithm.min_replay_size}) takes {prefill} env steps to collect, not less "
                f"than --num-timesteps ({num_timesteps})",
                ("min_replay_size", "num_envs", "num_timesteps"),
            )
        # Left unset, the capacity is the run's length, and a short run may draw batches larger than all it holds
        # (with replacement, as Brax's tests do); one chosen smaller than a batch is a mistake.
        if algorithm.max_replay_size is not None and algorithm.max_replay_size < algorithm.batch_size:
            raise ConfigError(
                f"max_replay_size ({algorithm.max_replay_size}) is smaller than one batch: batch_size = "
                f"{algorithm.batch_size}; the replay buffer must hold at least a batch of transitions",
                f"--max-replay-size ({algorithm.max_replay_size}) is smaller than one batch: --batch-size "
                f"{algorithm.batch_size}",
                ("max_replay_size", "batch_size"),
            )
        if algorithm.min_replay_size > self.replay_capacity:
            raise ConfigError(
                f"min_replay_size ({algorithm.min_replay_size}) must be at most max_replay_size "
                f"({self.replay_capacity}): the prefill would overflow the replay buffer",
                f"--min-replay-size ({algorithm.min_replay_size}) must be at most --max-replay-size "
                f"({self.replay_capacity})",
                ("min_replay_size", "max_replay_size"),
            )
        if self.replay_capacity < self.env.num_envs:
            raise ConfigError(
                f"max_replay_size ({self.replay_capacity}) must hold one step of every env: num_envs = "
                f"{self.env.num_envs}",
                f"--max-replay-size ({self.replay_capacity}) must hold one step of every env: --num-envs "
                f"{self.env.num_envs}",
                ("max_replay_size", "num_envs"),
            )

    # ---- Brax's keyword signature

    @classmethod
    def from_train_kwargs(cls, kwargs: Mapping[str, Any]) -> SACConfig:
        """A config from Brax's ``sac.train`` keywords; ``hidden_layer_sizes`` sets both networks' sizes. Errors
        speak of the keywords given."""
        values = dict(kwargs)
        if "hidden_layer_sizes" in values:
            sizes = values.pop("hidden_layer_sizes")
            values["policy_hidden_layer_sizes"] = values["value_hidden_layer_sizes"] = sizes
        return cls.from_flat(values)

