"""Augmented Random Search training (``brax.training.agents.ars.train`` counterpart; Mania et al., 2018,
https://arxiv.org/abs/1803.07055).

Same signature, argument names, defaults and return value as Brax 0.14.2's ``train``. Each epoch perturbs the linear
policy's weights along ``number_of_directions`` random directions, both ways, runs one episode of every perturbed
policy in parallel (``2 * number_of_directions`` envs), and steps along the directions whose better side scored
best (``top_directions`` of them), weighted by the difference of their two returns and scaled by the standard
deviation of the returns kept; the observation statistics fold in every step the episodes took.

Where this differs from Brax (its behaviour where Brax's works):

* every argument is checked before anything compiles, with an error naming it and what it accepts (Brax asserts or
  fails inside JAX), and dict observations are refused by name;
* ``num_evals=0`` trains without evaluating and returns the last epoch's training metrics (Brax divides by zero),
  and the returned metrics are those of the last evaluation or, without one, of the last epoch (Brax's are
  undefined when no evaluation ran);
* the episodes run without the auto-reset wrapper (Brax's steps it and masks what it does: an episode that ends
  stops counting), so a finished env does not pay a second physics reset;
* one device: Brax's ``pmap`` over a host's devices runs the same episodes split across them
  (``max_devices_per_host`` is accepted and checked).
"""

from __future__ import annotations

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
from brax_core.training.agents.ars import networks as ars_networks

Metrics = types.Metrics


@flax.struct.dataclass
class TrainingState:
    """Contains training state for the learner (Brax's fields)."""

    normalizer_params: running_statistics.RunningStatisticsState
    policy_params: types.Params
    num_env_steps: types.UInt64


def ars_step(
    policy_params: types.Params, noise: types.Params, reward_plus: jax.Array, reward_minus: jax.Array,
    top_directions: int, step_size: float,
) -> tuple[types.Params, jax.Array]:
    """ARS's update (the paper's V1-t/V2-t): the ``top_directions`` directions whose better side scored highest, each
    weighted by ``reward_plus - reward_minus``, over ``top_directions`` times the standard deviation of the returns
    they kept; returns the new parameters and the share of directions kept."""
    best = jnp.maximum(reward_plus, reward_minus)
    kept = jnp.argsort(jnp.argsort(-best)) < top_directions
    kept_both = jnp.concatenate([kept, kept])
    scores = jnp.concatenate([reward_plus, reward_minus])
    reward_std = jnp.std(scores, where=kept_both)
    reward_std = reward_std + (reward_std == 0.0) * 1e-6
    weight = kept * (reward_plus - reward_minus)
    step = jax.tree.map(lambda n: jnp.tensordot(weight, n, axes=1), noise)
    new = jax.tree.map(lambda p, s: p + step_size * s / (top_directions * reward_std), policy_params, step)
    return new, jnp.mean(kept)


def train(
    environment: Env,
    wrap_env: bool = True,
    wrap_env_fn: Callable[..., Any] | None = None,
    num_timesteps: int = 100,
    episode_length: int = 1000,
    action_repeat: int = 1,
    max_devices_per_host: int | None = None,
    number_of_directions: int = 60,
    top_directions: int = 20,
    step_size: float = 0.015,
    num_eval_envs: int = 128,
    exploration_noise_std: float = 0.025,
    seed: int = 0,
    normalize_observations: bool = False,
    num_evals: int = 1,
    reward_shift: float = 0.0,
    network_factory: types.NetworkFactory = ars_networks.make_policy_network,
    progress_fn: Callable[[int, Metrics], None] = lambda *args: None,
    eval_env: Env | None = None,
    randomization_fn: Callable[..., Any] | None = None,
) -> tuple[Callable[..., types.Policy], tuple[Any, Any], Metrics]:
    """Trains a linear policy with Augmented Random Search; returns ``(make_policy, params, metrics)`` as Brax's.

    Args:
      environment: the brax_core env to train on (unbatched).
      wrap_env, wrap_env_fn: wrap it for training (episode limit, action repeat, batching) with brax_core's
        wrappers, or with ``wrap_env_fn``; ``wrap_env=False``: it is batched already.
      num_timesteps: env steps to train for (steps of episodes still running, times ``action_repeat``).
      episode_length, action_repeat: the episodes' length in env steps, and env steps per policy step.
      max_devices_per_host: accepted as Brax's; the episodes run on one device.
      number_of_directions: random directions per epoch (each run both ways: twice as many envs).
      top_directions: the directions the step follows (those whose better side scored best).
      step_size: the step along the weighted directions.
      num_eval_envs: episodes per evaluation.
      exploration_noise_std: the perturbation's scale.
      seed: the run's random seed.
      normalize_observations: keep running observation statistics and normalise the policy's input with them.
      num_evals: evaluations over the run (``0``: none).
      reward_shift: subtracted from every reward while the episode runs (e.g. a locomotion task's alive bonus).
      network_factory: ``(observation_size, action_size, preprocess_observations_fn) -> ARSNetwork``.
      progress_fn: ``progress_fn(env_steps, metrics)`` after each evaluation.
      eval_env: the env to evaluate on (default: ``environment``).
      randomization_fn: domain randomisation ``(sys, rng) -> (sys, in_axes)``, one model per env.
    """
    evolution.check_arguments(
        "ARS", environment, eval_env,
        dict(num_timesteps=num_timesteps, num_evals=num_evals, episode_length=episode_length,
             action_repeat=action_repeat, number_of_directions=number_of_directions, top_directions=top_directions,
             num_eval_envs=num_eval_envs, max_devices_per_host=max_devices_per_host),
        dict(step_size=step_size, exploration_noise_std=exploration_noise_std),
        dict(network_factory=network_factory, progress_fn=progress_fn, randomization_fn=randomization_fn,
             wrap_env_fn=wrap_env_fn),
    )
    v.real("reward_shift", reward_shift)
    top_directions = min(top_directions, number_of_directions)
    num_envs = 2 * number_of_directions  # each direction, both ways
    built = evolution.setup(
        environment, eval_env, num_envs=num_envs, num_eval_envs=num_eval_envs, num_evals=num_evals,
        wrap_env=wrap_env, wrap_env_fn=wrap_env_fn, episode_length=episode_length, action_repeat=action_repeat,
        randomization_fn=randomization_fn, seed=seed, normalize_observations=normalize_observations,
        network_factory=network_factory,
    )
    env, network = built.env, built.network
    make_policy = ars_networks.make_inference_fn(network)
    policies = jax.vmap(network.apply, in_axes=(None, 0, 0))
    act = lambda normalizer, params, obs, key: policies(normalizer, params, obs)  # noqa: E731  (deterministic)

    @jax.jit
    def training_epoch(training_state: TrainingState, key: jax.Array) -> tuple[TrainingState, Metrics]:
        key_noise, key_episodes = jax.random.split(key)
        both, noise = evolution.antithetic(
            training_state.policy_params, key_noise, number_of_directions, exploration_noise_std
        )
        scores, obs, active = evolution.episode_returns(
            env, act, training_state.normalizer_params, both, key_episodes, num_envs, episode_length // action_repeat,
            reward_shift,
        )
        reward_plus, reward_minus = jnp.split(scores, 2)
        policy_params, kept = ars_step(
            training_state.policy_params, noise, reward_plus, reward_minus, top_directions, step_size
        )
        metrics = {
            "params_norm": optax.tree.norm(policy_params),
            "eval_scores_mean": jnp.mean(scores),
            "eval_scores_std": jnp.std(scores),
            "weights": kept,
        }
        steps = jnp.sum(active, dtype=jnp.int32) * action_repeat
        normalizer_params = evolution.fold_observations(training_state.normalizer_params, obs, active)
        return TrainingState(normalizer_params, policy_params, training_state.num_env_steps + steps), metrics

    training_state = TrainingState(
        normalizer_params=evolution.initial_statistics(environment),
        policy_params=network.init(built.network_key),
        num_env_steps=types.UInt64(hi=0, lo=0),
    )
    params, metrics = evolution.run(
        training_epoch, training_state, built, make_policy, num_timesteps=num_timesteps,
        num_evals=num_evals, num_eval_envs=num_eval_envs, progress_fn=progress_fn, num_envs=num_envs,
        episode_length=episode_length, action_repeat=action_repeat,
    )
    return make_policy, params, metrics
