"""Checkpoints of the JAX APG: the step directories of ``brax_core.training.run.checkpoints`` holding the orbax items
of ``brax_core.training.checkpoint`` (``config`` with ``"algo": "apg"`` and the run's ``APGConfig`` as ``training``;
``params``, the ``(normalizer_params, policy_params)`` pair ``make_inference_fn`` takes; ``state``: optimiser state,
the run's key, the updates made; ``env_state``), so that a resumed run continues exactly (``resumable``,
``restore``). ``load_policy`` rebuilds the inference function from a checkpoint alone, as Brax's PPO's does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import jax.numpy as jnp

from brax_core.training import checkpoint, types
from brax_core.training.agents.apg import networks as apg_networks
from brax_core.training.checkpoint import Saver, networks_from_config, read_config, restore, resumable, run_config
from brax_core.training.run.checkpoints import CheckpointError, latest_step

__all__ = [
    "CheckpointError", "Saver", "latest_step", "load_params", "load_policy", "networks_from_config", "read_config",
    "restore", "resumable", "run_config",
]

checkpoint.register_callable("make_apg_networks", apg_networks.make_apg_networks)


def _saved_params(network: apg_networks.APGNetworks, config: Mapping[str, Any]) -> tuple[Any, Any]:
    dtype = jnp.float64 if config["training"]["algorithm"].get("use_float64") else jnp.float32
    return checkpoint.abstract_params(checkpoint.saved_observation_size(config), (network.policy_network,), dtype=dtype)


def load_params(path: str | os.PathLike, network_factory: Callable[..., Any] | None = None) -> tuple[Any, Any]:
    """The ``(normalizer_params, policy_params)`` of a checkpoint (a step directory, or the newest under a save
    path)."""
    return tuple(checkpoint.load_checkpoint(path, "apg", _saved_params, network_factory)[3])


def load_policy(
    path: str | os.PathLike, network_factory: Callable[..., Any] | None = None, deterministic: bool = True
) -> types.Policy:
    """The inference function ``(observation, key) -> (action, extras)`` rebuilt from a checkpoint alone (a step
    directory, or the newest under a save path); ``network_factory`` replaces the saved factory, called with the
    saved arguments; ``deterministic``: the policy's mode (else a sample)."""
    return checkpoint.load_policy(
        path, "apg", _saved_params, apg_networks.make_inference_fn, network_factory, deterministic
    )
