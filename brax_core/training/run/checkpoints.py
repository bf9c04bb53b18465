"""The checkpoint directory every trainer writes, and how its checkpoints are found and verified.

Layout: ``<save_checkpoint_path>/<env_steps>/``, one step directory per checkpoint named with 12 digits as Brax
names them (``000000001280``; another number of digits, such as ``1280``, names the same step). Each trainer
writes its own items into it (the JAX trainers orbax's ``config``, ``params``, ``state`` and ``env_state``:
``brax_core.training.checkpoint``; the torch trainers ``state.pt`` and any JSON beside it:
``torch_training.checkpoint``) and then ``manifest.json``: the trainer, the step and a SHA-256 of every file of the
items, checked before an item is read, so a flipped bit raises ``CheckpointError`` naming the file instead of
loading as a different policy. A step directory appears complete or not at all (orbax and ``writing_step_directory``
both write into a temporary directory and rename it), so an interrupted save never looks like a checkpoint;
``max_to_keep`` (default ``None``: all) bounds how many are kept. The manifest is written last, so a step directory
without one is a save cut short: the newest checkpoint of a save path is its newest step directory with a manifest,
and a step directory without one, named directly, is refused as incomplete.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

STEP_NAME_DIGITS = 12
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "brax_core.checkpoint/1"
_STEP_NAME = re.compile(r"^\d+$")
# What a save cut short leaves: the torch trainers' temporary files and directories (orbax names its own
# ``*.orbax-*``). One untouched for STALE_TMP_S belongs to no running save (a save writes it, then renames it).
_TEMPORARY = re.compile(r"^\.tmp_.*\.part$")
STALE_TMP_S = 600.0


class CheckpointError(ValueError):
    """A checkpoint that is corrupt, incomplete or of another kind (the message names the path)."""


# ------------------------------------------------------------------------------------------------- names


def step_name(env_steps: int) -> str:
    """The name of the step directory of a checkpoint at ``env_steps``: Brax's, 12 digits (``000000001280``), so
    that the names sort as the steps do."""
    return f"{int(env_steps):0{STEP_NAME_DIGITS}d}"


def step_directory(path: str | os.PathLike, env_steps: int) -> str:
    """The step directory of the checkpoint at ``env_steps`` under the save path ``path``."""
    return os.path.join(os.path.abspath(os.fspath(path)), step_name(env_steps))


def step_directories(path: str | os.PathLike) -> list[str]:
    """Completed checkpoint step directories under ``path`` (those with a manifest), oldest first."""
    return [p for _, p in _entries(path)]


def _entries(path: str | os.PathLike) -> list[tuple[int, str]]:
    """``(env steps, step directory)`` of the completed checkpoints under ``path``, oldest first: temporary
    directories, other files and step directories without a manifest (saves cut short) are left out."""
    path = os.fspath(path)
    names = os.listdir(path) if os.path.isdir(path) else []
    full = [(name, os.path.join(path, name)) for name in names]
    return sorted((int(name), p) for name, p in full if _STEP_NAME.match(name) and is_step_directory(p))


def latest_step(path: str | os.PathLike) -> int | None:
    """Env steps of the newest completed checkpoint under ``path`` (read from its name; nothing is loaded)."""
    found = _entries(path)
    return found[-1][0] if found else None


def holds(save_path: str | os.PathLike | None, checkpoint_path: str | os.PathLike | None) -> bool:
    """Whether the checkpoint ``checkpoint_path`` lies in the save path ``save_path`` (a run resumed from its own
    folder, whose starting step is saved already)."""
    if save_path is None or checkpoint_path is None:
        return False
    return os.path.dirname(os.path.abspath(checkpoint_path)) == os.path.abspath(os.fspath(save_path))


def checked_paths(
    save_checkpoint_path: Any, restore_checkpoint_path: str | os.PathLike | None
) -> tuple[str | os.PathLike | None, str | None]:
    """A trainer's ``save_checkpoint_path`` (checked to be a path) and ``restore_checkpoint_path`` resolved to the
    checkpoint it names (``FileNotFoundError`` naming it where there is none)."""
    if save_checkpoint_path is not None and not isinstance(save_checkpoint_path, str | os.PathLike):
        raise TypeError(f"save_checkpoint_path must be a path, got {save_checkpoint_path!r}")
    return save_checkpoint_path, None if restore_checkpoint_path is None else resolve(restore_checkpoint_path)


def is_step_directory(path: str | os.PathLike) -> bool:
    """Whether ``path`` is one completed checkpoint's step directory (it holds a manifest) rather than a save path."""
    return os.path.isfile(os.path.join(path, MANIFEST))


def resolve(path: str | os.PathLike) -> str:
    """The checkpoint ``path`` names: a completed step directory itself, or the newest one under a save path.
    Raises ``FileNotFoundError`` naming the path where there is none, and ``CheckpointError`` for a step directory
    without a manifest (a save cut short)."""
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    if not os.path.exists(path):
        # The same step under another number of digits: 100 for 000000000100 (a path built with str(step)).
        same_step = [p for steps, p in _entries(parent) if steps == int(name)] if _STEP_NAME.match(name) else []
        if same_step:
            return same_step[0]
        raise FileNotFoundError(f"no checkpoint at {path!r}: the path does not exist")
    if os.path.isfile(path):
        raise FileNotFoundError(
            f"no checkpoint at {path!r}: it is a file; a checkpoint is a step directory (holding {MANIFEST}) or a "
            "save path holding step directories"
        )
    if is_step_directory(path):
        return path
    found = _entries(path)
    if not found and _STEP_NAME.match(name):
        raise _incomplete(path)
    if not found:
        raise FileNotFoundError(f"no checkpoint at {path!r}: it holds no completed checkpoint")
    return found[-1][1]


# The trainers that write checkpoints here, by the name their manifests give, with the call that restores each one's.
TRAINERS = {
    "jax": (
        "the JAX trainer (brax_core.training.agents.ppo)",
        "brax_core.training.agents.ppo.train(..., restore_checkpoint_path=PATH)",
    ),
    "torch_ppo": ("torch_ppo", "torch_ppo.train(..., restore_checkpoint_path=PATH)"),
    "torch_analytic": (
        "torch_analytic (APG or SHAC in torch)",
        "torch_analytic.apg.train or torch_analytic.shac.train(..., restore_checkpoint_path=PATH)",
    ),
    "torch_sac": ("torch_sac (SAC in torch)", "torch_sac.train(..., restore_checkpoint_path=PATH)"),
}


def written_by(found: str) -> str | None:
    """The trainer (a key of ``TRAINERS``) that wrote the checkpoint ``found`` (a resolved step directory), as its
    manifest says."""
    manifest = read_manifest(found)
    return None if manifest is None else manifest.get("trainer")


def _incomplete(step_dir: str) -> CheckpointError:
    return CheckpointError(
        f"checkpoint at {step_dir!r} is incomplete: it has no {MANIFEST}, which a save writes last (the save was cut "
        "short); restore an earlier checkpoint"
    )


def resolve_for(path: str | os.PathLike, trainer: str) -> str:
    """``resolve(path)``, refusing a checkpoint another trainer wrote with a ``CheckpointError`` that names that
    trainer and the call that restores it."""
    found = resolve(path)
    writer = written_by(found)
    if writer in TRAINERS and writer != trainer:
        name, call = TRAINERS[writer]
        raise CheckpointError(
            f"checkpoint at {found!r} was written by {name}, not by {TRAINERS[trainer][0]}: restore it with {call}; "
            "to start this trainer from that policy instead, convert its parameters with torch_ppo.policy_transfer "
            "(jax_params_to_torch, torch_params_to_jax) and pass them as restore_params"
        )
    return found


# ---------------------------------------------------------------------------------------------- writing


@contextlib.contextmanager
def writing_step_directory(path: str | os.PathLike, env_steps: int) -> Iterator[str]:
    """A temporary directory to write one checkpoint's items into; renamed to its step directory when the block
    ends without an exception (replacing an earlier checkpoint of the same step), removed otherwise."""
    path = os.path.abspath(os.fspath(path))
    os.makedirs(path, exist_ok=True)
    name = step_name(env_steps)
    temporary = tempfile.mkdtemp(prefix=f".tmp_{name}_", suffix=".part", dir=path)
    try:
        yield temporary
        final = os.path.join(path, name)
        if os.path.isdir(final):
            shutil.rmtree(final)
        os.replace(temporary, final)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def write_file(path: str, data: bytes) -> None:
    """Writes ``data`` to ``path`` and flushes it to the disk."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_manifest(step_dir: str, trainer: str, env_steps: int, items: Iterable[str]) -> None:
    """Writes the manifest of ``step_dir``: the trainer, the step and the digest of every file of ``items`` (files
    or directories inside ``step_dir``), atomically, as the last file of the checkpoint."""
    files = {name: digest for item in items for name, digest in _digests(step_dir, item).items()}
    manifest = {"format": MANIFEST_FORMAT, "trainer": trainer, "env_steps": int(env_steps), "files": files}
    temporary = os.path.join(step_dir, f".{MANIFEST}.tmp")
    write_file(temporary, json.dumps(manifest, indent=1, sort_keys=True).encode())
    os.replace(temporary, os.path.join(step_dir, MANIFEST))


def prune(path: str | os.PathLike, max_to_keep: int | None) -> None:
    """Deletes all but the newest ``max_to_keep`` checkpoints under ``path`` (``None``: keeps all)."""
    if max_to_keep is None:
        return
    found = _entries(path)
    for _, old in found[: max(len(found) - max_to_keep, 0)]:
        shutil.rmtree(old)


def remove_stale_temporaries(path: str | os.PathLike, older_than_s: float = STALE_TMP_S) -> list[str]:
    """Deletes the temporary files and directories that killed saves left in ``path``; returns their paths.

    Only those untouched for ``older_than_s`` seconds go: a save still running elsewhere (another process writing
    into the same folder) keeps writing, so its modification time stays recent.
    """
    path = os.fspath(path)
    now, removed = time.time(), []
    for name in os.listdir(path) if os.path.isdir(path) else []:
        full = os.path.join(path, name)
        try:
            if not _TEMPORARY.match(name) or now - _last_modified(full) < older_than_s:
                continue
            (shutil.rmtree if os.path.isdir(full) else os.remove)(full)
            removed.append(full)
        except FileNotFoundError:  # renamed or removed by its writer meanwhile
            continue
    return removed


def _last_modified(path: str) -> float:
    files = [os.path.join(root, f) for root, _, names in os.walk(path) for f in names]
    return max(os.stat(p).st_mtime for p in [path, *files])


# --------------------------------------------------------------------------------------------- verifying


def read_manifest(step_dir: str) -> dict[str, Any] | None:
    """The manifest of ``step_dir`` (``None`` where there is none); ``CheckpointError`` where it is unreadable."""
    path = os.path.join(step_dir, MANIFEST)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            manifest = json.load(f)
        if not isinstance(manifest, dict):
            raise ValueError(f"a JSON {type(manifest).__name__}, not an object")
    except (OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint at {step_dir!r} is corrupt: cannot read its {MANIFEST} ({e})") from e
    if manifest.get("format") != MANIFEST_FORMAT:
        raise CheckpointError(
            f"checkpoint at {step_dir!r} is corrupt: its {MANIFEST} has format {manifest.get('format')!r}, expected "
            f"{MANIFEST_FORMAT!r}"
        )
    return manifest


def verify_files(step_dir: str, item: str) -> None:
    """Checks the files of ``item`` against the digests the manifest holds, before anything reads them."""
    manifest = read_manifest(step_dir)
    if manifest is None:
        raise _incomplete(step_dir)
    expected = manifest["files"]
    for name in sorted(n for n in expected if n == item or n.startswith(item + "/")):
        path = os.path.join(step_dir, name)
        actual = _file_digest(path) if os.path.isfile(path) else None
        if actual != expected[name]:
            what = "is missing" if actual is None else "differs from what was saved (its SHA-256 does not match)"
            raise CheckpointError(f"checkpoint file {path!r} {what}: the checkpoint is corrupt; restore an earlier one")


def _digests(step_dir: str, item: str) -> dict[str, str]:
    """``{path relative to step_dir: SHA-256}`` of the file ``item`` or of every file under the directory."""
    top = os.path.join(step_dir, item)
    files = [top] if os.path.isfile(top) else [os.path.join(r, n) for r, _, names in os.walk(top) for n in names]
    return {os.path.relpath(p, step_dir).replace(os.sep, "/"): _file_digest(p) for p in files}


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------- loaded policies


def check_policy_input(where: str, observation: Any, expected: Any, arrays: str = "arrays") -> None:
    """Raises ``ValueError`` naming both when a policy loaded from the checkpoint at ``where`` is given observations
    of another size than it was trained on (instead of a matrix-multiply error deep in the network). ``expected``
    is the observation size, or for dict observations ``{key: size or shape}`` (per env); ``arrays`` names what the
    observations are. Shapes are static (under ``jit`` too), so the check costs nothing per step."""
    if isinstance(expected, Mapping):
        if not hasattr(observation, "get"):
            raise ValueError(
                f"the policy loaded from {where!r} takes dict observations with keys {sorted(expected)}; "
                f"got {type(observation).__name__}"
            )
        for key, size in expected.items():
            shape = tuple(size) if isinstance(size, tuple | list) else (size,)
            value = observation.get(key)
            got = tuple(getattr(value, "shape", ()))
            if value is None or got[len(got) - len(shape) :] != shape:
                raise ValueError(
                    f"the policy loaded from {where!r} takes observations[{key!r}] of shape {shape} (per env); "
                    f"got {'no such key' if value is None else f'shape {got}'}"
                )
        return
    got = tuple(getattr(observation, "shape", ()))
    if not got or got[-1] != expected:
        raise ValueError(
            f"the policy loaded from {where!r} takes observations of size {expected} ({arrays} [..., {expected}]); "
            f"got shape {got}: they come from another environment"
        )
