"""Checkpoints of the JAX APG, in the step directories every trainer of this library writes
(``brax_core.training.run.checkpoints``; orbax items with a manifest of their digests: ``checkpoint.Saver``).

A step directory holds ``config`` (JSON: the network configuration of ``brax_core.training.checkpoint`` with
``"algo": "apg"``, the run's ``APGConfig`` as ``training`` and the env-step count), ``params`` (the
``(normalizer_params, policy_params)`` pair ``make_inference_fn`` takes), ``state`` (optimiser state, the run's key,
the updates made) and ``env_state`` (the training envs), so that a resumed run continues exactly. ``load_policy``
rebuilds the inference function from a checkpoint alone, as Brax's PPO ``load_policy`` does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from brax_core.training import resume, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.apg import networks as apg_networks
from brax_core.training.agents.apg.config import APGConfig
from brax_core.training.checkpoint import (
    Saver,
    _drop_empty,
    _live_config,
    _obs_size,
    _read_config,
    config_to_json,
    network_config,
    register_callable,
    restore_checked,
)
from brax_core.training.run import checkpoints as run_checkpoints
from brax_core.training.run.checkpoints import CheckpointError, latest_step, resolve_for

__all__ = ["CheckpointError", "Saver", "checkpoint_config", "latest_step", "load_params", "load_policy", "restore"]

register_callable("make_apg_networks", apg_networks.make_apg_networks)


def checkpoint_config(
    observation_size: int, action_size: int, network_factory: Callable[..., Any], config: APGConfig
) -> dict[str, Any]:
    """What a run's checkpoints record: the networks (``network_config``: a factory that cannot be named raises
    ``ValueError`` here, before training), ``"algo": "apg"`` and the run's configuration."""
    saved = config_to_json(
        network_config(observation_size, action_size, config.algorithm.normalize_observations, network_factory)
    )
    return {**saved, "algo": "apg", "training": config.to_json()}


def _networks(config: Mapping[str, Any], network_factory: Callable[..., Any] | None) -> apg_networks.APGNetworks:
    live = _live_config(config)
    factory = live["network_factory"] if network_factory is None else network_factory
    preprocess = (
        running_statistics.normalize if live["normalize_observations"] else types.identity_observation_preprocessor
    )
    return factory(live["observation_size"], live["action_size"], preprocess_observations_fn=preprocess,
                   **live["network_factory_kwargs"])


def _abstract_params(network: apg_networks.APGNetworks, observation_size: int, dtype: Any) -> Any:
    statistics = running_statistics.init_state(jax.ShapeDtypeStruct((observation_size,), dtype))
    return jax.eval_shape(
        lambda: (jax.tree.map(lambda x: x.astype(dtype), statistics),
                 network.policy_network.init(jax.random.PRNGKey(0)))
    )


def _on_default_device(target: Any) -> Any:
    """``target``'s shapes laid on this process's default device (``jax.default_device`` where one is set): a
    policy loaded elsewhere does not have the devices that saved it."""
    default = jax.config.jax_default_device
    device = default if isinstance(default, jax.Device) else jax.local_devices(backend=default)[0]
    local = jax.sharding.SingleDeviceSharding(device)
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=local), target)


def _dtype(config: Mapping[str, Any]) -> Any:
    return jnp.float64 if config["training"]["algorithm"].get("use_float64") else jnp.float32


def load_params(path: str | os.PathLike, network_factory: Callable[..., Any] | None = None) -> tuple[Any, Any]:
    """The ``(normalizer_params, policy_params)`` of a checkpoint (a step directory, or the newest under a save
    path)."""
    step_dir = resolve_for(path, "jax")
    config = _read_config(step_dir, "apg")
    network = _networks(config, network_factory)
    target = _on_default_device(_abstract_params(network, _obs_size(config), _dtype(config)))
    return tuple(restore_checked(step_dir, "params", target))


def load_policy(
    path: str | os.PathLike, network_factory: Callable[..., Any] | None = None, deterministic: bool = True
) -> types.Policy:
    """The inference function ``(observation, key) -> (action, extras)`` rebuilt from a checkpoint alone (a step
    directory, or the newest under a save path); ``network_factory`` replaces the saved factory, called with the
    saved arguments; ``deterministic``: the policy's mode (else a sample)."""
    if network_factory is not None and not callable(network_factory):
        raise TypeError(f"network_factory must be callable or None, got {network_factory!r}")
    step_dir = resolve_for(path, "jax")
    config = _read_config(step_dir, "apg")
    network = _networks(config, network_factory)
    params = load_params(step_dir, network_factory)
    policy = apg_networks.make_inference_fn(network)(params, deterministic=deterministic)
    expected = _obs_size(config)

    def checked_policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, Any]:
        run_checkpoints.check_policy_input(step_dir, observations, expected, "arrays")
        return policy(observations, key_sample)

    return checked_policy


def resumable(path: str | os.PathLike | None, config: APGConfig) -> str | None:
    """The step directory a run of ``config`` resumes from (``None`` without a path), checked to hold an APG run of
    the same settings (only ``num_timesteps`` may change): read before anything compiles."""
    if path is None:
        return None
    step_dir = resolve_for(path, "jax")
    saved = APGConfig.from_json(_read_config(step_dir, "apg")["training"])
    resume.check_same_settings(step_dir, saved.flat(), config.flat())
    return step_dir


def restore(step_dir: str, params: Any, state: Mapping[str, Any], env_state: Any) -> tuple[Any, dict[str, Any], Any]:
    """A checkpoint's parameters, state (``optimizer_state``, ``key``, ``updates``) and envs' state, restored into the
    structures (and shardings) of the arguments."""
    restored_state = restore_checked(step_dir, "state", dict(state))
    restored_env = env_state
    if os.path.isdir(os.path.join(step_dir, "env_state")):
        loaded = restore_checked(step_dir, "env_state", _drop_empty(env_state))
        restored_env = jax.tree.map(lambda t, r: t if r is None else r, env_state, loaded, is_leaf=lambda x: x is None)
    return tuple(restore_checked(step_dir, "params", params)), restored_state, restored_env
