"""Evolution strategy training (``brax.training.agents.es.train`` counterpart; Salimans et al., 2017,
https://arxiv.org/abs/1703.03864).

Same signature, argument names, defaults and return value as Brax 0.14.2's ``train``. Each epoch perturbs the
policy's parameters along ``population_size`` random directions, both ways, runs one episode of every perturbed
policy in parallel (``2 * population_size`` envs, actions sampled from each policy's distribution), shapes the
returns (``fitness_shaping``; optionally centred and scaled), and takes an Adam step along the directions weighted by
the difference of their two shaped returns, less ``l2coeff`` times the parameters; the observation statistics fold in
every step the episodes took.

Where this differs from Brax (its behaviour where Brax's works): every argument is checked by name before anything
compiles and dict observations are refused; ``num_evals=0`` trains without evaluating (Brax divides by zero) and the
returned metrics are those of the last evaluation or, without one, of the last epoch; the episodes run without the
auto-reset wrapper Brax steps and masks; one device (``max_devices_per_host`` is accepted and checked).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax

from brax_core.envs.base import Env
from brax_core.training import evolution, types
from brax_core.training import validation as v
from brax_core.training.acme import running_statistics
from brax_core.training.agents.es import networks as es_networks

Metrics = types.Metrics


@flax.struct.dataclass
class TrainingState:
    """Contains training state for the learner (Brax's fields)."""

    normalizer_params: running_statistics.RunningStatisticsState
    optimizer_state: optax.OptState
    policy_params: types.Params
    num_env_steps: types.UInt64


def centered_rank(x: jax.Array) -> jax.Array:
    """Ranks scaled to [-0.5, 0.5] (the ES paper's shaping)."""
    return jnp.argsort(jnp.argsort(x)) / (x.shape[0] - 1) - 0.5


def wierstra(x: jax.Array) -> jax.Array:
    """Natural evolution strategies' shaping (Wierstra et al., 2014): utilities of the ranks, best first, summing to
    zero."""
    n = x.shape[0]
    rank = n - jnp.argsort(jnp.argsort(x))  # 1 for the best
    utility = jnp.maximum(0.0, jnp.log(n / 2.0 + 1.0) - jnp.log(rank))
    return utility / jnp.sum(utility) - 1.0 / n


class FitnessShaping(enum.Enum):
    """How returns become weights: as they are, centred ranks, or Wierstra's utilities."""

    ORIGINAL = enum.member(functools.partial(lambda x: x))
    CENTERED_RANK = enum.member(functools.partial(centered_rank))
    WIERSTRA = enum.member(functools.partial(wierstra))


def es_delta(params: jax.Array, noise: jax.Array, weights: jax.Array, l2coeff: float) -> jax.Array:
    """The descent direction an optimiser takes for one parameter leaf: minus the weighted mean of the directions
    (``noise`` ``[population, *shape]``, ``weights`` ``[population]``) plus the weight decay ``l2coeff * params``."""
    ascent = jnp.tensordot(weights, noise, axes=1) / noise.shape[0] - l2coeff * params
    return -ascent


def train(
    environment: Env,
    wrap_env: bool = True,
    wrap_env_fn: Callable[..., Any] | None = None,
    num_timesteps: int = 100,
    episode_length: int = 1000,
    action_repeat: int = 1,
    l2coeff: float = 0,
    max_devices_per_host: int | None = None,
    population_size: int = 128,
    learning_rate: float = 1e-3,
    fitness_shaping: FitnessShaping = FitnessShaping.ORIGINAL,
    num_eval_envs: int = 128,
    perturbation_std: float = 0.1,
    seed: int = 0,
    normalize_observations: bool = False,
    num_evals: int = 1,
    center_fitness: bool = False,
    deterministic_eval: bool = False,
    network_factory: types.NetworkFactory = es_networks.make_es_networks,
    progress_fn: Callable[[int, Metrics], None] = lambda *args: None,
    eval_env: Env | None = None,
    randomization_fn: Callable[..., Any] | None = None,
) -> tuple[Callable[..., types.Policy], tuple[Any, Any], Metrics]:
    """Trains a policy with an evolution strategy; returns ``(make_policy, params, metrics)`` as Brax's.

    Args (as Brax's; see the module docstring for the algorithm):
      environment, wrap_env, wrap_env_fn, eval_env, randomization_fn: the envs and their wrapping, as ARS's.
      num_timesteps, episode_length, action_repeat: env steps to train for (steps of episodes still running), the
        episodes' length, env steps per policy step.
      l2coeff: weight decay of the parameters in each step.
      max_devices_per_host: accepted as Brax's; the episodes run on one device.
      population_size: random directions per epoch (each run both ways: twice as many envs).
      learning_rate: Adam's step size.
      fitness_shaping: a ``FitnessShaping``.
      num_eval_envs, num_evals, deterministic_eval: episodes per evaluation, evaluations (``0``: none), and
        whether they act with the policy's mode.
      perturbation_std: the perturbation's scale.
      seed: the run's random seed.
      normalize_observations: keep running observation statistics and normalise the policy's input with them.
      center_fitness: standardise the shaped returns.
      network_factory: ``(observation_size, action_size, preprocess_observations_fn) -> ESNetworks``.
      progress_fn: ``progress_fn(env_steps, metrics)`` after each evaluation.
    """
    evolution.check_arguments(
        "ES", environment, eval_env,
        dict(num_timesteps=num_timesteps, num_evals=num_evals, episode_length=episode_length,
             action_repeat=action_repeat, population_size=population_size, num_eval_envs=num_eval_envs,
             max_devices_per_host=max_devices_per_host),
        dict(learning_rate=learning_rate, perturbation_std=perturbation_std),
        dict(network_factory=network_factory, progress_fn=progress_fn, randomization_fn=randomization_fn,
             wrap_env_fn=wrap_env_fn),
    )
    if not isinstance(fitness_shaping, FitnessShaping):
        raise ValueError("fitness_shaping must be a FitnessShaping: ORIGINAL, CENTERED_RANK or WIERSTRA; got "
                         f"{fitness_shaping!r}")
    v.real("l2coeff", l2coeff, low=0.0)
    num_envs = 2 * population_size  # each direction, both ways
    built = evolution.setup(
        environment, eval_env, num_envs=num_envs, num_eval_envs=num_eval_envs, num_evals=num_evals,
        wrap_env=wrap_env, wrap_env_fn=wrap_env_fn, episode_length=episode_length, action_repeat=action_repeat,
        randomization_fn=randomization_fn, seed=seed, normalize_observations=normalize_observations,
        network_factory=network_factory,
    )
    env, network = built.env, built.network
    make_policy = es_networks.make_inference_fn(network)
    logits_of = jax.vmap(network.policy_network.apply, in_axes=(None, 0, 0))

    def act(normalizer: Any, params: Any, obs: jax.Array, key: jax.Array) -> jax.Array:
        return network.parametric_action_distribution.sample(logits_of(normalizer, params, obs), key)

    optimizer = optax.adam(learning_rate=learning_rate)

    @jax.jit
    def training_epoch(training_state: TrainingState, key: jax.Array) -> tuple[TrainingState, Metrics]:
        key_noise, key_episodes = jax.random.split(key)
        both, noise = evolution.antithetic(training_state.policy_params, key_noise, population_size,
                                           perturbation_std)
        scores, obs, active = evolution.episode_returns(
            env, act, training_state.normalizer_params, both, key_episodes, num_envs, episode_length // action_repeat
        )
        weights = fitness_shaping.value(scores)
        if center_fitness:
            weights = (weights - jnp.mean(weights)) / (1e-6 + jnp.std(weights))
        plus, minus = jnp.split(weights, 2)
        weights = plus - minus
        delta = jax.tree.map(functools.partial(es_delta, weights=weights, l2coeff=l2coeff),
                             training_state.policy_params, noise)
        updates, optimizer_state = optimizer.update(delta, training_state.optimizer_state)
        policy_params = optax.apply_updates(training_state.policy_params, updates)
        metrics = {
            "params_norm": optax.tree.norm(policy_params),
            "eval_scores_mean": jnp.mean(scores),
            "eval_scores_std": jnp.std(scores),
            "weights": jnp.mean(weights),
        }
        steps = jnp.sum(active, dtype=jnp.int32) * action_repeat
        return TrainingState(
            normalizer_params=evolution.fold_observations(training_state.normalizer_params, obs, active),
            optimizer_state=optimizer_state,
            policy_params=policy_params,
            num_env_steps=training_state.num_env_steps + steps,
        ), metrics

    policy_params = network.policy_network.init(built.network_key)
    training_state = TrainingState(
        normalizer_params=evolution.initial_statistics(environment),
        optimizer_state=optimizer.init(policy_params),
        policy_params=policy_params,
        num_env_steps=types.UInt64(hi=0, lo=0),
    )
    params, metrics = evolution.run(
        training_epoch, training_state, built, functools.partial(make_policy, deterministic=deterministic_eval),
        num_timesteps=num_timesteps, num_evals=num_evals, num_eval_envs=num_eval_envs, progress_fn=progress_fn,
        num_envs=num_envs, episode_length=episode_length, action_repeat=action_repeat,
    )
    return make_policy, params, metrics
