"""Dict observations for asymmetric actor-critic: ``{"state": obs, "privileged_state": more}``.

A policy that acts on what a robot senses (``state``) can be trained with a critic that also sees what only the
simulator knows (``privileged_state``); ``make_ppo_networks(policy_obs_key=, value_obs_key=)`` picks each
network's input. ``DictObservationWrapper`` gives any env such observations: ``state`` is the env's own
observation and ``privileged_state`` what ``privileged_fn(state)`` computes (by default the observation followed
by the physics state's ``qpos`` and ``qvel``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from brax_core.envs.base import Env, ObservationSize, State, Wrapper

PrivilegedFn = Callable[[State], jax.Array]


def full_physics_state(state: State) -> jax.Array:
    """The env's observation followed by the physics state's positions and velocities."""
    pipeline = state.pipeline_state
    return jnp.concatenate([state.obs, pipeline.qpos, pipeline.qvel], axis=-1)


class DictObservationWrapper(Wrapper):
    """Makes an unbatched env's array observation a dict of ``state_key`` and ``privileged_key``.

    Wrap the env itself (before the training wrappers: ``ppo.train`` and ``TorchEnv`` add those), so
    ``privileged_fn`` sees the env's own ``State`` with an array ``obs``.
    """

    def __init__(
        self,
        env: Env,
        privileged_fn: PrivilegedFn = full_physics_state,
        state_key: str = "state",
        privileged_key: str = "privileged_state",
    ):
        super().__init__(env)
        if not callable(privileged_fn):
            raise TypeError(f"privileged_fn must be callable (State -> array), got {privileged_fn!r}")
        for name, key in (("state_key", state_key), ("privileged_key", privileged_key)):
            if not isinstance(key, str) or not key:
                raise ValueError(f"{name} must be a non-empty string, got {key!r}")
        if state_key == privileged_key:
            raise ValueError(f"state_key and privileged_key must differ, both are {state_key!r}")
        self._privileged_fn = privileged_fn
        self._state_key = state_key
        self._privileged_key = privileged_key

    def _as_dict(self, state: State) -> State:
        privileged = self._privileged_fn(state)
        return state.replace(obs={self._state_key: state.obs, self._privileged_key: privileged})

    def _inner(self, state: State) -> State:
        # The wrapped env reads and writes its own array observation.
        return state.replace(obs=state.obs[self._state_key])

    def reset(self, rng: jax.Array) -> State:
        return self._as_dict(self.env.reset(rng))

    def step(self, state: State, action: jax.Array) -> State:
        return self._as_dict(self.env.step(self._inner(state), action))

    @property
    def observation_size(self) -> ObservationSize:
        # Read from the observations themselves (abstract evaluation of reset, cached), not the wrapped env's int.
        return Env.observation_size.fget(self)
