"""PPO checkpoints (``brax.training.agents.ppo.checkpoint`` counterpart): the step directories of
``brax_core.training.run.checkpoints`` holding the orbax items of ``brax_core.training.checkpoint`` (whose names are
public here too, under Brax's module path): ``config`` (the network configuration, the env-step count and the
training settings a resume checks), ``params`` (``PPOTrainingParams``), ``state`` (optimiser state, RNG key, step
counters) and ``env_state`` (the training envs, so a resumed run continues exactly).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ml_collections import config_dict

from brax_core.training import checkpoint, resume, types
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import networks_vision
from brax_core.training.checkpoint import (
    check_observation_size,
    config_to_json,
    load_config,
    load_config_json,
    network_config,
    networks_from_config,
    register_activation,
    restore_env_state,
)
from brax_core.training.run.checkpoints import CheckpointError, latest_step, resolve, resolve_for, step_directories

__all__ = [
    "CheckpointError", "Saver", "abstract_params", "check_observation_size", "checkpoint_config", "config_to_json",
    "latest_step", "load", "load_config", "load_config_json", "load_params", "load_policy", "network_config",
    "networks_from_config", "register_activation", "resolve", "restore_env_state", "restore_item", "save",
    "step_directories",
]

checkpoint.register_callable("make_ppo_networks", ppo_networks.make_ppo_networks)


class Saver(checkpoint.Saver):
    """``brax_core.training.checkpoint.Saver`` of PPO: Brax's ``(normalizer_params, policy_params, value_params)``
    tuple is saved as the ``PPOTrainingParams`` training saves, so both load alike."""

    params_type = ppo_networks.PPOTrainingParams


def save(
    path: str | os.PathLike,
    step: int,
    params: Any,
    config: Mapping[str, Any] | config_dict.ConfigDict,
    state: Any | None = None,
    env_state: Any | None = None,
    max_to_keep: int | None = None,
) -> str:
    """Saves one checkpoint under ``path`` in the step directory ``step`` (the env-step count), as Brax's
    ``save(path, step, params, config)``; ``state`` (optimiser state, key, counters) and ``env_state`` make it
    resumable (see ``Saver``). ``params`` are ``PPOTrainingParams`` or Brax's
    ``(normalizer_params, policy_params, value_params)`` tuple. Returns the step directory.

    A configuration value that cannot be stored raises ``ValueError`` before anything is written.
    """
    if isinstance(state, config_dict.ConfigDict) or (
        isinstance(state, Mapping) and state.get("format") == checkpoint.CONFIG_FORMAT
    ):
        raise TypeError(
            "save(path, step, params, config, state=None, env_state=None, max_to_keep=None): state is a checkpoint "
            "configuration; pass the configuration as config, the fourth argument (as Brax's save)"
        )
    config_to_json(config)
    saver = Saver(path, max_to_keep=max_to_keep)
    try:
        return saver.save(step, params, state, config, env_state)
    finally:
        saver.close()


def restore_item(path: str | os.PathLike, item: str, target: Any) -> Any:
    """One item (``params``, ``state``) restored into the structure (and shardings) of ``target``."""
    return checkpoint.restore_checked(resolve_for(path, "jax"), item, target)


def abstract_params(
    network: ppo_networks.PPONetworks, observation_size: types.ObservationSize, std_eps: float = 0.0
) -> ppo_networks.PPOTrainingParams:
    """Shapes and dtypes of ``PPOTrainingParams`` for ``network`` (nothing is computed; ``std_eps`` is the
    normaliser's setting; as in training, image views have no running statistics)."""
    saved = (network.policy_network, network.value_network)
    observations = networks_vision.remove_pixels(observation_size)
    return ppo_networks.PPOTrainingParams(*checkpoint.abstract_params(observations, saved, std_eps))


def _saved_params(network: ppo_networks.PPONetworks, config: Mapping[str, Any]) -> ppo_networks.PPOTrainingParams:
    return abstract_params(network, checkpoint.saved_observation_size(config), config.get("normalizer_std_eps", 0.0))


def load_params(path: str | os.PathLike) -> ppo_networks.PPOTrainingParams:
    """``PPOTrainingParams(normalizer_params, policy_params, value_params)`` from a checkpoint."""
    return checkpoint.load_checkpoint(path, "ppo", _saved_params)[3]


load = load_params
"""Brax's name for ``load_params``: ``(normalizer_params, policy_params, value_params)`` from a checkpoint."""


def load_policy(
    path: str | os.PathLike, network_factory: Callable[..., Any] | None = None, deterministic: bool = True
) -> types.Policy:
    """Rebuilds the inference function ``(observation, key) -> (action, extras)`` from a checkpoint alone (as
    Brax's ``load_policy``; ``network_factory`` replaces the saved factory, called with the saved arguments)."""
    return checkpoint.load_policy(
        path, "ppo", _saved_params, ppo_networks.make_inference_fn, network_factory, deterministic
    )


def checkpoint_config(
    observation_size: types.ObservationSize,
    action_size: int,
    normalize_observations: bool,
    network_factory: Callable[..., Any],
    hyperparameters: Any,
    required: Any = True,
) -> dict[str, Any]:
    """A run's checkpoint configuration: ``network_config`` plus ``training`` (the ``resume.RESUME_FIELDS`` of the
    validated ``hyperparameters``, a ``PPOConfig``).

    A network argument that cannot be named raises ``ValueError`` when ``required`` is true (a run that saves);
    otherwise (a run that only restores) the configuration holds the sizes and ``training`` only.
    """
    try:
        config = config_to_json(network_config(observation_size, action_size, normalize_observations, network_factory))
    except ValueError:
        if required:
            raise
        size = checkpoint.observation_size_json(observation_size)
        config = {"observation_size": size, "action_size": int(action_size)}
    fields = hyperparameters.flat()
    config["training"] = {name: fields[name] for name in resume.RESUME_FIELDS}
    return config
