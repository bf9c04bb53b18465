"""What every JAX trainer's checkpoint shares (``brax.training.checkpoint`` counterpart), in the step directories of
``brax_core.training.run.checkpoints`` (its docstring gives the layout, the manifest and the kill-safe writes).

* ``network_config`` describes the networks as Brax's does (a ``ConfigDict`` of live values: sizes, the factory and
  every keyword argument of it); ``config_to_json`` gives the JSON form a checkpoint stores (callables by name: the
  ones Brax knows, those registered with ``register_callable``/``register_activation``, or an importable
  ``module:qualname``) and ``load_config`` the live values again.
* ``Saver`` writes the orbax items ``config``, ``params``, ``state`` and ``env_state`` with the manifest;
  ``restore_checked`` restores one, refusing files whose digests differ from the manifest before orbax reads them,
  and arrays of another shape than the target's, by name.
* ``load_policy``, ``load_checkpoint``, ``resumable`` and ``restore``: the loading each algorithm's checkpoint module
  (``brax_core.training.agents.{ppo,apg,sac}.checkpoint``) calls with what its ``params`` hold.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from ml_collections import config_dict

from brax_core.training import networks, resume, types
from brax_core.training.acme import running_statistics
from brax_core.training.run import checkpoints as run_checkpoints
from brax_core.training.run.checkpoints import STEP_NAME_DIGITS, CheckpointError, resolve_for, step_name

CONFIG_FORMAT = "brax_core.ppo.checkpoint/1"
# The orbax items a step directory holds; the manifest covers all but the configuration.
ITEMS = ("config", "params", "state", "env_state")
_CHECKED_ITEMS = ITEMS[1:]
# Where a checkpoint of each algorithm is loaded (a configuration without "algo" is PPO's).
LOADERS = {algo: f"brax_core.training.agents.{algo}.checkpoint" for algo in ("ppo", "apg", "sac")}
# Callables known by name in configurations (activations are looked up in networks.ACTIVATIONS first); a trainer
# adds its own network factory (register_callable).
_NAMED_CALLABLES: dict[str, Any] = {"lecun_uniform": networks.LECUN_UNIFORM}


# ------------------------------------------------------------------------------ the configuration as JSON


def _register(table: dict[str, Any], name: str, fn: Callable[..., Any]) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    table[name] = fn


def register_callable(name: str, fn: Callable[..., Any]) -> None:
    """Gives ``fn`` a name that checkpoint configurations can store (register it again before loading)."""
    _register(_NAMED_CALLABLES, name, fn)


def register_activation(name: str, fn: Callable[[jax.Array], jax.Array]) -> None:
    """Adds a custom activation to ``networks.ACTIVATIONS`` so checkpoints can name it."""
    _register(networks.ACTIVATIONS, name, fn)


def _callable_to_config(fn: Any, what: str) -> dict[str, Any]:
    """A JSON description of ``fn``: a registered name, an importable function, or a partial of one."""
    # Initialiser factories (Brax's names) have their own key: "lecun_uniform" is the initialiser itself.
    for key, table in (
        ("name", networks.ACTIVATIONS), ("name", _NAMED_CALLABLES), ("kernel_initializer", networks.KERNEL_INITIALIZER)
    ):
        for name, known in table.items():
            if fn is known:
                return {key: name}
    if isinstance(fn, functools.partial):
        if fn.args:
            raise ValueError(f"{what}: functools.partial with positional arguments cannot be stored; use keywords")
        kwargs = {k: _config_value(v, f"{what} keyword {k!r}") for k, v in fn.keywords.items()}
        return {**_callable_to_config(fn.func, what), "kwargs": kwargs}
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if module and qualname and module != "__main__" and "<" not in qualname:
        with contextlib.suppress(ImportError, AttributeError):
            if _import(f"{module}:{qualname}") is fn:
                return {"import": f"{module}:{qualname}"}
    raise ValueError(
        f"{what} {fn!r} cannot be named in the checkpoint configuration: use a name from "
        f"{sorted(networks.ACTIVATIONS)} (or register one with brax_core.training.checkpoint."
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
    raise ValueError(f"{what} = {value!r} cannot be stored in a JSON checkpoint configuration")


def _import(path: str) -> Any:
    module_name, _, qualname = path.partition(":")
    return functools.reduce(getattr, qualname.split("."), importlib.import_module(module_name))


def _callable_from_config(cfg: Mapping[str, Any]) -> Any:
    if "kernel_initializer" in cfg:
        if cfg["kernel_initializer"] not in networks.KERNEL_INITIALIZER:
            raise ValueError(
                f"the checkpoint names the kernel initialiser {cfg['kernel_initializer']!r}; known: "
                f"{sorted(networks.KERNEL_INITIALIZER)}"
            )
        return networks.KERNEL_INITIALIZER[cfg["kernel_initializer"]]
    if "name" not in cfg:
        fn = _import(cfg["import"])
    elif (fn := networks.ACTIVATIONS.get(cfg["name"], _NAMED_CALLABLES.get(cfg["name"]))) is None:
        raise ValueError(
            f"the checkpoint names the callable {cfg['name']!r}, which is not registered here; register it with "
            "brax_core.training.checkpoint.register_activation (or register_callable) before loading"
        )
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
    factory, kwargs = network_factory, {}
    while isinstance(factory, functools.partial):  # nested partials: the base factory and all their keywords
        if factory.args:
            raise ValueError("network_factory: functools.partial with positional arguments cannot be stored")
        factory, kwargs = factory.func, {**factory.keywords, **kwargs}
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        parameters = ()
    skipped = ("observation_size", "action_size", "preprocess_observations_fn")
    defaults = {p.name: p.default for p in parameters if p.name not in skipped and p.default is not p.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    defaults.update({k: v for k, v in kwargs.items() if k != "preprocess_observations_fn"})
    return config_dict.ConfigDict({
        "format": CONFIG_FORMAT, "observation_size": observation_size, "action_size": action_size,
        "normalize_observations": normalize_observations, "network_factory": factory,
        "network_factory_kwargs": defaults,
    })


def run_config(
    observation_size: types.ObservationSize, action_size: int, network_factory: Callable[..., Any], config: Any
) -> dict[str, Any]:
    """What a JAX run's checkpoints record: the networks (``network_config``: a factory that cannot be named raises
    ``ValueError`` here, before training), ``"algo"`` (``config.ALGO``) and the run's configuration (``"training"``,
    ``config.to_json()``)."""
    saved = config_to_json(
        network_config(observation_size, action_size, config.algorithm.normalize_observations, network_factory)
    )
    return {**saved, "algo": config.ALGO, "training": config.to_json()}


def config_to_json(config: Mapping[str, Any] | config_dict.ConfigDict) -> dict[str, Any]:
    """The JSON form of a checkpoint configuration, as ``save`` writes it: callables by name, tuples as lists,
    scalar arrays as numbers. A configuration already in this form comes back unchanged.

    Raises ``ValueError`` naming the entry for a value that cannot be stored (a lambda, an unknown object).
    """
    if not isinstance(config, Mapping | config_dict.ConfigDict):
        raise TypeError(f"config must be a ConfigDict or a mapping (see network_config), got {type(config).__name__}")
    out: dict[str, Any] = {}
    for key, value in _plain(config).items():
        if key == "network_factory" and callable(value):
            out[key] = _callable_to_config(value, "network_factory")
        elif key == "network_factory_kwargs" and isinstance(value, Mapping):
            out[key] = {str(k): _config_value(v, f"network_factory_kwargs[{k!r}]") for k, v in value.items()}
        elif key == "observation_size":
            out[key] = observation_size_json(value)
        else:
            out[key] = _config_value(value, f"config[{key!r}]")
    json.dumps(out)  # it must be valid JSON
    return out


def live_config(config: Mapping[str, Any] | config_dict.ConfigDict) -> dict[str, Any]:
    """A configuration in JSON form (or already live) with its callables, tuples and sizes as Python values."""
    live = _plain(config)
    if isinstance(live.get("network_factory"), Mapping):
        live["network_factory"] = _callable_from_config(live["network_factory"])
    if isinstance(live.get("network_factory_kwargs"), Mapping):
        live["network_factory_kwargs"] = {k: value_from_config(v) for k, v in live["network_factory_kwargs"].items()}
    if "observation_size" in live:
        live["observation_size"] = saved_observation_size(live)
    return live


def check_observation_size(what: str, size: types.ObservationSize, expected: types.ObservationSize) -> None:
    """Raises ``ValueError`` naming both sizes when ``what``'s observation size is not ``expected``."""
    if observation_size_json(size) != observation_size_json(expected):
        raise ValueError(
            f"{what} has observation_size {observation_size_json(size)!r} but the training environment's is "
            f"{observation_size_json(expected)!r}; the networks read observations of the training environment's size"
        )


def observation_size_json(observation_size: types.ObservationSize) -> Any:
    """An observation size as JSON: an int, or for dict observations ``{key: int or shape list}``."""
    if isinstance(observation_size, Mapping):
        return {k: [int(d) for d in v] if isinstance(v, tuple | list) else int(v) for k, v in observation_size.items()}
    return int(observation_size)


def saved_observation_size(config: Mapping[str, Any]) -> types.ObservationSize:
    obs = config["observation_size"]
    return {k: tuple(v) if isinstance(v, list) else v for k, v in obs.items()} if isinstance(obs, Mapping) else obs


def _plain(config: Any) -> dict[str, Any]:
    """A configuration as plain dicts (a ``ConfigDict`` or a mapping)."""
    return config.to_dict() if isinstance(config, config_dict.ConfigDict) else dict(config)


def load_config(path: str | os.PathLike, algo: str = "ppo") -> config_dict.ConfigDict:
    """The configuration of a checkpoint of ``algo`` (a step directory or the newest under ``path``), as Brax's: a
    ``ConfigDict`` of live values (``config.network_factory_kwargs``, ``config["env_steps"]``).

    The saved names become callables again (activations, kernel initialisers, the network factory; a custom
    one must be registered first, see ``register_activation``) and the saved lists of the network arguments
    and observation shapes become tuples, so the configuration equals the one ``network_config`` built and
    ``make_ppo_networks(obs, act, **config.network_factory_kwargs)`` works. ``config_to_json`` gives the saved
    JSON form.
    """
    return config_dict.ConfigDict(live_config(read_config(path, algo)))


def read_config(path: str | os.PathLike, algo: str = "ppo") -> dict[str, Any]:
    """The JSON configuration of a checkpoint of ``algo`` as plain dicts, callables by name (nothing is imported or
    looked up, so a checkpoint naming an unregistered activation still reads); a checkpoint of another algorithm
    is refused, naming the module that loads it."""
    step_dir = resolve_for(path, "jax")
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
        raise CheckpointError(f"checkpoint at {step_dir!r} has no brax_core config (format {CONFIG_FORMAT!r})")
    saved = config.get("algo", "ppo")
    if saved != algo:
        raise CheckpointError(
            f"checkpoint at {step_dir!r} is of {saved.upper()}, not {algo.upper()}: load it with "
            f"{LOADERS.get(saved, saved)}"
        )
    return config


load_config_json = read_config  # the configuration as saved


# ----------------------------------------------------------------------------------- the orbax items


def drop_empty(tree: Any) -> Any:
    """``tree`` with zero-size arrays replaced by ``None``: orbax refuses to write empty arrays, and MJX data
    has some (``act`` for a model without activation states). They carry no values, so restoring takes them
    from the target."""
    return jax.tree.map(lambda x: x if math.prod(x.shape) else None, tree)


def restore_checked(step_dir: str, item: str, target: Any) -> Any:
    """The orbax item ``item`` of ``step_dir`` restored into ``target``'s structure (and shardings), checked: its
    files against the manifest's digests before orbax reads them, and its arrays' saved shapes against
    ``target``'s (the first that differs is refused by name; orbax's own refusal names no array)."""
    item_dir = os.path.join(step_dir, item)
    if not os.path.isdir(item_dir):
        raise CheckpointError(f"checkpoint at {step_dir!r} is corrupt or incomplete: {item!r} is missing")
    run_checkpoints.verify_files(step_dir, item)
    import orbax.checkpoint as ocp

    try:
        with ocp.StandardCheckpointer() as checkpointer:
            mismatch = _saved_shape_mismatch(step_dir, item, checkpointer.metadata(item_dir), target)
            restored = None if mismatch else checkpointer.restore(item_dir, target)
    except Exception as e:  # orbax raises many types; the caller needs the path and the cause
        raise ValueError(
            f"checkpoint at {step_dir!r} is corrupt or does not match: cannot restore {item!r} ({e})"
        ) from e
    if mismatch:
        raise ValueError(mismatch)
    return restored


def _saved_shape_mismatch(step_dir: str, item: str, metadata: Any, target: Any) -> str | None:
    """The refusal of the first array the checkpoint holds with another shape than ``target``'s; ``None`` when none
    differs. Arrays only one side has are left to orbax."""
    # A tree path as plain names, alike for a dict's keys, a dataclass's fields and a sequence's indices.
    names = lambda path: tuple(str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path)
    tree = getattr(getattr(metadata, "item_metadata", None), "tree", None)
    saved = {names(path): tuple(leaf.shape) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
             if hasattr(leaf, "shape")}
    for path, leaf in jax.tree_util.tree_flatten_with_path(target)[0]:
        shape = saved.get(names(path))
        if shape is not None and hasattr(leaf, "shape") and shape != tuple(leaf.shape):
            return (f"checkpoint at {step_dir!r} does not match: {item}{jax.tree_util.keystr(path)} was saved with "
                    f"shape {shape}, expected {tuple(leaf.shape)}")
    return None


class Saver:
    """Writes checkpoints of the JAX trainers into ``path``: one step directory per save (atomic, at most
    ``max_to_keep`` kept) of the orbax items ``config`` (JSON), ``params``, ``state`` and ``env_state`` (the last
    two optional: a run needs both to resume) and its manifest. ``params_type``: the named tuple a plain tuple of
    ``params`` is saved as (PPO's), so that both load alike.

    With several JAX processes every process saves into the same path, which must be on a filesystem they all see:
    each writes its own shards, process 0 the rest and the manifest.
    """

    params_type: Any = None

    def __init__(self, path: str | os.PathLike, max_to_keep: int | None = None):
        import orbax.checkpoint as ocp  # here, not at module level: its import only where checkpoints are kept

        self.path = os.path.abspath(os.fspath(path))
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False,
            step_format_fixed_length=STEP_NAME_DIGITS,
        )
        self._manager = ocp.CheckpointManager(self.path, options=options, item_names=ITEMS)

    def save(
        self,
        env_steps: int,
        params: Any,
        state: Any | None,
        config: Mapping[str, Any] | config_dict.ConfigDict,
        env_state: Any | None = None,
    ) -> str:
        """Writes the step directory of ``env_steps``; returns it."""
        import orbax.checkpoint as ocp
        from jax.experimental import multihost_utils

        named = self.params_type
        if named is not None and type(params) in (tuple, list) and len(params) == len(named._fields):
            params = named(*params)
        config_json = config_to_json(config)
        config_json.setdefault("env_steps", int(env_steps))
        # The normaliser's std_eps is a setting, not an array, so the configuration carries it.
        std_eps = float(getattr(getattr(params, "normalizer_params", None), "std_eps", 0.0))
        if std_eps:
            config_json["normalizer_std_eps"] = std_eps
        items = {"config": ocp.args.JsonSave(config_json), "params": ocp.args.StandardSave(params)}
        if state is not None:
            items["state"] = ocp.args.StandardSave(state)
        if env_state is not None:
            items["env_state"] = ocp.args.StandardSave(drop_empty(env_state))
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


# ---------------------------------------------------------------------------------------------- loading


def networks_from_config(
    config: Mapping[str, Any] | config_dict.ConfigDict, network_factory: Callable[..., Any] | None = None
) -> Any:
    """Rebuilds the networks a configuration (live, as ``network_config`` and ``load_config`` give it, or its JSON
    form) describes, with ``network_factory`` instead of the saved factory when one is given."""
    config = live_config(config)
    factory = config["network_factory"] if network_factory is None else network_factory
    normalize = config["normalize_observations"]
    preprocess = running_statistics.normalize if normalize else types.identity_observation_preprocessor
    return factory(config["observation_size"], config["action_size"], preprocess_observations_fn=preprocess,
                   **config["network_factory_kwargs"])


def abstract_params(
    observation_size: types.ObservationSize, saved: Sequence[Any], std_eps: float = 0.0, dtype: Any = jnp.float32
) -> tuple[Any, ...]:
    """Shapes and dtypes (nothing is computed) of ``(normalizer_params, *params of each network in saved)``:
    observation statistics in ``dtype`` (``std_eps``: their setting), then each network's ``init``."""
    shape = lambda size: tuple(size) if isinstance(size, tuple | list) else (int(size),)
    template = (
        {k: jax.ShapeDtypeStruct(shape(v), dtype) for k, v in observation_size.items()}
        if isinstance(observation_size, Mapping) else jax.ShapeDtypeStruct(shape(observation_size), dtype)
    )

    def init() -> tuple[Any, ...]:
        statistics = jax.tree.map(lambda x: x.astype(dtype), running_statistics.init_state(template, std_eps))
        return (statistics, *(network.init(jax.random.PRNGKey(0)) for network in saved))

    return jax.eval_shape(init)


def on_default_device(target: Any) -> Any:
    """``target``'s shapes laid on this process's default device (``jax.default_device`` where one is set, else its
    first): without a sharding orbax would ask for the devices that saved the checkpoint, which a policy loaded
    elsewhere (one process, from a run on several) does not have."""
    default = jax.config.jax_default_device
    device = default if isinstance(default, jax.Device) else jax.local_devices(backend=default)[0]
    local = jax.sharding.SingleDeviceSharding(device)
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=local), target)


def load_checkpoint(
    path: str | os.PathLike, algo: str, params_shape: Callable[[Any, Mapping[str, Any]], Any],
    network_factory: Callable[..., Any] | None = None,
) -> tuple[str, dict[str, Any], Any, Any]:
    """``(step directory, configuration, networks, params)`` of the checkpoint of ``algo`` that ``path`` names (a
    step directory, or the newest under a save path): the networks its configuration describes (``network_factory``
    replacing the saved factory, called with the saved arguments) and its ``params``, restored on this process's
    default device into ``params_shape(networks, configuration)`` (the algorithm's, e.g. from ``abstract_params``)."""
    step_dir = resolve_for(path, "jax")
    config = read_config(step_dir, algo)
    network = networks_from_config(config, network_factory)
    params = restore_checked(step_dir, "params", on_default_device(params_shape(network, config)))
    return step_dir, config, network, params


def load_policy(
    path: str | os.PathLike, algo: str, params_shape: Callable[[Any, Mapping[str, Any]], Any],
    make_inference_fn: Callable[[Any], Callable[..., types.Policy]], network_factory: Callable[..., Any] | None = None,
    deterministic: bool = True,
) -> types.Policy:
    """The inference function ``(observation, key) -> (action, extras)`` of a checkpoint of ``algo``, rebuilt from it
    alone as Brax's ``load_policy`` does (``load_checkpoint``; ``make_inference_fn``: the algorithm's;
    ``deterministic``: the policy's mode, else a sample)."""
    if network_factory is not None and not callable(network_factory):
        raise TypeError(
            f"load_policy(path, network_factory=None, deterministic=True): network_factory must be callable or "
            f"None, got {network_factory!r}"
        )
    step_dir, config, network, params = load_checkpoint(path, algo, params_shape, network_factory)
    return checked_policy(step_dir, make_inference_fn(network)(params, deterministic=deterministic), config)


def checked_policy(step_dir: str, policy: types.Policy, config: Mapping[str, Any]) -> types.Policy:
    """``policy`` refusing observations of another size than the checkpoint's networks read, naming both."""
    expected = saved_observation_size(config)

    def checked(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, Any]:
        run_checkpoints.check_policy_input(step_dir, observations, expected, "arrays")
        return policy(observations, key_sample)

    return checked


def resumable(path: str | os.PathLike | None, config: Any) -> str | None:
    """The step directory a run of ``config`` resumes from (``None`` without a path), checked to hold a run of its
    algorithm with the same settings (``resume.check_same_config``): read before anything compiles."""
    if path is None:
        return None
    step_dir = resolve_for(path, "jax")
    resume.check_same_config(step_dir, read_config(step_dir, config.ALGO)["training"], config)
    return step_dir


def restore(step_dir: str, params: Any, state: Mapping[str, Any], env_state: Any) -> tuple[Any, dict[str, Any], Any]:
    """A whole run's parameters (a tuple), state and envs' state, restored into the structures (and shardings) of
    the arguments (the envs' as given where the saved ones do not fit, see ``restore_env_state``)."""
    restored_state = restore_checked(step_dir, "state", dict(state))
    restored_env = restore_env_state(step_dir, env_state)
    params = tuple(restore_checked(step_dir, "params", params))
    return params, restored_state, env_state if restored_env is None else restored_env


def restore_env_state(path: str | os.PathLike, target: Any) -> Any | None:
    """The saved environment state, or ``None`` when there is none or it does not fit ``target``."""
    step_dir = resolve_for(path, "jax")
    if not os.path.isdir(os.path.join(step_dir, "env_state")):
        return None
    try:
        restored = restore_checked(step_dir, "env_state", drop_empty(target))
    except CheckpointError:
        raise
    except ValueError as e:
        logging.warning("not resuming the environment state (%s); environments start fresh", e)
        return None
    return jax.tree.map(lambda t, r: t if r is None else r, target, restored, is_leaf=lambda x: x is None)
