"""Checkpoints of the JAX SAC (``brax.training.agents.sac.checkpoint`` counterpart), in the step directories every
trainer of this library writes (``brax_core.training.checkpoint.Saver``: orbax items with a manifest of their
digests, written atomically).

A step directory holds ``config`` (the network configuration of ``brax_core.training.checkpoint`` with
``"algo": "sac"``) and ``params``, the ``(normalizer_params, policy_params)`` pair ``make_inference_fn`` takes;
``load_policy`` rebuilds the policy from it alone, as Brax's does. A run saved with ``save_checkpoint_path`` also
holds its configuration (``"training"``), ``state`` (the training state, the replay buffer and the run's key) and
``env_state``, from which ``restore_checkpoint_path`` continues the run exactly (``resumable``, ``restore``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
from ml_collections import config_dict

from brax_core.training import resume, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.sac import networks as sac_networks
from brax_core.training.agents.sac.config import SACConfig
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
    restore_env_state,
    run_config,
    saved_observation_size,
)
from brax_core.training.run.checkpoints import resolve_for

__all__ = [
    "checkpoint_config", "load", "load_config", "load_policy", "network_config", "restore", "restore_params",
    "resumable", "save",
]

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


def checkpoint_config(observation_size: int, action_size: int, network_factory: Callable[..., Any], config: Any
                      ) -> dict[str, Any]:
    """What a run's checkpoints record (``brax_core.training.checkpoint.run_config``)."""
    return run_config(observation_size, action_size, network_factory, config)


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


def resumable(path: str | os.PathLike | None, config: SACConfig) -> str | None:
    """The step directory of a whole saved run that a run of ``config`` continues exactly (``None``: no path, or a
    checkpoint of the policy alone, which a run starts from as Brax's does), checked to hold a SAC run of the same
    settings (only ``num_timesteps`` may change; with it a replay buffer left at its default size, which must
    then keep its size): read before anything compiles."""
    if path is None:
        return None
    step_dir = resolve_for(path, "jax")
    saved_config = read_config(step_dir, "sac")
    if "training" not in saved_config or not os.path.isdir(os.path.join(step_dir, "state")):
        return None
    saved = SACConfig.from_json(saved_config["training"])
    resume.check_same_settings(step_dir, saved.flat(), config.flat())
    if saved.replay_capacity != config.replay_capacity:
        raise ValueError(
            f"cannot resume from {step_dir!r}: its replay buffer holds {saved.replay_capacity} transitions (the run's "
            f"num_timesteps, max_replay_size being unset) and this run's would hold {config.replay_capacity}; set "
            f"max_replay_size={saved.replay_capacity} to resume it with another num_timesteps"
        )
    return step_dir


def restore(step_dir: str, params: Any, state: Mapping[str, Any], env_state: Any) -> tuple[Any, dict[str, Any], Any]:
    """A whole run's parameters, state (``training_state``, ``buffer_state``, ``key``) and envs' state, restored into
    the structures of the arguments."""
    restored_state = restore_checked(step_dir, "state", on_default_device(dict(state)))
    restored_env = restore_env_state(step_dir, env_state)
    params = tuple(restore_checked(step_dir, "params", on_default_device(params)))
    return params, restored_state, env_state if restored_env is None else restored_env
