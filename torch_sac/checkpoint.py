"""Checkpoints of the torch SAC: the complete run state as the ``state.pt`` of ``torch_training.checkpoint``, so a run
resumes exactly, and the policy rebuilt from one alone (``load_policy``).

``state.pt`` holds the configuration (``SACConfig.to_json``'s form, compared on resume), the networks' sizes, the
actor (with the observation statistics), the critics and target critics, the temperature, the three optimisers, the
counters, the random generator, the training envs' JAX state and the replay buffer's transitions (oldest first): a
resumed run draws the batches the unbroken run would have drawn.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

import brax_bridge
from brax_core.training.agents.sac.config import SACConfig
from brax_core.training.run.checkpoints import CheckpointError, latest_step
from torch_sac.networks import SACActor
from torch_training import checkpoint as torch_checkpoint
from torch_training.checkpoint import TorchPolicy, read_state

__all__ = ["CheckpointError", "latest_step", "load", "load_policy", "resumable", "save"]

FORMAT = "torch_sac/1"
TRAINER = "torch_sac"


def save(path: str | os.PathLike, config: SACConfig, env_steps: int, run_state: Mapping[str, Any]) -> str:
    """Writes the checkpoint of a run at ``env_steps`` (``run_state``: the trainer's ``state_dict``); returns its step
    directory."""
    state = {"format": FORMAT, "algo": "sac", "config": config.to_json(), "env_steps": int(env_steps), **run_state}
    return torch_checkpoint.write_state(path, TRAINER, state, config.run.max_to_keep)


def load(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The state of the checkpoint ``path`` names (a step directory, or the newest under a save path), its file
    checked against the manifest first; ``state['path']`` says which step directory."""
    return read_state(path, TRAINER, FORMAT, map_location)


def resumable(path: str | os.PathLike | None, config: SACConfig) -> dict[str, Any] | None:
    """The state of the checkpoint a run with ``config`` restores (``None`` without a path), refused when it holds
    other settings (only ``num_timesteps`` may change); read before anything compiles."""
    return torch_checkpoint.resumable(path, config, TRAINER, FORMAT)


def load_policy(path: str | os.PathLike, deterministic: bool = True, device: Any = None) -> TorchPolicy:
    """The policy of a torch SAC checkpoint, rebuilt from it alone: ``policy(observation) -> (action, extras)``, as
    ``torch_ppo.load_policy`` gives.

    Args:
      path: a step directory, or a save path (its newest checkpoint).
      deterministic: the policy's mode (else a sample, from torch's global generator).
      device: where the network runs (``None``: the bridge's device rule, ``brax_bridge.default_device``).
    """
    device = brax_bridge.default_device() if device is None else torch.device(device)
    state = load(path, map_location=device)
    config, sizes = SACConfig.from_json(state["config"]), state["network"]
    network = config.network
    actor = SACActor(sizes["observation_size"], sizes["action_size"], network.policy_hidden_layer_sizes,
                     network.activation, network.layer_norm, config.algorithm.normalize_observations).to(device)
    torch_checkpoint.load_modules(state, actor, state["modules"]["actor"])
    actor.eval()
    return torch_checkpoint.checked_policy(state, actor, deterministic)
