"""PPO in PyTorch on brax_core environments through the bridge, with the JAX PPO's semantics and arguments.

``train`` checks its arguments (``arguments``: what each means and how it is checked), builds one process's
``trainer.TorchPPOBackend`` (networks, Adam, envs, evaluator; restored from parameters or a checkpoint; the JAX
trainer's counterpart is ``run_backend.PPOBackend``) and runs it through the run driver every trainer shares
(``brax_core.training.run``). A training step is ``update.collect`` then ``update.PPOUpdate``; nothing in a training
call reads a value back to the host but its metrics, once per call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from brax_core.training.agents.ppo.config import KEYWORD_FIELDS, PPOConfig
from brax_core.training.agents.ppo.config import defaults as schema_defaults
from brax_core.training.run.driver import ReportedMetrics, RunDriver, ignore
from brax_core.training.run.schedule import plan_run
from torch_ppo import arguments, distributed
from torch_ppo.params import TorchPPOParams, params_of
from torch_ppo.trainer import TorchPPOBackend
from torch_training import network_factory as custom_networks
from torch_training.device import resolve_device


def train(
    environment: Any,
    num_timesteps: int,
    episode_length: int | None = None,
    action_repeat: int = 1,
    num_envs: int = 1,
    num_eval_envs: int = 128,
    learning_rate: float = 0.0001,
    entropy_cost: float = 0.0001,
    discounting: float = 0.9,
    seed: int = 0,
    unroll_length: int = 10,
    batch_size: int = 32,
    num_minibatches: int = 16,
    num_updates_per_batch: int = 2,
    num_resets_per_eval: int = 0,
    normalize_observations: bool = False,
    normalize_observations_std_eps: float = 0.0,
    normalize_observations_mode: str = 'welford',
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
    learning_rate_schedule: str | None = None,
    learning_rate_schedule_min_lr: float = 1e-05,
    learning_rate_schedule_max_lr: float = 0.01,
    network_factory: Callable[[int, int], tuple[torch.nn.Module, torch.nn.Module]] | None = None,
    use_pmap_on_reset: bool = True,
    progress_fn: Callable[[int, ReportedMetrics], None] = ignore,
    policy_params_fn: Callable[..., None] = ignore,
    randomization_fn: Callable[..., Any] | None = None,
    wrap_env_fn: Callable[..., Any] | None = None,
    deterministic_eval: bool = False,
    num_evals: int = 1,
    eval_env: Any = None,
    eval_backend: str | None = None,
    collection: str | None = None,
    log_training_metrics: bool = False,
    training_metrics_steps: int | None = None,
    save_checkpoint_path: str | os.PathLike | None = None,
    restore_checkpoint_path: str | os.PathLike | None = None,
    restore_params: Any | None = None,
    restore_value_fn: bool = True,
    max_to_keep: int | None = None,
    policy_hidden_layer_sizes: tuple[int, ...] = (32, 32, 32, 32),
    value_hidden_layer_sizes: tuple[int, ...] = (256, 256, 256, 256, 256),
    activation: str | Callable[..., Any] = 'swish',
    num_quantiles: int = 32,
    distribution_type: str = 'tanh_normal',
    noise_std_type: str = 'scalar',
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    mean_clip_scale: float | None = None,
    policy_obs_key: str = 'state',
    value_obs_key: str = 'state',
    policy_network_kernel_init_fn: Any = 'lecun_uniform',
    policy_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    value_network_kernel_init_fn: Any = 'lecun_uniform',
    value_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    mean_kernel_init_fn: Any = None,
    mean_kernel_init_kwargs: Mapping[str, Any] | None = None,
    device: Any = None,
    torch_compile: bool | None = None,
    num_threads: int | None = 1,
    max_checkpoints_to_keep: int | None = None,
    vision: bool = False,
    augment_pixels: bool = False,
    allow_config_changes: bool | Sequence[str] = False,
    wrap_env: None = None,
) -> tuple[Callable[..., Any], TorchPPOParams, ReportedMetrics]:
    # Every argument by name: the PPOConfig's fields (arguments.parse builds the config) and how to run.
    given = dict(
        environment=environment, num_timesteps=num_timesteps, episode_length=episode_length,
        action_repeat=action_repeat, num_envs=num_envs, num_eval_envs=num_eval_envs,
        learning_rate=learning_rate, entropy_cost=entropy_cost, discounting=discounting, seed=seed,
        unroll_length=unroll_length, batch_size=batch_size, num_minibatches=num_minibatches,
        num_updates_per_batch=num_updates_per_batch, num_resets_per_eval=num_resets_per_eval,
        normalize_observations=normalize_observations,
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
        randomization_fn=randomization_fn, wrap_env_fn=wrap_env_fn, deterministic_eval=deterministic_eval,
        num_evals=num_evals, eval_env=eval_env, eval_backend=eval_backend, collection=collection,
        log_training_metrics=log_training_metrics, training_metrics_steps=training_metrics_steps,
        save_checkpoint_path=save_checkpoint_path, restore_checkpoint_path=restore_checkpoint_path,
        restore_params=restore_params, restore_value_fn=restore_value_fn, max_to_keep=max_to_keep,
        policy_hidden_layer_sizes=policy_hidden_layer_sizes, value_hidden_layer_sizes=value_hidden_layer_sizes,
        activation=activation, num_quantiles=num_quantiles, distribution_type=distribution_type,
        noise_std_type=noise_std_type, init_noise_std=init_noise_std, state_dependent_std=state_dependent_std,
        mean_clip_scale=mean_clip_scale, policy_obs_key=policy_obs_key, value_obs_key=value_obs_key,
        policy_network_kernel_init_fn=policy_network_kernel_init_fn,
        policy_network_kernel_init_kwargs=policy_network_kernel_init_kwargs,
        value_network_kernel_init_fn=value_network_kernel_init_fn,
        value_network_kernel_init_kwargs=value_network_kernel_init_kwargs,
        mean_kernel_init_fn=mean_kernel_init_fn, mean_kernel_init_kwargs=mean_kernel_init_kwargs, device=device,
        torch_compile=torch_compile, num_threads=num_threads, max_checkpoints_to_keep=max_checkpoints_to_keep,
        vision=vision, augment_pixels=augment_pixels, allow_config_changes=allow_config_changes,
        wrap_env=wrap_env,
    )
    # The JAX trainer's network_factory (every preset's) becomes torch_ppo's own networks' options.
    given = custom_networks.options_of_jax_factory(given, DEFAULTS)
    return _train(given)


# What every argument means: arguments.TRAIN_DOC.
train.__doc__ = arguments.TRAIN_DOC
# train's arguments that are not PPOConfig fields, with train's defaults: how to run, not what.
RUN_OPTIONS: dict[str, Any] = {
    "network_factory": None, "progress_fn": ignore, "policy_params_fn": ignore,
    "randomization_fn": None, "wrap_env_fn": None, "eval_env": None, "eval_backend": None, "collection": None,
    "save_checkpoint_path": None, "restore_checkpoint_path": None, "restore_params": None, "restore_value_fn": True,
    **arguments.KERNEL_INIT_DEFAULTS, "num_threads": 1, "vision": False, "augment_pixels": False,
    "allow_config_changes": False,
}
# train's defaults, every argument's but environment's and num_timesteps': the config fields' own, the run options',
# and three of train's alone (the device is the config's run.device in train_from_config, max_checkpoints_to_keep an
# alias of max_to_keep, and wrap_env is refused).
DEFAULTS: dict[str, Any] = {
    **{name: value for name, value in schema_defaults().items() if name in KEYWORD_FIELDS},
    **RUN_OPTIONS,
    "device": None,
    "max_checkpoints_to_keep": None,
    "wrap_env": None,
}


def train_from_config(
    config: PPOConfig, environment: Any = None, **options: Any
) -> tuple[Callable[..., Any], TorchPPOParams, ReportedMetrics]:
    """Trains ``config`` (a ``PPOConfig``, validated when it was built) on ``environment`` (default:
    ``config.env.name``, a registered name), on ``config.run.device`` (``None``: the bridge's device rule).

    ``options``: ``train``'s arguments that are not config fields, by the same names and with the same meanings
    (``progress_fn``, ``save_checkpoint_path``, ``network_factory``, ``eval_backend``, ``num_threads``, ...; see
    ``help(torch_ppo.train)``). Returns what ``train`` returns.
    """
    if not isinstance(config, PPOConfig):
        raise TypeError(f"config must be a PPOConfig, got {type(config).__name__}")
    unknown = sorted(set(options) - set(RUN_OPTIONS))
    if unknown:
        fields = sorted(set(unknown) & {*KEYWORD_FIELDS, "device"})
        hint = f" ({', '.join(fields)}: set in config, e.g. config.replace({fields[0]}=...))" if fields else ""
        raise TypeError(f"train_from_config got unknown options {unknown}{hint}; its options: {', '.join(RUN_OPTIONS)}")
    if environment is None:
        environment = config.env.name
    given = {**DEFAULTS, **options, "environment": environment, "device": config.run.device}
    return _train(given, config)


def _train(
    given: dict[str, Any], config: PPOConfig | None = None
) -> tuple[Callable[..., Any], TorchPPOParams, ReportedMetrics]:
    """One process's run of ``train``'s arguments (``config``: the run's config, else built from them)."""
    resolved_device = resolve_device(given["device"], given["environment"])
    dist = distributed.setup(resolved_device)
    threads_before = torch.get_num_threads()
    try:
        checked = arguments.parse(given, resolved_device, dist.world_size, config)
        if checked.num_threads is not None and resolved_device.type == "cpu":
            torch.set_num_threads(checked.num_threads)
        return _run(TorchPPOBackend(checked, dist))
    finally:
        torch.set_num_threads(threads_before)
        distributed.teardown(dist)


def _run(trainer: TorchPPOBackend) -> tuple[Callable[..., Any], TorchPPOParams, ReportedMetrics]:
    """The run of one process: nothing to train past a restored checkpoint's steps, else the schedule."""
    config, dist = trainer.config, trainer.dist
    args = trainer.args
    driver = RunDriver(
        trainer,
        num_evals=config.run.num_evals,
        log_training_metrics=config.run.log_training_metrics,
        progress_fn=args.progress_fn,
        policy_params_fn=args.policy_params_fn,
        save_checkpoint_path=args.save_checkpoint_path,
        restore_checkpoint_path=args.restore_checkpoint_path,
        make_policy=trainer.make_policy,
        env_steps=trainer.env_steps,
        main=dist.is_main,
        # A save needs every rank and a callback runs on rank 0 only: there the epoch's save (before the callbacks)
        # is what a failing callback leaves.
        save_before_failing_callback=not dist.enabled,
    )
    if config.run.num_timesteps <= trainer.env_steps:
        driver.save()
        return trainer.make_policy, params_of(trainer.modules), {}
    trainer.build_envs()
    schedule = plan_run(config, driver.env_steps, trainer.steps_per_training_step)
    metrics = driver.run(schedule, evaluate=trainer.evaluator is not None)
    return trainer.make_policy, params_of(trainer.modules), metrics
