"""Environments a user brings to the command line: ``module.path:Name`` or ``path/to/file.py:Name``.

``Name`` is a brax_core ``Env`` class, or a factory (any callable taking no arguments) that returns a brax_core
``Env``. A dotted ``Name`` reaches inside the module (``my_robot:Arms.three``). A module path is imported with the
working directory first on the Python path, as ``python -m`` does; a file is run as a module of its own. Each step
that can fail says which one did (the form, the module or file, the name, the object it names) in a
``UserEnvError``, before anything compiles.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from brax_core import envs

FORMS = "'module.path:Name' or 'path/to/file.py:Name'"


class UserEnvError(ValueError):
    """A user's env that cannot be imported or built; the message says which part failed."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """``source:name``; ``is_file`` when ``source`` is a path to a Python file rather than a module path."""

    source: str
    name: str
    is_file: bool

    def __str__(self) -> str:
        return f"{self.source}:{self.name}"


def is_spec(text: str) -> bool:
    """Whether ``text`` has the form of a user's env (a colon; ``playground:<task>`` is MuJoCo Playground's)."""
    return ":" in text and not text.startswith(envs.playground.PREFIX)


def _looks_like_path(source: str) -> bool:
    separators = {"/", os.sep, os.altsep} - {None}
    return source.endswith(".py") or any(sep in source for sep in separators)


def parse(text: str) -> Spec:
    """``text`` split into its source and name (at the last colon, so a Windows drive letter stays in the path);
    ``UserEnvError`` when either part has the wrong form."""
    source, _, name = text.rpartition(":")
    form = f"{text!r} is neither {FORMS}"
    if not source or not name:
        raise UserEnvError(f"{form}: both sides of the colon are needed")
    if not all(part.isidentifier() for part in name.split(".")):
        raise UserEnvError(f"{form}: {name!r} after the colon is not a Python name (like Arm3 or robots.Arm3)")
    if _looks_like_path(source):
        if not source.endswith(".py"):
            raise UserEnvError(f"{form}: the path {source!r} must name the Python file itself, ending in .py")
        return Spec(source, name, is_file=True)
    if not all(part.isidentifier() for part in source.split(".")):
        raise UserEnvError(f"{form}: {source!r} is not a module path (like my_robot or my_package.robots)")
    return Spec(source, name, is_file=False)


def canonical(text: str) -> str:
    """``text`` as a run folder records it: a file path made absolute, so it resolves from any working directory;
    a module path as given."""
    spec = parse(text)
    if not spec.is_file:
        return str(spec)
    return str(Spec(os.path.abspath(os.path.expanduser(spec.source)), spec.name, is_file=True))


def folder_name(text: str) -> str:
    """A default run folder's name part: ``my_robot:Arm3`` -> ``my_robot_Arm3``, ``robots/arm.py:Arm3`` ->
    ``arm_Arm3`` (no colon or path separator, which a folder name cannot hold)."""
    spec = parse(text)
    stem = os.path.splitext(os.path.basename(spec.source))[0] if spec.is_file else spec.source
    return f"{stem}_{spec.name}"


@contextmanager
def _on_path(folder: str) -> Iterator[None]:
    """``folder`` first on ``sys.path`` while a module is imported (then as it was)."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:  # the user's module took it off itself
            pass


def _import_module(spec: Spec, import_dir: str | None) -> Any:
    folder = os.path.abspath(import_dir or os.getcwd())
    try:
        with _on_path(folder):
            return importlib.import_module(spec.source)
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if spec.source == missing or spec.source.startswith(f"{missing}."):
            raise UserEnvError(
                f"module {spec.source!r} not found (looked in {folder} and on the Python path)"
            ) from None
        raise UserEnvError(f"importing module {spec.source!r} failed: {_one_line(err)}") from err
    except Exception as err:  # the user's module raised while it ran
        raise UserEnvError(f"importing module {spec.source!r} failed: {_one_line(err)}") from err


def _run_file(spec: Spec) -> Any:
    path = os.path.abspath(os.path.expanduser(spec.source))
    if not os.path.isfile(path):
        raise UserEnvError(f"file not found: {path}")
    # One module per file, named after its absolute path: the same file is run once per process, and two files
    # with the same name do not replace each other. It is entered in sys.modules before it runs, as an import
    # would, so its dataclasses and pickled objects find their module.
    module_name = f"brax_bridge_user_env_{hashlib.sha256(path.encode()).hexdigest()[:12]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    try:
        with _on_path(os.path.dirname(path)):  # the file's own imports of its neighbours, as `python file.py`
            loader_spec.loader.exec_module(module)
    except BaseException as err:
        del sys.modules[module_name]
        if isinstance(err, Exception):
            raise UserEnvError(f"running {path} failed: {_one_line(err)}") from err
        raise
    return module


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0]


def _env_classes(module: Any) -> list[str]:
    """The module's own ``Env`` subclasses, for a message that suggests them."""
    return sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, envs.Env) and value.__module__ == module.__name__
    )


def load(text: str, import_dir: str | None = None) -> Callable[[], envs.Env]:
    """The class or factory ``text`` names, imported (``import_dir``: where a module path is looked for first,
    default the working directory); ``UserEnvError`` naming the part that failed."""
    spec = parse(text)
    module = _run_file(spec) if spec.is_file else _import_module(spec, import_dir)
    where = os.path.abspath(spec.source) if spec.is_file else f"module {spec.source!r}"
    found: Any = module
    for depth, part in enumerate(spec.name.split(".")):
        if not hasattr(found, part):
            reached = ".".join(spec.name.split(".")[:depth]) or None
            owner = f"{reached} in {where}" if reached else where
            classes = _env_classes(module) if reached is None else []
            hint = f"; its Env classes: {', '.join(classes)}" if classes else ""
            raise UserEnvError(f"{owner} has no attribute {part!r}{hint}")
        found = getattr(found, part)
    if isinstance(found, envs.Env):
        raise UserEnvError(f"{text} is an Env instance; name its class, or a function that returns it")
    if isinstance(found, type) and not issubclass(found, envs.Env):
        raise UserEnvError(f"{text} is the class {found.__qualname__}, which is not a brax_core Env "
                           "(subclass brax_core.envs.PipelineEnv or Env)")
    if not callable(found):
        raise UserEnvError(f"{text} is of type {type(found).__name__}, not a brax_core Env class nor a factory "
                           "returning one")
    return found


def build(text: str, import_dir: str | None = None) -> envs.Env:
    """The env ``text`` names, constructed with no arguments; ``UserEnvError`` when that fails or the factory
    returns something that is not a brax_core ``Env``."""
    factory = load(text, import_dir)
    try:
        env = factory()
    except Exception as err:
        raise UserEnvError(f"calling {text}() failed: {_one_line(err)}") from err
    if not isinstance(env, envs.Env):
        raise UserEnvError(f"{text}() returned a value of type {type(env).__name__}, not a brax_core Env")
    return env


def import_dir(text: str) -> str | None:
    """The folder on the Python path that a module path's module was imported from (a run folder records it, so
    the env is found from another working directory too); None for a file path or a namespace package."""
    spec = parse(text)
    module = sys.modules.get(spec.source)
    path = getattr(module, "__file__", None)
    if spec.is_file or path is None:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) == "__init__.py":
        folder = os.path.dirname(folder)
    for _ in range(spec.source.count(".")):
        folder = os.path.dirname(folder)
    return folder


def default_episode_length(text: str, import_dir: str | None = None, env: envs.Env | None = None) -> int:
    """The ``default_episode_length`` of what ``text`` names (a class attribute, or one set on a factory function),
    else of the built env's class (``env``, or built here), else 1000 (brax_core's default)."""
    value = getattr(load(text, import_dir), "default_episode_length", None)
    if not _is_length(value):
        value = getattr(type(env if env is not None else build(text, import_dir)), "default_episode_length", None)
    return value if _is_length(value) else 1000


def _is_length(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
