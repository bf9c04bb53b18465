"""SHAC's presets: ``PRESETS[name]`` is the ``SHACConfig`` a run of the env ``name`` starts from (the env's name left
unset), built from ``PRESET_FIELDS[name]``, the fields it sets over the reference configuration's defaults:
``torch_analytic.shac.train_from_config(PRESETS[name], name)``, or ``brax-bridge train --algo shac --env NAME``.
How they were chosen and what they reach: benchmarks/results/gradients.md."""

from __future__ import annotations

from typing import Any

from brax_core.training.agents.shac.config import SHACConfig

# The reference implementation's Ant and Cheetah configurations (the defaults of SHACConfig) at a CPU's budget of
# env steps: 64 envs, 32-step windows, evaluations every 10,000 env steps.
_LOCOMOTION: dict[str, Any] = dict(num_timesteps=200_000, episode_length=1000, num_evals=21, num_eval_envs=16)

# The contact-free envs whose reward has an action gradient (inverted_pendulum with reward="upright", reacher): the
# reference defaults at PPO's preset's budget of env steps and evaluations.
_SMOOTH: dict[str, Any] = dict(num_timesteps=400_000, episode_length=1000, num_evals=21, num_eval_envs=16)

PRESET_FIELDS: dict[str, dict[str, Any]] = {
    "halfcheetah": dict(_LOCOMOTION),
    "ant": dict(_LOCOMOTION),
    "inverted_pendulum": dict(_SMOOTH),
    "reacher": dict(_SMOOTH, num_eval_envs=64),
}
PRESETS: dict[str, SHACConfig] = {name: SHACConfig.from_flat(fields) for name, fields in PRESET_FIELDS.items()}
