"""RSL-RL's ``OnPolicyRunner`` with its stock PPO on brax_core physics through ``brax_bridge.rsl_rl.RslRlVecEnv``.

Usage:
  python examples/rsl_rl_training.py --tiny          # under a minute: 16 envs, a few iterations
  python examples/rsl_rl_training.py --num-envs 256 --iterations 60

The only line that differs from training an Isaac Lab or Playground task with RSL-RL is the env construction: the
runner, the PPO and the models are rsl-rl-lib's own, configured as its example configuration (ELU MLPs of 128 units,
adaptive learning rate, 4 epochs of 4 minibatches). The episode return reported before and after training is that
of the runner's deterministic inference policy, measured on a separate evaluation env over one full episode.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner

from brax_bridge.rsl_rl import RslRlVecEnv


def runner_config(num_steps_per_env: int, hidden: int) -> dict[str, Any]:
    """rsl-rl-lib's example PPO configuration (its ``examples/configs``), with our rollout length and widths."""
    return {
        "num_steps_per_env": num_steps_per_env,
        "save_interval": 10_000,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": 4,
            "num_mini_batches": 4,
            "clip_param": 0.2,
            "gamma": 0.99,
            "lam": 0.95,
            "value_loss_coef": 1.0,
            "entropy_coef": 0.0,
            "learning_rate": 3.0e-4,
            "max_grad_norm": 1.0,
            "schedule": "adaptive",
            "desired_kl": 0.01,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [hidden, hidden],
            "activation": "elu",
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [hidden, hidden], "activation": "elu"},
    }


@torch.inference_mode()
def episode_return(policy: torch.nn.Module, env: RslRlVecEnv) -> float:
    """Mean return of one episode per env (rewards after an env's first episode ends are not counted)."""
    obs = env.reset()
    total = torch.zeros(env.num_envs, device=env.device)
    running = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    for _ in range(env.max_episode_length):
        obs, reward, done, _ = env.step(policy(obs).clamp(-1.0, 1.0))
        total += reward * running
        running &= done == 0
    return float(total.mean())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="16 envs, short episodes, a few iterations")
    parser.add_argument("--env", default="inverted_pendulum", help="environment name")
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    num_envs = args.num_envs or (16 if args.tiny else 256)
    iterations = args.iterations or (6 if args.tiny else 60)
    episode_length = 100 if args.tiny else None
    torch.manual_seed(args.seed)

    env = RslRlVecEnv(args.env, num_envs, episode_length=episode_length, seed=args.seed)
    eval_env = RslRlVecEnv(args.env, 64, episode_length=episode_length, seed=args.seed + 1)
    runner = OnPolicyRunner(env, runner_config(24, 32 if args.tiny else 128), log_dir=None, device=str(env.device))
    return_before = episode_return(runner.get_inference_policy(), eval_env)
    start = time.perf_counter()
    runner.learn(num_learning_iterations=iterations, init_at_random_ep_len=True)
    seconds = time.perf_counter() - start
    return_after = episode_return(runner.get_inference_policy(), eval_env)
    steps = iterations * 24 * num_envs
    print(f"{args.env}: episode return {return_before:.1f} -> {return_after:.1f} "
          f"({iterations} iterations, {steps} env steps, {seconds:.1f} s)")
    return {
        "env": args.env,
        "episode_return_before": return_before,
        "episode_return_after": return_after,
        "env_steps": steps,
        "seconds": seconds,
        "max_episode_length": eval_env.max_episode_length,
    }


if __name__ == "__main__":
    main()
