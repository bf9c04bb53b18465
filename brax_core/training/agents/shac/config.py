"""SHAC's configuration (Short-Horizon Actor-Critic, Xu et al., ICLR 2022) as one typed object; the trainer is
``torch_analytic.shac``.

``SHACConfig(run=RunSection(num_timesteps=...), env=SHACEnv(...), algorithm=SHACAlgorithm(...),
network=SHACNetwork(...))``, built and checked as every configuration of this library
(``brax_core.training.config``). Defaults are the reference implementation's Ant and Cheetah configurations
(NVlabs/DiffRL ``cfg/shac/ant.yaml`` and ``cheetah.yaml``). Names are shared with the other algorithms where the
concept is the same (``discounting``, ``max_grad_norm``, ``learning_rate_schedule``, ``policy_hidden_layer_sizes``
for the actor, ``value_hidden_layer_sizes`` for the critic), so each is one flag of ``brax-bridge train``.

Standard library only, as every configuration: ``brax-bridge --help`` reads it without JAX or torch.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from brax_core.training.agents.apg.config import UnrolledUpdates
from brax_core.training.config import (
    ACTIVATIONS,
    Config,
    ConfigError,
    EnvSection,
    RunSection,
    Section,
    boolean,
    choice,
    field,
    integer,
    real,
)

__all__ = ["SHAC_LR_SCHEDULES", "SHACAlgorithm", "SHACConfig", "SHACEnv", "SHACNetwork", "SHACRun"]

# Both learning rates over the run: linear (from their value towards FINAL_LEARNING_RATE) or constant.
SHAC_LR_SCHEDULES = ("linear", "constant")


@dataclasses.dataclass(frozen=True)
class SHACEnv(EnvSection):
    """The environment and how many of it run at once: 64 envs, as the reference configurations."""

    num_envs: int = integer(64, "parallel training environments (across all devices)")


@dataclasses.dataclass(frozen=True)
class SHACRun(RunSection):
    """How a SHAC run goes; its trainer is torch."""

    trainer: str | None = choice(
        None, "the trainer that runs this config: torch (None: the one it is given to)", ("torch",), optional=True,
        command_line=False,
    )


@dataclasses.dataclass(frozen=True)
class SHACAlgorithm(Section):
    """SHAC's hyperparameters: the window the actor's gradient flows through, the critic's TD(lambda) fit, the
    target critic, both optimisers and their schedule."""

    SECTION: ClassVar[str] = "algorithm"

    horizon_length: int = integer(32, "env steps per window: the unroll the actor's gradient flows through")
    actor_learning_rate: float = real(2e-3, "the actor's Adam learning rate", min_open=True)
    critic_learning_rate: float = real(2e-3, "the critic's Adam learning rate", min_open=True)
    learning_rate_schedule: str = choice(
        "linear", "both learning rates over the run: linear (decayed towards 1e-5) or constant", SHAC_LR_SCHEDULES
    )
    adam_b: tuple[float, float] = field((0.7, 0.95), "both optimisers' Adam decay rates (b1, b2)", "betas")
    discounting: float = real(0.99, "discount factor gamma per policy step", maximum=1.0)
    td_lambda: float = real(0.95, "lambda of the critic's TD(lambda) targets", maximum=1.0)
    critic_iterations: int = integer(16, "passes of the critic's fit per update")
    num_critic_batches: int = integer(4, "minibatches per critic pass")
    target_critic_alpha: float = real(
        0.2, "the target critic keeps this share of its weights per update (Polyak averaging)", maximum=1.0
    )
    max_grad_norm: float = real(1.0, "clip both networks' gradients to this global norm", min_open=True)
    reward_scaling: float = real(1.0, "multiplier applied to rewards in both losses", min_open=True)
    normalize_observations: bool = boolean(True, "keep a running mean/std of observations and normalise both "
                                          "networks' inputs")
    adaptive_horizon: bool = boolean(
        False, "AHAC's adaptive horizon (Georgiev et al., ICML 2024): windows of a length learned between "
        "horizon_min and horizon_length // action_repeat policy steps, an update as many of them as horizon_length "
        "env steps hold"
    )
    horizon_min: int = integer(4, "with adaptive_horizon: the shortest window, and the first (policy steps)")
    horizon_learning_rate: float = real(2e-3, "with adaptive_horizon: the step size of the window's length",
                                        min_open=True)
    horizon_dual_learning_rate: float = real(
        1e-4, "with adaptive_horizon: the step size of the dual variable that holds the window's length down",
        min_open=True,
    )


@dataclasses.dataclass(frozen=True)
class SHACNetwork(Section):
    """The actor (a tanh-normal policy) and the critic: MLPs."""

    SECTION: ClassVar[str] = "network"

    policy_hidden_layer_sizes: tuple[int, ...] = field((128, 64, 32), "the actor's hidden sizes, e.g. 128,64,32",
                                                       "sizes")
    value_hidden_layer_sizes: tuple[int, ...] = field((64, 64), "the critic's hidden sizes, e.g. 64,64", "sizes")
    activation: str = field("elu", "hidden-layer activation of both networks", "activation", choices=ACTIVATIONS)
    layer_norm: bool = boolean(True, "layer normalisation after each hidden layer of both networks")


@dataclasses.dataclass(frozen=True)
class SHACConfig(UnrolledUpdates, Config):
    """A SHAC run's configuration by concern, validated on construction (``ConfigError`` names what is wrong)."""

    ALGO: ClassVar[str] = "shac"

    run: SHACRun
    env: SHACEnv = dataclasses.field(default_factory=SHACEnv)
    algorithm: SHACAlgorithm = dataclasses.field(default_factory=SHACAlgorithm)
    network: SHACNetwork = dataclasses.field(default_factory=SHACNetwork)

    def check_together(self) -> None:
        super().check_together()
        states = self.policy_steps_per_update * self.env.num_envs
        if self.algorithm.adaptive_horizon and self.algorithm.horizon_min > self.policy_steps_per_update:
            raise ConfigError(
                f"horizon_min ({self.algorithm.horizon_min}) must be at most the policy steps of horizon_length "
                f"({self.policy_steps_per_update}: horizon_length // action_repeat)",
                f"--horizon-min ({self.algorithm.horizon_min}) must be at most --horizon-length // --action-repeat "
                f"({self.policy_steps_per_update})",
                ("horizon_min", "horizon_length"),
            )
        if self.algorithm.adaptive_horizon:
            states = self.algorithm.horizon_min * self.env.num_envs  # the shortest window's states
        if self.algorithm.num_critic_batches > states:
            raise ConfigError(
                f"num_critic_batches ({self.algorithm.num_critic_batches}) must be at most the states of a window, "
                f"horizon_length // action_repeat * num_envs ({states})",
                f"--num-critic-batches ({self.algorithm.num_critic_batches}) must be at most the states of a "
                f"window, --horizon-length // --action-repeat x --num-envs ({states})",
                ("num_critic_batches", "horizon_length", "num_envs"),
            )
