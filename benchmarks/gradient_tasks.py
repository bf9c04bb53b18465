"""Tasks the gradient benchmarks train on that are a registered env with other arguments, for the command line's
``--env benchmarks/gradient_tasks.py:NAME``."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from brax_core.envs.base import State
from brax_core.envs.half_cheetah import Halfcheetah
from brax_core.envs.inverted_pendulum import InvertedPendulum

_STANDARD_OBSERVATION = 17  # halfcheetah's own observation, which the tracking task extends


def inverted_pendulum_upright(**kwargs: Any) -> InvertedPendulum:
    """``inverted_pendulum`` paid ``cos(pole angle) - 0.01 * action²`` a step (``reward="upright"``): a dense reward
    whose action gradient is not zero, where the default reward's (1 a step while alive) is."""
    return InvertedPendulum(reward="upright", **kwargs)


class HalfcheetahTracking(Halfcheetah):
    """``halfcheetah`` whose six leg joints follow a reference gait: ``q_ref(t) = amplitude * sin(phase(t) + offset)``
    at ``frequency`` Hz, a gallop-like pattern (back and front legs in antiphase) within what the motors can hold
    against the joints' springs. Reward ``exp(-|q - q_ref|² / tracking_scale) - 0.01 * |action|²`` a step: dense and
    smooth in the joint angles (1 a step for exact tracking). The observation is halfcheetah's 17 values, the next
    reference pose (6) and the sine and cosine of the next phase (2); each episode starts at a random phase. Metric
    ``tracking_error``: the step's ``|q - q_ref|²``."""

    AMPLITUDE = (0.3, 0.3, 0.25, 0.3, 0.3, 0.25)
    OFFSET = (0.0, -math.pi / 2, -math.pi / 2, math.pi, math.pi / 2, math.pi / 2)

    def __init__(self, frequency: float = 1.5, tracking_scale: float = 0.1, **kwargs: Any):
        super().__init__(**kwargs)
        self._phase_step = 2 * math.pi * frequency * self.dt
        self._tracking_scale = tracking_scale

    def reference(self, phase: jax.Array) -> jax.Array:
        """The six joint angles of the reference gait at ``phase``."""
        return jnp.asarray(self.AMPLITUDE, jnp.float32) * jnp.sin(phase + jnp.asarray(self.OFFSET, jnp.float32))

    def reset(self, rng: jax.Array) -> State:
        rng, phase_key = jax.random.split(rng)
        state = super().reset(rng)
        phase = jax.random.uniform(phase_key, (), jnp.float32, 0.0, 2 * math.pi)
        metrics = {**state.metrics, "tracking_error": jnp.zeros((), jnp.float32)}
        return state.replace(obs=self._observe(state, phase), info={**state.info, "phase": phase}, metrics=metrics)

    def step(self, state: State, action: jax.Array) -> State:
        stepped = super().step(state.replace(obs=state.obs[:_STANDARD_OBSERVATION]), action)
        phase = jnp.mod(state.info["phase"] + self._phase_step, 2 * math.pi)
        error = jnp.sum(jnp.square(stepped.pipeline_state.qpos[3:] - self.reference(phase)))
        reward = jnp.exp(-error / self._tracking_scale) - 0.01 * jnp.sum(jnp.square(action))
        return stepped.replace(
            obs=self._observe(stepped, phase),
            reward=reward.astype(jnp.float32),
            info={**stepped.info, "phase": phase},
            metrics={**stepped.metrics, "tracking_error": error.astype(jnp.float32)},
        )

    def _observe(self, state: State, phase: jax.Array) -> jax.Array:
        upcoming = phase + self._phase_step
        own = state.obs[:_STANDARD_OBSERVATION]
        return jnp.concatenate([own, self.reference(upcoming), jnp.stack([jnp.sin(upcoming), jnp.cos(upcoming)])])


def halfcheetah_tracking(**kwargs: Any) -> HalfcheetahTracking:
    """``halfcheetah`` following a reference gait (``HalfcheetahTracking``): the kind of dense, smooth tracking
    reward where gradients through the physics are known to help."""
    return HalfcheetahTracking(**kwargs)
