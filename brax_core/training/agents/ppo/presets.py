"""Hyperparameters that train each environment quickly on a CPU (keyword arguments of ``ppo.train``).

``PRESETS[name]`` holds everything but the environment: ``ppo.train(env, **PRESETS[name])``. Network sizes live in
the ``network_factory`` partial; ``network_kwargs(name)`` returns them as plain data for trainers that build their
own networks (the torch trainer reuses these presets).
"""

from __future__ import annotations

import functools
from typing import Any

from brax_core.training.agents.ppo import networks as ppo_networks


def _networks(policy: tuple[int, ...], value: tuple[int, ...], activation: str = "swish") -> functools.partial:
    return functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=policy,
        value_hidden_layer_sizes=value,
        activation=activation,
    )


PRESETS: dict[str, dict[str, Any]] = {
    # The no-physics test env: learns (eval reward ~95 of 100) in 48 training steps of 1280 env steps.
    "fast": dict(
        num_timesteps=61_440,
        episode_length=100,
        num_envs=32,
        batch_size=32,
        num_minibatches=4,
        unroll_length=10,
        num_updates_per_batch=4,
        learning_rate=3e-3,
        entropy_cost=1e-3,
        discounting=0.95,
        normalize_observations=True,
        num_evals=4,
        num_eval_envs=32,
        network_factory=_networks((16, 16), (16, 16)),
    ),
    # Cart-pole balancing on MJX: eval reward 1000 (the maximum) after about 200k env steps, then stays there
    # (measured to 820k steps). Small batches of short unrolls from 128 envs: on a CPU, compiling dominates and
    # the physics is cheap, so few env steps and small networks beat Brax's 2048-env recipe.
    "inverted_pendulum": dict(
        num_timesteps=400_000,
        episode_length=1000,
        num_envs=128,
        batch_size=128,
        num_minibatches=4,
        unroll_length=16,
        num_updates_per_batch=4,
        learning_rate=5e-4,
        entropy_cost=1e-3,
        discounting=0.97,
        reward_scaling=0.1,
        normalize_observations=True,
        num_evals=21,
        num_eval_envs=16,
        network_factory=_networks((32, 32), (64, 64)),
    ),
}


def network_kwargs(name: str) -> dict[str, Any]:
    """The network keyword arguments of a preset (hidden layer sizes, activation name)."""
    if name not in PRESETS:
        raise ValueError(f"no PPO preset named {name!r}; presets: {sorted(PRESETS)}")
    return dict(PRESETS[name]["network_factory"].keywords)
