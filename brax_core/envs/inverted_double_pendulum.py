"""``inverted_double_pendulum``: balance two poles, hinged end to end, on a cart that slides along a rail.

* Observation (8), as Brax's version:

  ====== =====================================================
  index  meaning
  ====== =====================================================
  0      cart position (``qpos[0]``, m)
  1, 2   sin of the lower hinge angle, sin of the upper hinge angle (``qpos[1:3]``)
  3, 4   cos of the lower hinge angle, cos of the upper hinge angle
  5      cart velocity (``qvel[0]``), clipped to [-10, 10]
  6, 7   hinge angular velocities (``qvel[1:3]``), clipped to [-10, 10]
  ====== =====================================================

  (Gym's v5 version has 9 entries, adding a constraint force; Brax's and ours leave it out.)
* Action (1): force on the cart in ``[-1, 1]`` (motor gear 500).
* Reward: ``alive_bonus - distance_penalty - velocity_penalty`` where, with ``(x, z)`` the world position of the
  ``tip`` site at the free end of the upper pole (pole rotations included),

  - ``alive_bonus`` = 10 on every step that does not terminate (the terminating step earns none),
  - ``distance_penalty`` = ``0.01 x**2 + (z - 2)**2``,
  - ``velocity_penalty`` = ``1e-3 w1**2 + 5e-3 w2**2`` (``w1, w2`` the hinge angular velocities).

  The three terms are reported in ``metrics`` (``alive_bonus``, ``distance_penalty``, ``velocity_penalty``) and
  ``metrics['tip_z']`` holds the tip height.
* Termination: the tip height falls to 1 m or below (upright it is 1.2 m), or the state stops being finite
  (``PipelineEnv.end_if_diverged``: that step pays 0 and observes zeros).
* Reset: ``qpos`` uniform in ``[-0.01, 0.01]``; ``qvel`` normal with standard deviation 0.01.
* Defaults: ``episode_length`` 1000, ``n_frames`` 2, timestep 0.01 s (``dt`` 0.02 s).
* Model (``assets/inverted_double_pendulum.xml``): contacts disabled (nothing touches), Euler integration,
  2 Newton iterations / 4 line-search steps for the one constraint (the cart's rail limit): the fewest with which
  native MuJoCo matches its fully converged solver (1 iteration left 1e-4 errors once the limit was hit).
* Physics check (``tests/test_envs_planar.py``): MJX agrees with native ``mujoco.mj_step`` on the same model, same
  controls, over 25 env steps (50 physics steps) to ``qpos`` atol 2e-5, ``qvel`` atol 1e-4 (float32 vs float64).

The tip is found by running forward kinematics on the state the step reached (``mjx.step`` leaves ``site_xpos``
at the state before its last integration), so it always matches native MuJoCo's ``site_xpos`` for ``qpos``.

Differences from Brax 0.14's ``inverted_double_pendulum`` (deliberate; ``tests/test_env_definitions.py`` checks the
rest against Brax's formulas): the tip comes from the pose of the state the step reached, as Brax's default
``generalized`` pipeline computes it (on Brax's ``mjx`` backend the pose is the one before the step's last physics
step); ``metrics`` report the three reward terms and the tip height (Brax reports none). ``alive_bonus`` and
``reset_noise_scale`` (fixed 10 and 0.01 in Brax) are arguments with Brax's values as defaults.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

from brax_core.envs import _assets
from brax_core.envs.base import PipelineEnv, State

_METRICS = ("alive_bonus", "distance_penalty", "velocity_penalty", "tip_z")


class InvertedDoublePendulum(PipelineEnv):
    """Double cart-pole balancing on MuJoCo MJX."""

    default_episode_length = 1000

    def __init__(
        self,
        n_frames: int = 2,
        reset_noise_scale: float = 0.01,
        alive_bonus: float = 10.0,
        backend: str = "mjx",
        **kwargs,
    ):
        sys, mj_model = _assets.load("inverted_double_pendulum")
        super().__init__(sys, backend=backend, n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._reset_noise_scale = reset_noise_scale
        self._alive_bonus = alive_bonus
        self._tip_site = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_SITE, "tip")

    def reset(self, rng: jax.Array) -> State:
        pipeline_state = self.perturbed_init(rng, self._reset_noise_scale, qvel_noise="normal")
        zero = jnp.zeros((), jnp.float32)
        metrics = {name: zero for name in _METRICS}
        metrics["tip_z"] = self.tip_position(pipeline_state)[2].astype(jnp.float32)
        return State(pipeline_state, self._get_obs(pipeline_state), zero, zero, metrics)

    def step(self, state: State, action: jax.Array) -> State:
        pipeline_state = self.pipeline_step(state.pipeline_state, action)
        obs = self._get_obs(pipeline_state)
        tip = self.tip_position(pipeline_state)
        x, z = tip[0], tip[2]
        w1, w2 = pipeline_state.qvel[1], pipeline_state.qvel[2]
        distance_penalty = 0.01 * x**2 + (z - 2.0) ** 2
        velocity_penalty = 1e-3 * w1**2 + 5e-3 * w2**2
        fallen = z <= 1.0
        done = jnp.where(fallen, 1.0, 0.0).astype(jnp.float32)
        alive_bonus = (self._alive_bonus * (1.0 - done)).astype(jnp.float32)
        reward = (alive_bonus - distance_penalty - velocity_penalty).astype(jnp.float32)
        metrics = {
            **state.metrics,
            "alive_bonus": alive_bonus,
            "distance_penalty": distance_penalty.astype(jnp.float32),
            "velocity_penalty": velocity_penalty.astype(jnp.float32),
            "tip_z": z.astype(jnp.float32),
        }
        return self.end_if_diverged(
            state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, done=done, metrics=metrics)
        )

    def tip_position(self, pipeline_state: mjx.Data) -> jax.Array:
        """World position (3,) of the upper pole's free end for the state's ``qpos``."""
        # kinematics only (no dynamics): site_xpos after mjx.step lags qpos by one integration
        return self.kinematics(pipeline_state).site_xpos[self._tip_site]

    @staticmethod
    def _get_obs(pipeline_state: mjx.Data) -> jax.Array:
        qpos, qvel = pipeline_state.qpos, pipeline_state.qvel
        return jnp.concatenate([qpos[:1], jnp.sin(qpos[1:]), jnp.cos(qpos[1:]), jnp.clip(qvel, -10.0, 10.0)])
