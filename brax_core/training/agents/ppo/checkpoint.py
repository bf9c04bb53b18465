"""PPO checkpoints with orbax (``brax.training.agents.ppo.checkpoint`` counterpart).

Layout: the step directories both trainers write (``brax_core.training.run.checkpoints``:
``<save_checkpoint_path>/000000000100/``, a manifest with every file's SHA-256, ``max_to_keep``), each holding
these orbax items,

* ``config``: JSON — observation and action sizes (integers), ``normalize_observations``, the network factory
  and *every* network keyword argument (activations and initialisers by name), the env-step count as an exact
  integer, and the training hyperparameters. ``network_config`` builds it as an ``ml_collections.ConfigDict`` of
  live values, as Brax does; ``save`` writes its JSON form (``config_to_json``) and ``load_config`` returns the
  live values again;
* ``params``: ``PPOTrainingParams(normalizer_params, policy_params, value_params)``;
* ``state``: optimiser state, RNG key and step counters;
* ``env_state``: the training environments' state, so a resumed run continues exactly;
* ``checksums``: JSON — a SHA-256 of every array of ``params``, ``state`` and ``env_state`` (dtype, shape and
  bytes), compared with the arrays an item restores to;
and then the manifest (written once orbax has finished the step directory) with a SHA-256 of every file of
``params``, ``state`` and ``env_state``, checked before orbax reads an item. A flipped bit in a checkpoint raises
``CheckpointError`` (alias ``ChecksumError``) naming the file (or the array) instead of loading as a
different policy, and orbax never starts reading corrupt data (a read failing inside orbax closes its event loop
under reads still in flight, whose callbacks then print stray "Event loop is closed" tracebacks).

orbax writes each step into a temporary directory and renames it when complete, so an interrupted save never
looks like a checkpoint. ``load_policy`` rebuilds the inference function from the saved configuration alone.

With several JAX processes (``jax.distributed``) every process saves into the same path, which must be on a
filesystem they all see: each writes its own shards (its envs' state), process 0 the rest, and the step
directory is complete once all have finished.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from ml_collections import config_dict

from brax_core.training import types
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo.checkpoint_config import (
    CONFIG_FORMAT,
    _obs_size,
    _read_config,
    abstract_params,
    check_observation_size,
    check_params_fit,
    check_resume_config,
    checkpoint_config,
    config_to_json,
    load_config,
    load_config_json,
    network_config,
    networks_from_config,
    register_activation,
    register_callable,
    value_from_config,
)
from brax_core.training.run import checkpoints as run_checkpoints
from brax_core.training.run.checkpoints import STEP_NAME_DIGITS, CheckpointError, resolve, resolve_for, step_name
from brax_core.training.run.checkpoints import latest_step as latest_step  # the save path's newest step
from brax_core.training.run.checkpoints import step_directories as step_directories

# The configuration item's names (checkpoint_config) are public here too, under Brax's module path.
__all__ = [
    "CONFIG_FORMAT",
    "CheckpointError",
    "ChecksumError",
    "FILE_CHECKSUMS",
    "Saver",
    "abstract_params",
    "check_observation_size",
    "check_params_fit",
    "check_resume_config",
    "config_to_json",
    "latest_step",
    "load",
    "load_config",
    "load_config_json",
    "load_params",
    "load_policy",
    "network_config",
    "networks_from_config",
    "register_activation",
    "register_callable",
    "resolve",
    "restore_env_state",
    "restore_item",
    "checkpoint_config",
    "save",
    "step_directories",
    "step_name",
    "value_from_config",
]
_CHECKED_ITEMS = ("params", "state", "env_state")
# The file holding the digests of the checked items' files (a checkpoint without one is checked by its arrays).
FILE_CHECKSUMS = run_checkpoints.MANIFEST
# The name this module gave the one checkpoint error class before both trainers shared it.
ChecksumError = CheckpointError


class Saver:
    """Writes checkpoints into ``path`` (atomic, at most ``max_to_keep`` kept)."""

    def __init__(self, path: str | os.PathLike, max_to_keep: int | None = None):
        import orbax.checkpoint as ocp  # here, not at module level: its import only where checkpoints are kept

        self.path = os.path.abspath(os.fspath(path))
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep,
            create=True,
            enable_async_checkpointing=False,
            step_format_fixed_length=STEP_NAME_DIGITS,
        )
        self._manager = ocp.CheckpointManager(
            self.path, options=options, item_names=("config", "params", "state", "env_state", "checksums")
        )

    def save(
        self,
        env_steps: int,
        params: Any,
        state: Any | None,
        config: Mapping[str, Any] | config_dict.ConfigDict,
        env_state: Any | None = None,
    ) -> str:
        """Writes one step directory (``state`` and ``env_state`` are optional; a run needs both to resume)."""
        config_json = {**config_to_json(config)}
        config_json.setdefault("env_steps", int(env_steps))
        params = _ppo_params(params)
        # The normaliser's std_eps is a setting, not an array, so the configuration carries it.
        std_eps = float(getattr(getattr(params, "normalizer_params", None), "std_eps", 0.0))
        if std_eps:
            config_json["normalizer_std_eps"] = std_eps
        import orbax.checkpoint as ocp

        items = {"config": ocp.args.JsonSave(config_json), "params": ocp.args.StandardSave(params)}
        trees = {"params": params}
        if state is not None:
            trees["state"] = state
            items["state"] = ocp.args.StandardSave(state)
        if env_state is not None:
            trees["env_state"] = _drop_empty(env_state)
            items["env_state"] = ocp.args.StandardSave(trees["env_state"])
        items["checksums"] = ocp.args.JsonSave({name: _checksums(tree) for name, tree in trees.items()})
        self._manager.save(int(env_steps), args=ocp.args.Composite(**items), force=True)
        self._manager.wait_until_finished()
        step_dir = os.path.join(self.path, step_name(env_steps))
        # In a multi-process run every process writes its own shards into the one shared directory and orbax
        # finishes it when all have; the digests are one file, written by one process (two writers would race on
        # its temporary name), and no process goes on before it exists (a resume or load would find it missing).
        if jax.process_index() == 0:
            run_checkpoints.write_manifest(step_dir, "jax", env_steps, [i for i in _CHECKED_ITEMS if i in items])
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(f"brax_core checkpoint at {int(env_steps)} steps")
        return step_dir

    def close(self) -> None:
        self._manager.close()


def save(
    path: str | os.PathLike,
    step: int,
    params: Any,
    config: Mapping[str, Any] | config_dict.ConfigDict,
    state: Any | None = None,
    env_state: Any | None = None,
    max_to_keep: int | None = None,
) -> str:
    """Saves one checkpoint under ``path`` in the step directory ``step`` (the env-step count), as Brax's
    ``save(path, step, params, config)``; ``state`` (optimiser state, key, counters) and ``env_state`` make it
    resumable (see ``Saver``). ``params`` are ``PPOTrainingParams`` or Brax's
    ``(normalizer_params, policy_params, value_params)`` tuple. Returns the step directory.

    A configuration value that cannot be stored raises ``ValueError`` before anything is written.
    """
    if isinstance(state, config_dict.ConfigDict) or (
        isinstance(state, Mapping) and state.get("format") == CONFIG_FORMAT
    ):
        raise TypeError(
            "save(path, step, params, config, state=None, env_state=None, max_to_keep=None): state is a checkpoint "
            "configuration; pass the configuration as config, the fourth argument (as Brax's save)"
        )
    config_to_json(config)
    saver = Saver(path, max_to_keep=max_to_keep)
    try:
        return saver.save(step, params, state, config, env_state)
    finally:
        saver.close()


def _ppo_params(params: Any) -> Any:
    """Brax's ``(normalizer_params, policy_params, value_params)`` as the ``PPOTrainingParams`` that training
    saves, so both load alike; any other tree is saved as it is."""
    if type(params) in (tuple, list) and len(params) == 3:
        return ppo_networks.PPOTrainingParams(*params)
    return params


def _drop_empty(tree: Any) -> Any:
    """``tree`` with zero-size arrays replaced by ``None``: orbax refuses to write empty arrays, and MJX data
    has some (``act`` for a model without activation states). They carry no values, so restoring takes them
    from the target."""
    return jax.tree.map(lambda x: x if math.prod(x.shape) else None, tree)


def _checksums(tree: Any) -> list[list[str]] | None:
    """``[[path, sha256 of dtype, shape and bytes], ...]`` of ``tree``'s arrays (``None`` when an array is not
    wholly on this process, as in a multi-host run: its bytes cannot be read here)."""
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return None
        array = np.asarray(jax.device_get(leaf))
        digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
        out.append([jax.tree_util.keystr(path), digest.hexdigest()])
    return out


def _verify(step_dir: str, item: str, restored: Any) -> None:
    """Compares ``restored`` with the checksums saved beside it (checkpoints written before checksums existed
    have none and are not checked)."""
    path = os.path.join(step_dir, "checksums")
    files = [f for f in os.listdir(path) if not f.startswith(".")] if os.path.isdir(path) else []
    if not files:
        return
    try:
        with open(os.path.join(path, files[0])) as f:
            expected = json.load(f).get(item)
    except (OSError, ValueError, AttributeError) as e:
        raise CheckpointError(f"checkpoint at {step_dir!r} is corrupt: cannot read its checksums ({e})") from e
    actual = _checksums(restored)
    if expected is None or actual is None:
        return
    item_dir = os.path.join(step_dir, item)
    if len(expected) != len(actual):
        raise CheckpointError(
            f"checkpoint {item_dir!r} is corrupt: it restored {len(actual)} arrays, {len(expected)} were saved"
        )
    for (name, want), (_, got) in zip(expected, actual, strict=True):
        if want != got:
            raise CheckpointError(
                f"checkpoint {item_dir!r} is corrupt: the array {item}{name} differs from what was saved (its "
                "SHA-256 does not match the one written with it); restore an earlier checkpoint"
            )


def _restore_item(step_dir: str, item: str, target: Any) -> Any:
    item_dir = os.path.join(step_dir, item)
    if not os.path.isdir(item_dir):
        raise CheckpointError(f"checkpoint at {step_dir!r} is corrupt or incomplete: {item!r} is missing")
    run_checkpoints.verify_files(step_dir, item)
    import orbax.checkpoint as ocp

    try:
        with ocp.StandardCheckpointer() as checkpointer:
            restored = checkpointer.restore(item_dir, target)
    except Exception as e:  # orbax raises many types; the caller needs the path and the cause
        raise ValueError(
            f"checkpoint at {step_dir!r} is corrupt or does not match: cannot restore {item!r} ({e})"
        ) from e
    _verify(step_dir, item, restored)
    _check_shapes(step_dir, item, restored, target)
    return restored


def _check_shapes(step_dir: str, item: str, restored: Any, target: Any) -> None:
    """orbax restores an array of another saved shape as saved, whatever the target says: refuse that here."""
    got = jax.tree_util.tree_flatten_with_path(restored)[0]
    want = jax.tree.leaves(target)
    for (path, r), t in zip(got, want, strict=False):
        if t is not None and hasattr(t, "shape") and tuple(r.shape) != tuple(t.shape):
            raise ValueError(
                f"checkpoint at {step_dir!r} does not match: {item}{jax.tree_util.keystr(path)} was saved with shape "
                f"{tuple(r.shape)}, expected {tuple(t.shape)}"
            )


def restore_item(path: str | os.PathLike, item: str, target: Any) -> Any:
    """One item (``params``, ``state``) restored into the structure (and shardings) of ``target``."""
    return _restore_item(resolve_for(path, "jax"), item, target)


def restore_env_state(path: str | os.PathLike, target: Any) -> Any | None:
    """The saved environment state, or ``None`` when there is none or it does not fit ``target``."""
    step_dir = resolve_for(path, "jax")
    if not os.path.isdir(os.path.join(step_dir, "env_state")):
        return None
    try:
        restored = _restore_item(step_dir, "env_state", _drop_empty(target))
        return jax.tree.map(lambda t, r: t if r is None else r, target, restored, is_leaf=lambda x: x is None)
    except CheckpointError:
        raise
    except ValueError as e:
        logging.warning("not resuming the environment state (%s); environments start fresh", e)
        return None


def load(path: str | os.PathLike) -> ppo_networks.PPOTrainingParams:
    """Brax's name for ``load_params``: ``(normalizer_params, policy_params, value_params)`` from a checkpoint."""
    return load_params(path)


def load_params(path: str | os.PathLike) -> ppo_networks.PPOTrainingParams:
    """``PPOTrainingParams(normalizer_params, policy_params, value_params)`` from a checkpoint."""
    step_dir = resolve_for(path, "jax")
    config = _read_config(step_dir)
    return _restore_params(step_dir, config, networks_from_config(config))


def _restore_params(step_dir: str, config: Mapping[str, Any], network: ppo_networks.PPONetworks) -> Any:
    target = abstract_params(network, _obs_size(config), config.get("normalizer_std_eps", 0.0))
    # Onto this process's default device (``jax.default_device`` where one is set, else its first): without a
    # sharding orbax would ask for the devices that saved the checkpoint, which a policy loaded elsewhere (one
    # process, from a run on several) does not have.
    default = jax.config.jax_default_device
    device = default if isinstance(default, jax.Device) else jax.local_devices(backend=default)[0]
    local = jax.sharding.SingleDeviceSharding(device)
    target = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=local), target)
    return _restore_item(step_dir, "params", target)


def load_policy(
    path: str | os.PathLike, network_factory: Callable[..., Any] | None = None, deterministic: bool = True
) -> types.Policy:
    """Rebuilds the inference function ``(observation, key) -> (action, extras)`` from a checkpoint alone (as
    Brax's ``load_policy``; ``network_factory`` replaces the saved factory, called with the saved arguments)."""
    if network_factory is not None and not callable(network_factory):
        raise TypeError(
            f"load_policy(path, network_factory=None, deterministic=True): network_factory must be callable or "
            f"None, got {network_factory!r}"
        )
    step_dir = resolve_for(path, "jax")
    config = _read_config(step_dir)
    network = networks_from_config(config, network_factory)
    expected = _obs_size(config)
    params = _restore_params(step_dir, config, network)
    policy = ppo_networks.make_inference_fn(network)(params, deterministic=deterministic)

    def checked_policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, Any]:
        run_checkpoints.check_policy_input(step_dir, observations, expected, "arrays")
        return policy(observations, key_sample)

    return checked_policy
