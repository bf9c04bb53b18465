"""Checkpoints of the JAX SAC (``brax.training.agents.sac.checkpoint`` counterpart): the step directories of
``brax_core.training.run.checkpoints`` holding the orbax items of ``brax_core.training.checkpoint``: ``config`` (the
network configuration with ``"algo": "sac"``) and ``params``, the ``(normalizer_params, policy_params)`` pair
``make_inference_fn`` takes, from which ``load_policy`` rebuilds the policy alone, as Brax's does. A run saved with
``save_checkpoint_path`` also holds its configuration (``"training"``), ``state`` (the training state, the replay
buffer and the run's key) and ``env_state``, from which ``restore_checkpoint_path`` continues the run exactly
(``resumable``, ``restore``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ml_collections import config_dict

from brax_core.training import checkpoint, resume, types
from brax_core.training.agents.sac import networks as sac_networks
from brax_core.training.agents.sac.config import SACConfig
from brax_core.training.checkpoint import Saver, network_config, read_config, restore, run_config
from brax_core.training.run.checkpoints import resolve_for

__all__ = [
    "Saver", "load", "load_config", "load_policy", "network_config", "restore", "restore_params", "resumable",
    "run_config", "save",
]

checkpoint.register_callable("make_sac_networks", sac_networks.make_sac_networks)


def save(path: str | os.PathLike, step: int, params: Any, config: Mapping[str, Any] | config_dict.ConfigDict) -> str:
    """Saves ``params`` (``(normalizer_params, policy_params)``) under ``path`` in the step directory ``step`` (the
    env-step count) with the network configuration ``config`` (``network_config``'s); returns the step directory.
    A configuration value that cannot be stored raises ``ValueError`` before anything is written."""
    saved = {**checkpoint.config_to_json(config), "algo": "sac"}
    saver = Saver(path)
    try:
        return saver.save(step, tuple(params), None, saved)
    finally:
        saver.close()


def load_config(path: str | os.PathLike) -> config_dict.ConfigDict:
    """The network configuration of a SAC checkpoint (a step directory, or the newest under ``path``), with its
    callables and tuples as Python values (``network_factory(obs, act, **config.network_factory_kwargs)``)."""
    return checkpoint.load_config(path, "sac")


def restore_params(path: str | os.PathLike, target: Any) -> tuple[Any, Any]:
    """The ``(normalizer_params, policy_params)`` of a SAC checkpoint restored into ``target``'s shapes (arrays or
    ``jax.ShapeDtypeStruct``s): an array saved with another shape is refused, naming it."""
    step_dir = resolve_for(path, "jax")
    read_config(step_dir, "sac")  # refuses another algorithm's checkpoint, naming its loader
    return tuple(checkpoint.restore_checked(step_dir, "params", checkpoint.on_default_device(target)))


def _saved_params(network: sac_networks.SACNetworks, config: Mapping[str, Any]) -> tuple[Any, Any]:
    return checkpoint.abstract_params(checkpoint.saved_observation_size(config), (network.policy_network,))


def load(path: str | os.PathLike, network_factory: Callable[..., Any] | None = None) -> tuple[Any, Any]:
    """The ``(normalizer_params, policy_params)`` of a SAC checkpoint."""
    return tuple(checkpoint.load_checkpoint(path, "sac", _saved_params, network_factory)[3])


def load_policy(
    path: str | os.PathLike,
    network_factory: Callable[..., sac_networks.SACNetworks] | None = None,
    deterministic: bool = True,
) -> types.Policy:
    """The policy ``(observation, key) -> (action, extras)`` rebuilt from a SAC checkpoint alone;
    ``network_factory`` replaces the saved factory (called with the saved arguments), ``deterministic`` takes the
    action distribution's mode."""
    return checkpoint.load_policy(
        path, "sac", _saved_params, sac_networks.make_inference_fn, network_factory, deterministic
    )


def resumable(path: str | os.PathLike | None, config: SACConfig) -> str | None:
    """The step directory of a whole saved run that a run of ``config`` continues exactly (``None``: no path, or a
    checkpoint of the policy alone, which a run starts from as Brax's does), checked to hold a SAC run of the same
    settings (only ``num_timesteps`` may change; with it a replay buffer left at its default size, which must
    then keep its size): read before anything compiles."""
    step_dir = None if path is None else resolve_for(path, "jax")
    saved = None if step_dir is None else read_config(step_dir, "sac")
    if saved is None or "training" not in saved or not os.path.isdir(os.path.join(step_dir, "state")):
        return None
    capacity = resume.check_same_config(step_dir, saved["training"], config).replay_capacity
    if capacity != config.replay_capacity:
        raise ValueError(
            f"cannot resume from {step_dir!r}: its replay buffer holds {capacity} transitions (the run's "
            f"num_timesteps, max_replay_size being unset) and this run's would hold {config.replay_capacity}; set "
            f"max_replay_size={capacity} to resume it with another num_timesteps"
        )
    return step_dir
