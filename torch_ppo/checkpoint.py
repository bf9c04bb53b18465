"""torch_ppo checkpoints: the complete training state, written atomically, loaded with clear errors.

A checkpoint is one file ``<dir>/checkpoint_<env_steps:015d>.pt`` holding only tensors, numbers, strings and
dicts (it loads with ``torch.load(weights_only=True)``): the modules (normaliser included), the optimiser, the
env-step count, the torch RNG state, the bridge env's JAX state (flattened leaves) and the run configuration.
``config.json`` next to it repeats the configuration as JSON. Writes go to a temporary file in the same directory
and are renamed into place with ``os.replace``, so a crash mid-save never leaves a file that loads as good; the
temporary file such a crash leaves (``.tmp_*.part``) is deleted by a later ``save`` once it is ``STALE_TMP_S`` old.
Every entry's value is saved with its SHA-256 (``checksums``; a tensor's dtype, shape and bytes) and ``load``
verifies them: a checkpoint changed after it was written (a flipped bit in tensor data) raises ``CheckpointError``
naming the file and the entry. Under DDP ``env_states`` holds every rank's env state (``env_state`` is rank 0's).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from typing import Any

import torch

from torch_ppo.networks import PPOModules
from torch_ppo.params import make_inference_fn, params_of

FORMAT = "torch_ppo/1"
_NAME = re.compile(r"^checkpoint_(\d+)\.pt$")
_REQUIRED = ("format", "config", "modules", "optimizer", "env_steps", "rng_state")
_TMP = re.compile(r"^\.tmp_.*\.part$")
# A temporary file untouched this long belongs to no running save (a save writes it continuously, then renames).
STALE_TMP_S = 600.0


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable or not a torch_ppo checkpoint (the message names the path)."""


def checkpoint_files(directory: str | os.PathLike) -> list[str]:
    """Checkpoint files in ``directory``, oldest (fewest env steps) first."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    found = [(int(m.group(1)), n) for n in os.listdir(directory) if (m := _NAME.match(n))]
    return [os.path.join(directory, n) for _, n in sorted(found)]


def latest_step(directory: str | os.PathLike) -> int | None:
    """Env steps of the newest checkpoint in ``directory`` (read from its name; nothing is loaded)."""
    files = checkpoint_files(directory)
    return int(_NAME.match(os.path.basename(files[-1])).group(1)) if files else None


def path_for(directory: str | os.PathLike, env_steps: int) -> str:
    """The file the checkpoint of ``env_steps`` is saved as in ``directory``."""
    return os.path.join(os.fspath(directory), f"checkpoint_{int(env_steps):015d}.pt")


def checksums(state: Any, prefix: str = "") -> dict[str, str]:
    """``{entry path: SHA-256}`` of every value in ``state`` (tensors by dtype, shape and bytes; other values by
    their ``repr``), with paths such as ``modules/policy.hidden_0.weight`` or ``rng_state/0``."""
    out: dict[str, str] = {}
    if isinstance(state, dict):
        for key, value in state.items():
            out.update(checksums(value, f"{prefix}{key}/"))
    elif isinstance(state, list | tuple):
        for index, value in enumerate(state):
            out.update(checksums(value, f"{prefix}{index}/"))
    else:
        digest = hashlib.sha256()
        if isinstance(state, torch.Tensor):
            data = state.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{data.dtype}{tuple(state.shape)}".encode())
            digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        else:
            digest.update(repr(state).encode())
        out[prefix.rstrip("/")] = digest.hexdigest()
    return out


def save(directory: str | os.PathLike, state: dict[str, Any], max_to_keep: int | None = 5) -> str:
    """Atomically writes ``state`` as the checkpoint for ``state['env_steps']``; returns its path."""
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    state = {"format": FORMAT, **state}
    state["checksums"] = checksums(state)
    path = path_for(directory, state["env_steps"])
    _atomic_write(path, lambda f: torch.save(state, f))
    config = json.dumps(state["config"], indent=2, sort_keys=True).encode()
    _atomic_write(os.path.join(directory, "config.json"), lambda f: f.write(config))
    if max_to_keep is not None:
        for old in checkpoint_files(directory)[:-max_to_keep]:
            os.remove(old)
    remove_stale_temporaries(directory)
    return path


def remove_stale_temporaries(directory: str | os.PathLike, older_than_s: float = STALE_TMP_S) -> list[str]:
    """Deletes the ``.tmp_*.part`` files that a killed save left in ``directory``; returns their paths.

    Only files not modified for ``older_than_s`` seconds go: a save still running elsewhere (another process
    writing into the same folder) keeps writing its file, so its modification time stays recent.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    now, removed = time.time(), []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if not _TMP.match(name):
            continue
        try:
            if now - os.stat(path).st_mtime >= older_than_s:
                os.remove(path)
                removed.append(path)
        except FileNotFoundError:  # renamed or removed by its writer meanwhile
            continue
    return removed


def _atomic_write(path: str, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp_", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def resolve(path: str | os.PathLike) -> str:
    """The checkpoint file ``path`` names: the file itself, or the newest checkpoint in a directory."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path
    if os.path.isdir(path):
        files = checkpoint_files(path)
        if not files:
            raise FileNotFoundError(f"no checkpoint at {path!r}: the directory holds no checkpoint_<steps>.pt file")
        return files[-1]
    raise FileNotFoundError(f"no checkpoint at {path!r}: the path does not exist")


def load(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """Loads and validates a checkpoint (a file or a checkpoint directory)."""
    file = resolve(path)
    try:
        state = torch.load(file, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated, garbage or foreign pickles all land here
        raise CheckpointError(f"checkpoint {file!r} is corrupt or unreadable: {type(e).__name__}: {e}") from e
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{file!r} is not a torch_ppo checkpoint (expected format {FORMAT!r})")
    missing = [k for k in _REQUIRED if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {file!r} is incomplete: missing {missing}")
    expected = state.pop("checksums", None)  # checkpoints written before checksums existed have none
    if expected is not None:
        actual = checksums(state)
        wrong = sorted(k for k in expected.keys() | actual.keys() if expected.get(k) != actual.get(k))
        if wrong:
            raise CheckpointError(
                f"checkpoint {file!r} is corrupt: {', '.join(wrong[:5])}{' ...' if len(wrong) > 5 else ''} differ from "
                "what was saved (their SHA-256 does not match the one written with them); use an earlier checkpoint"
            )
    state["path"] = file
    return state


def load_policy(path: str | os.PathLike, deterministic: bool = True, device: Any = "cpu"):
    """Rebuilds the inference function from a checkpoint alone: ``policy(observation) -> (action, extras)``."""
    state = load(path, map_location=device)
    config = state["config"]
    network = config["network"]
    if network.get("activation") is None:
        raise CheckpointError(
            f"checkpoint {state['path']!r} was trained with an unnamed activation callable; rebuild the networks "
            "with that callable and load_params instead"
        )
    modules = PPOModules(**network).to(device)
    modules.load_state_dict(state["modules"])
    policy = make_inference_fn(modules)(params_of(modules), deterministic=deterministic)
    expected = network["observation_size"]

    def checked_policy(observation: Any, *args: Any, **kwargs: Any) -> Any:
        _check_observation(state["path"], observation, expected)
        return policy(observation, *args, **kwargs)

    checked_policy.modules = policy.modules  # callers move or inspect the networks behind the policy
    return checked_policy


def _check_observation(file: str, observation: Any, expected: Any) -> None:
    """A policy given observations of another size says so (instead of a matrix-multiply error deep in torch)."""
    if isinstance(expected, dict):
        for key, size in expected.items():
            value = observation.get(key) if hasattr(observation, "get") else None
            got = tuple(getattr(value, "shape", ()))
            if value is None or not got or got[-1] != size:
                raise ValueError(
                    f"the policy loaded from {file!r} takes observations[{key!r}] of size {size}; got "
                    f"{'no such key' if value is None else f'shape {got}'}"
                )
        return
    got = tuple(getattr(observation, "shape", ()))
    if not got or got[-1] != expected:
        raise ValueError(
            f"the policy loaded from {file!r} takes observations of size {expected} (tensors [..., {expected}]); "
            f"got shape {got}: they come from another environment"
        )
