"""torch_ppo checkpoints: the complete training state in the step directories both trainers write, loaded with clear
errors.

A checkpoint is the step directory ``<save_checkpoint_path>/<env steps, 12 digits>/`` of
``brax_core.training.run.checkpoints`` holding ``state.pt``, ``config.json`` and the manifest with both files'
SHA-256. ``state.pt`` holds only tensors, numbers, strings and dicts (it loads with ``torch.load(weights_only=True)``):
the modules (normaliser included), the optimiser, the env-step count, the torch RNG state, the bridge env's JAX state
(flattened leaves) and the run configuration, which ``config.json`` repeats as JSON. A step directory is written in a
temporary directory and renamed into place, so a crash mid-save never leaves a checkpoint that loads as good; the
temporary directory such a crash leaves is deleted by a later ``save`` once it is ``STALE_TMP_S`` old. ``load``
checks both files against the manifest before torch reads them: a checkpoint changed after it was written raises
``CheckpointError`` naming the file. Under DDP ``env_states`` holds every rank's env state (``env_state`` is rank
0's).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch

import brax_bridge
from brax_core.training import resume
from brax_core.training.agents.ppo.config import KEYWORD_FIELDS
from brax_core.training.run import checkpoints as run_checkpoints
from brax_core.training.run.checkpoints import (
    STALE_TMP_S,
    CheckpointError,
    latest_step,
    resolve,
    step_directories,
)
from torch_ppo import distributed
from torch_ppo.networks import PPOModules
from torch_ppo.params import TorchPolicy, make_inference_fn, params_of
from torch_training.checkpoint import STATE_FILE, check_network_factory, load_modules, read_state, write_state
from torch_training.network_factory import NetworkFactory

__all__ = [
    "FORMAT",
    "STALE_TMP_S",
    "CheckpointError",
    "latest_step",
    "load",
    "load_policy",
    "remove_stale_temporaries",
    "resolve",
    "save",
    "step_directories",
]

FORMAT = "torch_ppo/1"
CONFIG_FILE = "config.json"
_REQUIRED = ("format", "config", "modules", "optimizer", "env_steps", "rng_state")
remove_stale_temporaries = run_checkpoints.remove_stale_temporaries


def save(directory: str | os.PathLike, state: dict[str, Any], max_to_keep: int | None = None) -> str:
    """Writes ``state`` as the checkpoint of ``state['env_steps']`` (keeping the newest ``max_to_keep``; ``None``:
    all); returns its step directory."""
    state = {"format": FORMAT, **state}
    return write_state(directory, "torch_ppo", state, max_to_keep, {CONFIG_FILE: state["config"]})


def load(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """Loads and validates a checkpoint (a step directory, or the newest under a save path); ``state['path']`` says
    which."""
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
    config = state["config"]
    network = dict(config["network"])
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
    expected = network["observation_size"]

    def checked_policy(observation: Any, *args: Any, **kwargs: Any) -> Any:
        run_checkpoints.check_policy_input(state["path"], observation, expected, "tensors")
        return policy(observation, *args, **kwargs)

    checked_policy.modules = policy.modules  # callers move or inspect the networks behind the policy
    return checked_policy


# --------------------------------------------------------------------------------- what the trainer records


def checkpoint_config(
    args: Any, modules: PPOModules, episode_length: int, action_repeat: int, env_steps: int
) -> dict[str, Any]:
    """JSON-ready description of a run (``args``: its ``TrainArguments``): env, networks, hyperparameters, env-step
    count."""
    environment = args.environment
    if not isinstance(environment, str):
        environment = type(getattr(environment, "unwrapped_env", environment)).__name__
    plain = (bool, int, float, str, type(None))
    settings = {
        **{
            k: v
            for k, v in args.config.flat().items()
            if isinstance(v, plain) and k in KEYWORD_FIELDS and k != "num_timesteps"
        },
        **{k: v for k, v in args.kernel_inits.items() if isinstance(v, plain)},
        "eval_backend": args.eval_backend,
        "num_threads": args.num_threads,
        "restore_value_fn": args.restore_value_fn,
        "action_repeat": int(action_repeat),  # a ready TorchEnv brings its own
    }
    for name in ("policy_hidden_layer_sizes", "value_hidden_layer_sizes"):
        settings[name] = list(getattr(args.config.network, name))
    return {
        "format": FORMAT,
        "environment": environment,
        "network": modules.config(),
        "episode_length": int(episode_length),
        "action_repeat": int(action_repeat),
        "env_steps": int(env_steps),
        "training": settings,
    }


def comparable(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a run configuration a resumed run must share: env, networks, episode, and the training
    hyperparameters both trainers record (``resume.RESUME_FIELDS``)."""
    training = config.get("training", {})
    return {
        **{k: config[k] for k in ("environment", "network", "episode_length", "action_repeat") if k in config},
        "training": {k: training[k] for k in resume.RESUME_FIELDS if k in training},
    }


def size_json(size: Any) -> Any:
    """An observation size as JSON: an int, or for dict observations ``{key: int or shape list}``."""
    if isinstance(size, Mapping):
        return {k: list(v) if isinstance(v, tuple | list) else int(v) for k, v in size.items()}
    return int(size)


def gather_process_states(
    dist: distributed.DistributedContext, rng_state: torch.Tensor, env_state: dict[str, Any] | None
) -> tuple[list[Any], list[Any] | None]:
    """Every rank's RNG state and (under DDP) env state, as rank 0 saves them: each rank steps its own envs and
    resumes its own. Every rank must call it under DDP."""
    if not dist.enabled:
        return [rng_state], None
    rng_states: list[Any] = [None] * dist.world_size
    torch.distributed.all_gather_object(rng_states, rng_state, group=dist.group)
    # The env states cross as NumPy arrays: their tensors share memory with JAX's host buffers, which
    # all_gather_object's pickling of torch storages does not carry.
    as_numpy = None if env_state is None else {k: _map_tensors(v, torch.Tensor.numpy) for k, v in env_state.items()}
    env_states: list[Any] = [None] * dist.world_size
    torch.distributed.all_gather_object(env_states, as_numpy, group=dist.group)
    env_states = [
        None if e is None else {k: _map_tensors(v, torch.from_numpy) for k, v in e.items()} for e in env_states
    ]
    return rng_states, env_states


def _map_tensors(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to a tensor or array, or to each in a list."""
    return [fn(v) for v in value] if isinstance(value, list) else fn(value)
