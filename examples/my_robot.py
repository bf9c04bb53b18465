"""A robot of your own as a brax_core env: ``Arm3``, a three-link planar arm (its MJCF is ``assets/arm3.xml``)
reaching for a target that moves at every reset.

The ``brax-bridge`` command takes it by file path, or by module path from the folder that holds this file:

  brax-bridge envs examples/my_robot.py:Arm3
  brax-bridge train --env examples/my_robot.py:Arm3 --trainer torch
  cd examples && brax-bridge train --env my_robot:precise_arm3      # a factory works as well as a class

* Observation (15): cos and sin of the three joint angles, the joint velocities, the fingertip's x and y, the
  target's x and y, and the fingertip minus the target.
* Action (3): joint torques in [-1, 1] (motor gear 20).
* Reward: minus the fingertip's distance to the target, minus 0.01 times the squared action.
* Termination: the fingertip comes within ``tolerance`` of the target (success ends the episode early, so every
  step spent on the way costs), or the simulation diverges.
* Reset: joint angles uniform within 0.1 rad of straight, at rest; the target at 0.08 to 0.28 m from the shoulder
  in any direction.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

from brax_core.envs import PipelineEnv, State
from brax_core.io import mjcf

ARM3_XML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets", "arm3.xml")


class Arm3(PipelineEnv):
    """Three-link planar arm reaching a random target (MuJoCo MJX)."""

    default_episode_length = 100

    def __init__(self, tolerance: float = 0.02, n_frames: int = 2, **kwargs: Any):
        mj_model = mjcf.load_model(ARM3_XML)  # any MJCF file path; mjcf.loads(text) takes the XML itself
        super().__init__(mjcf.put(mj_model), n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._tolerance = tolerance
        self._fingertip = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_SITE, "fingertip")

    def reset(self, rng: jax.Array) -> State:
        rng_q, rng_radius, rng_angle = jax.random.split(rng, 3)
        qpos = self.sys.qpos0 + jax.random.uniform(rng_q, (self.sys.nq,), jnp.float32, -0.1, 0.1)
        radius = jax.random.uniform(rng_radius, (), jnp.float32, 0.08, 0.28)
        angle = jax.random.uniform(rng_angle, (), jnp.float32, -jnp.pi, jnp.pi)
        target = jnp.stack([radius * jnp.cos(angle), radius * jnp.sin(angle), jnp.float32(0.02)])
        pipeline_state = self.pipeline_init(qpos, jnp.zeros((self.sys.nv,), jnp.float32))
        # The target is a mocap body: placed here, it stays where it is put while the arm moves.
        pipeline_state = self.kinematics(pipeline_state.replace(mocap_pos=target[None]))
        obs = self._obs(pipeline_state)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state, obs, zero, zero, metrics={"distance": jnp.linalg.norm(obs[-2:])})

    def step(self, state: State, action: jax.Array) -> State:
        pipeline_state = self.pipeline_step(state.pipeline_state, self.action_to_ctrl(action))
        obs = self._obs(pipeline_state)
        distance = jnp.linalg.norm(obs[-2:])
        reward = -distance - 0.01 * jnp.sum(jnp.square(action))
        done = (distance < self._tolerance).astype(jnp.float32)
        state = state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, done=done,
                              metrics={"distance": distance})
        return self.end_if_diverged(state)

    def _obs(self, pipeline_state: mjx.Data) -> jax.Array:
        angles = pipeline_state.qpos
        fingertip = pipeline_state.site_xpos[self._fingertip, :2]
        target = pipeline_state.mocap_pos[0, :2]
        return jnp.concatenate([jnp.cos(angles), jnp.sin(angles), pipeline_state.qvel, fingertip, target,
                                fingertip - target])


def precise_arm3() -> Arm3:
    """A factory: ``Arm3`` that must come within 1 cm of the target."""
    return Arm3(tolerance=0.01)


def randomize_damping(sys: mjx.Model, rng: jax.Array) -> tuple[mjx.Model, Any]:
    """Domain randomisation: each env's joint damping scaled by its own factor in [0.5, 2] (``rng``: one key per
    env). Returns the batched model and the ``in_axes`` saying which of its fields are batched."""

    @jax.vmap
    def damping(key: jax.Array) -> jax.Array:
        return sys.dof_damping * jax.random.uniform(key, (), minval=0.5, maxval=2.0)

    in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"dof_damping": 0})
    return sys.tree_replace({"dof_damping": damping(rng)}), in_axes
