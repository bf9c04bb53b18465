"""What a hand-written controller scores on ``reacher``: a yardstick for the PPO presets' final reward.

The controller solves the arm's inverse kinematics for the target once per episode (of the two elbow solutions, the
one nearer the current pose) and then drives the joints there with a PD law, ``clip(kp * (q_goal - q) - kd * qd)``,
holding each action for ``action_repeat`` env steps as the trainers do. It runs on native MuJoCo with the env's own
model, frame skip and reward (``-|fingertip - target| - sum(action**2)`` per env step, 1,000 env steps per episode),
from start states drawn by the env's own ``reset``, over a grid of gains; the best gains' mean episode reward is
what PPO is measured against.

    python benchmarks/reacher_reference.py --episodes 256
"""

from __future__ import annotations

import argparse
import functools
import itertools

import jax
import mujoco
import numpy as np

from brax_core.envs import get_environment
from brax_core.envs.reacher import Reacher


def inverse_kinematics(model: mujoco.MjModel, target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Joint angles putting the fingertip on ``target`` (x, y), the elbow solution nearer ``current``."""
    body = functools.partial(mujoco.mj_name2id, model, mujoco.mjtObj.mjOBJ_BODY)
    UPPER_ARM, FOREARM = model.body_pos[body("body1"), 0], model.body_pos[body("fingertip"), 0]  # noqa: N806
    ELBOW_LIMIT = model.jnt_range[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "joint1"), 1]  # noqa: N806
    x, y = target
    cos_elbow = (x * x + y * y - UPPER_ARM**2 - FOREARM**2) / (2 * UPPER_ARM * FOREARM)
    best = None
    for sign in (1.0, -1.0):
        elbow = float(np.clip(sign * np.arccos(np.clip(cos_elbow, -1.0, 1.0)), -ELBOW_LIMIT, ELBOW_LIMIT))
        shoulder = np.arctan2(y, x) - np.arctan2(FOREARM * np.sin(elbow), UPPER_ARM + FOREARM * np.cos(elbow))
        shoulder = current[0] + (shoulder - current[0] + np.pi) % (2 * np.pi) - np.pi  # nearest equivalent angle
        goal = np.array([shoulder, elbow])
        if best is None or np.abs(goal - current).sum() < np.abs(best - current).sum():
            best = goal
    return best


def start_states(env: Reacher, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``qpos`` and ``qvel`` of ``episodes`` start states drawn by the env's own reset."""
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(seed), episodes))
    return np.asarray(states.pipeline_state.qpos), np.asarray(states.pipeline_state.qvel)


def episode_rewards(
    env: Reacher, starts: tuple[np.ndarray, np.ndarray], kp: float, kd: float, action_repeat: int
) -> np.ndarray:
    model = env.mj_model
    data = mujoco.MjData(model)
    tip = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "fingertip")
    totals = np.zeros(len(starts[0]))
    for episode, (qpos, qvel) in enumerate(zip(*starts, strict=True)):
        mujoco.mj_resetData(model, data)
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(model, data)
        goal = inverse_kinematics(model, data.qpos[2:4], data.qpos[:2])
        for step in range(env.default_episode_length):
            if step % action_repeat == 0:
                action = np.clip(kp * (goal - data.qpos[:2]) - kd * data.qvel[:2], -1.0, 1.0)
            data.ctrl[:] = action
            mujoco.mj_step(model, data, nstep=env.n_frames)
            mujoco.mj_kinematics(model, data)
            totals[episode] -= np.linalg.norm(data.site_xpos[tip][:2] - data.qpos[2:4]) + np.sum(action**2)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--action-repeat", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    env = get_environment("reacher")
    starts = start_states(env, args.episodes, args.seed)
    results = []
    for kp, kd in itertools.product((0.1, 0.2, 0.3, 0.4), (0.02, 0.05, 0.08)):
        rewards = episode_rewards(env, starts, kp, kd, args.action_repeat)
        results.append((rewards.mean(), kp, kd, np.median(rewards)))
        print(f"kp {kp:<4} kd {kd:<5} mean {rewards.mean():9.2f}  median {np.median(rewards):9.2f}", flush=True)
    mean, kp, kd, median = max(results)
    print(f"best: kp {kp}, kd {kd}: mean episode reward {mean:.2f} (median {median:.2f}) over {args.episodes} episodes")


if __name__ == "__main__":
    main()
