"""A real robot arm, not a toy: the seven-joint PR2-style arm of Gymnasium's ``Pusher`` (its MJCF ships inside the
gymnasium package, so nothing is downloaded) as a brax_core env with a reaching task of its own, trained by torch_ppo
through a ``TorchEnv``. Prints the evaluation reward before and after training.

  python examples/real_robot_arm.py          # about 12 minutes on a 2-core CPU
  python examples/real_robot_arm.py --tiny   # seconds of training, to check that everything runs

``ArmReach``:

* Model: Gymnasium's ``pusher_v5.xml`` as shipped (arm, table, puck and goal disc; no gravity), with contacts turned
  off: reaching needs none, and without them MJX compiles and steps the arm several times faster. The puck stays
  where the file puts it; the goal disc marks the target on the table.
* Observation (23): the seven joint angles and velocities, the gripper tip's position, the target's, and the tip
  minus the target.
* Action (7): joint torques in [-1, 1], mapped onto the motors' range [-2, 2].
* Reward: minus the tip's distance to the target, minus 0.05 times the squared action.
* Termination: none (episodes end at the time limit), except a diverged simulation.
* Reset: joint angles within 0.1 rad of the file's pose (inside their ranges), at rest; the target 0.275 m below
  the shoulder's height, anywhere in the 0.3 m x 0.4 m patch where Pusher places its puck.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

import torch_ppo
from brax_bridge import TorchEnv
from brax_core import compile as compile_options
from brax_core.envs import PipelineEnv, State
from brax_core.extras import install_line
from brax_core.io import mjcf

ARM_JOINTS = 7


def pusher_xml() -> str:
    """The path of ``pusher_v5.xml`` inside the installed gymnasium package (the ``gymnasium`` extra)."""
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or spec.origin is None:
        raise ImportError(f"the Pusher arm's model ships with Gymnasium: {install_line('gymnasium')}")
    return os.path.join(os.path.dirname(spec.origin), "envs", "mujoco", "assets", "pusher_v5.xml")


class ArmReach(PipelineEnv):
    """Reach a random point above the table with the gripper of Gymnasium's Pusher arm."""

    default_episode_length = 100

    def __init__(self, n_frames: int = 5, **kwargs: Any):
        mj_model = mjcf.load_model(pusher_xml())
        mj_model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
        # Joint limits are the only constraints left: a few solver iterations settle them.
        mj_model.opt.iterations, mj_model.opt.ls_iterations = 4, 8
        super().__init__(mjcf.put(mj_model), n_frames=n_frames, mj_model=mj_model, **kwargs)
        self._tip = mj_model.body("tips_arm").id
        self._goal_slides = mj_model.joint("goal_slidey").qposadr[0], mj_model.joint("goal_slidex").qposadr[0]
        self._goal_home = jnp.asarray(mj_model.body("goal").pos, jnp.float32)

    def reset(self, rng: jax.Array) -> State:
        rng_q, rng_x, rng_y = jax.random.split(rng, 3)
        noise = jax.random.uniform(rng_q, (ARM_JOINTS,), jnp.float32, -0.1, 0.1)
        low, high = self.sys.jnt_range[:ARM_JOINTS, 0], self.sys.jnt_range[:ARM_JOINTS, 1]
        # Some joints rest at an end of their range in the file's pose: the noise stays inside it.
        qpos = self.sys.qpos0.at[:ARM_JOINTS].set(jnp.clip(self.sys.qpos0[:ARM_JOINTS] + noise, low, high))
        # The goal disc slides along the table to under the target (Pusher's puck patch, relative to the disc).
        offset_x = jax.random.uniform(rng_x, (), jnp.float32, -0.3, 0.0)
        offset_y = jax.random.uniform(rng_y, (), jnp.float32, -0.2, 0.2)
        slide_y, slide_x = self._goal_slides
        qpos = qpos.at[slide_y].set(offset_y).at[slide_x].set(offset_x)
        pipeline_state = self.pipeline_init(qpos, jnp.zeros((self.sys.nv,), jnp.float32))
        zero = jnp.zeros((), jnp.float32)
        obs = self._obs(pipeline_state)
        return State(pipeline_state, obs, zero, zero, metrics={"distance": jnp.linalg.norm(obs[-3:])})

    def step(self, state: State, action: jax.Array) -> State:
        ctrl = self.action_to_ctrl(action)
        pipeline_state = self.pipeline_step(state.pipeline_state, ctrl)
        obs = self._obs(pipeline_state)
        distance = jnp.linalg.norm(obs[-3:])
        reward = -distance - 0.05 * jnp.sum(jnp.square(action))
        state = state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, metrics={"distance": distance})
        return self.end_if_diverged(state)

    def _target(self, pipeline_state: mjx.Data) -> jax.Array:
        slide_y, slide_x = self._goal_slides
        offset = jnp.stack([pipeline_state.qpos[slide_x], pipeline_state.qpos[slide_y], jnp.float32(0.048)])
        return self._goal_home + offset  # 0.048 m above the disc: the puck's centre

    def _obs(self, pipeline_state: mjx.Data) -> jax.Array:
        tip = pipeline_state.xpos[self._tip]
        target = self._target(pipeline_state)
        return jnp.concatenate([pipeline_state.qpos[:ARM_JOINTS], pipeline_state.qvel[:ARM_JOINTS], tip, target,
                                tip - target])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="seconds of training, to check that everything runs")
    parser.add_argument("--num-timesteps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    # XLA's CPU fusion emitters, which a long run's LLVM level 1 leaves on, compile this model pathologically slowly
    # (benchmarks/results/startup.md, "Compile options"); a model of your own that takes minutes to reach its first
    # evaluation may need the same. The user's own setting wins.
    os.environ.setdefault(compile_options.EMITTERS_ENV_VAR, "off")
    if args.tiny:
        sizes = dict(num_timesteps=args.num_timesteps or 320, num_envs=8, batch_size=8, num_minibatches=2,
                     unroll_length=5, num_evals=2, num_eval_envs=8, episode_length=20, policy_hidden_layer_sizes=(8,),
                     value_hidden_layer_sizes=(8,))
    else:
        sizes = dict(num_timesteps=args.num_timesteps or 1_500_000, num_envs=128, batch_size=128, num_minibatches=8,
                     unroll_length=16, num_updates_per_batch=8, num_evals=11, num_eval_envs=128, episode_length=100,
                     policy_hidden_layer_sizes=(64, 64), value_hidden_layer_sizes=(128, 128))
    env = TorchEnv(ArmReach(), sizes.pop("num_envs"), episode_length=sizes["episode_length"], seed=args.seed)
    reports: list[tuple[int, float, float]] = []
    start = time.perf_counter()

    def progress(step: int, metrics: dict[str, Any]) -> None:
        reports.append((step, float(metrics["eval/episode_reward"]), time.perf_counter() - start))
        print(f"step {step:,}: evaluation reward {reports[-1][1]:.1f} ({reports[-1][2]:.0f} s)", flush=True)

    torch_ppo.train(env, num_envs=env.num_envs, learning_rate=3e-4, entropy_cost=1e-3, discounting=0.97,
                    normalize_observations=True, max_grad_norm=1.0, seed=args.seed, progress_fn=progress, **sizes)
    print(f"ArmReach: evaluation reward {reports[0][1]:.1f} before training, {reports[-1][1]:.1f} after "
          f"{reports[-1][0]:,} env steps ({reports[-1][2]:.0f} s)")
    return {"reports": reports, "observation_size": env.observation_size, "action_size": env.action_size}


if __name__ == "__main__":
    main()
