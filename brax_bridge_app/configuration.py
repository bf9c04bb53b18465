"""A run's hyperparameters resolved (command-line default < preset < flag) into a ``PPOConfig``, and a config
mapped to either trainer's keyword arguments.

Which keyword arguments a trainer takes is stated by the schema (each field's ``trainers``); the network fields
are the one difference in how they are passed (JAX: inside a ``network_factory``; torch: by name).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from brax_bridge_app import envinfo, hparams
from brax_bridge_app.hparams import HParamError
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import presets as ppo_presets
from brax_core.training.agents.ppo.config import (
    NETWORK_FIELDS,
    ConfigError,
    PPOConfig,
    fields_of_train_kwargs,
)


def presets() -> dict[str, dict[str, Any]]:
    """brax_core's PPO presets by name (-> ``ppo.train`` keyword arguments): each env's own under the env's name,
    and Brax's GPU recipes (``presets.GPU_PRESETS``) under ``<env>-gpu``."""
    gpu = {f"{env}-gpu": preset for env, preset in ppo_presets.GPU_PRESETS.items()}
    return {**ppo_presets.PRESETS, **gpu}


def _preset_values(preset: Mapping[str, Any]) -> dict[str, Any]:
    """A preset's entries as schema fields, a callable activation by its name (run folders are JSON)."""
    values = fields_of_train_kwargs(preset)
    if callable(values.get("activation")):
        values["activation"] = getattr(values["activation"], "__name__", str(values["activation"]))
    return values


def resolve(
    env_name: str, preset_name: str | None, overrides: Mapping[str, Any], configured: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], str | None]:
    """Every command-line hyperparameter's value: command-line default < preset < config file (``configured``,
    where ``None`` is a value) < flag (``overrides``, where ``None`` means not given), validated together.
    Returns ``(values, preset used)``.

    ``preset_name=None`` picks the env's own preset when one exists. An unknown preset name is an error, and so
    is a preset setting something the command line cannot override (it would be a silent setting). A preset's
    seed is dropped: the commands take ``--seed``/``--seeds``.
    """
    table = presets()
    if preset_name is not None and preset_name not in table:
        raise HParamError(f"--preset must be one of: {', '.join(sorted(table))}; got {preset_name!r}")
    used = preset_name if preset_name is not None else (env_name if env_name in table else None)
    values = hparams.defaults()
    try:
        if used is not None:
            from_preset = _preset_values(table[used])
            from_preset.pop("seed", None)
            unknown = sorted(set(from_preset) - set(hparams.BY_NAME))
            if unknown:
                raise HParamError(f"preset {used!r} sets {unknown}, which the command line cannot override")
            values.update(from_preset)
        values.update(hparams.from_flags(dict(configured or {})))
        values.update(hparams.from_flags({k: v for k, v in overrides.items() if v is not None}))
        if values["episode_length"] is None:
            values["episode_length"] = env_default_episode_length(env_name)
        config = PPOConfig(**values)
    except ConfigError as err:
        raise HParamError(err.flag_message) from None
    return {name: getattr(config, name) for name in hparams.BY_NAME}, used


def config_of_run_folder(run: Mapping[str, Any]) -> PPOConfig:
    """The ``PPOConfig`` of a run folder's ``config.json`` (``hyperparameters`` and ``seed``); fields a
    folder lacks take the command line's defaults."""
    values = {**hparams.defaults(), **run["hyperparameters"], "seed": int(run["seed"])}
    try:
        return PPOConfig(**values)
    except ConfigError as err:
        raise HParamError(err.flag_message) from None


def env_default_episode_length(env_name: str) -> int:
    return envinfo.default_episode_length(env_name)


def jax_kwargs(config: PPOConfig) -> dict[str, Any]:
    """Keyword arguments for ``brax_core.training.agents.ppo.train.train``: the fields the JAX trainer takes,
    with the network fields inside a ``make_ppo_networks`` partial."""
    kwargs = config.trainer_kwargs("jax")
    network = {name: kwargs.pop(name) for name in NETWORK_FIELDS}
    kwargs["network_factory"] = functools.partial(ppo_networks.make_ppo_networks, **network)
    return kwargs


def torch_kwargs(config: PPOConfig) -> dict[str, Any]:
    """Keyword arguments for ``torch_ppo.train``: the fields the torch trainer takes, network fields by name."""
    return config.trainer_kwargs("torch")
