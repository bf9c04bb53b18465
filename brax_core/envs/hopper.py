"""``hopper``: make a planar one-legged robot hop forward (+x).

* Observation (11), as Brax's and Gym's versions (``qpos[0]``, the forward position, is left out unless
  ``exclude_current_positions_from_observation=False``, which prepends it and makes 12):

  ====== =====================================================
  index  meaning
  ====== =====================================================
  0      torso height z (``qpos[1]``, m; ``rootz`` has ``ref`` 1.25 so it is the world height)
  1      torso pitch angle (``qpos[2]``, rad)
  2-4    thigh, leg (knee), foot (ankle) joint angles (``qpos[3:6]``)
  5-10   ``qvel`` (x, z velocity of the torso, pitch rate, three joint rates), each clipped to [-10, 10]
  ====== =====================================================
* Action (3): torques at the thigh, knee and ankle, each in ``[-1, 1]`` (motor gear 200).
* Reward: ``reward_forward + reward_healthy + reward_ctrl`` with

  - ``reward_forward`` = 1.0 * forward velocity of the torso, ``(x_after - x_before) / dt``,
  - ``reward_healthy`` = 1.0 on every step (also the terminating one, as in Brax and Gym; with
    ``terminate_when_unhealthy=False`` only on healthy steps),
  - ``reward_ctrl`` = -1e-3 * ``sum(action**2)``.

  ``metrics`` holds these three terms plus ``x_position`` and ``x_velocity``.
* Termination (``terminate_when_unhealthy=True``): the hopper is unhealthy when the torso height is not in
  (0.7, inf), the torso angle is not in (-0.2, 0.2) rad, or any of ``qpos[2:]``, ``qvel`` leaves (-100, 100)
  (a non-finite state is unhealthy too).
* Reset: ``qpos`` (around the standing pose, torso at 1.25 m) and ``qvel`` uniform in ``[-0.005, 0.005]``.
* Defaults: ``episode_length`` 1000, ``n_frames`` 4, timestep 0.002 s (``dt`` 0.008 s).
* Model (``assets/hopper.xml``): only foot-vs-floor contacts (2 contact points), Euler integration,
  4 Newton iterations / 8 line-search steps (the fewest with which native MuJoCo matches its fully converged solver
  over 4 x 100 random-control steps; 2 drifted by 2e-3 m).
* Physics check (``tests/test_envs_planar.py``): MJX agrees with native ``mujoco.mj_step`` on the same model, same
  controls, over 25 env steps (100 physics steps, foot contacts included) to ``qpos`` atol 1e-5, ``qvel`` atol 1e-4
  (float32 vs float64).

Brax reads the torso's x and height from its body pose; here they are ``qpos[0]`` and ``qpos[1]``, which equal
that pose (the torso frame sits on the root joints, and ``rootz``'s ``ref`` makes ``qpos[1]`` the world height).

Differences from Brax 0.14's ``hopper`` (deliberate; ``tests/test_env_definitions.py`` checks the rest against
Brax's formulas): the forward velocity, the observed height and the health test read the state the step reached,
as Brax's default ``generalized`` pipeline does (its ``mjx`` backend reads body poses one physics step late);
``metrics['x_position']`` is the torso's position at reset too (Brax reports 0 there); the step also ends an
episode whose state stops being finite.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from mujoco import mjx

from brax_core.envs import _assets
from brax_core.envs.base import PipelineEnv, State

_METRICS = ("reward_forward", "reward_ctrl", "reward_healthy", "x_position", "x_velocity")


class Hopper(PipelineEnv):
    """Planar one-legged hopper on MuJoCo MJX (``Walker2d`` reuses it with two legs)."""

    default_episode_length = 1000
    _asset = "hopper"

    def __init__(
        self,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_state_range: tuple[float, float] | None = (-100.0, 100.0),
        healthy_z_range: tuple[float, float] = (0.7, float("inf")),
        healthy_angle_range: tuple[float, float] = (-0.2, 0.2),
        reset_noise_scale: float = 5e-3,
        exclude_current_positions_from_observation: bool = True,
        n_frames: int = 4,
        backend: str = "mjx",
        **kwargs,
    ):
        sys, mj_model = _assets.load(self._asset)
        super().__init__(sys, backend=backend, n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._healthy_reward = healthy_reward
        self._terminate_when_unhealthy = terminate_when_unhealthy
        self._healthy_state_range = healthy_state_range
        self._healthy_z_range = healthy_z_range
        self._healthy_angle_range = healthy_angle_range
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions = exclude_current_positions_from_observation

    def reset(self, rng: jax.Array) -> State:
        pipeline_state = self.perturbed_init(rng, self._reset_noise_scale)
        zero = jnp.zeros((), jnp.float32)
        metrics = {name: zero for name in _METRICS}
        metrics["x_position"] = pipeline_state.qpos[0].astype(jnp.float32)
        return State(pipeline_state, self._get_obs(pipeline_state), zero, zero, metrics)

    def step(self, state: State, action: jax.Array) -> State:
        before = state.pipeline_state
        pipeline_state = self.pipeline_step(before, action)
        x_velocity = (pipeline_state.qpos[0] - before.qpos[0]) / self.dt
        reward_forward = self._forward_reward_weight * x_velocity

        healthy = self.is_healthy(pipeline_state)
        if self._terminate_when_unhealthy:
            reward_healthy = jnp.full((), self._healthy_reward, jnp.float32)
            done = jnp.where(healthy, 0.0, 1.0)
        else:
            reward_healthy = jnp.where(healthy, self._healthy_reward, 0.0)
            done = jnp.zeros((), jnp.float32)
        reward_ctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(action))

        obs = self._get_obs(pipeline_state)
        reward = reward_forward + reward_healthy + reward_ctrl
        f32 = jnp.float32
        metrics = {
            **state.metrics,
            "reward_forward": reward_forward.astype(f32),
            "reward_ctrl": reward_ctrl.astype(f32),
            "reward_healthy": reward_healthy.astype(f32),
            "x_position": pipeline_state.qpos[0].astype(f32),
            "x_velocity": x_velocity.astype(f32),
        }
        return self.end_if_diverged(
            state.replace(
                pipeline_state=pipeline_state,
                obs=obs,
                reward=reward.astype(f32),
                done=done.astype(f32),
                metrics=metrics,
            )
        )

    def is_healthy(self, pipeline_state: mjx.Data) -> jax.Array:
        """Whether the torso height, torso angle (and, if set, the whole state) are inside the healthy ranges.

        Strict inequalities throughout; a non-finite state is unhealthy.
        """
        qpos, qvel = pipeline_state.qpos, pipeline_state.qvel
        z, angle = qpos[1], qpos[2]
        (min_z, max_z), (min_angle, max_angle) = self._healthy_z_range, self._healthy_angle_range
        healthy = (z > min_z) & (z < max_z) & (angle > min_angle) & (angle < max_angle)
        healthy &= jnp.all(jnp.isfinite(qpos)) & jnp.all(jnp.isfinite(qvel))
        if self._healthy_state_range is not None:
            low, high = self._healthy_state_range
            state_vec = jnp.concatenate([qpos[2:], qvel])
            healthy &= jnp.all((state_vec > low) & (state_vec < high))
        return healthy

    def _get_obs(self, pipeline_state: mjx.Data) -> jax.Array:
        position = pipeline_state.qpos[1:] if self._exclude_current_positions else pipeline_state.qpos
        return jnp.concatenate([position, jnp.clip(pipeline_state.qvel, -10.0, 10.0)])
