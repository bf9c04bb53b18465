"""Wrappers that turn a single environment into a batched, auto-resetting training environment.

Same names and call signatures as Brax's ``brax.envs.wrappers.training``, with its known problems fixed:

* ``DomainRandomizationVmapWrapper`` never leaves a tracer on the wrapped env, so the same env object can be
  wrapped any number of times (training and evaluation) by functions that read ``sys`` fields in their own
  ``jax.vmap``.
* ``AutoResetWrapper`` draws a fresh random initial state on every reset (``full_reset=True``) instead of
  returning each slot to one cached first state, and keeps the true terminal observation in
  ``info['final_obs']`` so trainers can bootstrap truncated episodes.
* ``EpisodeWrapper`` stops adding reward once an episode is done in the middle of an ``action_repeat``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from mujoco import mjx

from brax_core.envs.base import Env, PipelineEnv, State, Wrapper, validate_action
from brax_core.envs.reversible import ENV_AXIS

RandomizationFn = Callable[[mjx.Model], tuple[mjx.Model, mjx.Model]]

# info keys owned by the wrappers below; an auto-reset keeps them from the step, not from the reset.
_EPISODE_KEYS = ("steps", "truncation", "episode_metrics", "episode_done", "final_obs")
_AUTORESET_KEYS = ("autoreset_rng", "first_pipeline_state", "first_obs")


def wrap(
    env: Env,
    episode_length: int = 1000,
    action_repeat: int = 1,
    randomization_fn: RandomizationFn | None = None,
    full_reset: bool = True,
) -> Wrapper:
    """Common wrapper pattern for all training agents.

    Args:
      env: the environment to wrap.
      episode_length: the length of an episode (a time limit, reported as truncation).
      action_repeat: how many repeated actions to take per environment step.
      randomization_fn: ``sys -> (batched_sys, in_axes)``; a vmapped function that randomises the model
        (bind its ``rng`` with ``functools.partial`` as Brax does).
      full_reset: draw a fresh random initial state on every auto-reset; ``False`` restores Brax's behaviour of
        returning each slot to its first state.

    Returns:
      An environment that is batched, time-limited and auto-resetting.
    """
    env = EpisodeWrapper(env, episode_length, action_repeat)
    if randomization_fn is None:
        env = VmapWrapper(env)
    else:
        env = DomainRandomizationVmapWrapper(env, randomization_fn)
    return AutoResetWrapper(env, full_reset=full_reset)


def _float(x: Any) -> jax.Array:
    return jnp.asarray(x, dtype=jnp.float32)


def _same_metric_keys(env: Env, before: State, after: State) -> State:
    """``after`` with every metric of ``before``: a step keeps the metrics it was given, as Brax's envs do by
    updating ``state.metrics`` in place.

    Wrappers add metrics of their own (``EvalWrapper``'s ``reward``); an env whose ``step`` returns a fresh metrics
    dict would drop them and break every scan over steps (action repeat, unrolls, evaluation). A metric that only
    ``step`` produces cannot be carried by a scan at all, so it is refused here with a message naming it.
    """
    added = sorted(set(after.metrics) - set(before.metrics))
    if added:
        raise ValueError(
            f"{type(env.unwrapped).__name__}.step returns metrics {added} that its reset does not; every metric "
            "must be present from reset on (start it at zero in reset)"
        )
    if set(after.metrics) == set(before.metrics):
        return after
    return after.replace(metrics={**before.metrics, **after.metrics})


def is_count(value: Any, minimum: int) -> bool:
    """An int (not a bool) of at least ``minimum``: the check every size argument of these wrappers gets."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _check_batched_keys(rng: Any, batch_size: int | None) -> None:
    """A batched env's reset takes one PRNG key per env (``batch_size`` of them when that is fixed): a single key,
    or another count, would fail inside ``vmap`` with JAX's own message."""
    shape, dtype = tuple(getattr(rng, "shape", ())), getattr(rng, "dtype", None)
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    batch = shape[:1] if (typed and len(shape) == 1) or (not typed and len(shape) == 2) else None
    if batch is None:
        raise ValueError(
            f"the batched env's reset takes one PRNG key per env, e.g. jax.random.split(key, num_envs); got an array "
            f"of shape {shape}"
        )
    if batch_size is not None and batch[0] != batch_size:
        raise ValueError(
            f"the batched env's reset got {batch[0]} keys for {batch_size} envs (its randomised models): pass "
            f"jax.random.split(key, {batch_size})"
        )


class VmapWrapper(Wrapper):
    """Vectorises Brax env."""

    def __init__(self, env: Env, batch_size: int | None = None):
        super().__init__(env)
        if batch_size is not None and not is_count(batch_size, minimum=1):
            raise ValueError(f"batch_size must be a positive integer or None, got {batch_size!r}")
        self.batch_size = batch_size

    def reset(self, rng: jax.Array) -> State:
        if self.batch_size is not None:
            rng = jax.random.split(rng, self.batch_size)
        else:
            _check_batched_keys(rng, None)
        return jax.vmap(self.env.reset, axis_name=ENV_AXIS)(rng)

    def step(self, state: State, action: jax.Array) -> State:
        validate_action(action, self.action_size, tuple(state.done.shape))
        return jax.vmap(self.env.step, axis_name=ENV_AXIS)(state, action)


class EpisodeWrapper(Wrapper):
    """Maintains episode step count, truncation flags and per-episode metrics; repeats actions."""

    def __init__(self, env: Env, episode_length: int, action_repeat: int):
        super().__init__(env)
        if not is_count(episode_length, minimum=1):
            raise ValueError(f"episode_length must be a positive integer, got {episode_length!r}")
        if not is_count(action_repeat, minimum=1):
            raise ValueError(f"action_repeat must be an integer >= 1, got {action_repeat!r}")
        self.episode_length = episode_length
        self.action_repeat = action_repeat

    def reset(self, rng: jax.Array) -> State:
        state = self.env.reset(rng)
        # float32 as the step returns them: an env's Python-number reward or done (a weak type) in the reset's state
        # would make a jitted step compile again for its own, strongly typed outputs
        state = state.replace(reward=_float(state.reward), done=_float(state.done))
        zero = jnp.zeros_like(state.reward)
        state.info["steps"] = zero
        state.info["truncation"] = zero
        state.info["episode_done"] = zero
        episode_metrics = {"sum_reward": zero, "length": zero}
        for name in state.metrics:
            episode_metrics[name] = zero
        state.info["episode_metrics"] = episode_metrics
        return state

    def step(self, state: State, action: jax.Array) -> State:
        validate_action(action, self.action_size)

        def repeat(carry: tuple[State, jax.Array, jax.Array], _: None):
            current, reward_sum, was_done = carry
            nstate = _same_metric_keys(self.env, current, self.env.step(current, action))
            # where, not a product: the sub-steps after a done keep stepping, and 0 * NaN is NaN
            reward_sum = reward_sum + jnp.where(was_done > 0, 0.0, _float(nstate.reward))
            was_done = jnp.maximum(was_done, _float(nstate.done))
            return (nstate, reward_sum, was_done), None

        zero = jnp.zeros_like(_float(state.reward))
        start_done = zero
        (state, reward, done), _ = jax.lax.scan(repeat, (state, zero, start_done), (), self.action_repeat)
        state = state.replace(reward=reward, done=done)

        steps = _float(state.info["steps"]) + self.action_repeat
        time_up = steps >= self.episode_length
        one = jnp.ones_like(done)
        truncation = jnp.where(time_up, one - done, jnp.zeros_like(done))
        done = jnp.where(time_up, one, done)
        state.info["steps"] = steps
        state.info["truncation"] = truncation

        # Restart the running totals where the previous step ended an episode.
        # (where, not a product, so a NaN from an earlier episode cannot outlive it)
        ended = state.info["episode_done"] > 0

        def restart(total: jax.Array) -> jax.Array:
            return jnp.where(ended, jnp.zeros_like(total), total)

        metrics = dict(state.info["episode_metrics"])
        metrics["sum_reward"] = restart(metrics["sum_reward"]) + reward
        metrics["length"] = restart(metrics["length"]) + self.action_repeat
        for name, value in state.metrics.items():
            if name in metrics:
                metrics[name] = restart(metrics[name]) + _float(value)
        state.info["episode_metrics"] = metrics
        state.info["episode_done"] = done
        return state.replace(done=done)


class AutoResetWrapper(Wrapper):
    """Automatically resets a batched environment when an episode is done.

    On a done step the returned ``obs`` (and physics state) is the first of the new episode; the observation
    the transition actually reached is kept in ``info['final_obs']`` (for every env, so it equals ``obs`` where
    nothing ended). ``reward``, ``done``, ``metrics`` and the episode bookkeeping come from the step.
    """

    def __init__(self, env: Env, full_reset: bool = True):
        super().__init__(env)
        self.full_reset = full_reset

    def reset(self, rng: jax.Array) -> State:
        reset_rng, carry_rng = _split_batched(rng)
        state = self.env.reset(reset_rng)
        state.info["final_obs"] = state.obs
        if self.full_reset:
            state.info["autoreset_rng"] = carry_rng
        else:
            state.info["first_pipeline_state"] = state.pipeline_state
            state.info["first_obs"] = state.obs
        return state

    def step(self, state: State, action: jax.Array) -> State:
        if "steps" in state.info:
            steps = state.info["steps"]
            state.info.update(steps=jnp.where(state.done > 0, jnp.zeros_like(steps), steps))
        state = state.replace(done=jnp.zeros_like(state.done))
        state = self.env.step(state, action)
        done = state.done
        state.info["final_obs"] = state.obs

        if self.full_reset:
            next_rng, reset_rng = _split_batched(state.info["autoreset_rng"])
            state.info["autoreset_rng"] = next_rng
            fresh = jax.lax.cond(
                jnp.any(done > 0),
                lambda: _resettable(self.env.reset(reset_rng)),
                lambda: _resettable(state),
            )
            pipeline_state, obs = fresh.pipeline_state, fresh.obs
            info = dict(state.info)
            for key, value in fresh.info.items():
                info[key] = jax.tree.map(lambda new, old: select_envs(done, new, old), value, state.info[key])
        else:
            pipeline_state, obs = state.info["first_pipeline_state"], state.info["first_obs"]
            info = state.info
        select = lambda new, old: select_envs(done, new, old)
        pipeline_state = jax.tree.map(select, pipeline_state, state.pipeline_state)
        obs = jax.tree.map(select, obs, state.obs)
        return state.replace(pipeline_state=pipeline_state, obs=obs, info=info)


def _resettable(state: State) -> State:
    """The part of a state that an auto-reset replaces (wrapper bookkeeping is kept from the step)."""
    info = {k: v for k, v in state.info.items() if k not in _EPISODE_KEYS and k not in _AUTORESET_KEYS}
    return State(pipeline_state=state.pipeline_state, obs=state.obs, reward=state.reward, done=state.done, info=info)


def select_envs(mask: jax.Array, selected: jax.Array, other: jax.Array) -> jax.Array:
    """Per env, ``selected`` where ``mask`` (one flag per env, bool or 0/1) is set, else ``other``: one leaf of a
    batched state, whose leading axes are the mask's. A leaf without those axes is shared by the batch (MJX's Warp
    implementation keeps empty buffers without a batch axis), so no env's choice can change it: ``other``."""
    if mask.ndim == 0:
        return jnp.where(mask > 0, selected, other)
    if other.shape[: mask.ndim] != mask.shape:
        return other
    return jnp.where(jnp.reshape(mask > 0, mask.shape + (1,) * (other.ndim - mask.ndim)), selected, other)


def _split_batched(rng: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Splits every key in a (possibly batched) array of keys in two."""
    if not hasattr(rng, "dtype"):
        _check_batched_keys(rng, None)  # a plain number: the batched reset's own error
    typed = jnp.issubdtype(rng.dtype, jax.dtypes.prng_key)
    batch_ndim = rng.ndim if typed else rng.ndim - 1
    split = jax.random.split
    for _ in range(batch_ndim):
        split = jax.vmap(split)
    keys = split(rng)
    return keys[(slice(None),) * batch_ndim + (0,)], keys[(slice(None),) * batch_ndim + (1,)]


@struct.dataclass
class EvalMetrics:
    """Dataclass holding evaluation metrics for Brax.

    Attributes:
      episode_metrics: aggregated episode metrics since the beginning of the episode.
      active_episodes: boolean vector tracking which episodes are not done yet.
      episode_steps: integer vector tracking the number of steps in the episode.
    """

    episode_metrics: dict[str, jax.Array]
    active_episodes: jax.Array
    episode_steps: jax.Array


class EvalWrapper(Wrapper):
    """Brax env with eval metrics: accumulates each episode's metrics until it is first done."""

    def reset(self, rng: jax.Array) -> State:
        reset_state = self.env.reset(rng)
        reset_state.metrics["reward"] = _float(reset_state.reward)
        eval_metrics = EvalMetrics(
            episode_metrics=jax.tree.map(lambda x: jnp.zeros_like(_float(x)), reset_state.metrics),
            active_episodes=jnp.ones_like(_float(reset_state.reward)),
            episode_steps=jnp.zeros_like(_float(reset_state.reward)),
        )
        reset_state.info["eval_metrics"] = eval_metrics
        return reset_state

    def step(self, state: State, action: jax.Array) -> State:
        state_metrics = state.info["eval_metrics"]
        if not isinstance(state_metrics, EvalMetrics):
            raise ValueError(f"Incorrect type for state_metrics: {type(state_metrics)}")
        del state.info["eval_metrics"]
        nstate = self.env.step(state, action)
        nstate.metrics["reward"] = _float(nstate.reward)
        active = state_metrics.active_episodes
        episode_steps = state_metrics.episode_steps + active * _action_repeat(self.env)
        # where, not a product with `active`: a finished episode's env keeps stepping, and a NaN it reaches there
        # (0 * NaN is NaN) must not reach the totals
        episode_metrics = jax.tree.map(
            lambda total, value: total + jnp.where(active > 0, _float(value), 0.0),
            state_metrics.episode_metrics,
            nstate.metrics,
        )
        active_episodes = active * (1.0 - _float(nstate.done))
        nstate.info["eval_metrics"] = EvalMetrics(
            episode_metrics=episode_metrics, active_episodes=active_episodes, episode_steps=episode_steps
        )
        return nstate


def _action_repeat(env: Env) -> int:
    while isinstance(env, Wrapper):
        if isinstance(env, EpisodeWrapper):
            return env.action_repeat
        env = env.env
    return 1


class DomainRandomizationVmapWrapper(Wrapper):
    """Vectorises an environment over a batch of randomised physics models.

    ``randomization_fn(sys)`` returns ``(batched_sys, in_axes)``. The batched model is simulated through
    ``PipelineEnv.using_sys``, which always restores the env's own model, so nothing traced ever stays on the
    env object.
    """

    def __init__(self, env: Env, randomization_fn: RandomizationFn):
        super().__init__(env)
        if not isinstance(env.unwrapped, PipelineEnv):
            raise TypeError(
                f"randomization_fn needs a physics (PipelineEnv) environment; got {type(env.unwrapped).__name__}"
            )
        sys = self.env.unwrapped.sys
        result = randomization_fn(sys)
        # Returning only the batched model is the usual porting slip; unpacking it would fail deep inside a pytree.
        if not isinstance(result, tuple) or len(result) != 2 or not isinstance(result[0], type(sys)):
            got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
            raise TypeError(
                f"randomization_fn must return (batched_sys, in_axes): the randomised {type(sys).__name__} and a "
                f"matching tree of vmap axes (0 for batched fields, None for shared ones); it returned {got}"
            )
        self._sys_v, self._in_axes = result
        self.batch_size = _leading_batch_size(self._sys_v, self._in_axes)

    def _env_with(self, sys: mjx.Model):
        return self.env.unwrapped.using_sys(sys)

    def reset(self, rng: jax.Array) -> State:
        def reset_one(sys: mjx.Model, rng: jax.Array) -> State:
            with self._env_with(sys):
                return self.env.reset(rng)

        _check_batched_keys(rng, self.batch_size)
        return jax.vmap(reset_one, in_axes=[self._in_axes, 0], axis_name=ENV_AXIS)(self._sys_v, rng)

    def step(self, state: State, action: jax.Array) -> State:
        validate_action(action, self.action_size, tuple(state.done.shape))

        def step_one(sys: mjx.Model, s: State, a: jax.Array) -> State:
            with self._env_with(sys):
                return self.env.step(s, a)

        return jax.vmap(step_one, in_axes=[self._in_axes, 0, 0], axis_name=ENV_AXIS)(self._sys_v, state, action)


def _leading_batch_size(sys_v: mjx.Model, in_axes: Any) -> int | None:
    sizes = set()

    def visit(axis: Any, leaf: Any) -> None:
        if axis is not None and hasattr(leaf, "shape"):
            sizes.add(int(leaf.shape[axis]))

    jax.tree.map(visit, in_axes, sys_v, is_leaf=lambda x: x is None)
    if len(sizes) > 1:
        raise ValueError(f"randomization_fn returned batched fields of different sizes: {sorted(sizes)}")
    return sizes.pop() if sizes else None


# The wrappers ``wrap`` (and the trainers' evaluation) put around a single env; those that batch it.
TRAINING_WRAPPERS = (EpisodeWrapper, VmapWrapper, DomainRandomizationVmapWrapper, AutoResetWrapper, EvalWrapper)
BATCHING_WRAPPERS = (VmapWrapper, DomainRandomizationVmapWrapper)


def training_wrappers(env: Env) -> list[str]:
    """The class names of the training wrappers around ``env``, outermost first (empty for an env never wrapped
    for training; other wrappers are looked through)."""
    names = []
    while isinstance(env, Wrapper):
        if isinstance(env, TRAINING_WRAPPERS):
            names.append(type(env).__name__)
        env = env.env
    return names


def is_batched(env: Env) -> bool:
    """Whether a wrapper around ``env`` batches it (``VmapWrapper``, ``DomainRandomizationVmapWrapper``, or a
    wrapper of that name from Brax or MuJoCo Playground)."""
    while isinstance(env, Wrapper):
        if isinstance(env, BATCHING_WRAPPERS) or "VmapWrapper" in type(env).__name__:
            return True
        env = env.env
    return False


def describe_wrapping(env: Env) -> str:
    """``env`` in words for error messages: its class and the training wrappers around it."""
    name = type(env.unwrapped).__name__
    wrappers = training_wrappers(env)
    if not wrappers:
        return f"a single {name} env that brax_core.envs.training.wrap never wrapped"
    return f"already wrapped for training ({' around '.join(wrappers)} around {name})"
