"""Training with gradients through the physics: Brax's APG in PyTorch on a registered env, then SHAC on an env of
your own.

Both trainers differentiate the return through MuJoCo MJX's step (``TorchEnv(differentiable=True)``): APG follows
the gradient of the mean reward of each unroll; SHAC follows it over short windows, each closed by a learned value,
so the gradient stays short while the policy still sees past the window.

``Reach`` is a user's own env: a point mass in the plane paid for nearing a target, its episode ended (terminated)
when it leaves the arena. Its reward is smooth in the action, so the gradient reaches every earlier action; SHAC's
terminal rule gives a terminated step no value after it.

  python examples/gradients_through_physics.py            # APG on halfcheetah, then SHAC on Reach
  python examples/gradients_through_physics.py --tiny     # seconds: both on Reach, few updates
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import jax.numpy as jnp
import torch

from brax_core.envs import Env, State
from torch_analytic import apg, shac


class Reach(Env):
    """A point mass in the plane, pushed by the action towards a target drawn at reset; paid ``1 - distance`` per
    step, terminated when it leaves the square ``[-2, 2]^2``.

    Observation: position, velocity, target (6). Action: the push, 2 components in ``[-1, 1]``.
    """

    default_episode_length = 60

    def reset(self, rng: jax.Array) -> State:
        start, target = jax.random.uniform(rng, (2, 2), jnp.float32, -1.0, 1.0)
        obs = jnp.concatenate([start, jnp.zeros(2, jnp.float32), target])
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=obs, obs=obs, reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        position, velocity, target = state.obs[:2], state.obs[2:4], state.obs[4:]
        velocity = 0.85 * velocity + 0.2 * action
        position = position + 0.1 * velocity
        reward = 1.0 - jnp.sqrt(jnp.sum((position - target) ** 2) + 1e-6)
        done = jnp.any(jnp.abs(position) > 2.0).astype(jnp.float32)
        obs = jnp.concatenate([position, velocity, target])
        return state.replace(pipeline_state=obs, obs=obs, reward=reward, done=done)

    @property
    def observation_size(self) -> int:
        return 6

    @property
    def action_size(self) -> int:
        return 2


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="both trainers on Reach with few updates (seconds)")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}

    def report(name: str) -> Any:
        def progress(epoch: int, metrics: dict[str, float]) -> None:
            results.setdefault(name, []).append(metrics["eval/episode_reward"])
            print(f"{name} epoch {epoch}: eval reward {metrics['eval/episode_reward']:.2f}", flush=True)

        return progress

    # 1. Brax's APG in PyTorch: the analytic gradient of each unroll's mean reward.
    apg_env = Reach() if args.tiny else "halfcheetah"
    apg.train(
        apg_env, episode_length=60 if args.tiny else 1000, policy_updates=40 if args.tiny else 200,
        horizon_length=16 if args.tiny else 32, num_envs=8 if args.tiny else 64, num_evals=3 if args.tiny else 6,
        num_eval_envs=64 if args.tiny else 16, learning_rate=3e-3 if args.tiny else 1e-3, progress_fn=report("apg"),
        max_gradient_norm=1.0,  # clipped, the updates hold their gains (unclipped, the eval reward swings)
    )

    # 2. SHAC on the user's own env: short windows closed by the critic's value, TD(lambda) targets for the critic.
    make_policy, policy, metrics = shac.train(
        Reach(), episode_length=60, policy_updates=60 if args.tiny else 300, horizon_length=16,
        num_envs=16 if args.tiny else 64, num_evals=3 if args.tiny else 6, num_eval_envs=64,
        critic_iterations=4 if args.tiny else 16, progress_fn=report("shac"),
    )
    act = make_policy(policy, deterministic=True)
    results["action"] = act(torch.zeros(1, 6))
    results["metrics"] = metrics
    return results


if __name__ == "__main__":
    main()
