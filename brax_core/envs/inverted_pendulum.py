"""``inverted_pendulum``: balance a pole on a cart that slides along a rail.

* Observation (4): ``[cart position, pole angle, cart velocity, pole angular velocity]`` (``qpos``, ``qvel``).
* Action (1): in ``[-1, 1]``, mapped onto the motor's control range ``[-3, 3]`` (gear 100: up to 300 N on the
  cart), as Brax maps it.
* Reward: 1 for every step the pole is up (``reward="alive"``, Brax's). Being constant, it has no gradient with
  respect to the actions: differentiating it through the physics gives exactly zero. ``reward="upright"`` gives a
  dense reward that has one: ``cos(pole angle) - 0.01 * action²`` per step.
* Termination: the pole leans more than 0.2 rad from vertical (or the state stops being finite).
* Reset: ``qpos`` and ``qvel`` uniform in ``[-0.01, 0.01]``.
* Defaults: ``episode_length`` 1000, ``n_frames`` 2 (``dt`` 0.04 s).

Differences from Brax 0.14's ``inverted_pendulum``: none in observation, action mapping, reward, termination or
reset (``tests/test_env_definitions.py`` recomputes them with Brax's formulas); the step also ends an episode whose
state stops being finite. ``info`` carries no ``'time_out'`` flag: Brax's sets it equal to ``done``, so its PPO with
``bootstrap_on_timeout`` would bootstrap a fallen pole as if the time limit had ended the episode; our trainers
read time-limit ends from the ``truncation`` flag of the episode wrapper. ``reset_noise_scale`` (Brax: fixed 0.01)
is an argument with Brax's value as its default; so is ``reward``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from brax_core.envs import _assets
from brax_core.envs.base import PipelineEnv, State

REWARDS = ("alive", "upright")
# The upright reward's action cost: small enough that holding the pole up dominates it (the action is in [-1, 1]).
_UPRIGHT_ACTION_COST = 0.01


class InvertedPendulum(PipelineEnv):
    """Cart-pole balancing on MuJoCo MJX.

    Args:
      n_frames: physics steps per env step.
      reset_noise_scale: half-width of the uniform noise on ``qpos`` and ``qvel`` at reset.
      backend: only ``'mjx'``; Brax's other pipeline names are accepted and simulated by MJX.
      reward: ``"alive"`` (default, Brax's): 1 per step, which has no gradient with respect to the actions;
        ``"upright"``: ``cos(pole angle) - 0.01 * action²``, a dense reward whose action gradient is not zero, for
        training by gradients through the physics (``TorchEnv(..., differentiable=True)``, APG, SHAC).
    """

    default_episode_length = 1000

    def __init__(
        self,
        n_frames: int = 2,
        reset_noise_scale: float = 0.01,
        backend: str = "mjx",
        reward: str = "alive",
        **kwargs,
    ):
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(map(repr, REWARDS))}; got {reward!r}")
        sys, mj_model = _assets.load("inverted_pendulum")
        super().__init__(sys, backend=backend, n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._reset_noise_scale = reset_noise_scale
        self._reward = reward

    def reset(self, rng: jax.Array) -> State:
        pipeline_state = self.perturbed_init(rng, self._reset_noise_scale)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state, self._get_obs(pipeline_state), zero, zero)

    def step(self, state: State, action: jax.Array) -> State:
        pipeline_state = self.pipeline_step(state.pipeline_state, self.action_to_ctrl(action))
        obs = self._get_obs(pipeline_state)
        fallen = jnp.abs(obs[1]) > 0.2
        done = jnp.where(fallen, 1.0, 0.0).astype(jnp.float32)
        if self._reward == "upright":
            reward = jnp.cos(obs[1]) - _UPRIGHT_ACTION_COST * jnp.sum(action**2)
        else:
            reward = jnp.ones((), jnp.float32)
        return self.end_if_diverged(state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, done=done))

    @staticmethod
    def _get_obs(pipeline_state) -> jax.Array:
        return jnp.concatenate([pipeline_state.qpos, pipeline_state.qvel])
