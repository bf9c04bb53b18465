"""Proximal policy optimisation training (``brax.training.agents.ppo.train`` counterpart).

See: https://arxiv.org/pdf/1707.06347.pdf

Same argument names, meanings and defaults as Brax's ``train`` (``arguments.TRAIN_DOC`` says what each means), plus
what Brax lacks: exact resume from complete checkpoints, an env-step count that never wraps, training metrics without
evaluation, randomisation without a separate eval env, and any activation in saved networks.

Reading order: ``train`` is Brax's flow as a sequence of named steps. ``arguments.validated`` checks every argument
before anything compiles; ``programs`` builds the envs' reset, the training call and the evaluation on the device
mesh; ``_make_networks`` and ``run_backend`` build the networks and the training state and restore them;
``training_step`` is the algorithm (collect unrolls, then ``make_ppo_update``); ``brax_core.training.run`` plans the
whole run and drives it: a call of training steps at a time, saving, evaluating and reporting.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from brax_core import devices
from brax_core.devices import training_devices
from brax_core.envs.base import Env
from brax_core.training import types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import arguments, checkpoint, networks_vision, programs, run_backend
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import optimizer as ppo_optimizer
from brax_core.training.agents.ppo import training_step as ppo_training_step
from brax_core.training.agents.ppo.config import KEYWORD_FIELDS, PPOConfig
from brax_core.training.agents.ppo.environments import make_eval_env, observation_size
from brax_core.training.agents.ppo.networks import PPOTrainingParams
from brax_core.training.agents.ppo.training_step import (
    AXIS,
    TrainingState,
    make_ppo_update,
    pair_to_steps,
    random_shift_pixels,
    steps_to_pair,
)
from brax_core.training.run.driver import RunDriver, ignore
from brax_core.training.run.schedule import plan_run

__all__ = [
    "PPOTrainingParams",
    "TrainingState",
    "make_eval_env",
    "make_ppo_update",
    "pair_to_steps",
    "random_shift_pixels",
    "steps_to_pair",
    "train",
    "train_from_config",
]


def train(
    environment: Env | str,
    num_timesteps: int,
    max_devices_per_host: int | None = None,
    # environment wrapper
    wrap_env: bool | Callable[..., Env] = True,
    wrap_env_fn: Callable[..., Env] | None = None,
    # high-level control flow
    episode_length: int | None = None,
    action_repeat: int = 1,
    num_envs: int = 1,
    num_eval_envs: int = 128,
    # optimisation
    learning_rate: float = 1e-4,
    entropy_cost: float = 1e-4,
    discounting: float = 0.9,
    seed: int = 0,
    unroll_length: int = 10,
    batch_size: int = 32,
    num_minibatches: int = 16,
    num_updates_per_batch: int = 2,
    num_resets_per_eval: int = 0,
    normalize_observations: bool = False,
    normalize_observations_std_eps: float = 0.0,
    normalize_observations_mode: str = "welford",
    normalize_until_count: int | None = None,
    reward_scaling: float = 1.0,
    clipping_epsilon: float = 0.3,
    clipping_epsilon_value: float | None = None,
    gae_lambda: float = 0.95,
    max_grad_norm: float | None = None,
    normalize_advantage: bool = True,
    vf_loss_coefficient: float = 0.5,
    bootstrap_on_timeout: bool = False,
    use_distributional_critic: bool = False,
    desired_kl: float = 0.01,
    learning_rate_schedule: str | ppo_optimizer.LRSchedule | None = None,
    learning_rate_schedule_min_lr: float = 1e-5,
    learning_rate_schedule_max_lr: float = 1e-2,
    network_factory: Callable[..., ppo_networks.PPONetworks] = ppo_networks.make_ppo_networks,
    use_pmap_on_reset: bool = True,
    # callbacks
    progress_fn: Callable[[int, Mapping[str, Any]], None] = ignore,
    policy_params_fn: Callable[..., None] = ignore,
    # environment randomisation
    randomization_fn: Callable[..., Any] | None = None,
    # evaluation
    deterministic_eval: bool = False,
    num_evals: int = 1,
    eval_env: Env | None = None,
    # training metrics
    log_training_metrics: bool = False,
    training_metrics_steps: int | None = None,
    # checkpointing
    save_checkpoint_path: str | os.PathLike | None = None,
    restore_checkpoint_path: str | os.PathLike | None = None,
    restore_params: Any | None = None,
    restore_value_fn: bool = True,
    max_to_keep: int | None = None,
    run_evals: bool = True,
    madrona_backend: bool = False,
    augment_pixels: bool = False,
    vision: bool = False,
    allow_config_changes: bool | Sequence[str] = False,
) -> tuple[Callable[..., types.Policy], PPOTrainingParams, dict[str, float]]:
    # Every argument by name; arguments.validated makes the PPOConfig of its fields (config_of_keywords) and checks
    # the rest, how to run.
    keywords = dict(
        environment=environment, num_timesteps=num_timesteps, max_devices_per_host=max_devices_per_host,
        wrap_env=wrap_env, wrap_env_fn=wrap_env_fn, episode_length=episode_length, action_repeat=action_repeat,
        num_envs=num_envs, num_eval_envs=num_eval_envs, learning_rate=learning_rate, entropy_cost=entropy_cost,
        discounting=discounting, seed=seed, unroll_length=unroll_length, batch_size=batch_size,
        num_minibatches=num_minibatches, num_updates_per_batch=num_updates_per_batch,
        num_resets_per_eval=num_resets_per_eval, normalize_observations=normalize_observations,
        normalize_observations_std_eps=normalize_observations_std_eps,
        normalize_observations_mode=normalize_observations_mode, normalize_until_count=normalize_until_count,
        reward_scaling=reward_scaling, clipping_epsilon=clipping_epsilon,
        clipping_epsilon_value=clipping_epsilon_value, gae_lambda=gae_lambda, max_grad_norm=max_grad_norm,
        normalize_advantage=normalize_advantage, vf_loss_coefficient=vf_loss_coefficient,
        bootstrap_on_timeout=bootstrap_on_timeout, use_distributional_critic=use_distributional_critic,
        desired_kl=desired_kl, learning_rate_schedule=learning_rate_schedule,
        learning_rate_schedule_min_lr=learning_rate_schedule_min_lr,
        learning_rate_schedule_max_lr=learning_rate_schedule_max_lr, network_factory=network_factory,
        use_pmap_on_reset=use_pmap_on_reset, progress_fn=progress_fn, policy_params_fn=policy_params_fn,
        randomization_fn=randomization_fn, deterministic_eval=deterministic_eval, num_evals=num_evals,
        eval_env=eval_env, log_training_metrics=log_training_metrics,
        training_metrics_steps=training_metrics_steps, save_checkpoint_path=save_checkpoint_path,
        restore_checkpoint_path=restore_checkpoint_path, restore_params=restore_params,
        restore_value_fn=restore_value_fn, max_to_keep=max_to_keep, run_evals=run_evals,
        madrona_backend=madrona_backend, augment_pixels=augment_pixels, vision=vision,
        allow_config_changes=allow_config_changes,
    )
    return _train(arguments.validated(keywords, training_devices))


# What every argument means: arguments.TRAIN_DOC, the text help(train) shows.
train.__doc__ = arguments.TRAIN_DOC

# train's arguments that are not PPOConfig fields, with train's defaults: how to run, not what (callbacks,
# checkpoints, randomisation, ...).
RUN_OPTIONS: dict[str, Any] = {
    "max_devices_per_host": None, "wrap_env": True, "wrap_env_fn": None,
    "network_factory": ppo_networks.make_ppo_networks, "progress_fn": ignore,
    "policy_params_fn": ignore, "randomization_fn": None, "eval_env": None, "save_checkpoint_path": None,
    "restore_checkpoint_path": None, "restore_params": None, "restore_value_fn": True, "run_evals": True,
    "madrona_backend": False, "augment_pixels": False, "vision": False, "allow_config_changes": False,
}


def train_from_config(
    config: PPOConfig, environment: Env | str | None = None, **options: Any
) -> tuple[Callable[..., types.Policy], PPOTrainingParams, dict[str, float]]:
    """Trains ``config`` (a ``PPOConfig``, validated when it was built) on ``environment`` (default:
    ``config.env.name``, a registered name).

    ``options``: ``train``'s arguments that are not config fields, by the same names and with the same meanings
    (``progress_fn``, ``policy_params_fn``, ``save_checkpoint_path``, ``restore_checkpoint_path``,
    ``randomization_fn``, ``eval_env``, ``wrap_env``, ``network_factory``, ...; see ``help(train)``). Without a
    ``network_factory`` the networks are ``make_ppo_networks`` with ``config.network``'s fields. Returns what
    ``train`` returns.
    """
    if not isinstance(config, PPOConfig):
        raise TypeError(f"config must be a PPOConfig, got {type(config).__name__}")
    unknown = sorted(set(options) - set(RUN_OPTIONS))
    if unknown:
        fields = sorted(set(unknown) & set(KEYWORD_FIELDS))
        hint = f" ({', '.join(fields)}: set in config, e.g. config.replace({fields[0]}=...))" if fields else ""
        raise TypeError(f"train_from_config got unknown options {unknown}{hint}; its options: {', '.join(RUN_OPTIONS)}")
    given = {**RUN_OPTIONS, "network_factory": None, **options, "environment": environment}
    with devices.placed(config.run.device):
        return _train(arguments.validated(given, training_devices, config))


def _train(args: arguments.Arguments) -> tuple[Callable[..., types.Policy], PPOTrainingParams, dict[str, float]]:
    """The run of checked arguments: Brax's flow as a sequence of named steps."""
    config = args.config
    remaining = config.run.num_timesteps - args.env_steps_restored
    mesh = Mesh(np.asarray(args.devices), (AXIS,))
    options = programs.compiler_options(args.devices, remaining, args.environment)
    jit = functools.partial(jax.jit, compiler_options=options)
    cached = programs.run_programs(args)
    replicated = NamedSharding(mesh, P())
    algorithm = config.algorithm
    optimizer = ppo_optimizer.make_optimizer(
        algorithm.learning_rate, algorithm.max_grad_norm, algorithm.learning_rate_schedule
    )
    key = jax.random.PRNGKey(config.run.seed)
    key_init, key_run, key_env, key_eval, key_randomize = jax.random.split(key, 5)
    # One global array over the mesh, as every saved array must be when several processes write one checkpoint.
    key_run = jax.jit(lambda k: k, out_shardings=replicated)(key_run)

    # ---- environments. Built before the networks so that the observation size comes from the reset the
    # trainer traces anyway: a separate probe would trace the env's reset (MJX forward dynamics) once more.
    env, reset_fn, abstract_env_state = programs.make_training_env(
        args, remaining, key_randomize, key_env, mesh, cached
    )

    # ---- networks, their (checkpoint) configuration, a resumed run's check against it, and the optimiser
    ppo_network, obs_size, saved_config = _make_networks(args, abstract_env_state)
    make_policy = ppo_networks.make_inference_fn(ppo_network)  # the callbacks' and the caller's
    # The rollouts' and evaluations' own: without the distribution parameters, which no unroll needs to carry.
    acting_policy = ppo_networks._inference_fn(ppo_network, False, False, with_distribution=False)
    if args.restore_checkpoint_path is not None:
        run_backend.check_resume_config(args.restore_checkpoint_path, saved_config, args.allow_config_changes)
    training_state = run_backend.init_training_state(ppo_network, optimizer, obs_size, key_init, jit, replicated)

    # ---- restore: parameters to start from, then a checkpoint to resume
    if args.restore_params is not None:
        training_state = run_backend.start_from_params(
            args, training_state, ppo_network, obs_size, optimizer, jit, replicated
        )
    env_steps = 0
    if args.restore_checkpoint_path is not None:
        training_state, key_run, env_steps = run_backend.restore_training(
            args.restore_checkpoint_path, training_state, key_run
        )
    run = run_backend.PPOBackend(args, saved_config, training_state, key_run)
    driver = RunDriver(
        run, num_evals=config.run.num_evals, log_training_metrics=config.run.log_training_metrics,
        progress_fn=args.progress_fn, policy_params_fn=args.policy_params_fn,
        save_checkpoint_path=args.save_checkpoint_path, restore_checkpoint_path=args.restore_checkpoint_path,
        make_policy=make_policy, env_steps=env_steps,
    )

    if remaining <= 0:
        if config.run.num_timesteps > 0 and args.restore_checkpoint_path is not None:
            logging.info(
                "checkpoint is at %d env steps, num_timesteps is %d: nothing to train",
                env_steps,
                config.run.num_timesteps,
            )
        driver.save()
        run.close()
        return make_policy, run_backend.current_params(training_state), {}

    # ---- the compiled functions: training steps (collect unrolls, then the PPO update), reset, evaluation
    env_steps_per_training_step = (
        algorithm.batch_size * algorithm.unroll_length * algorithm.num_minibatches * config.env.action_repeat
    )
    training_step = ppo_training_step.make_training_step(
        env,
        acting_policy,
        ppo_training_step.make_update(config, ppo_network, optimizer, args.augment_pixels),
        unroll_length=algorithm.unroll_length,
        num_unrolls=algorithm.batch_size * algorithm.num_minibatches // config.env.num_envs,
        extra_fields=(
            ("truncation", "episode_metrics", "episode_done") if config.run.log_training_metrics else ("truncation",)
        ),
        log_training_metrics=config.run.log_training_metrics,
        env_steps_per_training_step=env_steps_per_training_step,
    )
    eval_env, eval_run = programs.make_evaluation(
        args, acting_policy, key_randomize, mesh, cached.jit("evaluation", jit)
    )
    schedule = plan_run(config, driver.env_steps, env_steps_per_training_step)
    training_jit = cached.jit(f"training/{schedule.steps_per_call}", jit)  # steps per call: part of the program
    training_fn = programs.make_training_fn(training_step, schedule.steps_per_call, mesh, training_jit)

    # ---- compile: reset, training and evaluation are traced here and compiled side by side (XLA compiles
    # without the GIL)
    abstract_sharded = programs.sharded(abstract_env_state, mesh)
    jobs = [(reset_fn, (key_env,)), (training_fn, (training_state, abstract_sharded, key_run))]
    if eval_run is not None:
        jobs.append((eval_run, (run_backend.current_params(training_state), key_eval)))
    compiled = programs.compile_in_parallel(jobs)

    env_state = compiled[0](key_env)
    if args.restore_checkpoint_path is not None:
        env_state = checkpoint.restore_env_state(args.restore_checkpoint_path, env_state) or env_state
    make_evaluator = None
    if eval_run is not None:
        make_evaluator = functools.partial(
            run_backend.make_evaluator, args, eval_env, acting_policy, key_eval, compiled[2]
        )
    run.start(compiled[0], compiled[1], env_state, key_env, make_evaluator)

    # ---- the run: an epoch of training calls (saved at its end), then report and evaluate
    at_evaluation_points = config.run.num_evals > 0
    metrics = driver.run(schedule, evaluate=args.evaluate, report_training_at_evaluation_points=at_evaluation_points)
    run.close()
    return make_policy, run_backend.current_params(run.training_state), metrics


def _make_networks(
    args: arguments.Arguments, abstract_env_state: Any | None
) -> tuple[ppo_networks.PPONetworks, Any, dict[str, Any] | None]:
    """The PPO networks, the observation size they take and, for a run that saves or resumes, its checkpoint
    config."""
    batched_obs = abstract_env_state.obs if args.wrap_env is True and abstract_env_state is not None else None
    obs_size = observation_size(args.environment, batched_obs)
    action_size = args.environment.action_size
    if (args.vision or args.augment_pixels) and not networks_vision.has_pixels(obs_size):
        flag = "vision=True" if args.vision else "augment_pixels=True"
        raise ValueError(
            f"{flag} needs dict observations with image views (keys starting with 'pixels/'); the environment's "
            f"observation_size is {obs_size!r}"
        )
    normalize = args.config.algorithm.normalize_observations
    preprocess = running_statistics.normalize if normalize else types.identity_observation_preprocessor
    ppo_network = args.network_factory(obs_size, action_size, preprocess_observations_fn=preprocess)
    if args.evaluate and args.eval_env is not None:
        checkpoint.check_observation_size("eval_env", args.eval_env.observation_size, obs_size)
    config = None
    if args.save_checkpoint_path is not None or args.restore_checkpoint_path is not None:
        # Only a run that saves needs every network argument to be nameable in JSON.
        config = checkpoint.checkpoint_config(
            obs_size, action_size, normalize, args.network_factory, args.config, required=args.save_checkpoint_path
        )
    return ppo_network, obs_size, config
