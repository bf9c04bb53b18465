"""The configuration a PPO checkpoint records (``config`` item): the networks, sizes and training settings as JSON,
read back as live values, and the checks a resumed run or restored parameters must pass.

Callables (activations, initialisers, the network factory) are stored by name: the ones Brax knows, those registered
with ``register_callable``/``register_activation``, or an importable ``module:qualname``. ``checkpoint`` re-exports
the public names under Brax's module path.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from ml_collections import config_dict

from brax_core.training import networks, resume, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import networks_vision
from brax_core.training.run.checkpoints import CheckpointError, resolve_for
from brax_core.training.run.checkpoints import latest_step as latest_step  # the save path's newest step
from brax_core.training.run.checkpoints import step_directories as step_directories

CONFIG_FORMAT = "brax_core.ppo.checkpoint/1"

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


def checkpoint_config(
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
    step_dir = resolve_for(path, "jax")
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
        raise CheckpointError(f"checkpoint at {step_dir!r} has no brax_core PPO config (format {CONFIG_FORMAT!r})")
    return config


def _obs_size(config: Mapping[str, Any]) -> types.ObservationSize:
    obs = config["observation_size"]
    if isinstance(obs, Mapping):
        return {k: tuple(v) if isinstance(v, list) else v for k, v in obs.items()}
    return obs
