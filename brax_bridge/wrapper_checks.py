"""Checks of the training wrappers ``TorchEnv`` runs an env in: ``wrap_env_fn`` and what it returns, and the
refusal of an env that already has brax_core's training wrappers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from brax_core import envs as _envs
from brax_core.envs.base import Env
from brax_core.envs.wrappers import training as _training


def checked_wrap_env_fn(wrap_env_fn: Any) -> Callable[..., Env] | None:
    """``wrap_env_fn`` checked; None for brax_core's own wrappers (also what Playground's wrapper means)."""
    if wrap_env_fn is None or _envs.playground.is_playground_training_wrapper(wrap_env_fn):
        return None
    if not callable(wrap_env_fn):
        raise ValueError(
            "wrap_env_fn must be None, MuJoCo Playground's wrapper.wrap_for_brax_training or a callable "
            f"fn(env, episode_length=, action_repeat=, randomization_fn=) -> Env, got {wrap_env_fn!r}"
        )
    return wrap_env_fn


def check_wrapped(env: Any, num_envs: int) -> None:
    """The env a custom ``wrap_env_fn`` returned has what the bridge's step reads (found by tracing its reset)."""
    if not isinstance(env, Env):
        raise ValueError(f"wrap_env_fn must return a brax_core Env, returned {type(env).__name__}")
    state = jax.eval_shape(env.reset, jax.ShapeDtypeStruct((num_envs, 2), jnp.uint32))
    missing = [k for k in ("truncation", "final_obs") if k not in state.info]
    if missing:
        raise ValueError(
            f"wrap_env_fn returned {type(env).__name__}, whose state has no info {missing}: TorchEnv needs a "
            "batched, auto-resetting env that reports them, as brax_core.envs.training.wrap builds (wrap with it "
            "inside the custom wrapper)"
        )
    if state.done.shape[:1] != (num_envs,):
        raise ValueError(
            f"wrap_env_fn returned {type(env).__name__}, whose reset of {num_envs} keys is not batched over them"
        )


def refuse_training_wrappers(env: Env) -> None:
    """TorchEnv adds the training wrappers itself; an env that already has them would be wrapped twice."""
    if _training.training_wrappers(env):
        raise ValueError(
            f"env is {_training.describe_wrapping(env)}, as brax_core.envs.training.wrap does; TorchEnv adds those "
            "wrappers itself: pass the unwrapped env (env.unwrapped, or the env before wrap(...)) and give "
            "episode_length, action_repeat and randomization_fn to TorchEnv"
        )
