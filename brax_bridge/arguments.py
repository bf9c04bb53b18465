"""``TorchEnv``'s constructor arguments: their checks, and the env and time limit they name (``resolve_env``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brax_bridge.wrapper_checks import checked_wrap_env_fn, refuse_training_wrappers
from brax_core import envs as _envs
from brax_core.envs.base import Env


def check_arguments(
    num_envs: Any,
    seed: Any,
    differentiable: Any,
    full_reset: Any,
    randomization_fn: Any,
    cpu_opt_level: Any,
    reward_fn: Any,
    wrap_env_fn: Any,
) -> Callable[..., Env] | None:
    """Refuses a bad argument (``ValueError`` naming it and what it accepts); returns ``wrap_env_fn`` checked
    (``wrapper_checks.checked_wrap_env_fn``: None for brax_core's own wrappers)."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer (as the trainers' seeds), got {seed!r}")
    for name, flag in (("differentiable", differentiable), ("full_reset", full_reset)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be True or False, got {flag!r}")
    if randomization_fn is not None and not callable(randomization_fn):
        raise ValueError(f"randomization_fn must be callable fn(sys, rng) or None, got {randomization_fn!r}")
    if cpu_opt_level is not None and (
        isinstance(cpu_opt_level, bool) or not isinstance(cpu_opt_level, int) or not 0 <= cpu_opt_level <= 3
    ):
        raise ValueError(f"cpu_opt_level must be one of 0, 1, 2, 3 or None, got {cpu_opt_level!r}")
    if reward_fn is not None and not callable(reward_fn):
        raise ValueError(f"reward_fn must be callable fn(state, action) or None, got {reward_fn!r}")
    wrap_env_fn = checked_wrap_env_fn(wrap_env_fn)
    if wrap_env_fn is not None and not full_reset:
        raise ValueError(
            "full_reset=False applies to brax_core's auto-reset wrapper; with wrap_env_fn the given wrapper "
            "decides how envs reset: leave full_reset at True"
        )
    return wrap_env_fn


def resolve_env(env: Any, env_kwargs: dict[str, Any], episode_length: int | None) -> tuple[Env | None, int]:
    """The env object given (None for a registered name, built later with its programs) and the time limit:
    ``episode_length``, else the task's or the env class's default."""
    if isinstance(env, str):
        env_class = _envs.get_environment_class(env)  # unknown names fail here, listing the registered ones
        base = None
    elif _envs.is_env(env):
        if env_kwargs:
            raise ValueError(f"env_kwargs {sorted(env_kwargs)} only apply when env is a name, not an Env object")
        base = _envs.as_env(env)  # a Playground MjxEnv gets brax_core's State through PlaygroundEnv
        env_class = base
    else:
        raise TypeError(
            "env must be a registered name (or 'playground:<task>'), a brax_core Env or a MuJoCo Playground "
            f"MjxEnv, got {type(env).__name__}"
        )
    if base is not None:
        refuse_training_wrappers(base)
    if isinstance(env_class, _envs.playground.PlaygroundTask):
        # The task's config may set the time limit (config_overrides={"episode_length": n}).
        episode_length = env_class.episode_length(episode_length, **env_kwargs)
    elif episode_length is None:
        episode_length = int(getattr(env_class, "default_episode_length", 1000))
    return base, episode_length
