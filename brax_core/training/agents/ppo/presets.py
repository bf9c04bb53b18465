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


def _locomotion(**overrides: Any) -> dict[str, Any]:
    """The locomotion recipe (see the comment above ``halfcheetah``), with per-env overrides."""
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
    # Tuned for few env steps (a CPU's budget): 16-step unrolls from 128 envs, 10 passes over each batch at
    # learning rate 3e-4, γ 0.97, unscaled rewards. (Brax's recipe, unroll 5 with rewards scaled by 10, needed
    # far more env steps; learning rate 1e-3 got there sooner but then collapsed.)
    # The clip ratio 0.1 keeps the balance once found: with 0.2 all three JAX seeds reached 9,359-9,360 and then
    # fell back (final 1,400, 8,387, 4,351). Measured (benchmarks/learning.py, 2-core CPU, no GPU, quiet, 12 seeds
    # each, 4-minute runs, 5.4M env steps; the maximum is about 9,360, a random policy gets 156): the JAX trainer
    # passes 9,000 in 11 of 12 runs, at 1.3M-4.7M env steps (30-80 s from launch, 67-114 s a run), final median
    # 9,359; torch_ppo in 9 of 12, at 1.4M-4.1M (62-202 s, 211-246 s a run), final median 8,411. Both sometimes
    # fall back after passing it (3 of 11 JAX runs, 5 of 9 torch runs, below 7,000 at some later evaluation).
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
    # Brax's action repeat 4 with the double pendulum's recipe (16-step unrolls from 128 envs, 10 passes, learning
    # rate 3e-4, γ 0.97, unscaled rewards, gradient norm clipped at 1); 64 eval envs, since an episode's reward
    # depends much on where its target lands. Holding the fingertip on the target takes actions of about 0.01 (motor
    # gear 200), so small policy changes turn a steady arm into an oscillating one: with the usual clip ratio 0.2
    # and entropy cost 1e-3, seed-0 runs of the JAX trainer reached -10.3 to -12 and then fell back in sudden drops
    # (to between -36 and -77 within 1M env steps, whatever the discount, value network, normaliser freeze, passes
    # per batch or entropy cost tried). The clip ratio 0.1, entropy cost 0.01 and a (256, 256) value network make
    # the climb steady. Measured (benchmarks/learning.py, 2-core CPU, quiet, 6 seeds each, 9.8M env steps): every run
    # passes -10, the JAX trainer at 5.9M-8.8M env steps (74-141 s from launch, 116-153 s a run), torch_ppo at
    # 6.6M-7.2M (178-246 s, 259-323 s a run); final rewards JAX -6.9 to -10.7 (median -8.9), torch -7.7 to -10.2
    # (median -8.8) and one run that fell to -21.3 at its last evaluation.
    # For scale: a hand-tuned inverse-kinematics PD controller scores -5.2 (benchmarks/reacher_reference.py), a
    # random policy -815.
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
    # The locomotion tasks share one recipe tuned for few env steps (a CPU's budget), in the spirit of the
    # MuJoCo-benchmark PPO settings rather than Brax's GPU recipe: 2,048 env steps per update (16-step unrolls
    # from 128 envs), cut into 32 minibatches of 64 steps, 10 passes, learning rate 3e-4, no entropy bonus,
    # γ 0.97. On halfcheetah it reached eval reward 2,951 at 602k env steps where Brax's recipe scaled down to
    # 128 envs was still below 0 at 200k. Measured (benchmarks/learning.py, 2-core CPU, quiet, 3.5-minute runs
    # stopping at the first evaluation after, 6 seeds per trainer; random policy in brackets): torch_ppo
    # at 2.7k-4.3k env steps/s covers 0.5M-1.0M env steps, the JAX trainer at 5.6k-13.9k covers 1.26M-2.77M. Final
    # rewards JAX / torch: halfcheetah 3,929, 5,414, 866, 1,022, 3,227, 1,203 / 2,887, 1,480, 1,637, 517, 2,775, 3,800
    # [about -260]; hopper 480, 667, 667, 787, 627, 595 (best 1,028) / 1,025, 620, 574, 507, 359, 797 [17]; walker2d
    # 379, 494, 711, 461, 460, 892 / 1,222, 542, 418, 458, 466, 407 [3]; ant 213, 292, 346, 283, 301, 512 (best 1,005) /
    # 1,030, 374, 1,241, 220, 423, 242 [-8]. humanoid (3 seeds, 15 / 12-minute runs): final 486, 750, 485 (JAX, up to
    # 5.0M env steps) / 480, 603, 704 (torch, up to 1.76M) [123]. On a GPU, GPU_PRESETS below.
    "halfcheetah": _locomotion(num_timesteps=5_000_000),
    "hopper": _locomotion(num_timesteps=5_000_000),
    "walker2d": _locomotion(num_timesteps=5_000_000),
    "ant": _locomotion(num_timesteps=5_000_000),
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


# Brax's own PPO recipes for the locomotion tasks (its training notebook, ``notebooks/training.ipynb``) with Brax's
# default networks (policy 4 x 32, value 5 x 256, swish): 2,048-4,096 envs and 50M env steps, sized for a GPU, which
# the CPU presets' 128 envs leave idle. The command line offers them as ``--preset <env>-gpu``. Measured on one
# NVIDIA H200 (benchmarks/gpu_locomotion.sh; RESULTS.md "GPU"; seed 0, empty compile cache): ant passes eval reward
# 3,000 at 27.9M env steps with both trainers, 75 s (JAX) and 112 s (torch_ppo) from the start of training, and the
# JAX run ends its 50M env steps at 4,031 in 111 s (untrained about 830). Sharing the GPU with other runs, the JAX
# trainer took humanoid to 7,601 at 27.9M env steps (untrained 88) and halfcheetah to 5,717 at 17.7M, which fell to
# 3,399 at the next evaluation and climbed back to 5,063 by 44.2M (untrained about 0). Brax 0.14.2's own PPO with the
# ant recipe reaches 3,557 at 50M env steps on this package's ant, and 7,542 on Brax's ant simulated by its own
# `generalized` engine: the difference is the physics. No GPU preset for hopper and walker2d: Brax's notebook trains
# them with SAC, and its humanoid PPO recipe learned them more slowly per env step than their CPU presets.
GPU_PRESETS: dict[str, dict[str, Any]] = {
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

# Playground's Control Suite config (``brax_ppo_config``: 2,048 envs, 16 updates of 32 minibatches per batch, 60M env
# steps) takes hours per million env steps on 2 CPU cores. These overrides keep the rest of it (unroll, discounting,
# learning rate, entropy cost, reward scaling, normalisation, networks) and learn CartpoleSwingup and CheetahRun on
# a 2-core CPU within minutes: ``{**from_playground(config), **PLAYGROUND_CPU, "num_timesteps": ...}``
# (benchmarks/learning.py and benchmarks/vs_brax.py).
PLAYGROUND_CPU: dict[str, Any] = dict(
    num_envs=256,
    batch_size=256,
    num_minibatches=4,
    num_updates_per_batch=4,
    num_eval_envs=32,
    num_evals=11,
    num_resets_per_eval=1,
)


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
