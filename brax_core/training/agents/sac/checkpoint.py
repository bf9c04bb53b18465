"""Checkpoints of the JAX SAC (``brax.training.agents.sac.checkpoint`` counterpart), in the step directories every
trainer of this library writes (``brax_core.training.checkpoint.Saver``: orbax items with a manifest of their
digests, written atomically).

A step directory holds ``config`` (the network configuration of ``brax_core.training.checkpoint`` with
``"algo": "sac"``) and ``params``, the ``(normalizer_params, policy_params)`` pair ``make_inference_fn`` takes;
``load_policy`` rebuilds the policy from it alone, as Brax's does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
from ml_collections import config_dict

from brax_core.training import types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.sac import networks as sac_networks
from brax_core.training.checkpoint import (
    Saver,
    checked_policy,
    config_to_json,
    live_config,
    network_config,
    networks_from_config,
    on_default_device,
    read_config,
    register_callable,
    restore_checked,
    saved_observation_size,
)
from brax_core.training.run.checkpoints import resolve_for

__all__ = ["load", "load_config", "load_policy", "network_config", "restore_params", "save"]

register_callable("make_sac_networks", sac_networks.make_sac_networks)


def save(path: str | os.PathLike, step: int, params: Any, config: Mapping[str, Any] | config_dict.ConfigDict) -> str:
    """Saves ``params`` (``(normalizer_params, policy_params)``) under ``path`` in the step directory ``step`` (the
    env-step count) with the network configuration ``config`` (``network_config``'s); returns the step directory.
    A configuration value that cannot be stored raises ``ValueError`` before anything is written."""
    saved = {**config_to_json(config), "algo": "sac"}
    saver = Saver(path)
    try:
        return saver.save(step, tuple(params), None, saved)
    finally:
        saver.close()


def load_config(path: str | os.PathLike) -> config_dict.ConfigDict:
    """The network configuration of a SAC checkpoint (a step directory, or the newest under ``path``), with its
    callables and tuples as Python values (``network_factory(obs, act, **config.network_factory_kwargs)``)."""
    return config_dict.ConfigDict(live_config(read_config(path, "sac")))


def restore_params(path: str | os.PathLike, target: Any) -> tuple[Any, Any]:
    """The ``(normalizer_params, policy_params)`` of a SAC checkpoint restored into ``target``'s shapes (arrays or
    ``jax.ShapeDtypeStruct``s): an array saved with another shape is refused, naming it."""
    step_dir = resolve_for(path, "jax")
    read_config(step_dir, "sac")  # refuses another algorithm's checkpoint, naming its loader
    return tuple(restore_checked(step_dir, "params", on_default_device(target)))


def _saved_shapes(config: Mapping[str, Any], network: sac_networks.SACNetworks) -> Any:
    statistics = running_statistics.init_state(jax.ShapeDtypeStruct((saved_observation_size(config),), "float32"))
    return jax.eval_shape(lambda: (statistics, network.policy_network.init(jax.random.PRNGKey(0))))


def load(path: str | os.PathLike, network_factory: Callable[..., Any] | None = None) -> tuple[Any, Any]:
    """The ``(normalizer_params, policy_params)`` of a SAC checkpoint."""
    step_dir = resolve_for(path, "jax")
    config = read_config(step_dir, "sac")
    return restore_params(step_dir, _saved_shapes(config, networks_from_config(config, network_factory)))


def load_policy(
    path: str | os.PathLike,
    network_factory: Callable[..., sac_networks.SACNetworks] | None = None,
    deterministic: bool = True,
) -> types.Policy:
    """The policy ``(observation, key) -> (action, extras)`` rebuilt from a SAC checkpoint alone;
    ``network_factory`` replaces the saved factory (called with the saved arguments), ``deterministic`` takes the
    action distribution's mode."""
    if network_factory is not None and not callable(network_factory):
        raise TypeError(f"network_factory must be callable or None, got {network_factory!r}")
    step_dir = resolve_for(path, "jax")
    config = read_config(step_dir, "sac")
    network = networks_from_config(config, network_factory)
    params = restore_params(step_dir, _saved_shapes(config, network))
    policy = sac_networks.make_inference_fn(network)(params, deterministic=deterministic)
    return checked_policy(step_dir, policy, config)
