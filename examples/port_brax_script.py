"""A Brax PPO training script, ported by changing the import prefix from ``brax`` to ``brax_core``.

The body below is what Brax's own tutorials do: create an env, call ``ppo.train`` with ``functools.partial``,
plot progress through ``progress_fn``, then jit the inference function and roll a policy out.

  python examples/port_brax_script.py            # inverted_pendulum, its CPU preset
  python examples/port_brax_script.py --tiny     # the `fast` env in seconds
"""

from __future__ import annotations

import argparse
import functools
import time
from typing import Any

import jax

# Brax:  from brax import envs
#        from brax.training.agents.ppo import train as ppo
from brax_core import envs
from brax_core.training.agents.ppo import presets
from brax_core.training.agents.ppo import train as ppo


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="train the `fast` env for a few seconds")
    args = parser.parse_args(argv)
    env_name = "fast" if args.tiny else "inverted_pendulum"
    env = envs.get_environment(env_name)

    train_fn = functools.partial(ppo.train, **presets.TRAIN_KWARGS[env_name])
    x_data, y_data, times = [], [], [time.time()]

    def progress(num_steps: int, metrics: dict[str, Any]) -> None:
        times.append(time.time())
        x_data.append(num_steps)
        y_data.append(metrics["eval/episode_reward"])
        print(f"step {num_steps}: eval reward {metrics['eval/episode_reward']:.1f}")

    make_inference_fn, params, _ = train_fn(environment=env, progress_fn=progress)
    print(f"time to jit: {times[1] - times[0]:.1f} s; time to train: {times[-1] - times[1]:.1f} s")

    # Roll out the trained policy, as in Brax's tutorial.
    inference_fn = make_inference_fn(params)
    jit_inference_fn = jax.jit(inference_fn)
    jit_reset, jit_step = jax.jit(env.reset), jax.jit(env.step)
    rng = jax.random.PRNGKey(0)
    state = jit_reset(rng)
    total_reward = 0.0
    for _ in range(presets.TRAIN_KWARGS[env_name]["episode_length"]):
        act_rng, rng = jax.random.split(rng)
        action, _ = jit_inference_fn(state.obs, act_rng)
        state = jit_step(state, action)
        total_reward += float(state.reward)
        if float(state.done):
            break
    print(f"rollout reward: {total_reward:.1f}")
    return {"steps": x_data, "eval_rewards": y_data, "rollout_reward": total_reward}


if __name__ == "__main__":
    main()
