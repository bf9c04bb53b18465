"""Acting in environments: one step, unrolls and evaluation (``brax.training.acting`` counterpart)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from brax_core.envs.base import Env, State
from brax_core.training import types


def actor_step(
    env: Env,
    env_state: State,
    policy: types.Policy,
    key: jax.Array,
    extra_fields: Sequence[str] = (),
) -> tuple[State, types.Transition]:
    """Collect data.

    ``next_observation`` is the observation the step actually reached (``info['final_obs']`` when the
    auto-reset wrapper provides it), so a transition into a time limit keeps its true successor.
    """
    actions, policy_extras = policy(env_state.obs, key)
    nstate = env.step(env_state, actions)
    state_extras = {x: nstate.info[x] for x in extra_fields}
    next_observation = nstate.info.get("final_obs", nstate.obs)
    return nstate, types.Transition(
        observation=env_state.obs,
        action=actions,
        reward=nstate.reward,
        discount=1.0 - nstate.done,
        next_observation=next_observation,
        extras={"policy_extras": policy_extras, "state_extras": state_extras},
    )


def generate_unroll(
    env: Env,
    env_state: State,
    policy: types.Policy,
    key: jax.Array,
    unroll_length: int,
    extra_fields: Sequence[str] = (),
) -> tuple[State, types.Transition]:
    """Collect trajectories of given unroll_length (time-major ``[T, num_envs, ...]``)."""

    def f(carry: tuple[State, jax.Array], _: None) -> tuple[tuple[State, jax.Array], types.Transition]:
        state, current_key = carry
        current_key, next_key = jax.random.split(current_key)
        nstate, transition = actor_step(env, state, policy, current_key, extra_fields=extra_fields)
        return (nstate, next_key), transition

    (final_state, _), data = jax.lax.scan(f, (env_state, key), (), length=unroll_length)
    return final_state, data


def evaluation_rollout(env: Env, policy: types.Policy, key: jax.Array, num_envs: int, num_steps: int) -> State:
    """Steps an ``EvalWrapper``-wrapped env until every episode has ended or ``num_steps`` have passed.

    Stopping once all episodes are over gives the same metrics as Brax's fixed-length unroll (finished
    episodes no longer accumulate) at a fraction of the cost early in training.
    """
    reset_key, policy_key = jax.random.split(key)
    state = env.reset(jax.random.split(reset_key, num_envs))

    def running(carry: tuple[State, jax.Array, jax.Array]) -> jax.Array:
        state, _, t = carry
        return (t < num_steps) & jnp.any(state.info["eval_metrics"].active_episodes > 0)

    def step(carry: tuple[State, jax.Array, jax.Array]) -> tuple[State, jax.Array, jax.Array]:
        state, k, t = carry
        k, step_key = jax.random.split(k)
        actions, _ = policy(state.obs, step_key)
        return env.step(state, actions), k, t + 1

    state, _, _ = jax.lax.while_loop(running, step, (state, policy_key, jnp.zeros((), jnp.int32)))
    return state


def summarize_eval(eval_metrics: Any, axis_name: str | None = None) -> dict[str, jax.Array]:
    """Episode means and standard deviations (over all eval envs, across devices when ``axis_name`` is set)."""

    def moments(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        n = jnp.asarray(x.size, jnp.float32)
        s, s2 = jnp.sum(x), jnp.sum(x * x)
        if axis_name is not None:
            n, s, s2 = (jax.lax.psum(v, axis_name) for v in (n, s, s2))
        mean = s / n
        return mean, jnp.sqrt(jnp.maximum(s2 / n - mean * mean, 0.0))

    out = {}
    for name, value in eval_metrics.episode_metrics.items():
        mean, std = moments(value)
        out[f"eval/episode_{name}"] = mean
        out[f"eval/episode_{name}_std"] = std
    out["eval/avg_episode_length"], out["eval/std_episode_length"] = moments(eval_metrics.episode_steps)
    return out


def key_after_evaluations(key: jax.Array, count: int) -> jax.Array:
    """The key an ``Evaluator`` started with ``key`` holds after ``count`` evaluations (each splits its own off):
    where the evaluations of a run resumed after ``count`` of them continue."""
    for _ in range(count):
        key = jax.random.split(key)[0]
    return key


def evaluation_run(
    eval_env: Env,
    eval_policy_fn: Callable[[Any], types.Policy],
    num_eval_envs: int,
    episode_length: int,
    action_repeat: int,
) -> Callable[[Any, jax.Array], dict[str, jax.Array]]:
    """``Evaluator``'s program before it is jitted: ``(policy_params, key) -> metrics``, ``num_eval_envs`` episodes
    of at most ``episode_length`` env steps summarised (a trainer jits it with its own options)."""
    num_steps = -(-episode_length // action_repeat)

    def generate_eval_unroll(policy_params: Any, key: jax.Array) -> dict[str, jax.Array]:
        state = evaluation_rollout(eval_env, eval_policy_fn(policy_params), key, num_eval_envs, num_steps)
        return summarize_eval(state.info["eval_metrics"])

    return generate_eval_unroll


class Evaluator:
    """Runs evaluation episodes with a compiled rollout and reports Brax's ``eval/*`` metrics.

    Args:
      eval_env: a batched env wrapped with ``EvalWrapper``.
      eval_policy_fn: ``policy_params -> policy``.
      num_eval_envs: number of episodes per evaluation.
      episode_length: maximum env steps per episode.
      action_repeat: env steps per policy step.
      key: random key.
      run_fn: optional replacement for the compiled ``(policy_params, key) -> metrics`` function (the trainer
        passes a device-parallel one).
    """

    def __init__(
        self,
        eval_env: Env,
        eval_policy_fn: Callable[[Any], types.Policy],
        num_eval_envs: int,
        episode_length: int,
        action_repeat: int,
        key: jax.Array,
        run_fn: Callable[[Any, jax.Array], dict[str, jax.Array]] | None = None,
    ):
        self._key = key
        self._eval_walltime = 0.0
        num_steps = -(-episode_length // action_repeat)
        if run_fn is None:
            run_fn = jax.jit(evaluation_run(eval_env, eval_policy_fn, num_eval_envs, episode_length, action_repeat))
        self._generate_eval_unroll = run_fn
        self._steps_per_unroll = num_steps * num_eval_envs * action_repeat

    def run_evaluation(
        self, policy_params: Any, training_metrics: types.Metrics, aggregate_episodes: bool = True
    ) -> dict[str, float]:
        """Run one epoch of evaluation."""
        del aggregate_episodes  # episodes are always aggregated (mean and std over envs)
        self._key, unroll_key = jax.random.split(self._key)
        t = time.time()
        eval_metrics = jax.device_get(self._generate_eval_unroll(policy_params, unroll_key))
        epoch_eval_time = time.time() - t
        metrics = {name: float(np.asarray(value)) for name, value in eval_metrics.items()}
        self._eval_walltime += epoch_eval_time
        metrics.update(
            {
                "eval/walltime": self._eval_walltime,
                "eval/epoch_eval_time": epoch_eval_time,
                "eval/sps": self._steps_per_unroll / max(epoch_eval_time, 1e-9),
            }
        )
        return {**training_metrics, **metrics}
