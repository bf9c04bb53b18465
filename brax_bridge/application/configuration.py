"""A run's hyperparameters resolved (spec default < preset < flag) and passed to either trainer.

Both trainers take Brax's argument names, so one resolved dict drives either; only the network settings
differ in how they are passed (JAX: a ``network_factory``; torch: plain keyword arguments).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from flax import linen

import torch_ppo
from brax_bridge.application.hparams import BY_NAME, NETWORK_KEYS, SPECS, HParamError, check, check_consistency
from brax_core import envs
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import presets as ppo_presets
from brax_core.training.agents.ppo import train as ppo_train


def presets() -> dict[str, dict[str, Any]]:
    """brax_core's PPO presets (env name -> ``ppo.train`` keyword arguments)."""
    return dict(ppo_presets.PRESETS)


def _preset_values(preset: Mapping[str, Any]) -> dict[str, Any]:
    """A preset's entries under the CLI's names (a ``network_factory`` partial is unpacked into its kwargs)."""
    values = {}
    for key, value in preset.items():
        if key == "network_factory":
            keywords = dict(getattr(value, "keywords", None) or {})
            unknown = sorted(set(keywords) - set(NETWORK_KEYS))
            if unknown:  # a network setting the flags cannot express would be silently lost
                raise HParamError(f"preset network_factory sets {unknown}; the command line handles {NETWORK_KEYS}")
            values.update(keywords)
            continue
        values[key] = value
    if callable(values.get("activation")):
        values["activation"] = getattr(values["activation"], "__name__", str(values["activation"]))
    return values


def resolve(env_name: str, preset_name: str | None, overrides: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Every hyperparameter's value: spec default < preset < flag. Returns ``(values, preset used)``.

    ``preset_name=None`` picks the env's own preset when one exists. Unknown preset names and preset keys
    the CLI does not know are errors (a preset value that could not be overridden would be a silent setting).
    """
    table = presets()
    if preset_name is not None and preset_name not in table:
        known = ", ".join(sorted(table))
        raise HParamError(f"--preset must be one of: {known}; got {preset_name!r}")
    used = preset_name if preset_name is not None else (env_name if env_name in table else None)
    values = {s.name: s.default for s in SPECS}
    if used is not None:
        from_preset = _preset_values(table[used])
        unknown = sorted(set(from_preset) - set(BY_NAME) - {"seed"})
        if unknown:
            raise HParamError(f"preset {used!r} sets {unknown}, which the command line cannot override")
        from_preset.pop("seed", None)
        values.update(from_preset)
    values.update({k: v for k, v in overrides.items() if v is not None})
    resolved = {name: check(name, value) for name, value in values.items()}
    if resolved["episode_length"] is None:
        resolved["episode_length"] = env_default_episode_length(env_name)
    check_consistency(resolved)
    return resolved, used


def env_default_episode_length(env_name: str) -> int:
    return int(getattr(envs.get_environment_class(env_name), "default_episode_length", 1000))


def activation_fn(name: str) -> Callable:
    """The flax activation for a name in ``ACTIVATIONS``."""
    return getattr(linen, name)


def jax_kwargs(hp: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``brax_core.training.agents.ppo.train.train``."""
    kwargs = {k: v for k, v in hp.items() if k not in NETWORK_KEYS and "jax" in BY_NAME[k].trainers}
    kwargs["network_factory"] = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=tuple(hp["policy_hidden_layer_sizes"]),
        value_hidden_layer_sizes=tuple(hp["value_hidden_layer_sizes"]),
        activation=activation_fn(hp["activation"]),
    )
    return _accepted(ppo_train.train, kwargs)


def torch_kwargs(hp: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``torch_ppo.train`` (network settings passed by name)."""
    kwargs = {k: v for k, v in hp.items() if "torch" in BY_NAME[k].trainers}
    return _accepted(torch_ppo.train, kwargs)


def _accepted(fn: Callable, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Refuses kwargs the trainer does not take, naming them (never drops a setting silently)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise HParamError(f"{fn.__module__}.{fn.__name__} does not accept {unknown}")
    return kwargs
