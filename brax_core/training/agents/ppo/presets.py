"""Hyperparameters that train each environment quickly on a CPU.

``PRESETS[name]`` is a ``PPOConfig`` (the env's name left unset): ``ppo.train_from_config(PRESETS[name], env)`` and
``torch_ppo.train_from_config(PRESETS[name], env)``. The same values as Brax's keyword arguments are
``TRAIN_KWARGS[name]``, everything but the environment: ``ppo.train(env, **TRAIN_KWARGS[name])``, network sizes in
the ``network_factory`` partial (``network_kwargs(name)`` returns them as plain data). ``GPU_PRESETS`` and
``GPU_TRAIN_KWARGS`` hold Brax's GPU recipes alike. How each was tuned and what it reaches are in
benchmarks/results/learning.md ("Preset tuning").
"""

from __future__ import annotations

import functools
from typing import Any

from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo.config import PPOConfig


def _networks(policy: tuple[int, ...], value: tuple[int, ...], activation: str = "swish") -> functools.partial:
    return functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=policy,
        value_hidden_layer_sizes=value,
        activation=activation,
    )


def _locomotion(**overrides: Any) -> dict[str, Any]:
    """The locomotion recipe for a CPU's budget of env steps, with per-env overrides."""
    recipe = dict(
        episode_length=1000,
        num_envs=128,
        batch_size=4,
        num_minibatches=32,
        unroll_length=16,
        num_updates_per_batch=10,
        learning_rate=3e-4,
        entropy_cost=0.0,
        discounting=0.97,
        reward_scaling=1.0,
        normalize_observations=True,
        num_evals=21,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (128, 128)),
    )
    return {**recipe, **overrides}


TRAIN_KWARGS: dict[str, dict[str, Any]] = {
    # The no-physics test env: sized for tests that train it to the most a 100-step episode pays (68.7).
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
    # Small batches of short unrolls and small networks: on a CPU compiling dominates and the physics is cheap.
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
    # Tuned for few env steps; the clip ratio 0.1 keeps the balance once found.
    "inverted_double_pendulum": dict(
        num_timesteps=5_000_000,
        episode_length=1000,
        num_envs=128,
        batch_size=128,
        num_minibatches=8,
        unroll_length=16,
        num_updates_per_batch=10,
        learning_rate=3e-4,
        entropy_cost=1e-3,
        clipping_epsilon=0.1,
        discounting=0.97,
        reward_scaling=1.0,
        normalize_observations=True,
        num_evals=31,
        num_eval_envs=16,
        network_factory=_networks((64, 64), (128, 128)),
    ),
    # The double pendulum's recipe with Brax's action repeat; the small clip ratio, the entropy bonus and the wide
    # value network keep the arm from turning from steady to oscillating; many eval envs because where the target
    # lands sways an episode's reward.
    "reacher": dict(
        num_timesteps=8_000_000,
        episode_length=1000,
        action_repeat=4,
        num_envs=128,
        batch_size=128,
        num_minibatches=8,
        unroll_length=16,
        num_updates_per_batch=10,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        clipping_epsilon=0.1,
        discounting=0.97,
        reward_scaling=1.0,
        normalize_observations=True,
        num_evals=31,
        num_eval_envs=64,
        max_grad_norm=1.0,
        network_factory=_networks((64, 64), (256, 256)),
    ),
    # One recipe for the five locomotion envs, tuned for few env steps.
    "halfcheetah": _locomotion(num_timesteps=5_000_000),
    "hopper": _locomotion(num_timesteps=5_000_000),
    "walker2d": _locomotion(num_timesteps=5_000_000),
    "ant": _locomotion(num_timesteps=5_000_000),
    # humanoid: wider networks for its larger observation.
    "humanoid": _locomotion(num_timesteps=5_000_000, network_factory=_networks((128, 128), (256, 256))),
}


def _brax_gpu(**overrides: Any) -> dict[str, Any]:
    """Brax's locomotion recipe as its training notebook runs it on an accelerator, with per-env overrides."""
    recipe = dict(
        num_timesteps=50_000_000,
        episode_length=1000,
        num_minibatches=32,
        learning_rate=3e-4,
        discounting=0.97,
        normalize_observations=True,
        num_evals=10,
        num_eval_envs=128,
        network_factory=_networks((32,) * 4, (256,) * 5),
    )
    return {**recipe, **overrides}


# Brax's training-notebook recipes with Brax's default networks, sized for a GPU (``--preset <env>-gpu``).
GPU_TRAIN_KWARGS: dict[str, dict[str, Any]] = {
    "ant": _brax_gpu(
        num_envs=4096,
        batch_size=2048,
        unroll_length=5,
        num_updates_per_batch=4,
        entropy_cost=1e-2,
        reward_scaling=10.0,
    ),
    "humanoid": _brax_gpu(
        num_envs=2048,
        batch_size=1024,
        unroll_length=10,
        num_updates_per_batch=8,
        entropy_cost=1e-3,
        reward_scaling=0.1,
    ),
    "halfcheetah": _brax_gpu(
        num_envs=2048,
        batch_size=512,
        unroll_length=20,
        num_updates_per_batch=8,
        entropy_cost=1e-3,
        discounting=0.95,
        reward_scaling=1.0,
        num_evals=20,
    ),
}

# Playground's Control Suite config cut to a CPU's size (``{**from_playground(config), **PLAYGROUND_CPU, ...}``), so
# that CartpoleSwingup and CheetahRun learn on a CPU.
PLAYGROUND_CPU: dict[str, Any] = dict(
    num_envs=256,
    batch_size=256,
    num_minibatches=4,
    num_updates_per_batch=4,
    num_eval_envs=32,
    num_evals=11,
    num_resets_per_eval=1,
)


# The presets as configurations: the fields the keyword arguments set, Brax's defaults for the rest.
PRESETS: dict[str, PPOConfig] = {name: PPOConfig.from_train_kwargs(kw) for name, kw in TRAIN_KWARGS.items()}
GPU_PRESETS: dict[str, PPOConfig] = {name: PPOConfig.from_train_kwargs(kw) for name, kw in GPU_TRAIN_KWARGS.items()}


def network_kwargs(name: str) -> dict[str, Any]:
    """The network keyword arguments of a preset (hidden layer sizes, activation name)."""
    if name not in TRAIN_KWARGS:
        raise ValueError(f"no PPO preset named {name!r}; presets: {sorted(TRAIN_KWARGS)}")
    return dict(TRAIN_KWARGS[name]["network_factory"].keywords)


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
