"""Environments for training and evaluating policies (``brax.envs`` counterpart)."""

from __future__ import annotations

import functools
import importlib
import inspect
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from brax_core import _quiet  # noqa: F401  (before any env module imports mujoco.mjx)
from brax_core import compile as _compile

# isort: split
from brax_core.envs import playground
from brax_core.envs.base import Env, PipelineEnv, State, Wrapper
from brax_core.envs.wrappers import training

# Every trainer and the bridge build their environments from here, so the persistent compile cache is on before
# their first compile: a second run of the same configuration loads XLA's output instead of compiling again.
_compile.enable_persistent_cache()

# name -> "module:Class", imported on first use so listing names compiles nothing.
_BUILTIN = {
    "fast": "brax_core.envs.fast:Fast",
    "inverted_pendulum": "brax_core.envs.inverted_pendulum:InvertedPendulum",
    "inverted_double_pendulum": "brax_core.envs.inverted_double_pendulum:InvertedDoublePendulum",
    "reacher": "brax_core.envs.reacher:Reacher",
    "halfcheetah": "brax_core.envs.half_cheetah:Halfcheetah",
    "hopper": "brax_core.envs.hopper:Hopper",
    "walker2d": "brax_core.envs.walker2d:Walker2d",
    "ant": "brax_core.envs.ant:Ant",
    "humanoid": "brax_core.envs.humanoid:Humanoid",
}
_envs: dict[str, Callable[..., Env] | str] = dict(_BUILTIN)


def register_environment(env_name: str, env_class: Callable[..., Env]) -> None:
    """Adds an environment to the registry (replacing one of the same name)."""
    if not isinstance(env_name, str) or not env_name:
        raise ValueError(f"env_name must be a non-empty string, got {env_name!r}")
    _envs[env_name] = env_class


def registered_names() -> list[str]:
    """The names ``get_environment`` accepts, besides ``"playground:<task>"`` for MuJoCo Playground's tasks."""
    return sorted(_envs)


def playground_names() -> list[str]:
    """MuJoCo Playground's tasks as names ``get_environment`` accepts (``"playground:CheetahRun"``); needs the
    ``playground`` extra."""
    return [playground.PREFIX + name for name in playground.task_names()]


def get_environment_class(env_name: str) -> Callable[..., Env]:
    """The class (or factory) registered under ``env_name``.

    ``"playground:<task>"`` names one of MuJoCo Playground's tasks (the ``playground`` extra): its factory takes
    ``load``'s keyword arguments (``config_overrides``) and has the task's ``default_episode_length``.
    """
    if isinstance(env_name, str) and env_name.startswith(playground.PREFIX):
        return playground.PlaygroundTask(env_name[len(playground.PREFIX) :])
    if env_name not in _envs:
        raise ValueError(
            f"unknown environment {env_name!r}; registered environments: {', '.join(registered_names())} "
            f"(and MuJoCo Playground's tasks as '{playground.PREFIX}<task>')"
        )
    entry = _envs[env_name]
    if isinstance(entry, str):
        module, name = entry.split(":")
        entry = getattr(importlib.import_module(module), name)
        _envs[env_name] = entry
    return entry


def get_environment(env_name: str, **kwargs: Any) -> Env:
    """Returns an environment from the environment registry.

    Args:
      env_name: environment name string.
      **kwargs: keyword arguments that get passed to the Env class constructor.

    Raises:
      ValueError: the name is not registered (the message lists the registered names).
    """
    env_class = get_environment_class(env_name)
    _check_keywords(env_name, env_class, kwargs)
    return env_class(**kwargs)


def _keyword_defaults(env_class: Any) -> dict[str, Any] | None:
    """The keywords ``env_class`` takes, with their defaults (``inspect.Parameter.empty`` for none): its own and,
    when it hands ``**kwargs`` on to ``PipelineEnv``, those of ``PipelineEnv`` a caller may set. ``None`` when
    they cannot be known (a factory taking ``**kwargs`` of its own)."""
    try:
        parameters = inspect.signature(env_class).parameters
    except (TypeError, ValueError):
        return None
    named = {
        name: p.default
        for name, p in parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        if not (isinstance(env_class, type) and issubclass(env_class, PipelineEnv)):
            return None
        inherited = inspect.signature(PipelineEnv.__init__).parameters
        named.update({k: p.default for k, p in inherited.items() if k not in ("self", "sys", "mj_model")})
    return named


def _check_keywords(env_name: str, env_class: Any, kwargs: dict[str, Any]) -> None:
    """A keyword the environment does not take, or a number given as something else, raises an error naming it
    (the constructor would fail with Python's or NumPy's own message, or deep inside a compile)."""
    accepted = _keyword_defaults(env_class)
    if accepted is None:
        return
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise TypeError(
            f"get_environment({env_name!r}): unknown keyword argument(s) {unknown}; {env_name} accepts "
            f"{', '.join(sorted(accepted))}"
        )
    for name, value in kwargs.items():
        default = accepted[name]
        numeric = isinstance(default, int | float) and not isinstance(default, bool)
        if numeric and not _is_number(value):
            raise TypeError(
                f"get_environment({env_name!r}): {name} must be a number (default {default!r}), got {value!r}"
            )


def _is_number(value: Any) -> bool:
    """A real number: Python's or NumPy's scalars, or a 0-d array (a randomised value); not a bool or a string."""
    if isinstance(value, bool | str | bytes):
        return False
    return isinstance(value, numbers.Real | np.generic) or getattr(value, "shape", None) == ()


def as_env(env: Any) -> Env:
    """``env`` as a brax_core ``Env``: a registered name (``"playground:<task>"`` too), a brax_core ``Env`` (as it is)
    or a MuJoCo Playground ``MjxEnv`` (wrapped in ``PlaygroundEnv``); anything else raises ``TypeError``."""
    if isinstance(env, str):
        return get_environment(env)
    if isinstance(env, Env):
        return env
    if playground.is_playground_env(env):
        return playground.PlaygroundEnv(env)
    raise TypeError(
        "env must be a registered environment name, a brax_core Env or a MuJoCo Playground MjxEnv; "
        f"got {type(env).__name__}"
    )


def is_env(env: Any) -> bool:
    """Whether ``as_env`` accepts ``env`` as an environment object (a brax_core Env or a Playground MjxEnv)."""
    return isinstance(env, Env) or playground.is_playground_env(env)


def create(
    env_name: str,
    episode_length: int = 1000,
    action_repeat: int = 1,
    auto_reset: bool = True,
    batch_size: int | None = None,
    **kwargs,
) -> Env:
    """Creates an environment from the registry, wrapped for batched, time-limited use (``batch_size`` 0 or
    ``None``: not batched, as in Brax)."""
    if batch_size is not None and not training.is_count(batch_size, minimum=0):
        raise ValueError(f"batch_size must be an integer >= 0 or None (0 and None: not batched), got {batch_size!r}")
    env = get_environment(env_name, **kwargs)
    if episode_length is not None:
        env = training.EpisodeWrapper(env, episode_length, action_repeat)
    if batch_size:
        env = training.VmapWrapper(env, batch_size)
    if auto_reset:
        env = training.AutoResetWrapper(env)
    return env


def create_fn(env_name: str, **kwargs) -> Callable[..., Env]:
    """Returns a function that when called, creates an Env."""
    return functools.partial(create, env_name, **kwargs)


__all__ = [
    "Env",
    "as_env",
    "is_env",
    "playground_names",
    "PipelineEnv",
    "State",
    "Wrapper",
    "create",
    "create_fn",
    "get_environment",
    "register_environment",
    "registered_names",
    "training",
]
