"""``ant``: make a four-legged ant walk forward (+x).

* Observation (27): ``qpos[2:]`` then ``qvel`` (the torso's x, y position is left out; external contact
  forces are left out, as in Brax).

  ===========  ====================================================================
  index        meaning
  ===========  ====================================================================
  0            torso height (m)
  1 - 4        torso orientation quaternion ``w, x, y, z``
  5 - 12       joint angles (rad): hip_1, ankle_1, hip_2, ankle_2, hip_3, ankle_3, hip_4, ankle_4
  13 - 15      torso linear velocity x, y, z (m/s)
  16 - 18      torso angular velocity x, y, z (rad/s)
  19 - 26      joint angular velocities (rad/s), same order as 5 - 12
  ===========  ====================================================================

* Action (8): motor controls in ``[-1, 1]`` (gear 150) in actuator order hip_4, ankle_4, hip_1, ankle_1,
  hip_2, ankle_2, hip_3, ankle_3 (the standard model's order, which differs from the joint order above).
* Reward: ``x_velocity + healthy_reward - ctrl_cost_weight * sum(action**2)`` with ``x_velocity`` the torso's
  x displacement over the step divided by ``dt``, ``healthy_reward`` 1 and ``ctrl_cost_weight`` 0.5. There is
  no contact cost (``reward_contact`` is reported as 0). As in Brax and Gymnasium, with
  ``terminate_when_unhealthy`` the healthy reward is paid on every step, including the terminating one;
  without it, only while healthy.
* Termination (``terminate_when_unhealthy=True``): the torso height leaves ``healthy_z_range`` (0.2, 1.0),
  or the physics state stops being finite.
* Reset: from the ``home`` keyframe (torso 0.55 m up, ankles bent 1 rad so every leg is inside its joint
  range), ``qpos`` uniform within ``± reset_noise_scale`` and ``qvel`` normal with standard deviation
  ``reset_noise_scale`` (0.1).
* Metrics: ``reward_forward``, ``reward_survive``, ``reward_ctrl``, ``reward_contact``, ``x_position``,
  ``y_position``, ``distance_from_origin``, ``x_velocity``, ``y_velocity``, ``forward_reward``.
* Defaults: ``episode_length`` 1000, ``n_frames`` 5, physics timestep 0.01 s, so ``dt`` 0.05 s.
* Physics check (``tests/test_envs_cheetah_ant_humanoid.py``): MJX and native ``mujoco.mj_step`` on the same model, same
  controls, same start agree within 1e-4 on ``qpos`` and 2e-3 on ``qvel`` (absolute) over 25 physics steps
  (float32 MJX against float64 MuJoCo); with the solve converged, MJX in float64 agrees within 1e-10 over 100 steps
  (slow test). The shipped single solver iteration stops the line search early, where MJX's and MuJoCo's partial
  steps can differ, so longer runs part (the test module's docstring gives the measurements).

Differences from Brax 0.14's ``ant``: none in observation, reward, termination, reset, metrics or solver settings
(``tests/test_env_definitions.py`` recomputes them with Brax's formulas); the torso pose is read from the pipeline
state as Brax's ``mjx`` backend reads it (the pose before the step's last physics step; Brax's default
``generalized`` pipeline reads the reached pose). Brax's ``contact_force_range`` argument (unused there: contact
forces are not observed) is not accepted.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from brax_core.envs import _assets
from brax_core.envs.base import PipelineEnv, State

_METRICS = (
    "reward_forward",
    "reward_survive",
    "reward_ctrl",
    "reward_contact",
    "x_position",
    "y_position",
    "distance_from_origin",
    "x_velocity",
    "y_velocity",
    "forward_reward",
)


class Ant(PipelineEnv):
    """Quadruped walking on MuJoCo MJX (Brax's ``ant`` task, contact forces excluded)."""

    default_episode_length = 1000

    def __init__(
        self,
        ctrl_cost_weight: float = 0.5,
        use_contact_forces: bool = False,
        contact_cost_weight: float = 5e-4,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.2, 1.0),
        reset_noise_scale: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
        n_frames: int = 5,
        backend: str = "mjx",
        **kwargs,
    ):
        if use_contact_forces:
            raise ValueError("use_contact_forces=True is not supported: the ant observation excludes contact forces")
        low, high = _z_range("healthy_z_range", healthy_z_range)
        sys, mj_model = _assets.load("ant")
        super().__init__(sys, backend=backend, n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._init_q = jnp.asarray(mj_model.key("home").qpos, jnp.float32)
        self._ctrl_cost_weight = float(ctrl_cost_weight)
        self._contact_cost_weight = float(contact_cost_weight)
        self._healthy_reward = float(healthy_reward)
        self._terminate_when_unhealthy = bool(terminate_when_unhealthy)
        self._healthy_z_range = (low, high)
        self._reset_noise_scale = float(reset_noise_scale)
        self._exclude_current_positions = bool(exclude_current_positions_from_observation)

    def reset(self, rng: jax.Array) -> State:
        pipeline_state = self.perturbed_init(rng, self._reset_noise_scale, qpos=self._init_q, qvel_noise="normal")
        zero = jnp.zeros((), jnp.float32)
        metrics = {name: zero for name in _METRICS}
        return State(pipeline_state, self._get_obs(pipeline_state), zero, zero, metrics)

    def step(self, state: State, action: jax.Array) -> State:
        before = state.pipeline_state
        pipeline_state = self.pipeline_step(before, action)
        # body 1 is the torso (body 0 is the world)
        torso = pipeline_state.xpos[1]
        velocity = (torso - before.xpos[1]) / self.dt
        forward_reward = velocity[0]

        low, high = self._healthy_z_range
        healthy = (torso[2] >= low) & (torso[2] <= high)
        obs = self._get_obs(pipeline_state)
        if self._terminate_when_unhealthy:
            healthy_reward = jnp.float32(self._healthy_reward)
            done = ~healthy
        else:
            healthy_reward = jnp.where(healthy, self._healthy_reward, 0.0)
            done = jnp.zeros((), bool)
        ctrl_cost = self._ctrl_cost_weight * jnp.sum(jnp.square(action))
        contact_cost = jnp.zeros((), jnp.float32)

        f32 = lambda x: jnp.asarray(x, jnp.float32)
        metrics = {
            **state.metrics,
            "reward_forward": f32(forward_reward),
            "reward_survive": f32(healthy_reward),
            "reward_ctrl": f32(-ctrl_cost),
            "reward_contact": f32(-contact_cost),
            "x_position": f32(torso[0]),
            "y_position": f32(torso[1]),
            "distance_from_origin": f32(jnp.linalg.norm(torso)),
            "x_velocity": f32(velocity[0]),
            "y_velocity": f32(velocity[1]),
            "forward_reward": f32(forward_reward),
        }
        reward = forward_reward + healthy_reward - ctrl_cost - contact_cost
        return self.end_if_diverged(
            state.replace(
                pipeline_state=pipeline_state,
                obs=obs,
                reward=f32(reward),
                done=jnp.where(done, 1.0, 0.0).astype(jnp.float32),
                metrics=metrics,
            )
        )

    def _get_obs(self, pipeline_state) -> jax.Array:
        qpos = pipeline_state.qpos[2:] if self._exclude_current_positions else pipeline_state.qpos
        return jnp.concatenate([qpos, pipeline_state.qvel])


def _z_range(name: str, value: tuple[float, float]) -> tuple[float, float]:
    """Checks a ``(low, high)`` height range at construction, naming the argument."""
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high) of floats, got {value!r}") from None
    if not low < high:
        raise ValueError(f"{name} must have low < high, got {value!r}")
    return low, high
