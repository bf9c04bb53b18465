"""torch_ppo checkpoints: the complete training state as the ``state.pt`` of ``torch_training.checkpoint`` in a step
directory of ``brax_core.training.run.checkpoints``, with ``config.json`` beside it (the run configuration as JSON,
``TorchPPOBackend.checkpoint_config``'s). ``state.pt`` holds the modules (normaliser included), the optimiser, the
env-step count, the torch RNG state, the bridge env's JAX state (flattened leaves) and the run configuration; under
DDP ``env_states`` holds every rank's env state (``env_state`` is rank 0's).
"""

from __future__ import annotations

import os
from typing import Any

import torch

import brax_bridge
from brax_core.training.run.checkpoints import (
    STALE_TMP_S,
    CheckpointError,
    latest_step,
    remove_stale_temporaries,
    resolve,
    step_directories,
)
from torch_ppo.networks import PPOModules
from torch_ppo.params import TorchPolicy, make_inference_fn, params_of
from torch_training.checkpoint import (
    STATE_FILE,
    check_network_factory,
    checked_policy,
    load_modules,
    read_state,
    write_state,
)
from torch_training.network_factory import NetworkFactory

__all__ = [
    "FORMAT", "STALE_TMP_S", "STATE_FILE", "CheckpointError", "latest_step", "load", "load_policy",
    "remove_stale_temporaries", "resolve", "save", "step_directories",
]

FORMAT = "torch_ppo/1"
CONFIG_FILE = "config.json"
_REQUIRED = ("format", "config", "modules", "optimizer", "env_steps", "rng_state")


def save(directory: str | os.PathLike, state: dict[str, Any], max_to_keep: int | None = None) -> str:
    """Writes ``state`` as the checkpoint of ``state['env_steps']`` (keeping the newest ``max_to_keep``; ``None``:
    all); returns its step directory."""
    state = {"format": FORMAT, **state}
    return write_state(directory, "torch_ppo", state, max_to_keep, {CONFIG_FILE: state["config"]})


def load(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """Loads and validates a checkpoint (a step directory, or the newest under a save path), its files checked
    against the manifest first; ``state['path']`` says which."""
    state = read_state(path, "torch_ppo", FORMAT, map_location)
    missing = [k for k in _REQUIRED if k not in state]
    if missing:
        file = os.path.join(state["path"], STATE_FILE)
        raise CheckpointError(f"checkpoint {file!r} is incomplete: missing {missing}")
    return state


def load_policy(
    path: str | os.PathLike,
    deterministic: bool = True,
    device: Any = None,
    network_factory: NetworkFactory | None = None,
) -> TorchPolicy:
    """Rebuilds the inference function from a checkpoint: ``policy(observation) -> (action, extras)``.

    Args:
      path: a step directory, or a save path (its newest checkpoint).
      deterministic: the distribution's mode (else a sample).
      device: where the networks run (``None``: the bridge's device rule, ``brax_bridge.default_device``).
      network_factory: the ``network_factory`` the run trained with, for a checkpoint of networks of your own
        (the checkpoint records its name, not its code); ``None`` for torch_ppo's own networks.
    """
    device = brax_bridge.default_device() if device is None else torch.device(device)
    state = load(path, map_location=device)
    network = dict(state["config"]["network"])
    recorded = network.pop("network_factory", None)
    check_network_factory(state, recorded, network_factory, "torch_ppo's own networks")
    if recorded is None and network.get("activation") is None:
        raise CheckpointError(
            f"checkpoint {state['path']!r} was trained with an unnamed activation callable; rebuild the networks "
            "with that callable and load_params instead"
        )
    modules = PPOModules(**network, network_factory=network_factory).to(device)
    load_modules(state, modules, state["modules"])
    policy = make_inference_fn(modules)(params_of(modules), deterministic=deterministic)
    return checked_policy({"path": state["path"], "network": network}, policy.modules, deterministic, policy)
