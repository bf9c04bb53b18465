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
    # The no-physics test env: eval reward 68.7 (the most a 100-step episode pays; ~34 untrained) after 48 training
    # steps of 1280 env steps.
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
    # Cart-pole balancing on MJX: eval reward 1000 (the maximum) at 221k env steps (JAX) and 197k (torch), then stays
    # there (measured to 492k; benchmarks/learning.py, 2-core CPU, load 2-6: 99 s and 91 s including start-up).
    # Small batches of short unrolls from 128 envs: on a CPU, compiling dominates and the physics is cheap, so few
    # env steps and small networks beat Brax's 2048-env recipe.
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
    # Brax's recipe (unroll 5, γ 0.97, entropy 1e-2, reward scaling 10) on 256 envs with smaller networks.
    # Measured (benchmarks/learning.py, 2-core CPU, no GPU, load 2-6, seed 0): eval reward 319 (JAX) and 686 (torch)
    # after about 2M env steps in 3 minutes, from 156 for a random policy; not yet near its maximum of about 9,350.
    "inverted_double_pendulum": dict(
        num_timesteps=10_000_000,
        episode_length=1000,
        num_envs=256,
        batch_size=256,
        num_minibatches=16,
        unroll_length=5,
        num_updates_per_batch=4,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        discounting=0.97,
        reward_scaling=10.0,
        normalize_observations=True,
        num_evals=41,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (128, 128)),
    ),
    # Brax's recipe (action repeat 4, γ 0.95, reward scaling 5, 8 updates per batch) on 128 envs.
    # Measured (benchmarks/learning.py, 2-core CPU, no GPU, load 2-6, seed 0): eval reward -93 (JAX, 1.4M env steps)
    # and -23 (torch, 2.0M) in 3 minutes, from -815 for a random policy.
    "reacher": dict(
        num_timesteps=5_000_000,
        episode_length=1000,
        action_repeat=4,
        num_envs=128,
        batch_size=128,
        num_minibatches=4,
        unroll_length=20,
        num_updates_per_batch=8,
        learning_rate=1e-3,
        entropy_cost=1e-3,
        discounting=0.95,
        reward_scaling=5.0,
        normalize_observations=True,
        num_evals=21,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (64, 64)),
    ),
    # Brax's recipe (unroll 20, γ 0.95, entropy 1e-3, reward scaling 1) on 128 envs.
    # Measured (benchmarks/learning.py, 2-core CPU, no GPU, load 2-6, seed 0): only 200k env steps fit in 3 minutes
    # (eval reward -62 JAX, -133 torch; random policy -234); longer runs are still to be measured.
    "halfcheetah": dict(
        num_timesteps=3_000_000,
        episode_length=1000,
        num_envs=128,
        batch_size=128,
        num_minibatches=8,
        unroll_length=20,
        num_updates_per_batch=4,
        learning_rate=3e-4,
        entropy_cost=1e-3,
        discounting=0.95,
        reward_scaling=1.0,
        normalize_observations=True,
        num_evals=16,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (128, 128)),
    ),
    # Brax trains hopper and walker2d with SAC; these PPO settings follow its locomotion recipe (γ 0.97,
    # entropy 1e-3, unroll 20) on 128 envs.
    # Not yet measured: a first guess from the settings above.
    "hopper": dict(
        num_timesteps=3_000_000,
        episode_length=1000,
        num_envs=128,
        batch_size=128,
        num_minibatches=8,
        unroll_length=20,
        num_updates_per_batch=4,
        learning_rate=3e-4,
        entropy_cost=1e-3,
        discounting=0.97,
        reward_scaling=1.0,
        normalize_observations=True,
        num_evals=16,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (128, 128)),
    ),
    # Not yet measured: the hopper's settings.
    "walker2d": dict(
        num_timesteps=3_000_000,
        episode_length=1000,
        num_envs=128,
        batch_size=128,
        num_minibatches=8,
        unroll_length=20,
        num_updates_per_batch=4,
        learning_rate=3e-4,
        entropy_cost=1e-3,
        discounting=0.97,
        reward_scaling=1.0,
        normalize_observations=True,
        num_evals=16,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (128, 128)),
    ),
    # Brax's recipe (unroll 5, γ 0.97, entropy 1e-2, reward scaling 10) on 128 envs.
    # Not yet measured: a first guess from Brax's settings.
    "ant": dict(
        num_timesteps=3_000_000,
        episode_length=1000,
        num_envs=128,
        batch_size=128,
        num_minibatches=8,
        unroll_length=10,
        num_updates_per_batch=4,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        discounting=0.97,
        reward_scaling=10.0,
        normalize_observations=True,
        num_evals=16,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (128, 128)),
    ),
    # Brax's recipe (unroll 10, 8 updates per batch, γ 0.97, entropy 1e-3, reward scaling 0.1) on 128 envs.
    # Not yet measured: a first guess from Brax's settings.
    "humanoid": dict(
        num_timesteps=3_000_000,
        episode_length=1000,
        num_envs=128,
        batch_size=128,
        num_minibatches=8,
        unroll_length=10,
        num_updates_per_batch=8,
        learning_rate=3e-4,
        entropy_cost=1e-3,
        discounting=0.97,
        reward_scaling=0.1,
        normalize_observations=True,
        num_evals=16,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (128, 128)),
    ),
}


def network_kwargs(name: str) -> dict[str, Any]:
    """The network keyword arguments of a preset (hidden layer sizes, activation name)."""
    if name not in PRESETS:
        raise ValueError(f"no PPO preset named {name!r}; presets: {sorted(PRESETS)}")
    return dict(PRESETS[name]["network_factory"].keywords)


def from_playground(config: Any) -> dict[str, Any]:
    """MuJoCo Playground's Brax PPO config as ``ppo.train`` keyword arguments, as Playground's training script
    hands it to Brax.

    ``config`` is Playground's ``ConfigDict`` (``mujoco_playground.config.dm_control_suite_params
    .brax_ppo_config(name)``, or the locomotion and manipulation ones) or a plain dict. Its ``network_factory``
    entry (keyword arguments of ``make_ppo_networks``) becomes a ``make_ppo_networks`` partial; every other key
    passes through unchanged, for ``train`` to validate.
    """
    as_dict = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    kwargs = dict(as_dict)
    factory = kwargs.pop("network_factory", None)
    if factory is not None:
        if not isinstance(factory, dict):
            raise ValueError(f"network_factory must be a dict of make_ppo_networks arguments, got {factory!r}")
        kwargs["network_factory"] = functools.partial(ppo_networks.make_ppo_networks, **factory)
    return kwargs
