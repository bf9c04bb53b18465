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
``CheckpointError`` (``ChecksumError`` is its older name) naming the file (or the array) instead of loading as a
different policy, and orbax never starts reading corrupt data (a read failing inside orbax closes its event loop
under reads still in flight, whose callbacks then print stray "Event loop is closed" tracebacks).

orbax writes each step into a temporary directory and renames it when complete, so an interrupted save never
looks like a checkpoint. ``load_policy`` rebuilds the inference function from the saved configuration alone.

With several JAX processes (``jax.distributed``) every process saves into the same path, which must be on a
filesystem they all see: each writes its own shards (its envs' state), process 0 the rest, and the step
directory is complete once all have finished.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import logging
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from ml_collections import config_dict

from brax_core.training import networks, resume, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import networks_vision
from brax_core.training.run import checkpoints as run_checkpoints
from brax_core.training.run.checkpoints import STEP_NAME_DIGITS, CheckpointError, resolve, step_name
from brax_core.training.run.checkpoints import latest_step as latest_step  # the save path's newest step
from brax_core.training.run.checkpoints import step_directories as step_directories

CONFIG_FORMAT = "brax_core.ppo.checkpoint/1"
_CHECKED_ITEMS = ("params", "state", "env_state")
# The file holding the digests of the checked items' files (a checkpoint without one is checked by its arrays).
FILE_CHECKSUMS = run_checkpoints.MANIFEST
# The name this module gave the one checkpoint error class before both trainers shared it.
ChecksumError = CheckpointError

# Callables known by name in configurations (activations are looked up in networks.ACTIVATIONS first).
_NAMED_CALLABLES: dict[str, Any] = {
    "make_ppo_networks": ppo_networks.make_ppo_networks,
    "lecun_uniform": networks.LECUN_UNIFORM,
}


def register_callable(name: str, fn: Callable[..., Any]) -> None:
    """Gives ``fn`` a name that checkpoint configurations can store (register it again before loading)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    _NAMED_CALLABLES[name] = fn


def register_activation(name: str, fn: Callable[[jax.Array], jax.Array]) -> None:
    """Adds a custom activation to ``networks.ACTIVATIONS`` so checkpoints can name it."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    networks.ACTIVATIONS[name] = fn


def _json_value(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _callable_to_config(fn: Any, what: str) -> dict[str, Any]:
    """A JSON description of ``fn``: a registered name, an importable function, or a partial of one."""
    for name, known in networks.ACTIVATIONS.items():
        if fn is known:
            return {"name": name}
    for name, known in _NAMED_CALLABLES.items():
        if fn is known:
            return {"name": name}
    # Initialiser factories (Brax's names) have their own key: "lecun_uniform" above is the initialiser itself.
    for name, known in networks.KERNEL_INITIALIZER.items():
        if fn is known:
            return {"kernel_initializer": name}
    if isinstance(fn, functools.partial):
        if fn.args:
            raise ValueError(f"{what}: functools.partial with positional arguments cannot be stored; use keywords")
        kwargs = {k: _config_value(v, f"{what} keyword {k!r}") for k, v in fn.keywords.items()}
        return {**_callable_to_config(fn.func, what), "kwargs": kwargs}
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if module and qualname and module != "__main__" and "<" not in qualname:
        try:
            found = _import(f"{module}:{qualname}")
        except (ImportError, AttributeError):
            found = None
        if found is fn:
            return {"import": f"{module}:{qualname}"}
    raise ValueError(
        f"{what} {fn!r} cannot be named in the checkpoint configuration: use a name from "
        f"{sorted(networks.ACTIVATIONS)} (or register one with brax_core.training.agents.ppo.checkpoint."
        "register_activation / register_callable), a module-level function of an importable module, or "
        "functools.partial of one with JSON keyword arguments"
    )


def _config_value(value: Any, what: str) -> Any:
    if isinstance(value, tuple | list):
        return [_config_value(v, what) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _config_value(v, what) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if callable(value):
        return {"callable": _callable_to_config(value, what)}
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    if hasattr(value, "tolist") and isinstance(getattr(value, "ndim", None), int):
        return value.tolist()
    if _json_value(value):
        return value
    raise ValueError(f"{what} = {value!r} cannot be stored in a JSON checkpoint configuration")


def _import(path: str) -> Any:
    module_name, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _callable_from_config(cfg: Mapping[str, Any]) -> Any:
    if "kernel_initializer" in cfg:
        name = cfg["kernel_initializer"]
        if name not in networks.KERNEL_INITIALIZER:
            raise ValueError(
                f"the checkpoint names the kernel initialiser {name!r}; known: {sorted(networks.KERNEL_INITIALIZER)}"
            )
        return networks.KERNEL_INITIALIZER[name]
    if "name" in cfg:
        name = cfg["name"]
        if name in networks.ACTIVATIONS:
            fn = networks.ACTIVATIONS[name]
        elif name in _NAMED_CALLABLES:
            fn = _NAMED_CALLABLES[name]
        else:
            raise ValueError(
                f"the checkpoint names the callable {name!r}, which is not registered here; register it with "
                "brax_core.training.agents.ppo.checkpoint.register_activation (or register_callable) before loading"
            )
    else:
        fn = _import(cfg["import"])
    if "kwargs" in cfg:
        fn = functools.partial(fn, **{k: value_from_config(v) for k, v in cfg["kwargs"].items()})
    return fn


def value_from_config(value: Any) -> Any:
    """A saved configuration value as Python again: callables re-imported, lists as tuples, dicts recursively."""
    if isinstance(value, Mapping) and set(value) == {"callable"}:
        return _callable_from_config(value["callable"])
    if isinstance(value, list):
        return tuple(value_from_config(v) for v in value)
    if isinstance(value, Mapping):
        return {k: value_from_config(v) for k, v in value.items()}
    return value


def _factory_and_kwargs(network_factory: Callable[..., Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """Unwraps (nested) ``functools.partial``s into the base factory and its keyword arguments."""
    kwargs: dict[str, Any] = {}
    fn = network_factory
    while isinstance(fn, functools.partial):
        if fn.args:
            raise ValueError("network_factory: functools.partial with positional arguments cannot be stored")
        kwargs = {**fn.keywords, **kwargs}
        fn = fn.func
    return fn, kwargs


def network_config(
    observation_size: types.ObservationSize,
    action_size: int,
    normalize_observations: bool,
    network_factory: Callable[..., Any],
) -> config_dict.ConfigDict:
    """The configuration that rebuilds the networks, as Brax's: a ``ConfigDict`` of the live values.

    Holds ``observation_size``, ``action_size``, ``normalize_observations``, the factory and *every* factory
    keyword argument (defaults included) as given: tuples stay tuples and activations and initialisers stay
    callables, so ``network_factory(obs, act, **config.network_factory_kwargs)`` rebuilds the networks. ``save``
    stores callables by name (``config_to_json``) and raises ``ValueError`` for one that cannot be named;
    ``load_config`` turns the names back into the callables.
    """
    if not callable(network_factory):
        raise TypeError(
            "network_config(observation_size, action_size, normalize_observations, network_factory): "
            f"network_factory must be callable, got {network_factory!r}"
        )
    factory, kwargs = _factory_and_kwargs(network_factory)
    full_kwargs: dict[str, Any] = {}
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        for name, param in signature.parameters.items():
            if name in ("observation_size", "action_size", "preprocess_observations_fn"):
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.default is param.empty:
                continue
            full_kwargs[name] = param.default
    full_kwargs.update({k: v for k, v in kwargs.items() if k != "preprocess_observations_fn"})
    config = {
        "format": CONFIG_FORMAT,
        "observation_size": observation_size,
        "action_size": action_size,
        "normalize_observations": normalize_observations,
        "network_factory": factory,
        "network_factory_kwargs": full_kwargs,
    }
    return config_dict.ConfigDict(config)


def config_to_json(config: Mapping[str, Any] | config_dict.ConfigDict) -> dict[str, Any]:
    """The JSON form of a checkpoint configuration, as ``save`` writes it: callables by name, tuples as lists,
    scalar arrays as numbers. A configuration already in this form comes back unchanged.

    Raises ``ValueError`` naming the entry for a value that cannot be stored (a lambda, an unknown object).
    """
    if not isinstance(config, Mapping | config_dict.ConfigDict):
        raise TypeError(f"config must be a ConfigDict or a mapping (see network_config), got {type(config).__name__}")
    plain = _plain(config)
    out: dict[str, Any] = {}
    for key, value in plain.items():
        if key == "network_factory" and callable(value):
            out[key] = _callable_to_config(value, "network_factory")
        elif key == "network_factory_kwargs" and isinstance(value, Mapping):
            out[key] = {str(k): _config_value(v, f"network_factory_kwargs[{k!r}]") for k, v in value.items()}
        elif key == "observation_size":
            out[key] = _obs_json(value)
        else:
            out[key] = _config_value(value, f"config[{key!r}]")
    json.dumps(out)  # it must be valid JSON
    return out


def _live_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration in JSON form (or already live) with its callables, tuples and sizes as Python values."""
    live = dict(config)
    factory = live.get("network_factory")
    if isinstance(factory, Mapping):
        live["network_factory"] = _callable_from_config(factory)
    if isinstance(live.get("network_factory_kwargs"), Mapping):
        live["network_factory_kwargs"] = {k: value_from_config(v) for k, v in live["network_factory_kwargs"].items()}
    if "observation_size" in live:
        live["observation_size"] = _obs_size(live)
    return live


def run_config(
    observation_size: types.ObservationSize,
    action_size: int,
    normalize_observations: bool,
    network_factory: Callable[..., Any],
    hyperparameters: Any,
    required: Any = True,
) -> dict[str, Any]:
    """A run's checkpoint configuration: ``network_config`` plus ``training`` (the ``resume.RESUME_FIELDS`` of the
    validated ``hyperparameters``, a ``PPOConfig``).

    A network argument that cannot be named raises ``ValueError`` when ``required`` is true (a run that saves);
    otherwise (a run that only restores) the configuration holds the sizes and ``training`` only.
    """
    try:
        config = config_to_json(network_config(observation_size, action_size, normalize_observations, network_factory))
    except ValueError:
        if required:
            raise
        config = {"observation_size": _obs_json(observation_size), "action_size": int(action_size)}
    config["training"] = {name: getattr(hyperparameters, name) for name in resume.RESUME_FIELDS}
    return config


def check_resume_config(path: str | os.PathLike, requested: Mapping[str, Any], allow: Any) -> None:
    """Refuses to resume from the checkpoint at ``path`` with a configuration other than its saved one (see
    ``resume.check_config``); allowed changes are logged."""
    step_dir = resolve(path)
    changed = resume.check_config(step_dir, _read_config(step_dir), requested, allow)
    for name, (saved, now) in changed.items():
        logging.warning("resuming from %s with %s changed from %r to %r", step_dir, name, saved, now)


def check_observation_size(what: str, size: types.ObservationSize, expected: types.ObservationSize) -> None:
    """Raises ``ValueError`` naming both sizes when ``what``'s observation size is not ``expected``."""
    if _obs_json(size) != _obs_json(expected):
        raise ValueError(
            f"{what} has observation_size {_obs_json(size)!r} but the training environment's is "
            f"{_obs_json(expected)!r}; the networks read observations of the training environment's size"
        )


def check_params_fit(what: str, params: Any, target: Any, with_value: bool = True) -> None:
    """Raises ``ValueError`` when ``params`` (``PPOTrainingParams``) do not have the shapes of ``target`` (the
    abstract params of the networks being trained), naming the observation sizes where those differ."""
    shapes = lambda tree: jax.tree.map(lambda x: tuple(getattr(x, "shape", ())), tree)
    got_obs, want_obs = shapes(params.normalizer_params.mean), shapes(target.normalizer_params.mean)
    if got_obs != want_obs:
        raise ValueError(
            f"{what} were trained on observations of shape {got_obs} but this environment's are {want_obs}: "
            "they belong to another environment"
        )
    parts = [("policy_params", params.policy_params, target.policy_params)]
    if with_value:
        parts.append(("value_params", params.value_params, target.value_params))
    for name, have, want in parts:
        have_leaves = jax.tree_util.tree_flatten_with_path(have)[0]
        want_leaves = jax.tree_util.tree_flatten_with_path(want)[0]
        have_map = {jax.tree_util.keystr(p): tuple(x.shape) for p, x in have_leaves}
        want_map = {jax.tree_util.keystr(p): tuple(x.shape) for p, x in want_leaves}
        if have_map != want_map:
            wrong = sorted(k for k in have_map.keys() | want_map.keys() if have_map.get(k) != want_map.get(k))
            listed = "; ".join(f"{k}: {have_map.get(k)} given, {want_map.get(k)} expected" for k in wrong[:4])
            raise ValueError(f"{what}.{name} do not fit these networks ({listed})")


def _obs_json(observation_size: types.ObservationSize) -> Any:
    if isinstance(observation_size, Mapping):
        return {
            k: ([int(d) for d in v] if isinstance(v, tuple | list) else int(v)) for k, v in observation_size.items()
        }
    return int(observation_size)


def _plain(config: Any) -> dict[str, Any]:
    """A configuration as plain dicts (a ``ConfigDict`` or a mapping)."""
    return config.to_dict() if isinstance(config, config_dict.ConfigDict) else dict(config)


def networks_from_config(
    config: Mapping[str, Any] | config_dict.ConfigDict, network_factory: Callable[..., Any] | None = None
) -> ppo_networks.PPONetworks:
    """Rebuilds the PPO networks a configuration (live, as ``network_config`` and ``load_config`` give it, or its
    JSON form) describes, with ``network_factory`` instead of the saved factory when one is given."""
    config = _live_config(_plain(config))
    factory = config["network_factory"] if network_factory is None else network_factory
    preprocess = (
        running_statistics.normalize if config["normalize_observations"] else types.identity_observation_preprocessor
    )
    return factory(
        config["observation_size"],
        config["action_size"],
        preprocess_observations_fn=preprocess,
        **config["network_factory_kwargs"],
    )


def abstract_params(
    network: ppo_networks.PPONetworks, observation_size: types.ObservationSize, std_eps: float = 0.0
) -> Any:
    """Shapes and dtypes of ``PPOTrainingParams`` for ``network`` (nothing is computed; ``std_eps`` is the
    normaliser's setting)."""
    key = jax.random.PRNGKey(0)
    if isinstance(observation_size, Mapping):
        # As in training, image views have no running statistics.
        template = {
            k: jax.ShapeDtypeStruct(tuple(v) if not isinstance(v, int) else (v,), jnp.float32)
            for k, v in networks_vision.remove_pixels(observation_size).items()
        }
    else:
        template = jax.ShapeDtypeStruct((int(observation_size),), jnp.float32)
    return jax.eval_shape(
        lambda: ppo_networks.PPOTrainingParams(
            running_statistics.init_state(template, std_eps),
            network.policy_network.init(key),
            network.value_network.init(key),
        )
    )


# ----------------------------------------------------------------------------------------------- files


def load_config(path: str | os.PathLike) -> config_dict.ConfigDict:
    """The configuration of a checkpoint (a step directory or the newest under ``path``), as Brax's: a
    ``ConfigDict`` of live values (``config.network_factory_kwargs``, ``config["env_steps"]``).

    The saved names become callables again (activations, kernel initialisers, the network factory; a custom
    one must be registered first, see ``register_activation``) and the saved lists of the network arguments
    and observation shapes become tuples, so the configuration equals the one ``network_config`` built and
    ``make_ppo_networks(obs, act, **config.network_factory_kwargs)`` works. ``config_to_json`` gives the saved
    JSON form.
    """
    return config_dict.ConfigDict(_live_config(_read_config(path)))


def load_config_json(path: str | os.PathLike) -> dict[str, Any]:
    """The configuration of a checkpoint as saved: plain JSON dicts, callables by name (nothing is imported or
    looked up, so a checkpoint naming an unregistered activation still reads)."""
    return _read_config(path)


def _read_config(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON configuration of a checkpoint as plain dicts."""
    step_dir = resolve(path)
    config_dir = os.path.join(step_dir, "config")
    files = [f for f in os.listdir(config_dir) if not f.startswith(".")] if os.path.isdir(config_dir) else []
    try:
        with open(os.path.join(config_dir, files[0]) if files else config_dir) as f:
            config = json.load(f)
    except (OSError, ValueError, IndexError) as e:
        raise CheckpointError(
            f"checkpoint at {step_dir!r} is corrupt or incomplete: cannot read its config ({e})"
        ) from e
    if not isinstance(config, dict) or config.get("format") != CONFIG_FORMAT:
        raise CheckpointError(f"checkpoint at {step_dir!r} has no brax_core PPO config (format {CONFIG_FORMAT!r})")
    return config


class Saver:
    """Writes checkpoints into ``path`` (atomic, at most ``max_to_keep`` kept)."""

    def __init__(self, path: str | os.PathLike, max_to_keep: int | None = None):
        import orbax.checkpoint as ocp  # here, not at module level: its 0.3 s import only where checkpoints are kept

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
    return _restore_item(resolve(path), item, target)


def restore_env_state(path: str | os.PathLike, target: Any) -> Any | None:
    """The saved environment state, or ``None`` when there is none or it does not fit ``target``."""
    step_dir = resolve(path)
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
    step_dir = resolve(path)
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


def _obs_size(config: Mapping[str, Any]) -> types.ObservationSize:
    obs = config["observation_size"]
    if isinstance(obs, Mapping):
        return {k: tuple(v) if isinstance(v, list) else v for k, v in obs.items()}
    return obs


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
    step_dir = resolve(path)
    config = _read_config(step_dir)
    network = networks_from_config(config, network_factory)
    expected = _obs_size(config)
    params = _restore_params(step_dir, config, network)
    policy = ppo_networks.make_inference_fn(network)(params, deterministic=deterministic)

    def checked_policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, Any]:
        run_checkpoints.check_policy_input(step_dir, observations, expected, "arrays")
        return policy(observations, key_sample)

    return checked_policy
