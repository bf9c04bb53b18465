"""PPO checkpoints with orbax (``brax.training.agents.ppo.checkpoint`` counterpart).

A checkpoint is one step directory of the layout both trainers share (``brax_core.training.run.checkpoints``:
``<save_checkpoint_path>/000000000100/``, written whole or not at all, a manifest of every file's SHA-256 checked
before orbax reads an item) holding the orbax items ``config`` (JSON: the network configuration of
``brax_core.training.checkpoint``, the env-step count and the training settings a resume checks), ``params``
(``PPOTrainingParams``), ``state`` (optimiser state, RNG key, step counters) and ``env_state`` (the training envs,
so a resumed run continues exactly). ``load_policy`` rebuilds the inference function from the checkpoint alone.

With several JAX processes (``jax.distributed``) every process saves into the same path, which must be on a
filesystem they all see: each writes its own shards, process 0 the rest and the manifest.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from ml_collections import config_dict

from brax_core.training import checkpoint, resume, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import networks_vision
from brax_core.training.checkpoint import (
    CONFIG_FORMAT,
    check_observation_size,
    checked_policy,
    config_to_json,
    load_config,
    load_config_json,
    network_config,
    networks_from_config,
    observation_size_json,
    on_default_device,
    read_config,
    register_activation,
    register_callable,
    restore_checked,
    restore_env_state,
    saved_observation_size,
    value_from_config,
)
from brax_core.training.run.checkpoints import CheckpointError, resolve, resolve_for, step_name
from brax_core.training.run.checkpoints import latest_step as latest_step  # the save path's newest step
from brax_core.training.run.checkpoints import step_directories as step_directories

# The shared checkpoint module's names (brax_core.training.checkpoint) are public here too, under Brax's module path.
__all__ = [
    "CONFIG_FORMAT", "CheckpointError", "Saver", "abstract_params", "check_observation_size", "check_resume_config",
    "checkpoint_config", "config_to_json", "latest_step", "load", "load_config", "load_config_json", "load_params",
    "load_policy", "network_config", "networks_from_config", "register_activation", "register_callable", "resolve",
    "restore_env_state", "restore_item", "save", "step_directories", "step_name", "value_from_config",
]

register_callable("make_ppo_networks", ppo_networks.make_ppo_networks)


class Saver(checkpoint.Saver):
    """Writes PPO checkpoints into ``path`` (atomic, at most ``max_to_keep`` kept): ``params`` as
    ``PPOTrainingParams`` (Brax's tuple converted), the normaliser's ``std_eps`` in the configuration."""

    def save(
        self,
        env_steps: int,
        params: Any,
        state: Any | None,
        config: Mapping[str, Any] | config_dict.ConfigDict,
        env_state: Any | None = None,
    ) -> str:
        config_json = {**config_to_json(config)}
        params = _ppo_params(params)
        # The normaliser's std_eps is a setting, not an array, so the configuration carries it.
        std_eps = float(getattr(getattr(params, "normalizer_params", None), "std_eps", 0.0))
        if std_eps:
            config_json["normalizer_std_eps"] = std_eps
        return super().save(env_steps, params, state, config_json, env_state)


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
        isinstance(state, Mapping) and state.get("format") == CONFIG_FORMAT
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


def _ppo_params(params: Any) -> Any:
    """Brax's ``(normalizer_params, policy_params, value_params)`` as the ``PPOTrainingParams`` that training
    saves, so both load alike; any other tree is saved as it is."""
    if type(params) in (tuple, list) and len(params) == 3:
        return ppo_networks.PPOTrainingParams(*params)
    return params


def restore_item(path: str | os.PathLike, item: str, target: Any) -> Any:
    """One item (``params``, ``state``) restored into the structure (and shardings) of ``target``."""
    return restore_checked(resolve_for(path, "jax"), item, target)


def load(path: str | os.PathLike) -> ppo_networks.PPOTrainingParams:
    """Brax's name for ``load_params``: ``(normalizer_params, policy_params, value_params)`` from a checkpoint."""
    return load_params(path)


def load_params(path: str | os.PathLike) -> ppo_networks.PPOTrainingParams:
    """``PPOTrainingParams(normalizer_params, policy_params, value_params)`` from a checkpoint."""
    step_dir = resolve_for(path, "jax")
    config = read_config(step_dir)
    return _restore_params(step_dir, config, networks_from_config(config))


def _restore_params(step_dir: str, config: Mapping[str, Any], network: ppo_networks.PPONetworks) -> Any:
    target = abstract_params(network, saved_observation_size(config), config.get("normalizer_std_eps", 0.0))
    return restore_checked(step_dir, "params", on_default_device(target))


def load_policy(
    path: str | os.PathLike, network_factory: Callable[..., Any] | None = None, deterministic: bool = True
) -> types.Policy:
    """Rebuilds the inference function ``(observation, key) -> (action, extras)`` from a checkpoint alone (as
    Brax's ``load_policy``; ``network_factory`` replaces the saved factory, called with the saved arguments)."""
    if network_factory is not None and not callable(network_factory):
        raise TypeError(
            f"load_policy(path, network_factory=None, deterministic=True): network_factory must be callable or "
            f"None, got {network_factory!r}"
        )
    step_dir = resolve_for(path, "jax")
    config = read_config(step_dir)
    network = networks_from_config(config, network_factory)
    params = _restore_params(step_dir, config, network)
    policy = ppo_networks.make_inference_fn(network)(params, deterministic=deterministic)
    return checked_policy(step_dir, policy, config)


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
        config = {"observation_size": observation_size_json(observation_size), "action_size": int(action_size)}
    fields = hyperparameters.flat()
    config["training"] = {name: fields[name] for name in resume.RESUME_FIELDS}
    return config


def check_resume_config(path: str | os.PathLike, requested: Mapping[str, Any], allow: Any) -> None:
    """Refuses to resume from the checkpoint at ``path`` with a configuration other than its saved one (see
    ``resume.check_config``); allowed changes are logged."""
    step_dir = resolve_for(path, "jax")
    changed = resume.check_config(step_dir, read_config(step_dir), requested, allow)
    for name, (saved, now) in changed.items():
        logging.warning("resuming from %s with %s changed from %r to %r", step_dir, name, saved, now)


def abstract_params(
    network: ppo_networks.PPONetworks, observation_size: types.ObservationSize, std_eps: float = 0.0
) -> Any:
    """Shapes and dtypes of ``PPOTrainingParams`` for ``network`` (nothing is computed; ``std_eps`` is the
    normaliser's setting)."""
    key = jax.random.PRNGKey(0)
    if isinstance(observation_size, Mapping):
        # As in training, image views have no running statistics.
        template = {
            k: jax.ShapeDtypeStruct(tuple(v) if not isinstance(v, int) else (v,), jnp.float32)
            for k, v in networks_vision.remove_pixels(observation_size).items()
        }
    else:
        template = jax.ShapeDtypeStruct((int(observation_size),), jnp.float32)
    return jax.eval_shape(
        lambda: ppo_networks.PPOTrainingParams(
            running_statistics.init_state(template, std_eps),
            network.policy_network.init(key),
            network.value_network.init(key),
        )
    )
