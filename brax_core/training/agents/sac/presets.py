"""SAC's presets: ``PRESETS[name]`` is the ``SACConfig`` a run of the env ``name`` starts from (the env's name left
unset), built from ``PRESET_FIELDS[name]``, the fields it sets over Brax's defaults:
``sac.train_from_config(PRESETS[name], name)``. How they were chosen and what they reach:
benchmarks/results/learning.md, "SAC".
"""

from __future__ import annotations

from typing import Any

from brax_core.training.agents.sac.config import SACConfig

PRESET_FIELDS: dict[str, dict[str, Any]] = {
    # The shape of the SAC recipes in Brax's training notebook (128 envs, 32 SGD steps on batches of 128 per env
    # step, a replay buffer prefilled with 8,192 transitions) with discount 0.97 and reward scaling 10, evaluated on
    # 16 envs: every seed balances the pole by 66,560 env steps (results/learning.md, "Learning, SAC").
    "inverted_pendulum": dict(
        num_timesteps=300_000, num_evals=11, episode_length=1000, num_envs=128, num_eval_envs=16,
        learning_rate=6e-4, discounting=0.97, batch_size=128, grad_updates_per_step=32, reward_scaling=10.0,
        normalize_observations=True, max_replay_size=1_048_576, min_replay_size=8192,
    ),
}
PRESETS: dict[str, SACConfig] = {name: SACConfig.from_flat(fields) for name, fields in PRESET_FIELDS.items()}
