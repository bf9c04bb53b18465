"""``fast``: a trivial point-mass task with no physics engine, for tests.

* Observation (2): ``[position, velocity]``.
* Action (1): acceleration in ``[-1, 1]``.
* Reward: ``1 - min(|position|, 1)`` — largest at the origin; a random policy drifts off and scores about
  0.3 per step over a 100-step episode, a good one holds about 0.95.
* Termination: never (episodes end only by the time limit).
* Reset: position uniform in ``[-1, 1]``, velocity 0.
* Defaults: ``episode_length`` 100 for tests; ``dt`` 0.05 (no frames: the update is closed-form).

Differences from Brax 0.14's ``fast`` (a different task): Brax's ``fast`` starts at rest at 0 and pays the position
reached (accelerating right every step is optimal); this one is a damped point mass rewarded for staying at the
origin, with a random start and a ``distance`` metric.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from brax_core.envs.base import Env, State


@struct.dataclass
class FastPipelineState:
    """Physics-like state with the field names research code reads from MJX data."""

    qpos: jax.Array
    qvel: jax.Array


class Fast(Env):
    """A one-dimensional point mass driven toward the origin (no MJX; compiles in milliseconds)."""

    default_episode_length = 100

    def __init__(self, dt: float = 0.05, **kwargs):
        del kwargs  # accepted for registry compatibility
        self._dt = float(dt)

    @property
    def dt(self) -> jax.Array:
        return jnp.float32(self._dt)

    def reset(self, rng: jax.Array) -> State:
        position = jax.random.uniform(rng, (1,), jnp.float32, -1.0, 1.0)
        pipeline_state = FastPipelineState(qpos=position, qvel=jnp.zeros((1,), jnp.float32))
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state, self._obs(pipeline_state), zero, zero, metrics={"distance": jnp.abs(position[0])})

    def step(self, state: State, action: jax.Array) -> State:
        accel = jnp.clip(action.astype(jnp.float32), -1.0, 1.0)
        velocity = jnp.clip(state.pipeline_state.qvel * 0.9 + accel * self._dt * 10.0, -2.0, 2.0)
        position = state.pipeline_state.qpos + velocity * self._dt
        pipeline_state = FastPipelineState(qpos=position, qvel=velocity)
        distance = jnp.abs(position[0])
        reward = 1.0 - jnp.minimum(distance, 1.0)
        metrics = dict(state.metrics, distance=distance)
        obs = self._obs(pipeline_state)
        return state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, metrics=metrics)

    @staticmethod
    def _obs(pipeline_state: FastPipelineState) -> jax.Array:
        return jnp.concatenate([pipeline_state.qpos, pipeline_state.qvel])

    @property
    def observation_size(self) -> int:
        return 2

    @property
    def action_size(self) -> int:
        return 1
