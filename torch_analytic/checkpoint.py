"""Checkpoints of the torch gradient trainers (``apg``, ``shac``): the complete run state as the ``state.pt`` of
``torch_training.checkpoint``, so a run resumes exactly, and the policy rebuilt from one alone (``load_policy``).

``state.pt`` holds the algorithm, its configuration (``to_json``'s form, compared on resume), the networks' sizes and
factory, the networks and optimisers, the update and epoch counts, the random generator, the training envs' JAX state
and the evaluations made so far. A run saves at the end of each epoch, before its evaluation and before
``progress_fn`` sees it (the run driver's order), so a callback that stops the run leaves the checkpoint of the epoch
it reported; a resumed run evaluates that epoch again, as the unbroken run did, and goes on from there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

import brax_bridge
from brax_core.training.agents.apg.config import APGConfig
from brax_core.training.agents.shac.config import SHACConfig
from brax_core.training.config import Config
from brax_core.training.run.checkpoints import CheckpointError, latest_step
from torch_analytic.networks import APGPolicy
from torch_training import checkpoint as torch_checkpoint
from torch_training import network_factory as network_factory_checks
from torch_training.checkpoint import TorchPolicy, read_state

__all__ = ["CheckpointError", "latest_step", "load", "load_policy", "save"]

FORMAT = "torch_analytic/2"
TRAINER = "torch_analytic"
CONFIGS: dict[str, type[Config]] = {"apg": APGConfig, "shac": SHACConfig}


def save(
    path: str | os.PathLike,
    algo: str,
    config: Config,
    env_steps: int,
    counters: Mapping[str, int],
    networks: Mapping[str, nn.Module],
    optimizers: Mapping[str, torch.optim.Optimizer],
    generator: torch.Generator,
    env_state: Mapping[str, Any],
    network_factory: Any = None,
) -> str:
    """Writes the checkpoint of a run at ``env_steps``; returns its step directory."""
    policy = networks["policy"]
    state = {
        "format": FORMAT,
        "algo": algo,
        "config": config.to_json(),
        "network": {
            "observation_size": policy.observation_size, "action_size": policy.action_size,
            "network_factory": None if network_factory is None else network_factory_checks.name_of(network_factory),
        },
        "env_steps": int(env_steps),
        "counters": {name: int(value) for name, value in counters.items()},
        "modules": {name: module.state_dict() for name, module in networks.items()},
        "optimizers": {name: optimizer.state_dict() for name, optimizer in optimizers.items()},
        "generator": generator.get_state(),
        "env": dict(env_state),
    }
    return torch_checkpoint.write_state(path, TRAINER, state, config.run.max_to_keep)


def load(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The state of the checkpoint ``path`` names (a step directory, or the newest under a save path), its file
    checked against the manifest first; ``state['path']`` says which step directory."""
    return read_state(path, TRAINER, FORMAT, map_location)


def resumable(path: str | os.PathLike | None, config: Config) -> dict[str, Any] | None:
    """The state a run with ``config`` (APG's or SHAC's) restores (``torch_training.checkpoint.resumable``)."""
    return torch_checkpoint.resumable(path, config, TRAINER, FORMAT)


def restore(
    state: Mapping[str, Any],
    networks: Mapping[str, nn.Module],
    optimizers: Mapping[str, torch.optim.Optimizer],
    generator: torch.Generator,
) -> None:
    """Puts a loaded ``state``'s networks, optimisers and generator back (the env's state is the caller's)."""
    for name, module in networks.items():
        module.load_state_dict(state["modules"][name])
    for name, optimizer in optimizers.items():
        optimizer.load_state_dict(state["optimizers"][name])
    generator.set_state(state["generator"].cpu())


def load_policy(
    path: str | os.PathLike,
    deterministic: bool = True,
    device: Any = None,
    network_factory: Callable[[int, int], tuple[Any, Any]] | None = None,
) -> TorchPolicy:
    """The policy of an APG or SHAC checkpoint, rebuilt from it alone: ``policy(observation) -> (action, extras)``,
    as ``torch_ppo.load_policy`` gives.

    Args:
      path: a step directory, or a save path (its newest checkpoint).
      deterministic: the policy's mode (else a sample, from torch's global generator).
      device: where the network runs (``None``: the bridge's device rule, ``brax_bridge.default_device``).
      network_factory: the ``network_factory`` the run trained with, for a checkpoint of networks of your own (the
        checkpoint records its name, not its code); ``None`` for the trainers' own networks.
    """
    device = brax_bridge.default_device() if device is None else torch.device(device)
    state = load(path, map_location=device)
    config, sizes = CONFIGS[state["algo"]].from_json(state["config"]), state["network"]
    own_networks = "the trainer's own networks"
    torch_checkpoint.check_network_factory(state, sizes["network_factory"], network_factory, own_networks)
    own = None
    if network_factory is not None:
        own = network_factory_checks.build(
            network_factory_checks.check_factory(network_factory), sizes["observation_size"], sizes["action_size"]
        )[0]
    network = config.network
    policy = APGPolicy(
        sizes["observation_size"], sizes["action_size"], network.policy_hidden_layer_sizes, network.activation,
        network.layer_norm, config.algorithm.normalize_observations, module=own,
    ).to(device)
    torch_checkpoint.load_modules(state, policy, state["modules"]["policy"])
    policy.eval()
    return torch_checkpoint.checked_policy(state, policy, deterministic)
