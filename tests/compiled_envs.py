"""Each registered env with its unbatched ``reset`` and ``step`` jitted once per test process.

Tracing an MJX step takes seconds on a CPU, so the modules that drive bare envs (``test_envs_planar.py``,
``test_env_definitions.py``) share these instead of each jitting its own copy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax

from brax_core import envs


class CompiledEnv(NamedTuple):
    env: envs.PipelineEnv
    reset: Callable[[jax.Array], envs.State]
    step: Callable[[envs.State, jax.Array], envs.State]


@functools.cache
def compiled_env(name: str) -> CompiledEnv:
    """``name``'s env (default arguments) with ``jax.jit(env.reset)`` and ``jax.jit(env.step)``; callers must not
    change the env."""
    env = envs.get_environment(name)
    return CompiledEnv(env, jax.jit(env.reset), jax.jit(env.step))
