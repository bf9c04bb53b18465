"""Traced programs kept on disk, so a second run of the same configuration skips tracing as well as XLA.

JAX's persistent compilation cache (``brax_core.compile.enable_persistent_cache``) spares a second run XLA's work,
but not tracing and lowering: tracing MJX's step under ``vmap`` is Python work that takes seconds on a CPU, every
run. This cache keeps each program as ``jax.export`` writes it (StableHLO), keyed by a description of what the
program computes, and a later run with the same key lowers the stored program instead of tracing; its compile then
finds XLA's output in JAX's cache.

The key is a hash of:

- the caller's description of the program, as plain data: its settings, and the objects it closes over (the
  environment and its wrappers, a network factory) as ``describe`` writes them, which it can only do for code of
  the packages the key covers; a program that depends on anything else (a user's class or function) is traced as
  usual;
- the abstract arguments (tree, shapes, dtypes, weak types, shardings) and the platform;
- every file of ``brax_core`` and of the other packages whose code the program runs (``brax_bridge`` for its
  ``TorchEnv``: code and MJCF models), the versions of Python, JAX, jaxlib, MuJoCo, NumPy and Flax, and JAX's
  configuration.

So editing the packages or upgrading a library starts afresh. What the key cannot see is code changed while the
program runs (a test that monkeypatches an env's method): set ``BRAX_BRIDGE_PROGRAM_CACHE=0`` for such runs. The
cache lives in a ``programs`` folder inside JAX's compilation cache folder and is off whenever that cache is off.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib.util
import json
import logging
import os
import pickle
import platform
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import mujoco
import numpy as np

from brax_core.io import model as model_io

ENV_VAR = "BRAX_BRIDGE_PROGRAM_CACHE"
_FORMAT = 1
_SOURCE_HASHES: dict[str, str] = {}
# Whether this process has already said why the cache could not be used: once is enough, every program after the
# first would fail the same way.
_warned = False

logger = logging.getLogger(__name__)


def folder() -> str | None:
    """Where programs are kept: ``<JAX's compilation cache folder>/programs``; None when either cache is off."""
    setting = os.environ.get(ENV_VAR, "1").strip()
    if setting not in ("0", "1"):
        raise ValueError(f"{ENV_VAR} must be 0 (off) or 1 (on, the default), got {setting!r}")
    if setting == "0":
        return None
    jax_folder = jax.config.jax_compilation_cache_dir
    return os.path.join(jax_folder, "programs") if jax_folder else None


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready plain data, or raises ``TypeError`` when it holds anything else."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("mapping keys must be strings")
        return {k: _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *[_plain(v) for v in value]]
    raise TypeError(f"{type(value).__name__} is not plain data")


_TRUSTED = ("brax_core", "brax_bridge", "jax", "jaxlib", "flax", "optax", "numpy", "mujoco")


def _trusted(module: str | None) -> bool:
    """Code whose every change the key sees: these packages' files or their versions."""
    return module is not None and module.split(".")[0] in _TRUSTED


def describe(value: Any) -> Any:
    """Plain data that pins down what ``value`` (an env, a wrapper, a network factory, a hyperparameter) contributes
    to a traced program; raises ``TypeError`` where it cannot be sure.

    Objects and functions are described only when their code belongs to the packages the key covers (brax_core,
    brax_bridge, JAX, Flax, Optax, NumPy, MuJoCo): an object by its class and every attribute, a function by its name,
    defaults and the values it closes over, an array by its dtype, shape and bytes, a MuJoCo model by its binary
    form. Anything else (a user's class or function) makes the program uncacheable: its code could change between
    runs without the key changing.
    """
    return _describe(value, {})


def _describe(value: Any, seen: dict[int, tuple[int, Any]]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if id(value) in seen:  # shared or cyclic references: by their first appearance
        return {"ref": seen[id(value)][0]}
    # The value is kept alive with its index: an id is unique only while its object lives, and the walk makes
    # temporaries (attribute dicts, closure cell lists) whose ids could otherwise be reused.
    seen[id(value)] = (len(seen), value)
    recurse = functools.partial(_describe, seen=seen)
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda item: repr(item[0]))
        return {"mapping": type(value).__name__, "items": [[recurse(k), recurse(v)] for k, v in items]}
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return [type(value).__name__, *[recurse(v) for v in value]]
    if isinstance(value, np.dtype):
        return {"dtype": value.str, "name": value.name}
    if isinstance(value, bytes):
        return {"bytes": hashlib.sha256(value).hexdigest()}
    if isinstance(value, (np.ndarray, np.generic, jax.Array)):
        array = np.asarray(value)
        digest = hashlib.sha256(np.ascontiguousarray(array).view(np.uint8).tobytes()).hexdigest()
        return {"array": str(array.dtype), "shape": list(array.shape), "sha256": digest}
    if isinstance(value, mujoco.MjModel):
        buffer = np.empty(mujoco.mj_sizeModel(value), np.uint8)
        mujoco.mj_saveModel(value, None, buffer)
        return {"mj_model": hashlib.sha256(buffer.tobytes()).hexdigest()}
    if isinstance(value, jax.Device):
        return {"device": value.platform, "kind": value.device_kind, "id": value.id}
    if isinstance(value, type):
        if not _trusted(value.__module__):
            raise TypeError(f"class {value.__qualname__} of {value.__module__}")
        return {"class": f"{value.__module__}.{value.__qualname__}"}
    if isinstance(value, functools.partial):
        return {"partial": recurse(value.func), "args": recurse(value.args), "keywords": recurse(value.keywords)}
    if isinstance(value, types.MethodType):
        return {"method": recurse(value.__func__), "self": recurse(value.__self__)}
    if isinstance(value, types.FunctionType):
        if not _trusted(value.__module__):
            raise TypeError(f"function {value.__qualname__} of {value.__module__}")
        cells = [cell.cell_contents for cell in value.__closure__ or ()]
        return {
            "function": f"{value.__module__}.{value.__qualname__}",
            "defaults": recurse(value.__defaults__),
            "kwdefaults": recurse(value.__kwdefaults__),
            "closure": recurse(cells),
        }
    if callable(value) and hasattr(value, "__wrapped__"):  # jax.jit and other wrappers: what they wrap
        if not _trusted(type(value).__module__):
            raise TypeError(f"wrapper {type(value).__qualname__} of {type(value).__module__}")
        return {"wrapper": f"{type(value).__module__}.{type(value).__qualname__}", "wraps": recurse(value.__wrapped__)}
    if isinstance(value, (types.BuiltinFunctionType, np.ufunc)):
        module = getattr(value, "__module__", None) or type(value).__module__
        if not _trusted(module) and module != "builtins":
            raise TypeError(f"callable {value!r}")
        return {"builtin": f"{module}.{getattr(value, '__qualname__', value.__name__)}"}
    cls = type(value)
    if isinstance(value, enum.Enum) and _trusted(cls.__module__):
        return {"enum": f"{cls.__module__}.{cls.__qualname__}", "value": recurse(value.value)}
    slots = [name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ()) if hasattr(value, name)]
    if _trusted(cls.__module__) and (hasattr(value, "__dict__") or slots):
        fields = {name: getattr(value, name) for name in slots}
        fields.update(getattr(value, "__dict__", {}))
        # Lazily filled caches (``_observation_size_cache``) say nothing new and appear only after first use.
        fields = {k: v for k, v in fields.items() if not k.endswith("_cache")}
        return {"object": f"{cls.__module__}.{cls.__qualname__}", "fields": recurse(fields)}
    raise TypeError(f"{cls.__module__}.{cls.__qualname__} is not described")


def _source_hash(package: str) -> str:
    """One hash over every file of ``package`` (found without importing it; read once per process)."""
    if package not in _SOURCE_HASHES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"no package named {package!r} to hash")
        root = list(spec.submodule_search_locations)[0]
        digest = hashlib.sha256()
        for directory, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(directory, name)
                digest.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as file:
                    digest.update(hashlib.sha256(file.read()).digest())
        _SOURCE_HASHES[package] = digest.hexdigest()
    return _SOURCE_HASHES[package]


def _versions() -> dict[str, str]:
    import flax
    import jaxlib

    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
        "flax": flax.__version__,
    }


def _tree(tree: Any) -> Any:
    """A tree structure node by node (its text shows the addresses of MJX's static fields; its pickle depends on
    which of them are shared)."""
    data = tree.node_data()
    if data is None:
        return "*"
    node_type, aux = data
    return [f"{node_type.__module__}.{node_type.__qualname__}", describe(aux), [_tree(c) for c in tree.children()]]


def _abstract(args: Sequence[Any]) -> list[Any]:
    leaves, tree = jax.tree.flatten(tuple(args))
    described = [_tree(tree)]
    for leaf in leaves:
        sharding = getattr(leaf, "sharding", None)
        described.append([list(leaf.shape), str(leaf.dtype), bool(getattr(leaf, "weak_type", False)), repr(sharding)])
    return described


def key(
    description: Mapping[str, Any], args: Sequence[Any], platform_name: str, packages: Sequence[str] = ("brax_core",)
) -> str | None:
    """The cache key of a program: ``description`` (plain data naming what it computes) with its abstract
    arguments on ``platform_name``; None when the description is not plain data (the program is then not cached)."""
    try:
        described = _plain(dict(description))
        arguments = _abstract(args)
    except TypeError:
        return None
    config = {name: repr(value) for name, value in sorted(jax.config.values.items())}
    payload = {
        "format": _FORMAT,
        "program": described,
        "arguments": arguments,
        "platform": platform_name,
        "sources": {package: _source_hash(package) for package in sorted({"brax_core", *packages})},
        "versions": _versions(),
        "jax_config": config,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _warn_once(action: str, error: BaseException) -> None:
    """Says once per process that the cache could not ``action`` and why; the run goes on by tracing."""
    global _warned
    if _warned:
        logger.info("program cache: could not %s (%s: %s)", action, type(error).__name__, error)
        return
    _warned = True
    warnings.warn(
        f"brax_core's program cache could not {action} ({type(error).__name__}: {error}); programs are traced in "
        f"this run instead, which only costs start-up time. {ENV_VAR}=0 turns the program cache off.",
        RuntimeWarning,
        stacklevel=4,
    )


def _load(path: str) -> tuple[jax.export.Exported, Any] | None:
    try:
        with open(path, "rb") as file:
            entry = pickle.load(file)
        if entry.get("format") != _FORMAT:
            return None
        return jax.export.deserialize(bytearray(entry["exported"])), entry["out_tree"]
    except FileNotFoundError:
        return None
    except Exception as error:  # a truncated or foreign file, or a JAX that cannot deserialise: trace instead
        _warn_once(f"load the stored program {path}", error)
        return None


def _store(path: str, exported: jax.export.Exported, out_tree: Any) -> None:
    entry = {"format": _FORMAT, "exported": bytes(exported.serialize()), "out_tree": out_tree}
    model_io.pickle_atomically(path, entry, prefix=".program-")


def _lowering_platform(platform_name: str) -> str:
    """``jax.export``'s name for a device platform: a GPU device says ``gpu``, its programs lower for ``cuda`` or
    ``rocm``."""
    if platform_name != "gpu":
        return platform_name
    version = str(getattr(jax.devices("gpu")[0].client, "platform_version", "")).lower()
    return "rocm" if "rocm" in version else "cuda"


def _export(fn: Callable[..., Any], args: Sequence[Any], platform_name: str) -> tuple[jax.export.Exported, Any]:
    """Traces ``fn`` once for ``args`` into a ``jax.export`` program over flat argument and result lists (the
    trees stay on this side: they may hold classes ``jax.export`` cannot serialise)."""
    leaves, in_tree = jax.tree.flatten(tuple(args))
    out_trees = []

    def flat(*flat_args: Any) -> list[Any]:
        outputs = fn(*jax.tree.unflatten(in_tree, flat_args))
        out_leaves, out_tree = jax.tree.flatten(outputs)
        out_trees.append(out_tree)
        return out_leaves

    abstract_leaves = [
        jax.ShapeDtypeStruct(
            x.shape, x.dtype, sharding=getattr(x, "sharding", None), weak_type=getattr(x, "weak_type", False)
        )
        for x in leaves
    ]
    exported = jax.export.export(jax.jit(flat), platforms=[_lowering_platform(platform_name)])(*abstract_leaves)
    return exported, out_trees[-1]


def _runner(exported: jax.export.Exported, out_tree: Any) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        return jax.tree.unflatten(out_tree, exported.call(*jax.tree.leaves(args)))

    return run


def cached(
    fn: Callable[..., Any],
    make_jit: Callable[[Callable[..., Any]], Any],
    args: Sequence[Any],
    description: Mapping[str, Any] | None,
    platform_name: str,
    packages: Sequence[str] = ("brax_core",),
) -> tuple[Any, bool]:
    """A jitted version of ``fn`` for ``args`` that a later run with the same key can use without tracing ``fn``.

    Args:
      fn: the (unjitted) function; traced at most once here, when the program is not on disk yet.
      make_jit: ``jax.jit`` with the caller's options (donation, compiler options), applied to what runs.
      args: abstract (or concrete) arguments, laid out as the real calls' will be.
      description: plain data naming everything ``fn`` computes from beyond its arguments; None: no caching.
      platform_name: the platform the program runs on.
      packages: the packages whose code ``fn`` runs (brax_core always): every file of each is part of the key.

    Returns ``(jitted, from_disk)``: with caching on, ``jitted`` runs the stored program (exported now if it was
    not on disk); with caching off or a description that is not plain data, it is ``make_jit(fn)``.
    """
    where = folder()
    try:
        program_key = None if where is None or description is None else key(description, args, platform_name, packages)
    except Exception as error:  # e.g. a package folder that cannot be read for its hash
        _warn_once("compute a program's key", error)
        program_key = None
    if program_key is None:
        return make_jit(fn), False
    path = os.path.join(where, program_key + ".jaxexport")
    loaded = _load(path)
    if loaded is not None:
        return make_jit(_runner(*loaded)), True
    try:
        exported, out_tree = _export(fn, args, platform_name)
    except Exception as error:  # e.g. a custom call jax.export does not guarantee stable: no caching
        logger.info("program %s not exportable (%s); tracing it each run", description, error)
        return make_jit(fn), False
    try:
        _store(path, exported, out_tree)
    except Exception as error:  # a read-only folder, a full disk, or serialisation missing (flatbuffers)
        _warn_once(f"store a program in {where}", error)
    return make_jit(_runner(exported, out_tree)), False


def run_config(config: Any, randomized: bool) -> dict[str, Any]:
    """A trainer's configuration (a ``brax_core.training.config.Config``) as its programs see it, for a
    description: without the records that reach no program (the env's name, since the environment describes itself;
    which trainer runs it; the device, which the platform names; the preset it came from), and without the seed
    unless ``randomized`` (the seed reaches the programs only through randomised models; otherwise its keys are
    arguments, so every seed of a configuration shares its programs)."""
    plain = dataclasses.asdict(config)
    plain["env"].pop("name", None)
    for record in ("trainer", "device", "preset") + (() if randomized else ("seed",)):
        plain["run"].pop(record, None)
    return plain


class Programs:
    """A run's programs through this cache: ``jit(name, base)`` stands for ``base`` (a ``jax.jit`` partial), and
    the program it makes is found on disk, or traced and stored, at its first use (``eval_shape``, ``lower`` or a
    call), when its arguments are known. ``description`` (plain data, see ``cached``) names what every program of
    the run computes beyond its arguments; each program adds its ``name``. ``None``: every program is traced as
    usual."""

    def __init__(self, description: dict[str, Any] | None, platform_name: str):
        self.description, self.platform = description, platform_name

    def jit(self, name: str, base: functools.partial) -> functools.partial:
        """``base`` for the program ``name``: same keywords, so callers read its options."""
        return functools.partial(self._program, name, **base.keywords)

    def _program(self, name: str, fn: Callable[..., Any], **jit_kwargs: Any) -> Any:
        make_jit = functools.partial(jax.jit, **jit_kwargs)
        if self.description is None:
            return make_jit(fn)
        return _CachedProgram(fn, make_jit, {**self.description, "program": name}, self.platform)


class _CachedProgram:
    """A jitted program found through ``cached`` at its first use, when its arguments are known."""

    def __init__(self, fn: Callable[..., Any], make_jit: Callable[..., Any], description: dict, platform_name: str):
        self._fn, self._make_jit, self._description, self._platform = fn, make_jit, description, platform_name
        self._jitted: Any = None

    def _resolve(self, args: tuple[Any, ...]) -> Any:
        if self._jitted is None:
            self._jitted, from_disk = cached(self._fn, self._make_jit, args, self._description, self._platform)
            logger.info("program %s %s", self._description["program"], "from disk" if from_disk else "traced")
        return self._jitted

    def eval_shape(self, *args: Any) -> Any:
        return self._resolve(args).eval_shape(*args)

    def lower(self, *args: Any) -> Any:
        return self._resolve(args).lower(*args)

    def __call__(self, *args: Any) -> Any:
        return self._resolve(args)(*args)
