"""Types shared by the training code (``brax.training.types`` counterpart)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import jax

Params = Any
PRNGKey = jax.Array
Metrics = Mapping[str, jax.Array]
Observation = jax.Array | Mapping[str, jax.Array]
ObservationSize = int | Mapping[str, tuple[int, ...] | int]
Action = jax.Array
Extra = Mapping[str, Any]
PreprocessorParams = Any
PolicyParams = tuple[PreprocessorParams, Params]
NetworkType = Any


class Transition(NamedTuple):
    """A batch of environment transitions.

    ``extras`` carries ``{'policy_extras': {'raw_action', 'log_prob'}, 'state_extras': {'truncation', ...}}``
    for PPO.
    """

    observation: Observation
    action: Action
    reward: jax.Array
    discount: jax.Array
    next_observation: Observation
    extras: Extra = ()  # type: ignore[assignment]


class Policy(Protocol):
    def __call__(self, observation: Observation, key: PRNGKey) -> tuple[Action, Extra]: ...


class PreprocessObservationFn(Protocol):
    def __call__(self, observation: Observation, preprocessor_params: PreprocessorParams) -> jax.Array: ...


def identity_observation_preprocessor(observation: Observation, preprocessor_params: PreprocessorParams) -> Observation:
    """Leaves observations as they are (the default when no normaliser is used)."""
    del preprocessor_params
    return observation
