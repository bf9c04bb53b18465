"""Save the policy at every evaluation point with ``policy_params_fn``, then reload one and roll it out.

``policy_params_fn(current_step, make_policy, params)`` receives params that ``make_policy`` accepts directly,
so saving them is one call and the saved file is a complete policy.

  python examples/save_intermediate_policies.py --out /tmp/policies
  python examples/save_intermediate_policies.py --tiny
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

import jax

from brax_core import envs
from brax_core.io import model
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import presets
from brax_core.training.agents.ppo import train as ppo


def rollout(env: envs.Env, policy: Any, steps: int, seed: int = 0) -> float:
    """Total reward of one episode (at most ``steps`` steps) of ``policy`` in ``env``."""
    reset, step, act = jax.jit(env.reset), jax.jit(env.step), jax.jit(policy)
    rng = jax.random.PRNGKey(seed)
    state = reset(rng)
    total = 0.0
    for _ in range(steps):
        rng, key = jax.random.split(rng)
        state = step(state, act(state.obs, key)[0])
        total += float(state.reward)
        if float(state.done):
            break
    return total


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="train the `fast` env for a few seconds")
    parser.add_argument("--out", default=None, help="directory for the saved policies (default: a temporary one)")
    args = parser.parse_args(argv)
    env_name = "fast" if args.tiny else "inverted_pendulum"
    out = args.out or tempfile.mkdtemp(prefix="policies-")
    os.makedirs(out, exist_ok=True)
    saved: list[str] = []

    def save_policy(current_step: int, make_policy: Any, params: ppo_networks.PPOTrainingParams) -> None:
        path = os.path.join(out, f"policy_{current_step:012d}.pkl")
        model.save_params(path, params)
        saved.append(path)

    config = presets.TRAIN_KWARGS[env_name]
    env = envs.get_environment(env_name)
    make_inference_fn, _, metrics = ppo.train(env, policy_params_fn=save_policy, **config)
    print(f"saved {len(saved)} policies in {out}; final eval reward {metrics['eval/episode_reward']:.1f}")

    # A saved file holds PPOTrainingParams, which the inference function factory takes as they are.
    rewards = {}
    for path in (saved[0], saved[-1]):
        policy = make_inference_fn(model.load_params(path), deterministic=True)
        name = os.path.basename(path)
        rewards[name] = rollout(env, policy, config["episode_length"])
        print(f"{name}: rollout reward {rewards[name]:.1f}")
    return {"saved": saved, "rewards": rewards}


if __name__ == "__main__":
    main()
