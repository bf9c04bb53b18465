"""Train with a custom activation, checkpoint, and rebuild the policy from the checkpoint alone.

The checkpoint's configuration names the activation; a custom one is registered under a name (before saving
and before loading), a library one is stored by its own name, and ``functools.partial`` of either keeps its
keyword arguments. ``checkpoint.load_policy`` then needs nothing but the path.

  python examples/custom_activation_checkpoint.py --out /tmp/ckpt
  python examples/custom_activation_checkpoint.py --tiny
"""

from __future__ import annotations

import argparse
import functools
import tempfile
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from brax_core.training.agents.ppo import checkpoint, presets
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as ppo


def scaled_swish(x: jax.Array, beta: float = 1.5) -> jax.Array:
    """A swish with a sharper gate: ``x * sigmoid(beta * x)``."""
    return x * jax.nn.sigmoid(beta * x)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="train the `fast` env for a few seconds")
    parser.add_argument("--out", default=None, help="checkpoint directory (default: a temporary one)")
    args = parser.parse_args(argv)
    env_name = "fast" if args.tiny else "inverted_pendulum"
    out = args.out or tempfile.mkdtemp(prefix="ckpt-")

    checkpoint.register_activation("scaled_swish", scaled_swish)
    config = dict(presets.TRAIN_KWARGS[env_name])
    sizes = presets.network_kwargs(env_name)
    config["network_factory"] = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=sizes["policy_hidden_layer_sizes"],
        value_hidden_layer_sizes=sizes["value_hidden_layer_sizes"],
        activation=functools.partial(scaled_swish, beta=2.0),
    )
    if args.tiny:
        config.update(num_timesteps=config["num_timesteps"] // 8, num_evals=2)
    make_policy, params, metrics = ppo.train(env_name, save_checkpoint_path=out, **config)
    print(f"trained; eval reward {metrics['eval/episode_reward']:.1f}; checkpoints in {out}")
    print("saved activation:", checkpoint.load_config_json(out)["network_factory_kwargs"]["activation"])

    loaded = checkpoint.load_policy(out, deterministic=True)
    obs = jax.random.normal(jax.random.PRNGKey(0), (8, jnp.size(params.normalizer_params.mean)))
    expected, _ = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(1))
    actual, _ = loaded(obs, jax.random.PRNGKey(1))
    gap = float(np.max(np.abs(np.asarray(actual) - np.asarray(expected))))
    print(f"loaded policy matches the trained one (max action difference {gap:.2e})")
    return {
        "path": out,
        "max_action_difference": gap,
        "config": checkpoint.load_config(out).to_dict(),  # live: the activation is the partial again
        "saved_config": checkpoint.load_config_json(out),  # as written: the activation by name
    }


if __name__ == "__main__":
    main()
