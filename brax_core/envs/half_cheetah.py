"""``halfcheetah``: make a planar two-legged cheetah run forward (+x).

* Observation (17): ``qpos[1:]`` then ``qvel`` — the forward position ``rootx`` is left out so the policy
  cannot see how far it has run.

  ===========  ====================================================================
  index        meaning
  ===========  ====================================================================
  0            torso height ``rootz`` (m, relative to the 0.7 m start)
  1            torso pitch ``rooty`` (rad)
  2 - 4        back thigh, shin, foot angles (rad)
  5 - 7        front thigh, shin, foot angles (rad)
  8, 9, 10     torso x velocity, z velocity (m/s), pitch rate (rad/s)
  11 - 13      back thigh, shin, foot angular velocities (rad/s)
  14 - 16      front thigh, shin, foot angular velocities (rad/s)
  ===========  ====================================================================

* Action (6): motor controls in ``[-1, 1]`` for back thigh, back shin, back foot, front thigh, front shin,
  front foot (gears 120, 90, 60, 120, 60, 30 N m).
* Reward: ``forward_reward_weight * x_velocity - ctrl_cost_weight * sum(action**2)``, where ``x_velocity`` is
  the torso's x displacement over the step divided by ``dt`` (weights 1.0 and 0.1).
* Termination: none in normal play (the standard task has no failure state); the episode is ended only if
  the physics state stops being finite. Episodes otherwise end by the time limit.
* Reset: ``qpos`` uniform in ``qpos0 ± reset_noise_scale``, ``qvel`` normal with standard deviation
  ``reset_noise_scale`` (0.1).
* Metrics: ``x_position``, ``x_velocity``, ``reward_run``, ``reward_ctrl``.
* Defaults: ``episode_length`` 1000, ``n_frames`` 5, physics timestep 0.01 s, so ``dt`` 0.05 s.
* Physics check (``tests/test_envs_cheetah_ant_humanoid.py``): MJX and native ``mujoco.mj_step`` on the same model, same
  controls, same start agree within 1e-4 on ``qpos`` and 2e-3 on ``qvel`` (absolute) over 25 physics steps
  (float32 MJX against float64 MuJoCo); with the solve converged, MJX in float64 agrees within 1e-10 over 100 steps
  (slow test). The shipped single solver iteration stops the line search early, where MJX's and MuJoCo's partial
  steps can differ, so longer runs part (the test module's docstring gives the measurements).

Differences from Brax 0.14's ``halfcheetah`` (deliberate, for speed on MJX): the constraint solver runs Newton with
1 iteration and 4 line-search steps with Euler damping disabled (Brax's model keeps MuJoCo's defaults: 4
iterations, 50 line-search steps, damping enabled), and the torso capsule collides with the floor (in Brax only the
head, thighs and feet do). Observation, reward, termination, reset and metrics are Brax's
(``tests/test_env_definitions.py`` recomputes them with Brax's formulas); the torso's x position is read from the
pipeline state as Brax's ``mjx`` backend reads it (the pose before the step's last physics step; Brax's default
``generalized`` pipeline reads the reached pose).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from brax_core.envs import _assets
from brax_core.envs.base import PipelineEnv, State

_METRICS = ("x_position", "x_velocity", "reward_run", "reward_ctrl")


class Halfcheetah(PipelineEnv):
    """Planar cheetah running on MuJoCo MJX (Brax's ``halfcheetah`` task)."""

    default_episode_length = 1000

    def __init__(
        self,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.1,
        reset_noise_scale: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
        n_frames: int = 5,
        backend: str = "mjx",
        **kwargs,
    ):
        sys, mj_model = _assets.load("halfcheetah")
        super().__init__(sys, backend=backend, n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._forward_reward_weight = float(forward_reward_weight)
        self._ctrl_cost_weight = float(ctrl_cost_weight)
        self._reset_noise_scale = float(reset_noise_scale)
        self._exclude_current_positions = bool(exclude_current_positions_from_observation)

    def reset(self, rng: jax.Array) -> State:
        pipeline_state = self.perturbed_init(rng, self._reset_noise_scale, qvel_noise="normal")
        zero = jnp.zeros((), jnp.float32)
        metrics = {name: zero for name in _METRICS}
        return State(pipeline_state, self._get_obs(pipeline_state), zero, zero, metrics)

    def step(self, state: State, action: jax.Array) -> State:
        before = state.pipeline_state
        pipeline_state = self.pipeline_step(before, action)
        # body 1 is the torso (body 0 is the world)
        x_velocity = (pipeline_state.xpos[1, 0] - before.xpos[1, 0]) / self.dt
        forward_reward = self._forward_reward_weight * x_velocity
        ctrl_cost = self._ctrl_cost_weight * jnp.sum(jnp.square(action))
        obs = self._get_obs(pipeline_state)
        f32 = lambda x: jnp.asarray(x, jnp.float32)
        metrics = {
            **state.metrics,
            "x_position": f32(pipeline_state.xpos[1, 0]),
            "x_velocity": f32(x_velocity),
            "reward_run": f32(forward_reward),
            "reward_ctrl": f32(-ctrl_cost),
        }
        return self.end_if_diverged(
            state.replace(
                pipeline_state=pipeline_state,
                obs=obs,
                reward=f32(forward_reward - ctrl_cost),
                done=jnp.zeros((), jnp.float32),
                metrics=metrics,
            )
        )

    def _get_obs(self, pipeline_state) -> jax.Array:
        qpos = pipeline_state.qpos[1:] if self._exclude_current_positions else pipeline_state.qpos
        return jnp.concatenate([qpos, pipeline_state.qvel])
