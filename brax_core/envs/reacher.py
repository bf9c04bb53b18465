"""``reacher``: move the fingertip of a two-link planar arm onto a randomly placed target.

* Observation (11), as Brax's version:

  ====== =====================================================
  index  meaning
  ====== =====================================================
  0, 1   cos of the shoulder and elbow angles (``qpos[0:2]``)
  2, 3   sin of the shoulder and elbow angles
  4, 5   target x, y (``qpos[2:4]``, m)
  6, 7   fingertip linear velocity x, y in the world frame (m/s)
  8-10   fingertip position minus target position, x, y, z (z is 0: both sit 0.01 m above the floor)
  ====== =====================================================

  (Gym's version observes the joint angular velocities ``qvel[0:2]`` at 6, 7; Brax and we use the fingertip's
  velocity, which gives more sensible early policies.)
* Action (2): torques at the shoulder and the elbow, each in ``[-1, 1]`` (motor gear 200).
* Reward: ``reward_dist + reward_ctrl`` with ``reward_dist = -|fingertip - target|`` and
  ``reward_ctrl = -sum(action**2)``; both are reported in ``metrics``.
* Termination: none (only the time limit), unless the state stops being finite.
* Reset: arm angles uniform in ``[-0.1, 0.1]`` around zero, arm velocities uniform in ``[-0.005, 0.005]``; the
  target at distance ``0.2 * u`` (``u`` uniform in [0, 1]) in a uniformly random direction, at rest.
* Defaults: ``episode_length`` 1000 (Brax's; Gym uses 50), ``n_frames`` 2, timestep 0.01 s (``dt`` 0.02 s).
* Model (``assets/reacher.xml``): contacts disabled (nothing in the standard model collides), Euler integration,
  2 Newton iterations / 4 line-search steps for the one constraint (the elbow limit; the fewest with which native
  MuJoCo matches its fully converged solver, 1 drifted by 0.5 rad once the limit was hit); the target's slide joints
  carry no limits because nothing ever pushes the target.
* Physics check (``tests/test_envs_planar.py``): MJX agrees with native ``mujoco.mj_step`` on the same model, same
  controls, over 25 env steps (50 physics steps) to ``qpos`` atol 3e-5, ``qvel`` atol 5e-4 (float32 vs float64).

The fingertip position and velocity come from forward kinematics of the state the step reached (``mjx.step``
leaves positions at the state before its last integration).

Differences from Brax 0.14's ``reacher`` (deliberate; ``tests/test_env_definitions.py`` checks the rest against
Brax's formulas): observations 6, 7 are the fingertip's true velocity; Brax adds the elbow link's angular velocity
crossed with a fixed world-x offset (not rotated with the arm), so the two agree only when the arm points along x.
Poses are those of the state the step reached, as Brax's default ``generalized`` pipeline computes them (its
``mjx`` backend reads them one physics step late). The step also ends an episode whose state stops being finite.
``reset_noise_scale`` and ``target_radius`` (fixed 0.1 and 0.2 in Brax) are arguments with Brax's values as
defaults.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

from brax_core.envs import _assets
from brax_core.envs.base import PipelineEnv, State

_METRICS = ("reward_dist", "reward_ctrl")


class Reacher(PipelineEnv):
    """Two-link arm reaching on MuJoCo MJX."""

    default_episode_length = 1000

    def __init__(
        self,
        n_frames: int = 2,
        reset_noise_scale: float = 0.1,
        target_radius: float = 0.2,
        backend: str = "mjx",
        **kwargs,
    ):
        sys, mj_model = _assets.load("reacher")
        super().__init__(sys, backend=backend, n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._reset_noise_scale = reset_noise_scale
        self._target_radius = target_radius
        self._tip_site = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_SITE, "fingertip")
        self._tip_body = int(mj_model.site_bodyid[self._tip_site])
        self._target_body = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_BODY, "target")

    def reset(self, rng: jax.Array) -> State:
        rng_q, rng_qd, rng_dist, rng_angle = jax.random.split(rng, 4)
        scale = self._reset_noise_scale
        q = self.sys.qpos0 + jax.random.uniform(rng_q, (self.sys.nq,), jnp.float32, -scale, scale)
        qd = jax.random.uniform(rng_qd, (self.sys.nv,), jnp.float32, -0.005, 0.005)
        dist = self._target_radius * jax.random.uniform(rng_dist, (), jnp.float32)
        angle = 2.0 * jnp.pi * jax.random.uniform(rng_angle, (), jnp.float32)
        q = q.at[2:].set(jnp.stack([dist * jnp.cos(angle), dist * jnp.sin(angle)]))
        qd = qd.at[2:].set(0.0)
        pipeline_state = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state, self._get_obs(pipeline_state), zero, zero, {name: zero for name in _METRICS})

    def step(self, state: State, action: jax.Array) -> State:
        pipeline_state = self.pipeline_step(state.pipeline_state, action)
        obs = self._get_obs(pipeline_state)
        reward_dist = -_safe_norm(obs[8:11])
        reward_ctrl = -jnp.sum(jnp.square(action))
        reward = (reward_dist + reward_ctrl).astype(jnp.float32)
        done = jnp.zeros((), jnp.float32)
        metrics = {
            **state.metrics,
            "reward_dist": reward_dist.astype(jnp.float32),
            "reward_ctrl": reward_ctrl.astype(jnp.float32),
        }
        return self.end_if_diverged(
            state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, done=done, metrics=metrics)
        )

    def fingertip(self, pipeline_state: mjx.Data) -> tuple[jax.Array, jax.Array, jax.Array]:
        """World fingertip position (3,), fingertip linear velocity (3,) and target position (3,) for the state's
        ``qpos``/``qvel``."""
        data = self.kinematics(pipeline_state, with_com=True)
        tip = data.site_xpos[self._tip_site]
        jacp, _ = mjx.jac(self.sys, data, tip, self._tip_body)
        return tip, jacp.T @ pipeline_state.qvel, data.xpos[self._target_body]

    def _get_obs(self, pipeline_state: mjx.Data) -> jax.Array:
        theta = pipeline_state.qpos[:2]
        tip, tip_vel, target = self.fingertip(pipeline_state)
        return jnp.concatenate([jnp.cos(theta), jnp.sin(theta), pipeline_state.qpos[2:], tip_vel[:2], tip - target])


def _safe_norm(x: jax.Array) -> jax.Array:
    """Euclidean norm whose gradient is 0 (not NaN) at the origin."""
    sq = jnp.sum(jnp.square(x))
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)
