"""PPO in PyTorch on brax_core environments through the bridge, with the JAX PPO's semantics and arguments.

One training step (as on the JAX side): ``batch_size * num_minibatches / num_envs`` unrolls of ``unroll_length``
steps of every env are collected under ``torch.inference_mode`` into one TensorDict ``[rows, unroll_length]``
(TorchRL keys); the observation normaliser folds in the batch's observations; then ``num_updates_per_batch``
passes shuffle the rows and take one Adam step per minibatch of ``batch_size`` rows. Nothing in the loop reads a
value back to the host; metrics are accumulated as tensors and read once per logging point.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from brax_bridge import TorchEnv, compile_envs
from brax_core import compile as compile_options
from brax_core import envs
from brax_core.training import resume
from brax_core.training.agents.ppo.config import PPOConfig
from brax_core.training.validation import boolean as _bool
from brax_core.training.validation import callable_arg as _callable
from brax_core.training.validation import positive_int as _positive_int
from torch_ppo import checkpoint as ckpt
from torch_ppo import distributed
from torch_ppo.evaluation import EVAL_BACKENDS, BridgeEvaluator, JaxEvaluator, UnsupportedActor
from torch_ppo.losses import (
    LossConfig,
    LossTerms,
    ppo_loss_from_tensors,
    rollout_behaviour,
    rollout_tensors,
)
from torch_ppo.networks import Activation, PPOModules, make_actor, resolve_kernel_init
from torch_ppo.params import TorchPPOParams, load_params, make_inference_fn, params_of
from torch_ppo.policy_transfer import jax_params_to_torch

Metrics = dict[str, float]
_LOSS_NAMES = ("total_loss", "policy_loss", "v_loss", "entropy_loss", "approx_kl")
# What collection keeps of every step (the loss's LOSS_KEYS, the action and done); the last five under "next".
_COLLECTED_NEXT = ("final_observation", "reward", "terminated", "truncated", "done")
_COLLECTED = ("observation", "action", "raw_action", "action_log_prob", *_COLLECTED_NEXT)
_ADAPTIVE_KL = "ADAPTIVE_KL"
_LR_FACTOR = 1.5  # ADAPTIVE_KL's step, as brax_core.training.agents.ppo.optimizer

# PPOModules' options beyond sizes, activation and normalisation: taken by name from train's arguments.
_NETWORK_OPTIONS = (
    "distribution_type",
    "noise_std_type",
    "init_noise_std",
    "state_dependent_std",
    "mean_clip_scale",
    "policy_obs_key",
    "value_obs_key",
    "policy_network_kernel_init_fn",
    "policy_network_kernel_init_kwargs",
    "value_network_kernel_init_fn",
    "value_network_kernel_init_kwargs",
    "mean_kernel_init_fn",
    "mean_kernel_init_kwargs",
)


# --------------------------------------------------------------------------------------------- validation
# Hyperparameters are checked by the schema both trainers share (brax_core.training.agents.ppo.config), so the
# messages are the JAX trainer's; what is left here is the torch-only arguments and the process count.


def _validate(kw: dict[str, Any], world_size: int) -> dict[str, Any]:
    """Checks every argument before anything is built; returns them normalised."""
    env = kw["environment"]
    if isinstance(env, str):
        envs.get_environment_class(env)  # unknown names raise here, listing the registered ones
    elif envs.is_env(env):
        kw["environment"] = envs.as_env(env)  # a Playground MjxEnv becomes a brax_core Env here
    elif not isinstance(env, TorchEnv):
        raise TypeError(
            "environment must be a brax_core Env, a MuJoCo Playground MjxEnv, a registered environment name "
            f"('playground:<task>' too) or a brax_bridge.TorchEnv, got {env!r}"
        )
    for name in ("vision", "augment_pixels"):
        if kw[name] is not False:
            raise ValueError(
                f"{name}={kw[name]!r}: torch_ppo has no networks for image observations; train pixel observations "
                "with the JAX trainer (brax_core.training.agents.ppo.train, e.g. with "
                "networks_vision.make_ppo_networks_vision)"
            )
    if kw["max_checkpoints_to_keep"] is not None:  # older name of max_to_keep
        kw["max_to_keep"] = kw["max_checkpoints_to_keep"]
    hp = PPOConfig(
        num_timesteps=kw["num_timesteps"],
        episode_length=kw["episode_length"],
        action_repeat=kw["action_repeat"],
        num_envs=kw["num_envs"],
        num_eval_envs=kw["num_eval_envs"],
        learning_rate=kw["learning_rate"],
        entropy_cost=kw["entropy_cost"],
        discounting=kw["discounting"],
        seed=kw["seed"],
        unroll_length=kw["unroll_length"],
        batch_size=kw["batch_size"],
        num_minibatches=kw["num_minibatches"],
        num_updates_per_batch=kw["num_updates_per_batch"],
        num_resets_per_eval=kw["num_resets_per_eval"],
        normalize_observations=kw["normalize_observations"],
        normalize_observations_std_eps=kw["normalize_observations_std_eps"],
        normalize_observations_mode=kw["normalize_observations_mode"],
        normalize_until_count=kw["normalize_until_count"],
        reward_scaling=kw["reward_scaling"],
        clipping_epsilon=kw["clipping_epsilon"],
        clipping_epsilon_value=kw["clipping_epsilon_value"],
        gae_lambda=kw["gae_lambda"],
        max_grad_norm=kw["max_grad_norm"],
        normalize_advantage=kw["normalize_advantage"],
        vf_loss_coefficient=kw["vf_loss_coefficient"],
        bootstrap_on_timeout=kw["bootstrap_on_timeout"],
        use_distributional_critic=kw["use_distributional_critic"],
        desired_kl=kw["desired_kl"],
        learning_rate_schedule=kw["learning_rate_schedule"],
        learning_rate_schedule_min_lr=kw["learning_rate_schedule_min_lr"],
        learning_rate_schedule_max_lr=kw["learning_rate_schedule_max_lr"],
        use_pmap_on_reset=kw["use_pmap_on_reset"],
        num_quantiles=kw["num_quantiles"],
        deterministic_eval=kw["deterministic_eval"],
        num_evals=kw["num_evals"],
        log_training_metrics=kw["log_training_metrics"],
        training_metrics_steps=kw["training_metrics_steps"],
        max_to_keep=kw["max_to_keep"],
        policy_hidden_layer_sizes=kw["policy_hidden_layer_sizes"],
        value_hidden_layer_sizes=kw["value_hidden_layer_sizes"],
        activation=kw["activation"],
        distribution_type=kw["distribution_type"],
        noise_std_type=kw["noise_std_type"],
        init_noise_std=kw["init_noise_std"],
        state_dependent_std=kw["state_dependent_std"],
        mean_clip_scale=kw["mean_clip_scale"],
        policy_obs_key=kw["policy_obs_key"],
        value_obs_key=kw["value_obs_key"],
        torch_compile=kw["torch_compile"],
    )
    kw.update(hp.to_dict())  # the validated values (numpy scalars as Python numbers, sizes as tuples)
    # Kernel initialisers are outside the schema (a name and its keyword arguments): resolved once here so a bad
    # one fails before any env compiles.
    for prefix in ("policy_network_kernel_init", "value_network_kernel_init", "mean_kernel_init"):
        if kw[f"{prefix}_fn"] is not None:
            resolve_kernel_init(f"{prefix}_fn", kw[f"{prefix}_fn"], f"{prefix}_kwargs", kw[f"{prefix}_kwargs"])
        elif kw[f"{prefix}_kwargs"]:
            raise ValueError(f"{prefix}_kwargs needs {prefix}_fn")
    kw["restore_value_fn"] = _bool("restore_value_fn", kw["restore_value_fn"])
    _callable("progress_fn", kw["progress_fn"])
    _callable("policy_params_fn", kw["policy_params_fn"])
    kw["allow_config_changes"] = resume.check_allow("allow_config_changes", kw["allow_config_changes"])
    if kw["randomization_fn"] is not None:
        _callable("randomization_fn", kw["randomization_fn"])
    if kw["wrap_env_fn"] is not None:
        _callable("wrap_env_fn", kw["wrap_env_fn"])
        if envs.playground.is_playground_training_wrapper(kw["wrap_env_fn"]):
            kw["wrap_env_fn"] = None  # brax_core's own wrappers do what Playground's do, as in the JAX trainer
        elif isinstance(kw["environment"], TorchEnv):
            raise ValueError(
                "wrap_env_fn cannot apply to a ready TorchEnv (it is wrapped already): pass wrap_env_fn to TorchEnv, "
                "or give train the env itself"
            )
    if kw["eval_backend"] is not None and kw["eval_backend"] not in EVAL_BACKENDS:
        raise ValueError(f"eval_backend must be one of {', '.join(EVAL_BACKENDS)} or None, got {kw['eval_backend']!r}")
    if kw["eval_backend"] == "jax" and isinstance(kw["eval_env"], TorchEnv):
        raise ValueError(
            "eval_backend='jax' evaluates on a brax_core env, but eval_env is a TorchEnv: pass the env itself (a "
            "name or an Env), or eval_backend='torch' (or None) to step the TorchEnv through the bridge"
        )
    if kw["eval_env"] is not None:
        if envs.is_env(kw["eval_env"]):
            kw["eval_env"] = envs.as_env(kw["eval_env"])
        elif not isinstance(kw["eval_env"], TorchEnv):
            raise TypeError(
                "eval_env must be a brax_core Env, a MuJoCo Playground MjxEnv, a brax_bridge.TorchEnv or None, "
                f"got {kw['eval_env']!r}"
            )
    num_envs, batch_size = kw["num_envs"], kw["batch_size"]
    if num_envs % world_size != 0:
        raise ValueError(f"num_envs ({num_envs}) must be divisible by the number of processes ({world_size})")
    if batch_size % world_size != 0:
        raise ValueError(f"batch_size ({batch_size}) must be divisible by the number of processes ({world_size})")
    if kw["num_threads"] is not None:
        kw["num_threads"] = _positive_int("num_threads", kw["num_threads"])
    if kw["save_checkpoint_path"] is not None and not isinstance(kw["save_checkpoint_path"], str | os.PathLike):
        raise TypeError(f"save_checkpoint_path must be a path, got {kw['save_checkpoint_path']!r}")
    if kw["restore_checkpoint_path"] is not None:
        kw["restore_checkpoint_path"] = ckpt.resolve(kw["restore_checkpoint_path"])
    return kw


def _resolve_device(device: Any, environment: Any) -> torch.device:
    if device is not None:
        try:
            device = torch.device(device)
        except (TypeError, RuntimeError) as err:
            raise ValueError(
                f"device must be None, 'cpu', 'cuda' or 'cuda:<index>' (or a torch.device); got {device!r}"
            ) from err
    if isinstance(environment, TorchEnv):
        if device is not None and device != environment.device:
            raise ValueError(f"device={device!r} differs from the TorchEnv's device {environment.device}")
        return environment.device
    return torch.device("cpu") if device is None else device


# --------------------------------------------------------------------------------------------- environments


def _make_env(
    environment: Any,
    num_envs: int,
    episode_length: int | None,
    action_repeat: int,
    device: torch.device,
    seed: int,
    randomization_fn: Any,
    wrap_env_fn: Any = None,
    num_timesteps: int | None = None,
) -> Any:
    if isinstance(environment, TorchEnv):
        if environment.num_envs != num_envs:
            raise ValueError(
                f"the TorchEnv has num_envs={environment.num_envs}; expected num_envs={num_envs} (per process)"
            )
        if episode_length is not None and episode_length != environment.episode_length:
            raise ValueError(
                f"episode_length={episode_length} differs from the TorchEnv's episode_length="
                f"{environment.episode_length}; give the TorchEnv that episode length, or leave episode_length None"
            )
        return environment
    if isinstance(environment, str):
        envs.get_environment_class(environment)  # unknown names raise here, listing the registered ones
    elif not isinstance(environment, envs.Env):
        raise TypeError(
            f"environment must be a registered name, a brax_core Env or a brax_bridge.TorchEnv; "
            f"got {type(environment).__name__}"
        )
    return TorchEnv(
        environment,
        num_envs,
        episode_length=episode_length,
        action_repeat=action_repeat,
        device=device,
        seed=seed,
        randomization_fn=randomization_fn,
        wrap_env_fn=wrap_env_fn,
        cpu_opt_level=None if num_timesteps is None else _cpu_opt_level(environment, num_timesteps),
    )


def _cpu_opt_level(environment: str | envs.Env, num_timesteps: int, step_only: bool = True) -> int:
    """The LLVM level on a CPU for a run of ``num_timesteps`` env steps on this model: 0 while compiling would
    dominate the run, else 1 (``brax_core.compile.auto_level_for_run``). ``step_only``: for the training env's step,
    a physics step compiled alone; otherwise the JAX trainer's choice, which the evaluation follows. A name is built
    here only to read its model (milliseconds once its module is imported); the TorchEnv keeps the name, so envs of
    one configuration still share their compiled programs."""
    env = envs.get_environment(environment) if isinstance(environment, str) else environment
    model = getattr(getattr(env, "unwrapped", env), "mj_model", None)
    return compile_options.auto_level_for_run(num_timesteps, model, step_only=step_only)


def _eval_source(environment: Any) -> Any:
    return environment.unwrapped_env if isinstance(environment, TorchEnv) else environment


# --------------------------------------------------------------------------------------------- optimisation


class _LossModule(nn.Module):
    """The PPO loss as a module over plain tensors, so DDP can wrap it and torch.compile can trace it."""

    def __init__(self, modules: PPOModules, config: LossConfig, compile_loss: bool):
        super().__init__()
        self.modules_ = modules
        self.config = config
        fn = functools.partial(ppo_loss_from_tensors, modules, config)
        self._fn = torch.compile(fn, dynamic=False) if compile_loss else fn

    def forward(self, *tensors: torch.Tensor, **behaviour: torch.Tensor | None) -> LossTerms:
        return self._fn(*tensors, **behaviour)


def _clip_global_norm_(params: Sequence[nn.Parameter], max_norm: float) -> None:
    """optax.clip_by_global_norm: scale every gradient by ``max_norm / norm`` when ``norm >= max_norm``."""
    grads = [p.grad for p in params if p.grad is not None]
    # One call for every per-tensor norm (the same vector_norm per tensor, without a Python call each).
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    scale = torch.where(norm < max_norm, torch.ones_like(norm), max_norm / norm)
    torch._foreach_mul_(grads, scale)


def adapt_learning_rate(
    learning_rate: torch.Tensor,
    kl_mean: torch.Tensor,
    desired_kl: float,
    min_learning_rate: float = 1e-5,
    max_learning_rate: float = 1e-2,
) -> torch.Tensor:
    """The ADAPTIVE_KL rule of ``brax_core.training.agents.ppo.optimizer.adapt_learning_rate`` on tensors (no host
    read): divide by 1.5 (not below the minimum) when the KL exceeds ``2 * desired_kl``, multiply by 1.5 (not above
    the maximum) when it is positive and below ``desired_kl / 2``."""
    lowered = torch.clamp(learning_rate / _LR_FACTOR, min=min_learning_rate)
    raised = torch.clamp(learning_rate * _LR_FACTOR, max=max_learning_rate)
    learning_rate = torch.where(kl_mean > 2.0 * desired_kl, lowered, learning_rate)
    return torch.where((kl_mean < desired_kl / 2.0) & (kl_mean > 0.0), raised, learning_rate)


# --------------------------------------------------------------------------------------------- training metrics


class _EpisodeTracker:
    """Sums of the wrappers' episode metrics over episodes that ended (tensors, no host reads per step)."""

    def __init__(self, env: Any):
        self.env = env
        self.sums: dict[str, torch.Tensor] = {}
        self.count = torch.zeros((), device=env.device)

    def update(self) -> None:
        info = self.env.episode_info(copy=False)
        done = info.get("episode_done").reshape(-1).to(torch.float32)
        for name, value in info.get("episode_metrics").items():
            total = (value.reshape(-1) * done).sum()
            self.sums[name] = self.sums[name] + total if name in self.sums else total
        self.count = self.count + done.sum()

    def totals(self) -> dict[str, torch.Tensor]:
        """Sums per metric and the episode ``count`` since the last call (tensors); starts a new interval."""
        out = {**self.sums, "count": self.count}
        self.sums, self.count = {}, torch.zeros((), device=self.env.device)
        return out


# --------------------------------------------------------------------------------------------- train


def train(
    environment: Any,
    num_timesteps: int,
    episode_length: int | None = None,
    action_repeat: int = 1,
    num_envs: int = 1,
    num_eval_envs: int = 128,
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
    learning_rate_schedule: Any = None,
    learning_rate_schedule_min_lr: float = 1e-5,
    learning_rate_schedule_max_lr: float = 1e-2,
    use_pmap_on_reset: bool = True,
    progress_fn: Callable[[int, Metrics], None] = lambda *args: None,
    policy_params_fn: Callable[..., None] = lambda *args: None,
    randomization_fn: Callable[..., Any] | None = None,
    wrap_env_fn: Callable[..., Any] | None = None,
    deterministic_eval: bool = False,
    num_evals: int = 1,
    eval_env: Any = None,
    eval_backend: str | None = None,
    log_training_metrics: bool = False,
    training_metrics_steps: int | None = None,
    save_checkpoint_path: str | os.PathLike | None = None,
    restore_checkpoint_path: str | os.PathLike | None = None,
    restore_params: Any | None = None,
    restore_value_fn: bool = True,
    max_to_keep: int | None = None,
    policy_hidden_layer_sizes: Sequence[int] = (32,) * 4,
    value_hidden_layer_sizes: Sequence[int] = (256,) * 5,
    activation: Activation = "swish",
    num_quantiles: int = 32,
    distribution_type: str = "tanh_normal",
    noise_std_type: str = "scalar",
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    mean_clip_scale: float | None = None,
    policy_obs_key: str = "state",
    value_obs_key: str = "state",
    policy_network_kernel_init_fn: Any = "lecun_uniform",
    policy_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    value_network_kernel_init_fn: Any = "lecun_uniform",
    value_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    mean_kernel_init_fn: Any = None,
    mean_kernel_init_kwargs: Mapping[str, Any] | None = None,
    device: Any = None,
    torch_compile: bool = False,
    num_threads: int | None = 1,
    max_checkpoints_to_keep: int | None = None,
    vision: bool = False,
    augment_pixels: bool = False,
    allow_config_changes: bool | Sequence[str] = False,
) -> tuple[Callable[..., Any], TorchPPOParams, Metrics]:
    """Trains a PPO agent with PyTorch on a brax_core environment stepped through ``brax_bridge.TorchEnv``.

    Arguments have the names, meanings and defaults of ``brax_core.training.agents.ppo.train.train`` (see its docstring)
    and are checked by the same schema (``brax_core.training.agents.ppo.config.PPOConfig``), so bad values are refused
    with the JAX trainer's messages. In particular ``num_timesteps`` is the *total* step count, and a run restored from
    a checkpoint counts from the checkpoint's steps. Only what the JAX trainer takes as a ``network_factory`` is given
    here directly: ``policy_hidden_layer_sizes``, ``value_hidden_layer_sizes``, ``activation`` (a name such as
    ``'swish'`` or a callable), ``num_quantiles`` (the distributional critic's outputs) and the other
    ``make_ppo_networks`` options with its names, defaults and meanings (``distribution_type``, ``noise_std_type``,
    ``init_noise_std``, ``state_dependent_std``, ``mean_clip_scale``, ``policy_obs_key``/``value_obs_key`` for dict
    observations, and the ``*_kernel_init_fn``/``_kwargs`` pairs, given by Brax's initialiser names or the
    ``jax.nn.initializers`` functions; ``delta_orthogonal``, a convolution initialiser, has no torch counterpart).
    The ``ADAPTIVE_KL`` learning-rate schedule changes Adam's learning rate (a tensor, so no host read) at every
    minibatch from the minibatch's mean ``KL(behaviour || current)``, averaged over processes, and updates the
    observation statistics after a batch's SGD, as the JAX trainer does; the clipped value loss compares with the
    values the critic gave the batch before its SGD. ``use_pmap_on_reset`` is accepted and changes nothing: the
    bridge resets all envs in one compiled call. Torch additions: ``device`` (default: the
    TorchEnv's device, else CPU), ``torch_compile`` (compile the loss with ``torch.compile``), ``num_threads`` (torch's
    intra-op threads on CPU while training, restored on return; ``None`` keeps torch's setting). The default is 1: JAX's
    physics runs on its own thread pool on the same cores, and torch's OpenMP workers waiting at barriers behind it made
    small ops over 10x slower on a 2-core machine. ``environment``/``eval_env`` may also be ready ``TorchEnv``s (with
    ``num_envs`` per process). On a CPU the training env's step compiles at LLVM level 0 (about twice as fast
    to compile, several times slower to run) for runs too short for level 1 to repay its compile, and the evaluation
    at the level the JAX trainer would choose for ``num_timesteps`` on this environment (see
    ``brax_core.compile.auto_level_for_run``: a physics step alone repays level 1 sooner than a trainer's whole
    program); a ready ``TorchEnv`` keeps its own ``cpu_opt_level``. ``restore_params`` takes ``TorchPPOParams`` or the
    JAX trainer's ``PPOTrainingParams``.
    ``wrap_env_fn`` is the JAX trainer's: a Brax-style wrapper ``fn(env, episode_length=, action_repeat=,
    randomization_fn=)`` that replaces ``brax_core.envs.training.wrap`` for the training and evaluation envs (see
    ``TorchEnv``'s ``wrap_env_fn`` for what it must return); MuJoCo Playground's ``wrap_for_brax_training`` means
    brax_core's own wrappers. A ready ``TorchEnv`` brings its own wrappers and episode length (an ``episode_length``
    that differs from it is refused). ``max_checkpoints_to_keep`` is a deprecated alias of ``max_to_keep``.
    ``vision`` and ``augment_pixels`` exist for the JAX trainer's signature; torch_ppo has no image networks, so only
    ``False`` is accepted.

    Evaluation (``eval_backend``, a torch addition): ``'jax'`` copies the actor's weights into brax_core's networks
    of the same layout and runs the JAX trainer's evaluation (its env, ``make_eval_env``, and its compiled rollout)
    in one call per evaluation; ``'torch'`` has the torch actor step a separate ``TorchEnv`` of ``num_eval_envs``
    envs through the bridge, a call per env step (on a 2-core CPU a full 1,000-step evaluation of 16
    ``inverted_pendulum`` envs takes about 0.2 s in JAX against 0.85 s through the bridge). Both report the same
    ``eval/*`` metrics. ``None`` (the default) means ``'jax'``, except for an ``eval_env`` that is a ready ``TorchEnv``
    or an actor brax_core's networks cannot express (an activation function known to torch only), which go
    through the bridge; ``'jax'`` refuses those.

    Resuming (``restore_checkpoint_path``) follows the JAX trainer: the checkpoint's saved configuration (env,
    networks, training hyperparameters) must equal this call's unless the differing fields are named in
    ``allow_config_changes`` (``True``: any; sizes never), and with the same ``num_timesteps``, ``num_evals``,
    ``num_resets_per_eval`` and ``training_metrics_steps`` the resumed run continues the saved run's schedule (same
    evaluation points and final step count; the same parameters bit for bit on CPU). ``progress_fn`` and
    ``policy_params_fn`` run after their step's checkpoint is saved; one that raises between evaluations has the
    run saved first (single process), and its exception carries a note naming it.

    Launched by ``torchrun`` with several processes, each owns ``num_envs / world_size`` envs (see
    ``torch_ppo.distributed``).

    Returns:
      ``(make_policy, params, metrics)``: ``make_policy(params, deterministic=False)`` gives
      ``policy(observation, generator=None) -> (action, extras)``; ``params`` is
      ``TorchPPOParams(normalizer_params, policy_params, value_params)``; ``metrics`` are the last reported ones.
    """
    kw = dict(locals())
    resolved_device = _resolve_device(device, environment)
    dist_ctx = distributed.setup(resolved_device)
    threads_before = torch.get_num_threads()
    try:
        kw = _validate(kw, dist_ctx.world_size)
        if kw["num_threads"] is not None and resolved_device.type == "cpu":
            torch.set_num_threads(kw["num_threads"])
        return _Trainer(kw, dist_ctx).run()
    finally:
        torch.set_num_threads(threads_before)
        distributed.teardown(dist_ctx)


class _Trainer:
    """One training run (state shared by collection, SGD, evaluation and checkpointing)."""

    def __init__(self, kw: dict[str, Any], dist_ctx: distributed.DistributedContext):
        self.kw = kw
        self.dist = dist_ctx
        self.device = _resolve_device(kw["device"], kw["environment"])
        # Under DDP a save needs every rank, and a callback runs on rank 0 only: there the epoch's save (before
        # the callbacks) is what a failing callback leaves.
        # A weak reference: the trainer must not hold itself through its callbacks, or it (and under DDP the process
        # group its DistributedDataParallel holds) outlives train() until the cyclic garbage collector runs.
        save = weakref.WeakMethod(self._save)
        on_error = (lambda: None) if dist_ctx.enabled else (lambda: save()())
        self.progress_fn = resume.user_callback("progress_fn", kw["progress_fn"], "(num_steps, metrics)", on_error)
        self.policy_params_fn = resume.user_callback(
            "policy_params_fn", kw["policy_params_fn"], "(current_step, make_policy, params)", on_error
        )
        world = dist_ctx.world_size
        self.local_envs = kw["num_envs"] // world
        self.local_batch = kw["batch_size"] // world
        self.num_unrolls = kw["batch_size"] * kw["num_minibatches"] // kw["num_envs"]
        self.steps_per_training_step = (
            kw["batch_size"] * kw["unroll_length"] * kw["num_minibatches"] * kw["action_repeat"]
        )
        self.env_seed = kw["seed"] + 7919 * dist_ctx.rank
        obs_size, action_size = self._sizes()
        if kw["eval_env"] is not None and kw["num_evals"] > 0:
            # Before anything compiles (the size comes from tracing the env's reset).
            size = kw["eval_env"].observation_size
            if _size_json(size) != _size_json(obs_size):
                raise ValueError(
                    f"eval_env has observation_size {_size_json(size)!r} but the training environment's is "
                    f"{_size_json(obs_size)!r}; the networks read observations of the training environment's size"
                )
        kw["action_repeat"] = self.action_repeat  # a ready TorchEnv brings its own
        self.steps_per_training_step = (
            kw["batch_size"] * kw["unroll_length"] * kw["num_minibatches"] * self.action_repeat
        )
        with torch.random.fork_rng(devices=[]):  # initial weights from the seed alone, same on every rank
            torch.manual_seed(kw["seed"])
            self.modules = PPOModules(
                obs_size,
                action_size,
                kw["policy_hidden_layer_sizes"],
                kw["value_hidden_layer_sizes"],
                kw["activation"],
                kw["normalize_observations"],
                use_distributional_critic=kw["use_distributional_critic"],
                num_quantiles=kw["num_quantiles"],
                **{name: kw[name] for name in _NETWORK_OPTIONS},
            ).to(self.device)
            self.modules.normalizer.set_update_rule(
                kw["normalize_observations_mode"], kw["normalize_observations_std_eps"], kw["normalize_until_count"]
            )
        self.generator = torch.Generator(device=self.device).manual_seed(kw["seed"] * 1_000_003 + dist_ctx.rank)
        self.eval_generator = torch.Generator(device=self.device).manual_seed(kw["seed"] * 1_000_003 + 999_983)
        self.adaptive_kl = kw["learning_rate_schedule"] == _ADAPTIVE_KL
        if self.adaptive_kl:
            # A tensor learning rate that the schedule changes in place, on the device (float32 as on the JAX side).
            # On CUDA only the capturable Adam reads a tensor rate without a host sync.
            lr = torch.tensor(kw["learning_rate"], dtype=torch.float32, device=self.device)
            capturable = self.device.type == "cuda"
            self.optimizer = torch.optim.Adam(
                self.modules.parameters(), lr=lr, eps=1e-8, capturable=capturable, foreach=capturable
            )
        else:
            # foreach: one call per Adam stage for all parameters instead of a Python loop over them (on the CPU the
            # default); it applies the same operations to each tensor, so the updates are bit for bit the same.
            self.optimizer = torch.optim.Adam(self.modules.parameters(), lr=kw["learning_rate"], eps=1e-8, foreach=True)
        self.loss_names = _LOSS_NAMES + (("kl_mean", "learning_rate") if self.adaptive_kl else ())
        self.loss_config = LossConfig(
            kw["entropy_cost"],
            kw["discounting"],
            kw["reward_scaling"],
            kw["gae_lambda"],
            kw["clipping_epsilon"],
            kw["normalize_advantage"],
            kw["vf_loss_coefficient"],
            kw["bootstrap_on_timeout"],
            kw["clipping_epsilon_value"],
            kw["use_distributional_critic"],
        )
        loss_module: nn.Module = _LossModule(self.modules, self.loss_config, kw["torch_compile"])
        if dist_ctx.enabled:
            loss_module = nn.parallel.DistributedDataParallel(
                loss_module, broadcast_buffers=False, process_group=dist_ctx.group
            )
        self.loss_module = loss_module
        self.make_policy = make_inference_fn(self.modules)
        self.env_steps = 0
        self.saved_at: int | None = None
        self.saved_env_state = None
        self.obs: torch.Tensor | None = None
        self.loss_sums: torch.Tensor | None = None  # per name of loss_names, summed over minibatches
        self.num_loss_terms = 0
        self.tracker: _EpisodeTracker | None = None
        self.last_episode: Metrics = {}
        if kw["restore_params"] is not None:
            self._restore_params(kw["restore_params"], kw["restore_value_fn"])
        if kw["restore_checkpoint_path"] is not None:
            self._restore_checkpoint(self._checkpoint_every_rank_restores(kw["restore_checkpoint_path"]))

    # ---------------------------------------------------------------- set-up

    def _sizes(self) -> tuple[int | dict[str, Any], int]:
        """Builds the training TorchEnv (nothing compiles until its first reset) and reads its sizes.

        A registered name stays a name, so TorchEnvs of the same configuration share one compiled step.
        """
        kw = self.kw
        self.env = _make_env(
            kw["environment"],
            self.local_envs,
            kw["episode_length"],
            kw["action_repeat"],
            self.device,
            self.env_seed,
            kw["randomization_fn"],
            kw["wrap_env_fn"],
            kw["num_timesteps"],
        )
        self.episode_length = self.env.episode_length
        self.action_repeat = self.env.action_repeat
        obs_size = self.env.observation_size
        if isinstance(obs_size, Mapping):
            for name in ("policy_obs_key", "value_obs_key"):
                if kw[name] not in obs_size:
                    raise ValueError(f"{name}={kw[name]!r} is not among the env's observation keys {sorted(obs_size)}")
            return dict(obs_size), int(self.env.action_size)
        return int(obs_size), int(self.env.action_size)

    def _restore_params(self, params: Any, with_value: bool) -> None:
        first = params[0] if isinstance(params, tuple | list) else getattr(params, "normalizer_params", None)
        # torch_ppo's normaliser statistics are a plain dict; the JAX trainer's are a RunningStatisticsState.
        if not isinstance(first, dict):
            params = jax_params_to_torch(params)  # the JAX trainer's params
        shapes = lambda m: (
            {k: tuple(torch.as_tensor(v).shape) for k, v in m.items()}
            if isinstance(m, Mapping)
            else tuple(torch.as_tensor(m).shape)
        )
        got, want = shapes(params[0]["mean"]), shapes(self.modules.normalizer.stats()["mean"])
        if got != want:
            raise ValueError(
                f"restore_params were trained on observations of shape {got} but this environment's are {want}: "
                "they belong to another environment"
            )
        if not with_value:
            params = TorchPPOParams(params[0], params[1], {})
        load_params(self.modules, params)

    def _checkpoint_every_rank_restores(self, path: str) -> str:
        """Rank 0's newest checkpoint file, on every rank: a folder resolved by each rank alone could name
        different files (one still being written elsewhere), and ranks resuming at different step counts would
        wait on each other's collectives forever."""
        chosen = distributed.broadcast_object(self.dist, path)
        if not os.path.isfile(chosen):
            raise FileNotFoundError(
                f"restore_checkpoint_path: process {self.dist.rank} cannot read {chosen!r}, the checkpoint process 0 "
                "restores; with several processes or machines the checkpoint folder must be one every process reads"
            )
        return chosen

    def _restore_checkpoint(self, path: str) -> None:
        state = ckpt.load(path, map_location=self.device)
        requested = _run_config(self.kw, self.modules, self.episode_length, self.action_repeat, 0)
        changed = resume.check_config(
            state["path"], _comparable(state["config"]), _comparable(requested), self.kw["allow_config_changes"]
        )
        for name, (saved, now) in changed.items():
            logging.warning("resuming from %s with %s changed from %r to %r", state["path"], name, saved, now)
        try:
            self.modules.load_state_dict(state["modules"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as e:
            raise ValueError(f"checkpoint {state['path']!r} does not fit these networks: {e}") from e
        self.env_steps = int(state["env_steps"])
        rng_states = state["rng_state"]
        self.generator.set_state(rng_states[min(self.dist.rank, len(rng_states) - 1)].cpu())
        per_rank = state.get("env_states")
        if per_rank is not None and len(per_rank) == self.dist.world_size:
            self.saved_env_state = per_rank[self.dist.rank]  # every rank continues its own envs
        elif self.dist.rank == 0:
            self.saved_env_state = state.get("env_state")

    def _build_envs(self) -> None:
        kw = self.kw
        self._build_evaluator()
        self._compile_envs()
        self.obs = self.env.reset(seed=self.env_seed).get("observation")
        if self.saved_env_state is not None:
            try:
                self.obs = self.env.load_state_dict(self.saved_env_state)
            except ValueError:
                pass  # saved from another env layout: training continues from the fresh reset
        self.actor = make_actor(self.modules, deterministic=False, generator=self.generator)
        self.tracker = _EpisodeTracker(self.env) if kw["log_training_metrics"] else None

    def _compile_envs(self) -> None:
        """Compiles the training env's reset and step and the evaluator's programs (its bridge env's reset and step,
        or its JAX rollout) side by side before anything runs, as the JAX trainer compiles its programs: on a 2-core
        CPU they compile in about the time of the slowest."""
        start = time.perf_counter()
        if self.evaluator is None:
            compile_envs(self.env)
        else:
            self.evaluator.use(
                compile_envs(self.env, *self.evaluator.torch_envs, programs=self.evaluator.lower())
            )
        logging.info("compiled the envs' reset and step and the evaluation in %.1f s", time.perf_counter() - start)

    def _build_evaluator(self) -> None:
        kw = self.kw
        self.evaluator = None
        if kw["num_evals"] == 0 or not self.dist.is_main:
            return
        if kw["eval_env"] is not None:
            source, randomization = kw["eval_env"], None  # used as it is, never randomised
        else:
            source, randomization = _eval_source(kw["environment"]), kw["randomization_fn"]
        num_steps = -(-self.episode_length // self.action_repeat)
        backend = kw["eval_backend"]
        if backend != "torch" and not isinstance(source, TorchEnv):
            try:
                self.evaluator = JaxEvaluator(
                    self.env.unwrapped_env if kw["eval_env"] is None else source,
                    self.modules,
                    num_eval_envs=kw["num_eval_envs"],
                    episode_length=self.episode_length,
                    action_repeat=self.action_repeat,
                    deterministic=kw["deterministic_eval"],
                    wrap_env_fn=kw["wrap_env_fn"],
                    randomization_fn=randomization,
                    seed=kw["seed"] + 104_729,
                    jax_device=self.env.jax_device,
                    cpu_opt_level=self._eval_level(),
                )
                return
            except UnsupportedActor as reason:
                if backend == "jax":
                    raise ValueError(f"eval_backend='jax': the actor cannot be evaluated in JAX: {reason}") from reason
                logging.info("evaluating through the bridge: %s", reason)
        eval_env = source
        if not isinstance(source, TorchEnv):
            eval_env = TorchEnv(
                source,
                kw["num_eval_envs"],
                episode_length=self.episode_length,
                action_repeat=self.action_repeat,
                device=self.device,
                seed=kw["seed"] + 104_729,
                randomization_fn=randomization,
                wrap_env_fn=kw["wrap_env_fn"],  # as the JAX trainer wraps its evaluation env
                cpu_opt_level=self._eval_level(),
            )
        self.evaluator = BridgeEvaluator(eval_env, num_steps, self.action_repeat, kw["seed"])

    def _eval_level(self) -> int:
        """The evaluation's LLVM level on a CPU: the JAX trainer's for this run (its evaluation's level)."""
        return _cpu_opt_level(self.env.unwrapped_env, self.kw["num_timesteps"], step_only=False)

    # ---------------------------------------------------------------- one training step

    @torch.inference_mode()
    def _collect(self) -> TensorDictBase:
        # Plain tensors per step, stacked once per unroll: per-step TensorDict plumbing (the actor's modules, select,
        # stacking TensorDicts) cost more than the policy itself at these sizes. The draws are the actor's.
        env, tracker = self.env, self.tracker
        policy, sampler = self.modules.policy, self.actor.module[-1]
        keep_distribution = self.adaptive_kl
        obs = self.obs
        columns: dict[str, list[Any]] = {}
        for _ in range(self.num_unrolls):
            steps: dict[str, list[Any]] = {name: [] for name in _COLLECTED}
            if keep_distribution:
                steps["loc"], steps["scale"] = [], []
            for _ in range(self.kw["unroll_length"]):
                loc, scale = policy(obs)
                action, raw_action, log_prob = sampler.sample(loc, scale)
                nxt = env.step(action).get("next")
                for name, value in (
                    ("observation", obs),
                    ("action", action),
                    ("raw_action", raw_action),
                    ("action_log_prob", log_prob),
                    ("final_observation", nxt.get("final_observation")),
                    ("reward", nxt.get("reward")),
                    ("terminated", nxt.get("terminated")),
                    ("truncated", nxt.get("truncated")),
                    ("done", nxt.get("done")),
                ):
                    steps[name].append(value)
                if keep_distribution:
                    steps["loc"].append(loc)
                    steps["scale"].append(scale)
                if tracker is not None:
                    tracker.update()
                obs = nxt.get("observation")
            for name, values in steps.items():
                columns.setdefault(name, []).append(torch.stack(values, dim=1))
        self.obs = obs
        data = {name: parts[0] if len(parts) == 1 else torch.cat(parts, dim=0) for name, parts in columns.items()}
        data["next"] = {name: data.pop(name) for name in _COLLECTED_NEXT}
        rows = self.num_unrolls * self.local_envs
        return TensorDict(data, batch_size=[rows, self.kw["unroll_length"]], device=self.device)

    def _sgd(self, data: TensorDictBase) -> None:
        kw = self.kw
        num_minibatches, unroll_length = kw["num_minibatches"], kw["unroll_length"]
        rows = data.shape[0]
        params = list(self.modules.parameters())
        # The loss inputs as plain tensors [rows, T, ...] (behaviour last, None where absent), gathered once per pass;
        # a minibatch is then a view. Indexing the TensorDict per minibatch cost more than the minibatch's maths.
        inputs = (*rollout_tensors(data), *rollout_behaviour(data))
        num_inputs = len(inputs) - 3
        for _ in range(kw["num_updates_per_batch"]):
            order = self._minibatch_order(rows)
            shuffled = [
                None if x is None else x[order].reshape(num_minibatches, rows // num_minibatches, *x.shape[1:])
                for x in inputs
            ]
            for i in range(num_minibatches):
                minibatch = [None if x is None else x[i].transpose(0, 1) for x in shuffled]
                old_value, old_loc, old_scale = minibatch[num_inputs:]
                noise = self._entropy_noise((unroll_length, self.local_batch, self.modules.action_size))
                terms = self.loss_module(
                    *minibatch[:num_inputs], noise, old_value=old_value, old_loc=old_loc, old_scale=old_scale
                )
                self.optimizer.zero_grad(set_to_none=True)
                terms.total_loss.backward()
                if kw["max_grad_norm"] is not None:
                    _clip_global_norm_(params, kw["max_grad_norm"])
                learning_rate = self._adapt_learning_rate(terms.kl_mean) if self.adaptive_kl else None
                self.optimizer.step()
                # One stacked sum for all names: two ops per minibatch rather than two per name.
                with torch.no_grad():
                    step = torch.stack(
                        [learning_rate if name == "learning_rate" else getattr(terms, name) for name in self.loss_names]
                    )
                self.loss_sums = step if self.loss_sums is None else self.loss_sums + step
                self.num_loss_terms += 1

    # The two random draws of SGD, as methods so that a check of the data-parallel update can fix them (the
    # same minibatches and entropy samples in one process as split over several).
    def _minibatch_order(self, rows: int) -> torch.Tensor:
        """The row permutation of one pass over the batch."""
        return torch.randperm(rows, generator=self.generator, device=self.device)

    def _entropy_noise(self, shape: tuple[int, ...]) -> torch.Tensor:
        """The standard-normal sample of one minibatch's entropy estimate, ``[unroll_length, rows, action_size]``."""
        return torch.randn(shape, generator=self.generator, device=self.device)

    def _adapt_learning_rate(self, kl_mean: torch.Tensor) -> torch.Tensor:
        """Applies the ADAPTIVE_KL rule to Adam's tensor rate in place, from the minibatch's KL averaged over
        processes; returns the new rate."""
        kw = self.kw
        kl = kl_mean.detach().clone()
        if self.dist.enabled:
            torch.distributed.all_reduce(kl, group=self.dist.group)
            kl = kl / self.dist.world_size
        lr = self.optimizer.param_groups[0]["lr"]
        lr.copy_(
            adapt_learning_rate(
                lr, kl, kw["desired_kl"], kw["learning_rate_schedule_min_lr"], kw["learning_rate_schedule_max_lr"]
            )
        )
        return lr.detach().clone()

    def _training_step(self) -> None:
        self._update(self._collect())

    def _update(self, data: TensorDictBase) -> None:
        """The update of one training step from this process's rows of the batch: normaliser and SGD (over all
        processes together when distributed)."""
        group = self.dist.group if self.dist.enabled else None
        if self.kw["clipping_epsilon_value"] is not None and not self.kw["use_distributional_critic"]:
            # The critic's values before this batch's SGD, with the normaliser the actor used (one batched pass).
            with torch.no_grad():
                data.set("state_value", self.modules.value(data.get("observation")))
        if not self.adaptive_kl:
            self.modules.normalizer.update(data.get("observation"), group)
        self._sgd(data)
        if self.adaptive_kl:
            # After SGD, so the behaviour distribution stays comparable with the current policy's (as in JAX).
            self.modules.normalizer.update(data.get("observation"), group)

    # ---------------------------------------------------------------- metrics, evaluation, checkpoints

    def _read_training_metrics(self, sps: float, walltime: float) -> Metrics:
        """Host-side metrics of the steps since the last read (the only host sync of a training call)."""
        names = list(self.loss_names) if self.loss_sums is not None else []
        values = list((self.loss_sums / max(self.num_loss_terms, 1)).unbind(0)) if names else []
        episode = self.tracker.totals() if self.tracker is not None else {}
        packed = torch.stack([*values, *episode.values()]) if values or episode else None
        if packed is not None and self.dist.enabled:
            world = self.dist.world_size
            scale = torch.tensor([1.0 / world] * len(values) + [1.0] * len(episode), device=packed.device)
            torch.distributed.all_reduce(packed, group=self.dist.group)
            packed = packed * scale
        host = packed.tolist() if packed is not None else []
        out = {f"training/{n}": v for n, v in zip(names, host[: len(names)], strict=True)}
        out["training/sps"] = sps
        out["training/walltime"] = walltime
        if self.tracker is not None:
            totals = dict(zip(episode, host[len(names) :], strict=True))
            count = totals.pop("count", 0.0)
            if count > 0:
                for name, total in totals.items():
                    self.last_episode[f"episode/{name}"] = total / count
            out.update(self.last_episode)
            out["episode/count"] = count
        self.loss_sums, self.num_loss_terms = None, 0
        return out

    def _save(self) -> str | None:
        """Writes the checkpoint of ``env_steps`` (once per step count); every rank takes part under DDP."""
        kw = self.kw
        if kw["save_checkpoint_path"] is None:
            return None
        if self.saved_at == self.env_steps:
            return ckpt.path_for(kw["save_checkpoint_path"], self.env_steps)
        self.saved_at = self.env_steps
        rng = self.generator.get_state()
        rng_states = [rng]
        env_state = self.env.state_dict() if self.obs is not None else None
        env_states = None
        if self.dist.enabled:
            rng_states = [None] * self.dist.world_size
            torch.distributed.all_gather_object(rng_states, rng, group=self.dist.group)
            # Each rank steps its own envs: all their states are saved, so every rank resumes its own. They cross
            # as NumPy arrays: the env state's tensors share memory with JAX's host buffers, which
            # all_gather_object's pickling of torch storages does not carry.
            as_numpy = (
                None if env_state is None else {k: _map_tensors(v, torch.Tensor.numpy) for k, v in env_state.items()}
            )
            env_states = [None] * self.dist.world_size
            torch.distributed.all_gather_object(env_states, as_numpy, group=self.dist.group)
            env_states = [
                None if e is None else {k: _map_tensors(v, torch.from_numpy) for k, v in e.items()} for e in env_states
            ]
        path = None
        if self.dist.is_main:
            path = self._write_checkpoint(rng_states, env_state, env_states)
        if self.dist.enabled:
            # No rank goes on until the file exists: a rank that resumes from this folder next must find it.
            torch.distributed.barrier(group=self.dist.group)
        return path

    def _write_checkpoint(self, rng_states: list, env_state: Any, env_states: list | None) -> str:
        kw = self.kw
        return ckpt.save(
            kw["save_checkpoint_path"],
            {
                "config": _run_config(kw, self.modules, self.episode_length, kw["action_repeat"], self.env_steps),
                "modules": self.modules.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "env_steps": self.env_steps,
                "rng_state": rng_states,
                "env_state": env_state,
                **({"env_states": env_states} if env_states is not None else {}),
            },
            max_to_keep=kw["max_to_keep"],
        )

    def _evaluate(self, training_metrics: Metrics) -> Metrics:
        self.modules.eval()
        metrics = self.evaluator.run(self.modules, self.kw["deterministic_eval"], self.eval_generator)
        self.modules.train()
        return {**training_metrics, **metrics}

    # ---------------------------------------------------------------- the schedule (as the JAX trainer)

    def run(self) -> tuple[Callable[..., Any], TorchPPOParams, Metrics]:
        kw = self.kw
        main = self.dist.is_main
        remaining = kw["num_timesteps"] - self.env_steps
        if remaining <= 0:
            self._save()
            return self.make_policy, params_of(self.modules), {}
        self._build_envs()

        every = None
        if kw["log_training_metrics"]:
            every = max(1, (kw["training_metrics_steps"] or 0) // self.steps_per_training_step)
        done, rest = divmod(self.env_steps, self.steps_per_training_step)
        # The whole run's plan, not the remainder's: a resumed run continues where the unbroken one would be.
        # (A count between training steps comes from another batch size: the remainder is planned on its own.)
        schedule = resume.make_schedule(
            -(-(kw["num_timesteps"] if rest == 0 else remaining) // self.steps_per_training_step),
            num_evals=kw["num_evals"],
            num_resets_per_eval=kw["num_resets_per_eval"],
            steps_between_reports=every,
            steps_done=done if rest == 0 else 0,
        )
        initial_eval = kw["num_evals"] > 1
        if self.evaluator is not None:
            self.evaluator.runs = schedule.evaluations_before_start(initial_eval)  # the unbroken run's eval seeds

        metrics: Metrics = {}
        if self.evaluator is not None and schedule.evaluates_at_start(initial_eval):
            metrics = self._evaluate({"eval/walltime": 0.0})
            self.progress_fn(self.env_steps, metrics)
        if main:  # as Brax does, once before training: the starting policy
            self.policy_params_fn(self.env_steps, self.make_policy, params_of(self.modules))

        training_metrics: Metrics = {}
        walltime = 0.0
        steps_per_call = schedule.steps_per_call
        for call in schedule.calls():
            if schedule.resets_before(call):
                reset_seed = (self.env_seed * 1_000_003 + self.env_steps) % (2**31 - 1)
                self.obs = self.env.reset(seed=reset_seed).get("observation")
            start = time.perf_counter()
            for _ in range(steps_per_call):
                self._training_step()
            done_steps = steps_per_call * self.steps_per_training_step
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            elapsed = time.perf_counter() - start
            walltime += elapsed
            self.env_steps += done_steps
            training_metrics = self._read_training_metrics(done_steps / max(elapsed, 1e-9), walltime)
            if schedule.ends_epoch(call):
                self._save()  # before any user callback: a failing one costs no work
            if kw["log_training_metrics"]:
                metrics = training_metrics
                if main:
                    self.progress_fn(self.env_steps, dict(training_metrics))
            if not schedule.ends_epoch(call):
                continue
            if main:
                self.policy_params_fn(self.env_steps, self.make_policy, params_of(self.modules))
            if self.evaluator is not None:
                metrics = self._evaluate(training_metrics)
                self.progress_fn(self.env_steps, metrics)
        return self.make_policy, params_of(self.modules), metrics


def _map_tensors(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to a tensor or array, or to each in a list."""
    return [fn(v) for v in value] if isinstance(value, list) else fn(value)


def _size_json(size: Any) -> Any:
    if isinstance(size, Mapping):
        return {k: list(v) if isinstance(v, tuple | list) else int(v) for k, v in size.items()}
    return int(size)


def _comparable(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a run configuration a resumed run must share: env, networks, episode, and the training
    hyperparameters both trainers record (``resume.RESUME_FIELDS``)."""
    training = config.get("training", {})
    return {
        **{k: config[k] for k in ("environment", "network", "episode_length", "action_repeat") if k in config},
        "training": {k: training[k] for k in resume.RESUME_FIELDS if k in training},
    }


def _run_config(
    kw: dict[str, Any], modules: PPOModules, episode_length: int, action_repeat: int, env_steps: int
) -> dict:
    """JSON-ready description of the run: network config, hyperparameters, env-step count."""
    env = kw["environment"]
    env_name = env if isinstance(env, str) else type(getattr(env, "unwrapped_env", env)).__name__
    plain = (bool, int, float, str, type(None))
    skip = ("environment", "device", "num_timesteps")
    hyper = {k: v for k, v in kw.items() if isinstance(v, plain) and k not in skip}
    for name in ("policy_hidden_layer_sizes", "value_hidden_layer_sizes"):
        hyper[name] = list(kw[name])
    return {
        "format": ckpt.FORMAT,
        "environment": env_name,
        "network": modules.config(),
        "episode_length": int(episode_length),
        "action_repeat": int(action_repeat),
        "env_steps": int(env_steps),
        "training": hyper,
    }
