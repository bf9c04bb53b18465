"""The torch trainers' checkpoint files: ``state.pt`` (and any JSON beside it) in a step directory of
``brax_core.training.run.checkpoints`` (whose docstring gives the layout, the manifest and the kill-safe writes),
read back only when its digests match the manifest. ``state.pt`` holds only tensors, numbers, strings and dicts, so
it loads with ``torch.load(weights_only=True)``. Also what loading a run or a policy from one shares.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import torch

from brax_core.training import resume
from brax_core.training.run import checkpoints as run_checkpoints
from brax_core.training.run.checkpoints import CheckpointError, resolve_for

STATE_FILE = "state.pt"
TorchPolicy = Callable[..., tuple[torch.Tensor, dict[str, Any]]]


def write_state(
    path: str | os.PathLike, trainer: str, state: Mapping[str, Any], max_to_keep: int | None,
    json_files: Mapping[str, Any] | None = None,
) -> str:
    """Writes ``state`` (with ``state['env_steps']``) as ``state.pt``, and each of ``json_files`` (file name ->
    value) as JSON beside it, into the step directory of ``trainer`` at that step; keeps the newest ``max_to_keep``
    (``None``: all); returns the step directory."""
    buffer = io.BytesIO()
    torch.save(dict(state), buffer)
    env_steps = state["env_steps"]
    files = {STATE_FILE: buffer.getvalue()}
    files.update({name: json.dumps(v, indent=2, sort_keys=True).encode() for name, v in (json_files or {}).items()})
    with run_checkpoints.writing_step_directory(path, env_steps) as step_dir:
        for name, data in files.items():
            run_checkpoints.write_file(os.path.join(step_dir, name), data)
        run_checkpoints.write_manifest(step_dir, trainer, env_steps, tuple(files))
    run_checkpoints.prune(path, max_to_keep)
    run_checkpoints.remove_stale_temporaries(path)
    return run_checkpoints.step_directory(path, env_steps)


def read_state(path: str | os.PathLike, trainer: str, state_format: str, map_location: Any = "cpu") -> dict[str, Any]:
    """The ``state.pt`` of the checkpoint ``path`` names (a step directory, or the newest under a save path), written
    by ``trainer`` (its manifest's name) in ``state_format``: the file checked against the manifest before torch
    reads it (``weights_only``), then its format; ``state['path']`` says which step directory."""
    found = resolve_for(path, trainer)
    run_checkpoints.verify_files(found, STATE_FILE)
    file = os.path.join(found, STATE_FILE)
    try:
        state = torch.load(file, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated, garbage or foreign pickles all land here
        raise CheckpointError(f"checkpoint {file!r} is corrupt or unreadable: {type(e).__name__}: {e}") from e
    if not isinstance(state, dict) or state.get("format") != state_format:
        raise CheckpointError(f"{file!r} is not a {trainer} checkpoint (expected format {state_format!r})")
    state["path"] = found
    return state


def resumable(path: str | os.PathLike | None, config: Any, trainer: str, state_format: str) -> dict[str, Any] | None:
    """The state of the checkpoint (``read_state``'s) a run with ``config`` restores (``None`` without a path),
    refused when it holds another algorithm or other settings (``resume.check_same_config``: only ``num_timesteps``
    may change); read before anything compiles."""
    if path is None:
        return None
    state = read_state(path, trainer, state_format)
    if state["algo"] != config.ALGO:
        raise ValueError(
            f"restore_checkpoint_path: the checkpoint at {state['path']!r} is of {state['algo']}, not of "
            f"{config.ALGO}: restore it with {trainer}.{state['algo']}.train"
        )
    resume.check_same_config(state["path"], state["config"], config)
    return state


def check_network_factory(state: Mapping[str, Any], recorded: str | None, network_factory: Any, own: str) -> None:
    """Refuses a ``load_policy`` whose ``network_factory`` does not fit the checkpoint: one recorded (``recorded``,
    its name) must be passed again, since a checkpoint holds its modules' weights but not their code; ``own`` names
    the trainer's own networks, which a checkpoint without one rebuilds alone."""
    if recorded is not None and network_factory is None:
        raise CheckpointError(
            f"checkpoint {state['path']!r} was trained with network_factory={recorded}, modules of your own that a "
            "checkpoint holds the weights of but not the code: pass load_policy(path, network_factory=...) that "
            "function"
        )
    if recorded is None and network_factory is not None:
        raise ValueError(
            f"network_factory={network_factory!r}: checkpoint {state['path']!r} holds {own}, which it rebuilds "
            "alone; leave network_factory None"
        )


def checked_policy(
    state: Mapping[str, Any], actor: torch.nn.Module, deterministic: bool, policy: TorchPolicy | None = None
) -> TorchPolicy:
    """``policy(observation, ...) -> (action, extras)`` of a torch trainer's loaded ``actor``, refusing observations
    of another size than the checkpoint's (``state['network']['observation_size']``), naming both. ``policy``: the
    trainer's own; without one, ``actor(observation) -> (loc, scale)`` of the pre-squash normal (with ``mode`` and
    ``postprocess``) gives its mode with ``deterministic``, else a sample from torch's global generator.
    ``policy.modules`` is the actor: callers move or inspect the network behind the policy."""
    expected = state["network"]["observation_size"]

    @torch.inference_mode()
    def sample(observation: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        if deterministic:
            return actor.mode(observation), {}
        loc, scale = actor(observation)
        return actor.postprocess(loc + scale * torch.randn_like(loc)), {}

    def checked(observation: Any, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        run_checkpoints.check_policy_input(state["path"], observation, expected, "tensors")
        return (sample if policy is None else policy)(observation, *args, **kwargs)

    checked.modules = actor
    return checked


def load_modules(state: Mapping[str, Any], module: torch.nn.Module, weights: Mapping[str, Any]) -> None:
    """``module.load_state_dict(weights)``, refused with the checkpoint's path when the weights do not fit."""
    try:
        module.load_state_dict(weights)
    except RuntimeError as err:
        raise ValueError(f"checkpoint {state['path']!r} does not fit these networks: {err}") from err
