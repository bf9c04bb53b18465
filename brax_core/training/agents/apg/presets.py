"""APG's presets, for both of its trainers: ``PRESETS[name]`` is the ``APGConfig`` a run of the env ``name`` starts
from (the env's name left unset), built from ``PRESET_FIELDS[name]``, the fields it sets over Brax's defaults:
``apg.train_from_config(PRESETS[name], name)``, ``torch_analytic.apg.train_from_config(PRESETS[name], name)``, or
``brax-bridge train --algo apg --env NAME``. How they were chosen and what they reach:
benchmarks/results/gradients.md."""

from __future__ import annotations

from typing import Any

from brax_core.training.agents.apg.config import APGConfig

# Brax's APG with 64 envs and the policy gradient clipped to norm 1 (Brax's 1e9 lets one stiff contact take the
# whole step), at a CPU's budget of env steps; evaluations every 10,000 env steps.
_LOCOMOTION: dict[str, Any] = dict(
    num_timesteps=200_000, episode_length=1000, num_envs=64, max_grad_norm=1.0, learning_rate=1e-3, num_evals=21,
    num_eval_envs=16,
)

# The contact-free envs whose reward has an action gradient (inverted_pendulum with reward="upright", reacher): the
# same 64 envs and clip, PPO's preset's budget of env steps and evaluations, a larger step (nothing stiff to cross).
_SMOOTH: dict[str, Any] = dict(
    num_timesteps=400_000, episode_length=1000, num_envs=64, max_grad_norm=1.0, learning_rate=3e-3, num_evals=21,
    num_eval_envs=16,
)

PRESET_FIELDS: dict[str, dict[str, Any]] = {
    "halfcheetah": dict(_LOCOMOTION),
    "ant": dict(_LOCOMOTION),
    "inverted_pendulum": dict(_SMOOTH),
    # Holding the fingertip on its target takes actions of about 0.01 (motor gear 200): many small, precise updates
    # (16 envs, 16-step unrolls: 256 env steps each) with Adam's usual betas and a step decaying twentyfold over the
    # run, training episodes of 96 steps so that a sixth of the unrolls start with the arm away from the target, a
    # tanh policy with layer norm (the orthogonal(0.01) kernels of Brax's APG need it), and the policy's mode
    # evaluated. Brax's defaults and the other envs' recipe held at -100 to -115, the target-blind answer of a
    # fingertip parked at the targets' centre (benchmarks/results/gradients.md, "a reaching task").
    "reacher": dict(
        num_timesteps=1_024_000, episode_length=1000, training_episode_length=96, num_envs=16, horizon_length=16,
        learning_rate=3e-3, adam_b=(0.9, 0.999), schedule_decay=0.99925, max_grad_norm=1.0,
        normalize_observations=True, policy_hidden_layer_sizes=(64, 64), activation="tanh", layer_norm=True,
        deterministic_eval=True, num_evals=11, num_eval_envs=64,
    ),
}
PRESETS: dict[str, APGConfig] = {name: APGConfig.from_flat(fields) for name, fields in PRESET_FIELDS.items()}
