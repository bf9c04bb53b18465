"""Stable-Baselines3 PPO on brax_core physics through ``brax_bridge.sb3.VecEnv``.

Usage:
  python examples/sb3_training.py --tiny           # seconds, on the `fast` env
  python examples/sb3_training.py --env inverted_pendulum --num-envs 64 --timesteps 200000

The env is a regular SB3 ``VecEnv`` (here under ``VecNormalize``), so any SB3 algorithm for Box actions works
unchanged; all envs step together in one jitted JAX call.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

from brax_bridge.sb3 import VecEnv


def deterministic_reward(model: PPO, env: VecNormalize, steps: int, seed: int) -> float:
    """Mean reward per step of the policy's deterministic action from the starts ``seed`` draws."""
    env.seed(seed)
    obs = env.reset()
    total = np.zeros(env.num_envs)
    for _ in range(steps):
        action, _ = model.predict(obs, deterministic=True)
        obs, _, _, _ = env.step(action)
        total += env.get_original_reward()
    return float(total.mean()) / steps


def episode_return(model: PPO, env: VecNormalize, max_steps: int, seed: int) -> float:
    """Mean return of each env's first episode under the deterministic policy (what a reward threshold means)."""
    env.seed(seed)
    obs = env.reset()
    total = np.zeros(env.num_envs)
    running = np.ones(env.num_envs, dtype=bool)
    for _ in range(max_steps):
        action, _ = model.predict(obs, deterministic=True)
        obs, _, done, _ = env.step(action)
        total += env.get_original_reward() * running
        running &= ~done
        if not running.any():
            break
    return float(total.mean())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="seconds, on the `fast` env")
    parser.add_argument("--env", default=None, help="environment name (default inverted_pendulum; tiny: fast)")
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--timesteps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    name = args.env or ("fast" if args.tiny else "inverted_pendulum")
    num_envs = args.num_envs or (16 if args.tiny else 64)
    timesteps = args.timesteps or (16 * 16 * 25 if args.tiny else 200_000)
    episode_length = 20 if args.tiny else None
    torch.manual_seed(args.seed)

    env = VecNormalize(VecEnv(name, num_envs, episode_length=episode_length, seed=args.seed), norm_reward=False)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=16 if args.tiny else 64,
        # 10 epochs of 512-sample minibatches: 80 gradient steps per 4,096-step rollout. With 4 epochs of 1,024 (16
        # steps) the policy balanced within 200k steps for one seed of three; with these, for each of the three.
        batch_size=64 if args.tiny else 512,
        n_epochs=4 if args.tiny else 10,
        learning_rate=3e-3 if args.tiny else 3e-4,
        gamma=0.97,
        policy_kwargs={"net_arch": [32, 32] if args.tiny else [64, 64], "log_std_init": -0.5},
        seed=args.seed,
        device=env.venv.bridge.device,  # the physics' device (brax_bridge.default_device()): one device for both
        verbose=0,
    )
    eval_env = VecNormalize(VecEnv(name, 64, episode_length=episode_length, seed=args.seed + 1),
                            training=False, norm_reward=False)
    eval_steps = episode_length or 1000
    eval_env.obs_rms = env.obs_rms
    reward_before = deterministic_reward(model, eval_env, eval_steps, seed=123)
    return_before = episode_return(model, eval_env, eval_steps, seed=123)
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    seconds = time.perf_counter() - start
    eval_env.obs_rms = env.obs_rms  # learn() updated the statistics in place; share them with evaluation
    reward_after = deterministic_reward(model, eval_env, eval_steps, seed=123)
    return_after = episode_return(model, eval_env, eval_steps, seed=123)
    print(f"{name}: deterministic reward per step {reward_before:.3f} -> {reward_after:.3f}, "
          f"episode return {return_before:.1f} -> {return_after:.1f} ({timesteps} steps, {seconds:.1f} s)")
    return {"env": name, "eval_reward_before": reward_before, "eval_reward_after": reward_after,
            "eval_return_before": return_before, "eval_return_after": return_after, "seconds": seconds}


if __name__ == "__main__":
    main()
