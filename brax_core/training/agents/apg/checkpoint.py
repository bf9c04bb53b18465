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
    checked_policy,
    networks_from_config,
    on_default_device,
    read_config,
    register_callable,
    restore_checked,
    restore_env_state,
    run_config,
    saved_observation_size,
)
from brax_core.training.run.checkpoints import CheckpointError, latest_step, resolve_for

__all__ = ["CheckpointError", "Saver", "checkpoint_config", "latest_step", "load_params", "load_policy", "restore"]

register_callable("make_apg_networks", apg_networks.make_apg_networks)


def checkpoint_config(observation_size: int, action_size: int, network_factory: Callable[..., Any], config: Any
                      ) -> dict[str, Any]:
    """What a run's checkpoints record (``brax_core.training.checkpoint.run_config``)."""
    return run_config(observation_size, action_size, network_factory, config)


def _abstract_params(network: apg_networks.APGNetworks, observation_size: int, dtype: Any) -> Any:
    statistics = running_statistics.init_state(jax.ShapeDtypeStruct((observation_size,), dtype))
    return jax.eval_shape(
        lambda: (jax.tree.map(lambda x: x.astype(dtype), statistics),
                 network.policy_network.init(jax.random.PRNGKey(0)))
    )


def _dtype(config: Mapping[str, Any]) -> Any:
    return jnp.float64 if config["training"]["algorithm"].get("use_float64") else jnp.float32


def load_params(path: str | os.PathLike, network_factory: Callable[..., Any] | None = None) -> tuple[Any, Any]:
    """The ``(normalizer_params, policy_params)`` of a checkpoint (a step directory, or the newest under a save
    path)."""
    step_dir = resolve_for(path, "jax")
    config = read_config(step_dir, "apg")
    network = networks_from_config(config, network_factory)
    target = on_default_device(_abstract_params(network, saved_observation_size(config), _dtype(config)))
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
    config = read_config(step_dir, "apg")
    network = networks_from_config(config, network_factory)
    params = load_params(step_dir, network_factory)
    policy = apg_networks.make_inference_fn(network)(params, deterministic=deterministic)
    return checked_policy(step_dir, policy, config)


def resumable(path: str | os.PathLike | None, config: APGConfig) -> str | None:
    """The step directory a run of ``config`` resumes from (``None`` without a path), checked to hold an APG run of
    the same settings (only ``num_timesteps`` may change): read before anything compiles."""
    if path is None:
        return None
    step_dir = resolve_for(path, "jax")
    saved = APGConfig.from_json(read_config(step_dir, "apg")["training"])
    resume.check_same_settings(step_dir, saved.flat(), config.flat())
    return step_dir


def restore(step_dir: str, params: Any, state: Mapping[str, Any], env_state: Any) -> tuple[Any, dict[str, Any], Any]:
    """A checkpoint's parameters, state (``optimizer_state``, ``key``, ``updates``) and envs' state, restored into the
    structures (and shardings) of the arguments."""
    restored_state = restore_checked(step_dir, "state", dict(state))
    restored_env = restore_env_state(step_dir, env_state)
    params = tuple(restore_checked(step_dir, "params", params))
    return params, restored_state, env_state if restored_env is None else restored_env
