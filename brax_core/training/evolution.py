"""What the evolution-strategy trainers share (ARS, ES): antithetic perturbations of the policy's parameters, one
episode of every perturbed policy in parallel, their argument checks and their loop of epochs and evaluations."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from brax_core.envs.base import Env
from brax_core.training import acting, types
from brax_core.training import validation as v
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo.environments import make_eval_env, wrap_for


def check_arguments(
    algorithm: str, environment: Any, eval_env: Any, counts: Mapping[str, Any], positive: Mapping[str, Any],
    callables: Mapping[str, Any],
) -> None:
    """Refuses bad arguments by name, before anything compiles: ``counts`` must be integers >= 0 (``None`` allowed
    for ``max_devices_per_host``, which must be >= 1), ``positive`` numbers > 0, ``callables`` callable (or ``None``
    where the name ends a ``_fn`` other than ``progress_fn``)."""
    if not isinstance(environment, Env):
        raise TypeError(f"environment must be a brax_core Env, got {type(environment).__name__}")
    if eval_env is not None and not isinstance(eval_env, Env):
        raise TypeError(f"eval_env must be a brax_core Env or None, got {type(eval_env).__name__}")
    for name, value in counts.items():
        if name == "max_devices_per_host":
            if value is not None:
                v.positive_int(name, value)
        elif name in ("num_timesteps", "num_evals"):
            v.check(v.FieldSpec("int", "", minimum=0, name=name), value)
        else:
            v.positive_int(name, value)
    for name, value in positive.items():
        v.real(name, value, low=0.0, open_low=True)
    for name, value in callables.items():
        if value is not None or name in ("network_factory", "progress_fn"):
            v.callable_arg(name, value)
    if isinstance(environment.observation_size, Mapping):
        raise ValueError(
            f"environment: {algorithm}'s policy takes a flat observation vector; this env's observations are a dict "
            f"with keys {sorted(environment.observation_size)}"
        )


class Setup(NamedTuple):
    """What both trainers build before their first epoch."""

    key: jax.Array  # the run's key after the splits below: each epoch splits its key from it
    network_key: jax.Array
    eval_key: jax.Array
    env: Env  # the population's episodes: one per env, without the auto-reset wrapper (each masked once it ends)
    evaluation_env: Env | None  # None without evaluations
    network: Any


def setup(
    environment: Env, eval_env: Env | None, *, num_envs: int, num_eval_envs: int, num_evals: int, wrap_env: bool,
    wrap_env_fn: Callable[..., Any] | None, episode_length: int, action_repeat: int,
    randomization_fn: Callable[..., Any] | None, seed: int, normalize_observations: bool,
    network_factory: Callable[..., Any],
) -> Setup:
    """The run's keys (Brax's splits of ``seed``), its envs and its network (``network_factory`` called with Brax's
    keywords, the normaliser as preprocessing when ``normalize_observations``)."""
    key, network_key, eval_key, randomize_key = jax.random.split(jax.random.PRNGKey(seed), 4)
    wrapping = (wrap_env_fn or True) if wrap_env else False
    options = dict(wrap_env=wrapping, episode_length=episode_length, action_repeat=action_repeat,
                   randomization_fn=randomization_fn)
    randomized = randomization_fn is not None
    env = wrap_for(environment, num_envs, randomize_key if randomized else None, for_eval=True, **options)
    evaluation_env = None if num_evals == 0 else make_eval_env(
        eval_env or environment, num_eval_envs, eval_key if randomized else None, **options
    )
    preprocess = running_statistics.normalize if normalize_observations else types.identity_observation_preprocessor
    network = network_factory(observation_size=environment.observation_size, action_size=environment.action_size,
                              preprocess_observations_fn=preprocess)
    return Setup(key, network_key, eval_key, env, evaluation_env, network)


def initial_statistics(environment: Env) -> running_statistics.RunningStatisticsState:
    """Empty observation statistics for ``environment``'s flat observations."""
    return running_statistics.init_state(jax.ShapeDtypeStruct((environment.observation_size,), jnp.float32))


def antithetic(params: types.Params, key: jax.Array, count: int, std: float) -> tuple[Any, Any]:
    """``count`` unit normal directions shaped as ``params`` and the ``2 * count`` perturbed parameter sets
    ``params + std * noise`` then ``params - std * noise`` (stacked on a leading axis): ``(perturbed, noise)``."""
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(key, len(leaves))
    noise = treedef.unflatten(
        [jax.random.normal(k, (count, *x.shape), x.dtype) for k, x in zip(keys, leaves, strict=True)]
    )
    perturbed = jax.tree.map(lambda p, n: jnp.concatenate([p + std * n, p - std * n]), params, noise)
    return perturbed, noise


def episode_returns(
    env: Env, act: Callable[[Any, Any, jax.Array, jax.Array], jax.Array], normalizer_params: Any, params: Any,
    key: jax.Array, num_envs: int, num_steps: int, reward_shift: float = 0.0,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One episode of each of ``num_envs`` parameter sets (``act(normalizer_params, params, obs, key)`` gives every
    env's action): each one's return (``reward - reward_shift`` summed while it ran), and the observations with their
    weights (1 while the episode ran) for the statistics."""
    key_reset, key_steps = jax.random.split(key)
    state = env.reset(jax.random.split(key_reset, num_envs))

    def step(carry: tuple[Any, jax.Array, jax.Array], key: jax.Array) -> tuple[Any, tuple[jax.Array, jax.Array]]:
        state, total, active = carry
        nstate = env.step(state, act(normalizer_params, params, state.obs, key))
        total = total + (nstate.reward - reward_shift) * active
        return (nstate, total, active * (1.0 - nstate.done)), (state.obs, active)

    zeros = jnp.zeros((num_envs,), jnp.float32)
    carry = (state, zeros, jnp.ones_like(zeros))
    (_, total, _), (obs, active) = jax.lax.scan(step, carry, jax.random.split(key_steps, num_steps))
    return total, obs, active


def fold_observations(normalizer_params: Any, obs: jax.Array, active: jax.Array) -> Any:
    """The observation statistics with every step the episodes took (the steps after an episode ended weigh 0)."""
    return running_statistics.update(normalizer_params, obs.reshape(-1, obs.shape[-1]), weights=active.reshape(-1))


def run(
    training_epoch: Callable[[Any, jax.Array], tuple[Any, Mapping[str, jax.Array]]], training_state: Any,
    built: Setup, make_policy: Callable[[Any], types.Policy], *, num_timesteps: int, num_evals: int,
    num_eval_envs: int, progress_fn: Callable[[int, Any], None], num_envs: int, episode_length: int,
    action_repeat: int,
) -> tuple[tuple[Any, Any], dict[str, Any]]:
    """Epochs until ``num_timesteps`` env steps, evaluating ``make_policy``'s policy ``num_evals`` times spread over
    them as Brax's trainers do (the last at the end); returns the final ``(normalizer_params, policy_params)`` and
    the metrics of the last evaluation (without one, of the last epoch)."""
    evaluator = None if built.evaluation_env is None else acting.Evaluator(
        built.evaluation_env, make_policy, num_eval_envs, episode_length, action_repeat, built.eval_key
    )
    params = lambda state: (state.normalizer_params, state.policy_params)  # noqa: E731
    between = num_timesteps // num_evals if num_evals else 0
    next_eval = num_timesteps - (num_evals - 1) * between if num_evals else None
    key, walltime, metrics = built.key, 0.0, {}
    while int(training_state.num_env_steps) < num_timesteps:
        key, epoch_key = jax.random.split(key)
        start = time.perf_counter()
        training_state, epoch_metrics = training_epoch(training_state, epoch_key)
        epoch_metrics = jax.device_get(epoch_metrics)
        seconds = time.perf_counter() - start
        walltime += seconds
        metrics = {
            "training/sps": num_envs * episode_length / seconds,
            "training/walltime": walltime,
            **{f"training/{name}": float(value) for name, value in epoch_metrics.items()},
        }
        steps = int(training_state.num_env_steps)
        if evaluator is not None and steps >= next_eval:
            metrics = evaluator.run_evaluation(params(training_state), metrics)
            progress_fn(steps, metrics)
            next_eval += between
    return params(training_state), metrics
