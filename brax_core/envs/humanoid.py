"""``humanoid``: make a 3-D humanoid walk forward (+x) without falling.

* Observation (244), following Brax's layout (external contact forces left out):

  ===========  =====================================================================================
  index        meaning
  ===========  =====================================================================================
  0 - 21       ``qpos[2:]``: torso height, torso quaternion ``w, x, y, z``, then the 17 joint angles
               (abdomen_z, abdomen_y, abdomen_x, right hip x/z/y, right knee, left hip x/z/y, left knee,
               right shoulder 1/2, right elbow, left shoulder 1/2, left elbow)
  22 - 44      ``qvel``: torso linear (3) and angular (3) velocity, then the 17 joint velocities
  45 - 154     ``cinert[1:]``: for each of the 11 bodies (world excluded), MuJoCo's 10-number
               centre-of-mass inertia (inertia 6, mass * offset 3, mass 1)
  155 - 220    ``cvel[1:]``: for each of the 11 bodies, MuJoCo's centre-of-mass velocity (angular 3,
               linear 3)
  221 - 243    ``qfrc_actuator``: the generalised force the motors applied in the last step (23)
  ===========  =====================================================================================

* Action (17): in ``[-1, 1]``, mapped linearly onto the motors' control range ``[-0.4, 0.4]`` (as Brax does);
  motor order abdomen_y, abdomen_z, abdomen_x, right_hip_x, right_hip_z, right_hip_y, right_knee, left_hip_x,
  left_hip_z, left_hip_y, left_knee, right_shoulder1, right_shoulder2, right_elbow, left_shoulder1,
  left_shoulder2, left_elbow (gears 100 ×5, 300, 200, 100 ×2, 300, 200, 25 ×6).
* Reward: ``forward_reward_weight * x_velocity + healthy_reward - ctrl_cost_weight * sum(ctrl**2)``, where
  ``x_velocity`` is the x displacement of the whole-body centre of mass over the step divided by ``dt`` and
  ``ctrl`` is the mapped control (weights 1.25, 5.0, 0.1). As in Brax and Gymnasium, with
  ``terminate_when_unhealthy`` the healthy reward is paid on every step, including the terminating one.
* Termination (``terminate_when_unhealthy=True``): the torso height leaves ``healthy_z_range`` (1.0, 2.0),
  or the physics state stops being finite.
* Reset: ``qpos`` uniform in ``qpos0 ± reset_noise_scale`` (torso 1.4 m up, limbs straight) and ``qvel``
  uniform in ``± reset_noise_scale`` (0.01).
* Metrics: ``forward_reward``, ``reward_linvel``, ``reward_quadctrl``, ``reward_alive``, ``x_position``,
  ``y_position``, ``distance_from_origin``, ``x_velocity``, ``y_velocity`` (positions of the centre of mass).
* Defaults: ``episode_length`` 1000, ``n_frames`` 5, physics timestep 0.003 s, so ``dt`` 0.015 s.
* Physics check (``tests/test_envs_cheetah_ant_humanoid.py``): MJX and native ``mujoco.mj_step`` on the same model, same
  controls, same start agree within 1e-4 on ``qpos`` and 2e-3 on ``qvel`` (absolute) over 25 physics steps
  (float32 MJX against float64 MuJoCo) from the standing start, before the feet land. With the shipped single
  solver iteration the line search stops early, and a foot landing can make MJX's and MuJoCo's partial steps
  differ (measured 6e-3 in ``qpos`` within 25 steps); with the solve converged they agree within 1e-5 in float32
  and 1e-14 over 100 steps in float64 (slow tests).

Differences from Brax 0.14's ``humanoid`` (deliberate): observations 45-220 are MuJoCo's own ``cinert`` and
``cvel`` per body (the layout of MuJoCo's MJX tutorial humanoid); Brax builds them from its own transforms (the
inertia as a 3x3 matrix about the whole-body centre of mass plus mass, and mass-weighted linear before angular
velocity). Sizes, the other observations, action mapping, reward, termination, reset and metrics are Brax's
(``tests/test_env_definitions.py`` recomputes them with Brax's formulas); body poses and the centre of mass are read
from the pipeline state as Brax's ``mjx`` backend reads them (before the step's last physics step; Brax's default
``generalized`` pipeline reads the reached poses).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from brax_core.envs import _assets
from brax_core.envs.ant import _z_range
from brax_core.envs.base import PipelineEnv, State

_METRICS = (
    "forward_reward",
    "reward_linvel",
    "reward_quadctrl",
    "reward_alive",
    "x_position",
    "y_position",
    "distance_from_origin",
    "x_velocity",
    "y_velocity",
)


class Humanoid(PipelineEnv):
    """Humanoid walking on MuJoCo MJX (Brax's ``humanoid`` task, 244-number observation)."""

    default_episode_length = 1000

    def __init__(
        self,
        forward_reward_weight: float = 1.25,
        ctrl_cost_weight: float = 0.1,
        healthy_reward: float = 5.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (1.0, 2.0),
        reset_noise_scale: float = 1e-2,
        exclude_current_positions_from_observation: bool = True,
        n_frames: int = 5,
        backend: str = "mjx",
        **kwargs,
    ):
        low, high = _z_range("healthy_z_range", healthy_z_range)
        sys, mj_model = _assets.load("humanoid")
        super().__init__(sys, backend=backend, n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._forward_reward_weight = float(forward_reward_weight)
        self._ctrl_cost_weight = float(ctrl_cost_weight)
        self._healthy_reward = float(healthy_reward)
        self._terminate_when_unhealthy = bool(terminate_when_unhealthy)
        self._healthy_z_range = (low, high)
        self._reset_noise_scale = float(reset_noise_scale)
        self._exclude_current_positions = bool(exclude_current_positions_from_observation)

    def reset(self, rng: jax.Array) -> State:
        pipeline_state = self.perturbed_init(rng, self._reset_noise_scale)
        zero = jnp.zeros((), jnp.float32)
        metrics = {name: zero for name in _METRICS}
        return State(pipeline_state, self._get_obs(pipeline_state), zero, zero, metrics)

    def step(self, state: State, action: jax.Array) -> State:
        ctrl = self.action_to_ctrl(action)
        before = state.pipeline_state
        pipeline_state = self.pipeline_step(before, ctrl)
        # subtree_com[1] is the centre of mass of everything under the torso, i.e. the whole humanoid
        com = pipeline_state.subtree_com[1]
        velocity = (com - before.subtree_com[1]) / self.dt
        forward_reward = self._forward_reward_weight * velocity[0]

        low, high = self._healthy_z_range
        torso_z = pipeline_state.xpos[1, 2]
        healthy = (torso_z >= low) & (torso_z <= high)
        obs = self._get_obs(pipeline_state)
        if self._terminate_when_unhealthy:
            healthy_reward = jnp.float32(self._healthy_reward)
            done = ~healthy
        else:
            healthy_reward = jnp.where(healthy, self._healthy_reward, 0.0)
            done = jnp.zeros((), bool)
        ctrl_cost = self._ctrl_cost_weight * jnp.sum(jnp.square(ctrl))

        f32 = lambda x: jnp.asarray(x, jnp.float32)
        metrics = {
            **state.metrics,
            "forward_reward": f32(forward_reward),
            "reward_linvel": f32(forward_reward),
            "reward_quadctrl": f32(-ctrl_cost),
            "reward_alive": f32(healthy_reward),
            "x_position": f32(com[0]),
            "y_position": f32(com[1]),
            "distance_from_origin": f32(jnp.linalg.norm(com)),
            "x_velocity": f32(velocity[0]),
            "y_velocity": f32(velocity[1]),
        }
        return self.end_if_diverged(
            state.replace(
                pipeline_state=pipeline_state,
                obs=obs,
                reward=f32(forward_reward + healthy_reward - ctrl_cost),
                done=jnp.where(done, 1.0, 0.0).astype(jnp.float32),
                metrics=metrics,
            )
        )

    def _get_obs(self, pipeline_state) -> jax.Array:
        qpos = pipeline_state.qpos[2:] if self._exclude_current_positions else pipeline_state.qpos
        return jnp.concatenate(
            [
                qpos,
                pipeline_state.qvel,
                _cinert(pipeline_state)[1:].ravel(),
                pipeline_state.cvel[1:].ravel(),
                pipeline_state.qfrc_actuator,
            ]
        )


def _cinert(data) -> jax.Array:
    """``cinert`` of MJX data; recent MJX keeps it on the implementation part and deprecates direct access."""
    impl = getattr(data, "_impl", None)
    return impl.cinert if impl is not None and hasattr(impl, "cinert") else data.cinert
