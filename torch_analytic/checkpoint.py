"""Checkpoints of the torch gradient trainers (``apg.train``, ``shac.train``): the complete run state in the step
directories every trainer of this library writes (``brax_core.training.run.checkpoints``), so a run resumes exactly.

A checkpoint is ``<save_checkpoint_path>/<env steps, 12 digits>/`` holding ``state.pt`` and the manifest with its
SHA-256, checked before torch reads it; the directory is written under a temporary name and renamed when complete,
so a save cut short never looks like a checkpoint. ``state.pt`` loads with ``torch.load(weights_only=True)``: the
algorithm, its settings (the run's JSON-plain arguments, compared on resume), the networks and optimisers, the update
and epoch counts, the random generator, the training envs' JAX state and the evaluations made so far. A run saves
at the end of each epoch, before its evaluation and before ``progress_fn`` sees it (the run driver's order), so a
callback that stops the run leaves the checkpoint of the epoch it reported; a resumed run evaluates that epoch
again, as the unbroken run did, and goes on from there.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from brax_core.training.run import checkpoints as run_checkpoints
from torch_ppo import checkpoint as torch_checkpoint

FORMAT = "torch_analytic/1"
TRAINER = "torch_analytic"
STATE_FILE = torch_checkpoint.STATE_FILE


def save(
    path: str | os.PathLike,
    algo: str,
    settings: Mapping[str, Any],
    env_steps: int,
    counters: Mapping[str, int],
    modules: Mapping[str, nn.Module],
    optimizers: Mapping[str, torch.optim.Optimizer],
    generator: torch.Generator,
    env_state: Mapping[str, Any],
) -> str:
    """Writes the checkpoint of a run at ``env_steps``; returns its step directory."""
    state = {
        "format": FORMAT,
        "algo": algo,
        "settings": dict(settings),
        "env_steps": int(env_steps),
        "counters": {name: int(value) for name, value in counters.items()},
        "modules": {name: module.state_dict() for name, module in modules.items()},
        "optimizers": {name: optimizer.state_dict() for name, optimizer in optimizers.items()},
        "generator": generator.get_state(),
        "env": dict(env_state),
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    with run_checkpoints.writing_step_directory(path, env_steps) as step_dir:
        run_checkpoints.write_file(os.path.join(step_dir, STATE_FILE), buffer.getvalue())
        run_checkpoints.write_manifest(step_dir, TRAINER, env_steps, (STATE_FILE,))
    run_checkpoints.remove_stale_temporaries(path)
    return run_checkpoints.step_directory(path, env_steps)


def load(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The state of the checkpoint ``path`` names (a step directory, or the newest under a save path), its file
    checked against the manifest first; ``state['path']`` says which step directory."""
    return torch_checkpoint.read_state(path, TRAINER, FORMAT, map_location)


def check_resume(state: Mapping[str, Any], algo: str, settings: Mapping[str, Any]) -> None:
    """Refuses to resume ``state`` with another algorithm or with settings other than its saved ones, naming each
    setting that differs."""
    if state["algo"] != algo:
        raise ValueError(
            f"restore_checkpoint_path: the checkpoint at {state['path']!r} is of {state['algo']}, not of {algo}: "
            f"restore it with torch_analytic.{state['algo']}.train"
        )
    saved = state["settings"]
    changed = sorted(k for k in saved.keys() | settings.keys() if saved.get(k) != settings.get(k))
    if changed:
        listed = "; ".join(f"{k}: saved {saved.get(k)!r}, now {settings.get(k)!r}" for k in changed)
        raise ValueError(
            f"restore_checkpoint_path: the run at {state['path']!r} was saved with other settings ({listed}); a "
            "resumed run continues the saved one exactly, so give the same arguments"
        )


def resumable(path: str | os.PathLike | None, algo: str, settings: Mapping[str, Any]) -> dict[str, Any] | None:
    """The state of the checkpoint a run restores (``load``), checked to continue ``algo`` with ``settings``
    (``check_resume``); ``None`` without a path. Read before anything compiles."""
    if path is None:
        return None
    state = load(path)
    check_resume(state, algo, settings)
    return state


def restore(
    state: Mapping[str, Any],
    modules: Mapping[str, nn.Module],
    optimizers: Mapping[str, torch.optim.Optimizer],
    generator: torch.Generator,
) -> None:
    """Puts a loaded ``state``'s networks, optimisers and generator back (the env's state is the caller's)."""
    for name, module in modules.items():
        module.load_state_dict(state["modules"][name])
    for name, optimizer in optimizers.items():
        optimizer.load_state_dict(state["optimizers"][name])
    generator.set_state(state["generator"].cpu())


def plain_settings(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A run's arguments as a checkpoint records them: JSON-plain values (tuples as lists), the environment by name
    (its class's, for an env object); callables and envs given as objects left out."""
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if isinstance(value, tuple):
            value = list(value)
        if value is None or isinstance(value, bool | int | float | str) or (
            isinstance(value, list) and all(isinstance(v, int | float) for v in value)
        ):
            out[name] = value
        elif name == "environment":
            out[name] = type(getattr(value, "unwrapped", value)).__name__
    return out
