"""Domain randomisation: train on cart-poles whose masses differ per environment, without a separate eval env.

``randomization_fn(sys, rng)`` follows Brax: ``rng`` holds one key per environment and the function returns the
batched model plus the ``in_axes`` that say which fields are batched. It may read ``sys`` fields inside its own
``jax.vmap``. The trainer binds ``rng`` for the training envs and, with its own keys, for the evaluation envs.

  python examples/domain_randomization.py
  python examples/domain_randomization.py --tiny
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
from mujoco import mjx

from brax_core import envs
from brax_core.training.agents.ppo import presets
from brax_core.training.agents.ppo import train as ppo


def scale_body_mass(sys: mjx.Model, rng: jax.Array, low: float = 0.8, high: float = 1.2) -> tuple[mjx.Model, Any]:
    """Scales every body's mass by one random factor in ``[low, high]`` per environment."""

    @jax.vmap
    def randomise(key: jax.Array) -> jax.Array:
        scale = jax.random.uniform(key, (), minval=low, maxval=high)
        return sys.body_mass * scale  # reads a model field inside this function's own vmap

    body_mass = randomise(rng)
    in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"body_mass": 0})
    return sys.tree_replace({"body_mass": body_mass}), in_axes


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few training steps with tiny batches")
    args = parser.parse_args(argv)
    config = dict(presets.TRAIN_KWARGS["inverted_pendulum"])
    if args.tiny:
        # A short run that still exercises randomised training and randomised evaluation envs.
        config.update(
            num_timesteps=2 * 8 * 4 * 4,
            num_envs=8,
            batch_size=8,
            num_minibatches=4,
            unroll_length=4,
            num_evals=2,
            num_eval_envs=4,
            episode_length=20,
        )
    reports = []

    def progress(step: int, metrics: dict[str, Any]) -> None:
        reports.append((step, metrics["eval/episode_reward"]))
        print(f"step {step}: eval reward {metrics['eval/episode_reward']:.1f}")

    env = envs.get_environment("inverted_pendulum")
    _, params, metrics = ppo.train(env, randomization_fn=scale_body_mass, progress_fn=progress, **config)
    return {"reports": reports, "metrics": metrics, "params": params}


if __name__ == "__main__":
    main()
