"""Raw MJX stepping for the throughput benchmarks: physics only, no env logic (shared by several scripts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax


def raw_rollout(env: Any, num_envs: int, steps: int) -> Callable[[Any, jax.Array], Any]:
    """A jitted ``(pipeline_state, key) -> pipeline_state``: ``steps`` env steps of ``jax.vmap(env.pipeline_step)``
    (``n_frames`` MJX steps each) with small uniform random controls in ``[-0.1, 0.1]``."""

    @jax.jit
    def rollout(data: Any, key: jax.Array) -> Any:
        step = jax.vmap(env.pipeline_step)

        def body(d: Any, k: jax.Array) -> tuple[Any, tuple]:
            return step(d, jax.random.uniform(k, (num_envs, env.action_size), minval=-0.1, maxval=0.1)), ()

        return jax.lax.scan(body, data, jax.random.split(key, steps))[0]

    return rollout
