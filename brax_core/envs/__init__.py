"""Environments for training and evaluating policies (``brax.envs`` counterpart)."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from brax_core import _quiet  # noqa: F401  (before any env module imports mujoco.mjx)

# isort: split
from brax_core.envs.base import Env, PipelineEnv, State, Wrapper
from brax_core.envs.wrappers import training

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
    """The names ``get_environment`` accepts."""
    return sorted(_envs)


def get_environment_class(env_name: str) -> Callable[..., Env]:
    """The class (or factory) registered under ``env_name``."""
    if env_name not in _envs:
        raise ValueError(f"unknown environment {env_name!r}; registered environments: {', '.join(registered_names())}")
    entry = _envs[env_name]
    if isinstance(entry, str):
        module, name = entry.split(":")
        entry = getattr(importlib.import_module(module), name)
        _envs[env_name] = entry
    return entry


def get_environment(env_name: str, **kwargs) -> Env:
    """Returns an environment from the environment registry.

    Args:
      env_name: environment name string.
      **kwargs: keyword arguments that get passed to the Env class constructor.

    Raises:
      ValueError: the name is not registered (the message lists the registered names).
    """
    return get_environment_class(env_name)(**kwargs)


def create(
    env_name: str,
    episode_length: int = 1000,
    action_repeat: int = 1,
    auto_reset: bool = True,
    batch_size: int | None = None,
    **kwargs,
) -> Env:
    """Creates an environment from the registry, wrapped for batched, time-limited use."""
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
