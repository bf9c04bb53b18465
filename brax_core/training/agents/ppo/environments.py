"""The environments the JAX PPO trains and evaluates on: the user's env batched over one device's share and wrapped
as ``wrap_env`` asks (time limit, action repeat, auto-reset, domain randomisation)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from brax_core.envs import training as env_training
from brax_core.envs.base import Env


def wrap_for(
    env: Env,
    n_local: int,
    rng: jax.Array | None,
    *,
    wrap_env: bool | Callable[..., Env],
    episode_length: int,
    action_repeat: int,
    randomization_fn: Callable[..., Any] | None,
    for_eval: bool = False,
) -> Env:
    """``env`` batched over one device's ``n_local`` envs, as ``wrap_env`` asks (randomised when ``rng`` is set)."""
    v_randomization_fn = None
    if randomization_fn is not None and rng is not None:
        v_randomization_fn = functools.partial(randomization_fn, rng=jax.random.split(rng, n_local))
    if wrap_env is True and for_eval:
        # Evaluation stops once every episode has ended, so it needs no auto-reset: leaving it out keeps a
        # second physics reset out of the compiled evaluation.
        env = env_training.EpisodeWrapper(env, episode_length, action_repeat)
        if v_randomization_fn is None:
            return env_training.VmapWrapper(env)
        return env_training.DomainRandomizationVmapWrapper(env, v_randomization_fn)
    if wrap_env is True:
        return env_training.wrap(
            env, episode_length=episode_length, action_repeat=action_repeat, randomization_fn=v_randomization_fn
        )
    if wrap_env is False:
        return env
    return wrap_env(
        env, episode_length=episode_length, action_repeat=action_repeat, randomization_fn=v_randomization_fn
    )


def make_eval_env(
    environment: Env,
    num_eval_envs: int,
    rng: jax.Array | None = None,
    *,
    wrap_env: bool | Callable[..., Env] = True,
    episode_length: int,
    action_repeat: int,
    randomization_fn: Callable[..., Any] | None = None,
) -> Env:
    """The batched evaluation env ``train`` builds: ``num_eval_envs`` copies of ``environment`` with the episode time
    limit and action repeat but no auto-reset (an evaluation ends once every episode has), or what ``wrap_env`` (a
    Brax-style wrapper function; ``False``: ``environment`` is wrapped already) makes of it, under ``EvalWrapper``.
    ``randomization_fn`` applies when ``rng`` is given (one key per env). torch_ppo evaluates on the same env."""
    return env_training.EvalWrapper(
        wrap_for(
            environment,
            num_eval_envs,
            rng,
            wrap_env=wrap_env,
            episode_length=episode_length,
            action_repeat=action_repeat,
            randomization_fn=randomization_fn,
            for_eval=True,
        )
    )


def observation_size(environment: Env, batched_obs: Any | None) -> Any:
    """``environment.observation_size``, found from ``batched_obs`` (the abstract observations ``[envs, ...]`` of
    the trainer's own batched reset, or ``None``) where possible.

    ``Env.observation_size`` traces ``reset`` once to find the shapes and caches them; the trainer's reset trace
    shows the same per-env shapes (its wrappers keep observations as they are), so filling that cache from it
    saves a trace of the physics. Subclasses that build on the base property (``fast``) use the cache too;
    wrappers answer for the env they wrap, so they are asked as they are.
    """
    if batched_obs is not None:
        environment.remember_observation_size(batched_obs)
    return environment.observation_size
