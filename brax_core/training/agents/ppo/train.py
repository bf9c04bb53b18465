"""Proximal policy optimisation training (``brax.training.agents.ppo.train`` counterpart).

See: https://arxiv.org/pdf/1707.06347.pdf

Same argument names, meanings and defaults as Brax's ``train``, plus what Brax lacks: exact resume from complete
checkpoints, an env-step count that never wraps, training metrics without evaluation, randomisation without a
separate eval env, and any activation in saved networks. The hyperparameters are checked by building a
``PPOConfig`` (``config.py``), the schema the torch trainer and the command line share, so all three accept the
same values and word their refusals alike.

Layout of one run: the environments are data-parallel over a one-axis device mesh (``shard_map``); every
device steps its share of the envs, gradients and the observation normaliser are averaged across devices, and
the parameters are replicated. (The env code's scans start from unvarying constants, so ``shard_map`` runs
with ``check_vma=False``; every replicated output is the result of a cross-device mean or sum, and a
two-device test checks that the devices' copies agree.) One compiled call runs a whole epoch (or, with
``log_training_metrics``, one metrics interval) of training steps; the host only sees its results.

Reading order: ``train`` is Brax's flow as a sequence of named steps. ``_validated_arguments`` checks every
argument before anything compiles; ``_make_training_env``, ``_make_networks`` and ``_init_training_state`` build the
envs, the networks and the optimiser state; ``_start_from_params`` and ``_restore_training`` restore;
``_make_training_step`` (collect unrolls) and ``make_ppo_update`` (normaliser and SGD on them) are the algorithm;
``_make_training_fn``, ``_make_reset_fn`` and ``_make_eval_run`` put them on the device mesh; ``resume.make_schedule``
splits the whole run into compiled calls, which compile side by side; the loop at the end of ``train`` runs an epoch
of them (``_train_epoch``, which saves a checkpoint at its end), then evaluates and reports.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from brax_core import compile as compile_options
from brax_core import envs, program_cache
from brax_core.envs import training as env_training
from brax_core.envs.base import Env
from brax_core.training import acting, gradients, resume, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import checkpoint, networks_vision
from brax_core.training.agents.ppo import losses as ppo_losses
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import optimizer as ppo_optimizer
from brax_core.training.agents.ppo.config import PPOConfig
from brax_core.training.agents.ppo.networks import PPOTrainingParams
from brax_core.training.validation import boolean as _bool
from brax_core.training.validation import callable_arg as _callable
from brax_core.training.validation import positive_int as _positive_int

_AXIS = "i"
_TWO_32 = 1 << 32

__all__ = ["PPOTrainingParams", "TrainingState", "make_ppo_update", "train"]


@flax.struct.dataclass
class TrainingState:
    """Contains training state for the learner.

    ``env_steps`` is the env-step count as a ``uint32`` pair ``(high, low)`` so it is exact past 2**32 without
    64-bit JAX; ``training_step`` counts training steps and, folded into the run key, gives every step its own
    random key whatever the epoch boundaries (which is what makes a resumed run identical to an unbroken one).
    """

    optimizer_state: optax.OptState
    params: ppo_losses.PPONetworkParams
    normalizer_params: running_statistics.RunningStatisticsState
    env_steps: jax.Array
    training_step: jax.Array


def steps_to_pair(n: int) -> np.ndarray:
    """An exact non-negative step count as a ``uint32`` pair ``(high, low)``."""
    if n < 0 or n >= _TWO_32 * _TWO_32:
        raise ValueError(f"step count {n} is outside [0, 2**64)")
    return np.array([n >> 32, n & (_TWO_32 - 1)], np.uint32)


def pair_to_steps(pair: Any) -> int:
    high, low = (int(v) for v in np.asarray(pair, np.uint64))
    return (high << 32) + low


def _add_steps(pair: jax.Array, n: int) -> jax.Array:
    """``pair + n`` with the carry from the low word into the high word (``n < 2**32``)."""
    low = pair[1] + jnp.uint32(n)
    carry = (low < pair[1]).astype(jnp.uint32)
    return jnp.stack([pair[0] + carry, low])


# ---------------------------------------------------------------------------------------------- validation


def _compiler_options(
    devices: list[jax.Device], env_steps_to_run: int, environment: Any = None
) -> dict[str, Any] | None:
    """Short CPU runs are dominated by compiling, so they compile at LLVM level 0, longer ones at level 1; "short"
    depends on whether the environment's model has contacts (``compile.auto_level_for_run``;
    ``BRAX_CORE_CPU_OPT_LEVEL`` overrides)."""
    model = getattr(getattr(environment, "unwrapped", environment), "mj_model", None)
    auto_level = compile_options.auto_level_for_run(env_steps_to_run, model)
    return compile_options.compiler_options(devices[0].platform, auto_level)


class _Programs:
    """The run's reset, training and evaluation programs through ``brax_core.program_cache``: a later run of the same
    configuration lowers them from disk instead of tracing them (MJX under ``vmap``: seconds of Python per program).

    The programs are functions of ``train``'s arguments (environment, hyperparameters, network factory, wrappers,
    devices, resume point) and of the code of the packages the cache key covers, so those arguments make up their
    description; a run with user code among them (a user's env class, randomisation or wrapper function, network
    factory) or over several processes traces as usual.
    """

    def __init__(self, args: _Arguments):
        self.description: dict[str, Any] | None = None
        self.platform = args.devices[0].platform
        if program_cache.folder() is None or jax.process_count() > 1:
            return
        hp = dataclasses.asdict(args.hp)
        if args.randomization_fn is None:
            # The seed reaches the programs only through the randomised models; otherwise its keys are arguments,
            # so every seed of a configuration shares its programs.
            hp.pop("seed")
        try:
            self.description = dict(
                owner="brax_core.training.agents.ppo.train",
                hp=program_cache.describe(hp),
                environment=program_cache.describe(args.environment),
                eval_env=program_cache.describe(args.eval_env),
                wrap_env=program_cache.describe(args.wrap_env),
                randomization_fn=program_cache.describe(args.randomization_fn),
                network_factory=program_cache.describe(args.network_factory),
                devices=program_cache.describe(args.devices),
                evaluate=args.evaluate,
                vision=args.vision,
                augment_pixels=args.augment_pixels,
                restore_value_fn=args.restore_value_fn,
                restore_params=args.restore_params is not None,
                env_steps_restored=args.env_steps_restored,
            )
        except TypeError as reason:
            logging.info("programs traced each run: %s", reason)

    def jit(self, name: str, base: functools.partial) -> functools.partial:
        """``base`` (a ``jax.jit`` partial) for the program ``name``: same keywords, so callers read its options."""
        return functools.partial(self._program, name, **base.keywords)

    def _program(self, name: str, fn: Callable[..., Any], **jit_kwargs: Any) -> Any:
        make_jit = functools.partial(jax.jit, **jit_kwargs)
        if self.description is None:
            return make_jit(fn)
        return _CachedProgram(fn, make_jit, {**self.description, "program": name}, self.platform)


class _CachedProgram:
    """A jitted program found through ``program_cache`` at its first use (``eval_shape``, ``lower`` or a call), when
    its arguments are known."""

    def __init__(self, fn: Callable[..., Any], make_jit: Callable[..., Any], description: dict, platform: str):
        self._fn, self._make_jit, self._description, self._platform = fn, make_jit, description, platform
        self._jitted: Any = None

    def _resolve(self, args: tuple[Any, ...]) -> Any:
        if self._jitted is None:
            self._jitted, from_disk = program_cache.cached(
                self._fn, self._make_jit, args, self._description, self._platform
            )
            logging.info("program %s %s", self._description["program"], "from disk" if from_disk else "traced")
        return self._jitted

    def eval_shape(self, *args: Any) -> Any:
        return self._resolve(args).eval_shape(*args)

    def lower(self, *args: Any) -> Any:
        return self._resolve(args).lower(*args)

    def __call__(self, *args: Any) -> Any:
        return self._resolve(args)(*args)


def _devices(max_devices_per_host: int | None) -> list[jax.Device]:
    """The devices to train on: up to ``max_devices_per_host`` of each process's local devices.

    A default device set with ``jax.default_device`` places the run, as it places any other JAX computation: a
    device means that device alone, a platform name (``"cpu"``) that platform's devices. Brax ignores it and trains
    on the default backend's devices, so ``--device cpu`` on a GPU machine would still train on the GPU.
    """
    default = jax.config.jax_default_device
    if isinstance(default, jax.Device):
        return [default]
    per_process: dict[int, list[jax.Device]] = {}
    for d in jax.devices(default) if default else jax.devices():
        per_process.setdefault(d.process_index, []).append(d)
    chosen = []
    for index in sorted(per_process):
        local = per_process[index]
        chosen.extend(local if max_devices_per_host is None else local[:max_devices_per_host])
    return chosen


class _SaveFirst:
    """What a failing user callback calls before its exception propagates: ``save`` (set once there is a run to
    save) saves the run as it stands and returns where, or ``None`` without a checkpoint path."""

    def __init__(self) -> None:
        self.save: Callable[[], str | None] = lambda: None

    def __call__(self) -> str | None:
        return self.save()


@dataclasses.dataclass(frozen=True)
class _Arguments:
    """``train``'s arguments once checked: the hyperparameters as the schema validated them, and how to run."""

    hp: PPOConfig
    environment: Env
    eval_env: Env | None
    wrap_env: bool | Callable[..., Env]
    randomization_fn: Callable[..., Any] | None
    network_factory: Callable[..., ppo_networks.PPONetworks]
    progress_fn: Callable[[int, Mapping[str, Any]], None]
    policy_params_fn: Callable[..., None]
    save_first: _SaveFirst
    allow_config_changes: bool | tuple[str, ...]
    devices: list[jax.Device]
    evaluate: bool
    vision: bool
    augment_pixels: bool
    restore_params: PPOTrainingParams | None
    restore_value_fn: bool
    restore_checkpoint_path: str | None
    env_steps_restored: int
    save_checkpoint_path: str | os.PathLike | None

    @property
    def env_options(self) -> dict[str, Any]:
        """The keyword arguments of ``_wrap_for`` shared by the training and the evaluation envs."""
        hp = self.hp
        return dict(
            wrap_env=self.wrap_env,
            episode_length=hp.episode_length,
            action_repeat=hp.action_repeat,
            randomization_fn=self.randomization_fn,
        )


def _validated_arguments(arguments: Mapping[str, Any]) -> _Arguments:
    """``train``'s keyword arguments, checked in one place before anything compiles (errors name the argument)."""
    environment = arguments["environment"]
    if not (isinstance(environment, str) or envs.is_env(environment)):
        raise TypeError(
            "environment must be a brax_core Env, a MuJoCo Playground MjxEnv or a registered environment name "
            f"('playground:<task>' too), got {environment!r}"
        )
    environment = envs.as_env(environment)
    episode_length = arguments["episode_length"]
    if episode_length is None:
        episode_length = int(getattr(environment.unwrapped, "default_episode_length", 1000))
    # The schema holds every hyperparameter train shares with the torch trainer and the command line.
    schema_fields = {field.name for field in dataclasses.fields(PPOConfig)}
    hp = PPOConfig(**{**{k: v for k, v in arguments.items() if k in schema_fields}, "episode_length": episode_length})
    run_evals = _bool("run_evals", arguments["run_evals"])
    max_devices_per_host = arguments["max_devices_per_host"]
    if max_devices_per_host is not None:
        max_devices_per_host = _positive_int("max_devices_per_host", max_devices_per_host)
    restore_value_fn = _bool("restore_value_fn", arguments["restore_value_fn"])
    # Not schema fields: like run_evals they say how to run, and the command line has no image environments.
    vision, augment_pixels = _bool("vision", arguments["vision"]), _bool("augment_pixels", arguments["augment_pixels"])
    if vision and hp.action_repeat != 1:
        # Brax's rule: repeated actions would render frames no policy sees; a pixel env repeats physics itself.
        raise ValueError(
            f"vision=True needs action_repeat=1 (got {hp.action_repeat}); repeat physics steps inside the env instead"
        )
    madrona_backend = arguments["madrona_backend"]
    if madrona_backend is not False:
        raise ValueError(f"madrona_backend must be False: brax_core has no batch renderer, got {madrona_backend!r}")
    # Checked now; on failure they save the run first (what to save is known once there is a run).
    save_first = _SaveFirst()
    progress_fn = resume.user_callback(
        "progress_fn", _callable("progress_fn", arguments["progress_fn"]), "(num_steps, metrics)", save_first
    )
    policy_params_fn = resume.user_callback(
        "policy_params_fn",
        _callable("policy_params_fn", arguments["policy_params_fn"]),
        "(current_step, make_policy, params)",
        save_first,
    )
    allow_config_changes = resume.check_allow("allow_config_changes", arguments["allow_config_changes"])
    network_factory = _checked_network_factory(arguments["network_factory"], hp.use_distributional_critic)
    randomization_fn = arguments["randomization_fn"]
    if randomization_fn is not None:
        _callable("randomization_fn", randomization_fn)
    eval_env = arguments["eval_env"]
    if eval_env is not None:
        if not envs.is_env(eval_env):
            raise TypeError(f"eval_env must be a brax_core Env, a MuJoCo Playground MjxEnv or None, got {eval_env!r}")
        eval_env = envs.as_env(eval_env)
    wrap_env = _checked_wrap_env(arguments["wrap_env"], arguments["wrap_env_fn"])
    devices = _devices(max_devices_per_host)
    evaluate = hp.num_evals > 0 and run_evals
    _check_device_split(hp, len(devices), evaluate)
    restore_params = arguments["restore_params"]
    if restore_params is not None:
        restore_params = PPOTrainingParams(*_three_params(restore_params))
    save_checkpoint_path = arguments["save_checkpoint_path"]
    if save_checkpoint_path is not None and not isinstance(save_checkpoint_path, str | os.PathLike):
        raise TypeError(f"save_checkpoint_path must be a path, got {save_checkpoint_path!r}")
    restore_checkpoint_path = arguments["restore_checkpoint_path"]
    if restore_checkpoint_path is not None:
        restore_checkpoint_path = checkpoint.resolve(restore_checkpoint_path)
    env_steps_restored = (
        int(checkpoint.load_config_json(restore_checkpoint_path)["env_steps"]) if restore_checkpoint_path else 0
    )
    return _Arguments(
        hp=hp,
        environment=environment,
        eval_env=eval_env,
        wrap_env=wrap_env,
        randomization_fn=randomization_fn,
        network_factory=network_factory,
        progress_fn=progress_fn,
        policy_params_fn=policy_params_fn,
        save_first=save_first,
        allow_config_changes=allow_config_changes,
        devices=devices,
        evaluate=evaluate,
        vision=vision,
        augment_pixels=augment_pixels,
        restore_params=restore_params,
        restore_value_fn=restore_value_fn,
        restore_checkpoint_path=restore_checkpoint_path,
        env_steps_restored=env_steps_restored,
        save_checkpoint_path=save_checkpoint_path,
    )


def _checked_network_factory(
    network_factory: Any, use_distributional_critic: bool
) -> Callable[..., ppo_networks.PPONetworks]:
    """``network_factory``, checked against ``use_distributional_critic`` and bound to it when it is set."""
    network_factory = _callable("network_factory", network_factory)
    in_factory = (getattr(network_factory, "keywords", None) or {}).get("use_distributional_critic")
    if in_factory is not None and bool(in_factory) != use_distributional_critic:
        raise ValueError(
            f"network_factory sets use_distributional_critic={in_factory!r} but train has "
            f"use_distributional_critic={use_distributional_critic!r}; they must agree"
        )
    if use_distributional_critic:
        # The value network must output quantiles; binding it here also records it in saved network configs.
        network_factory = functools.partial(network_factory, use_distributional_critic=True)
    return network_factory


def _checked_wrap_env(wrap_env: Any, wrap_env_fn: Any) -> bool | Callable[..., Env]:
    """The wrapper to apply: ``True``, ``False`` or a callable (Brax's ``wrap_env_fn`` wins over ``wrap_env``)."""
    if wrap_env_fn is not None:
        wrap_env = _callable("wrap_env_fn", wrap_env_fn)
    if envs.playground.is_playground_training_wrapper(wrap_env):
        wrap_env = True  # brax_core's own wrappers do what Playground's do, on the State PlaygroundEnv returns
    if not (isinstance(wrap_env, bool) or callable(wrap_env)):
        raise ValueError(f"wrap_env must be True, False or a wrapper callable, got {wrap_env!r}")
    return wrap_env


def _check_device_split(hp: PPOConfig, device_count: int, evaluate: bool) -> None:
    """Refuses env and batch counts that the training devices cannot share equally."""
    if hp.num_envs % device_count != 0:
        raise ValueError(f"num_envs ({hp.num_envs}) must be divisible by the number of devices ({device_count})")
    if hp.batch_size % device_count != 0:
        raise ValueError(f"batch_size ({hp.batch_size}) must be divisible by the number of devices ({device_count})")
    if evaluate and hp.num_eval_envs % device_count != 0:
        raise ValueError(
            f"num_eval_envs ({hp.num_eval_envs}) must be divisible by the number of devices ({device_count})"
        )


def _three_params(params: Any) -> tuple[Any, Any, Any]:
    """``restore_params`` as ``(normalizer_params, policy_params, value_params)``."""
    if any(type(leaf).__module__.split(".")[0] == "torch" for leaf in jax.tree.leaves(params)):
        raise TypeError(
            "restore_params holds torch tensors (torch_ppo's parameters?): convert them first with "
            "torch_ppo.policy_transfer.torch_params_to_jax(params)"
        )
    if all(hasattr(params, f) for f in PPOTrainingParams._fields):
        return params.normalizer_params, params.policy_params, params.value_params
    if isinstance(params, tuple | list) and len(params) == 3:
        return tuple(params)
    raise TypeError(
        "restore_params must be PPOTrainingParams(normalizer_params, policy_params, value_params) or a "
        f"(normalizer_params, policy_params, value_params) tuple, got {type(params).__name__}"
    )


# ---------------------------------------------------------------------------------------------- environments


def _wrap_for(
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


def _make_reset_fn(env: Env, mesh: Mesh, local_envs: int, jit: Callable[..., Any]) -> Any:
    """The jitted reset of every device's ``local_envs`` envs, each device from its own keys."""

    def per_device_reset(key: jax.Array):
        key = jax.random.fold_in(key, jax.lax.axis_index(_AXIS))
        return env.reset(jax.random.split(key, local_envs))

    return jit(jax.shard_map(per_device_reset, mesh=mesh, in_specs=P(), out_specs=P(_AXIS), check_vma=False))


def _observation_size(environment: Env, batched_obs: Any | None) -> Any:
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


# ------------------------------------------------------------------------------------------------- train


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
    progress_fn: Callable[[int, Mapping[str, Any]], None] = lambda *args: None,
    policy_params_fn: Callable[..., None] = lambda *args: None,
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
    """PPO training.

    Args:
      environment: the environment to train: an ``Env``, a MuJoCo Playground ``MjxEnv`` (wrapped in
        ``brax_core.envs.playground.PlaygroundEnv``) or a registered name (``"playground:CheetahRun"`` too).
      num_timesteps: the total number of environment steps to train for. A run restored from a checkpoint
        counts from the checkpoint's step count, so re-running the same command resumes where it stopped;
        ``0`` only builds (and restores) the networks.
      max_devices_per_host: maximum number of local devices to train on (default: all).
      wrap_env: ``True`` wraps ``environment`` for training with ``brax_core.envs.training.wrap``; ``False`` uses
        it as it is (it must already be batched and auto-resetting); a callable is used as the wrapper, called
        like Brax's ``wrap_env_fn(env, episode_length=, action_repeat=, randomization_fn=)``. MuJoCo Playground's
        ``wrapper.wrap_for_brax_training`` is accepted and means ``True`` (brax_core's wrappers, for Playground's
        envs too).
      wrap_env_fn: Brax's name for a wrapper callable (same as passing it as ``wrap_env``).
      episode_length: the length of an environment episode (default: the env's ``default_episode_length``, else
        1000).
      action_repeat: the number of timesteps to repeat an action.
      num_envs: the number of parallel environments (across all devices).
      num_eval_envs: the number of environments for evaluation.
      learning_rate: Adam learning rate.
      entropy_cost: entropy bonus weight.
      discounting: discount γ.
      seed: random seed.
      unroll_length: the number of timesteps to unroll in each environment; the PPO loss uses unrolls of this
        length.
      batch_size: the batch size (in unrolls) of each minibatch SGD step.
      num_minibatches: minibatches per pass over a batch; one training step collects
        ``batch_size * num_minibatches`` unrolls.
      num_updates_per_batch: passes over each collected batch.
      num_resets_per_eval: environment resets between evaluations (0: never reset).
      normalize_observations: keep a running mean/std of observations and normalise network inputs.
      normalize_observations_std_eps: added to the variance under the square root of the normaliser's std.
      normalize_observations_mode: ``'welford'`` or ``'ema'``, the running-statistics algorithm (see
        ``brax_core.training.acme.running_statistics``).
      normalize_until_count: freeze the observation statistics once a batch would take their count past this many
        observations (``None``: never). Brax 0.14.2 honours it only in ``'ema'`` mode; here in both.
      reward_scaling: rewards are multiplied by this in the loss.
      clipping_epsilon: PPO ratio clip.
      clipping_epsilon_value: clipped value loss: the larger of ``(vs − V)²`` and ``(vs − V_clipped)²`` with
        ``V_clipped = V_old + clip(V − V_old, ±clipping_epsilon_value)`` around the values at collection time
        (``None``: plain value loss). With ``use_distributional_critic``, the quantile Huber loss's kappa instead.
      gae_lambda: GAE λ.
      max_grad_norm: clip gradients to this global norm (``None``: no clipping).
      normalize_advantage: standardise advantages per minibatch.
      vf_loss_coefficient: value loss weight; the value loss is ``mean((vs − V)²) · 0.5 · vf_loss_coefficient``.
      bootstrap_on_timeout: bootstrap time-limit steps from the true final observation instead of dropping them.
      use_distributional_critic: a quantile critic (see ``losses.compute_ppo_loss``); it needs
        ``clipping_epsilon_value``. The networks are built with ``use_distributional_critic=True`` (Brax also
        requires it of the ``network_factory``; here a factory saying otherwise is refused).
      desired_kl: the KL divergence the ``ADAPTIVE_KL`` schedule aims at.
      learning_rate_schedule: ``None`` (or ``'NONE'``): constant ``learning_rate``; ``'ADAPTIVE_KL'`` (or Brax's
        ``LRSchedule`` enum): the learning rate starts at ``learning_rate`` and changes at every minibatch with the
        mean ``KL(behaviour || current)`` over the devices (``optimizer.adapt_learning_rate``); the observation
        statistics are then updated after a batch's SGD instead of before it, so the behaviour policy's
        distribution is the current policy's before the first update. Reports ``training/learning_rate`` and
        ``training/kl_mean``.
      learning_rate_schedule_min_lr: the ``ADAPTIVE_KL`` schedule's lowest learning rate.
      learning_rate_schedule_max_lr: the ``ADAPTIVE_KL`` schedule's highest learning rate.
      network_factory: builds the PPO networks (``make_ppo_networks`` or a ``functools.partial`` of it).
      use_pmap_on_reset: accepted for Brax compatibility (where ``False`` resets a single device with
        ``jit(vmap)`` instead of ``pmap``); resets here always run as one compiled ``shard_map`` call over the
        training devices, which is what both choices compute, so the value changes nothing.
      progress_fn: ``progress_fn(num_steps: int, metrics: dict[str, float])`` at every evaluation and, with
        ``log_training_metrics``, every ``training_metrics_steps`` env steps. A callable that cannot take these two
        arguments is refused before anything runs. User callbacks run after the checkpoint of their step is
        saved (with ``save_checkpoint_path``; a callback raising between two evaluations first has the run saved at
        its step), and their exceptions propagate with a note naming the callback and the checkpoint.
      policy_params_fn: ``policy_params_fn(current_step, make_policy, params)`` once before training (at the
        step the run starts from, as Brax does) and after every epoch, with params that ``make_policy`` accepts.
        They are the callback's own copies: training goes on in buffers it reuses, and a kept policy stays valid.
      randomization_fn: Brax's ``randomization_fn(sys, rng) -> (batched_sys, in_axes)``; ``rng`` is bound to one
        key per environment of a device. The eval env gets its own keys.
      deterministic_eval: evaluate with the mode of the policy.
      num_evals: the number of evaluations (the first one before training when ``num_evals > 1``; ``0`` builds
        no eval env).
      eval_env: an environment for evaluation, used as it is (never randomised); default: ``environment``.
      log_training_metrics: stream training metrics (episode returns and lengths from the training envs, losses,
        approximate KL, ``training/sps``) to ``progress_fn``.
      training_metrics_steps: env steps between training-metrics reports (default: every training step).
      save_checkpoint_path: directory for checkpoints, written after every epoch and at the end.
      restore_checkpoint_path: a checkpoint (or a ``save_checkpoint_path``, for its newest) to resume from. Its
        saved configuration (network sizes and options, observation normalisation, training hyperparameters) must
        equal this call's: differing fields are refused, all listed, unless named in ``allow_config_changes``.
        Resumed with the same ``num_timesteps``, ``num_evals``, ``num_resets_per_eval`` and
        ``training_metrics_steps`` as the run that saved it, the run continues that run's schedule: the same
        evaluation points (an evaluation point it resumes at is evaluated again), the same final step count and
        the same parameters as an unbroken run (up to float32 reassociation, within 1e-5).
      restore_params: ``PPOTrainingParams`` (or ``(normalizer, policy, value)``) to start from.
      restore_value_fn: with ``restore_params``, also take the value parameters.
      max_to_keep: the most checkpoints kept in ``save_checkpoint_path`` (``None``: all).
      run_evals: ``False`` skips evaluation runs (evaluation points still report training metrics, call
        ``policy_params_fn`` and save checkpoints).
      madrona_backend: accepted for Brax compatibility; only ``False`` (no batch renderer here).
      augment_pixels: shift every image view (dict observation keys starting with ``pixels/``) of each collected
        unroll by a random offset of up to 4 pixels (edges repeated) before every pass of SGD, one offset per unroll
        and view; the observation must have image views.
      vision: the environment has image observations (dict observations with ``pixels/`` keys, for networks such as
        ``networks_vision.make_ppo_networks_vision``); requires ``action_repeat == 1`` as in Brax (a renderer should
        repeat physics steps itself, not render frames nobody sees). Whatever this flag, the observation normaliser
        keeps statistics of the non-image keys only.
      allow_config_changes: field names (e.g. ``("learning_rate",)``) that may differ from the configuration of
        the checkpoint ``restore_checkpoint_path`` names, or ``True`` for any; observation and action sizes never.

    Returns:
      ``(make_policy, params, metrics)``: the inference function factory, ``PPOTrainingParams`` and the last
      metrics reported.
    """
    args = _validated_arguments(locals())  # first statement: locals() holds exactly train's arguments
    hp = args.hp
    remaining = hp.num_timesteps - args.env_steps_restored
    mesh = Mesh(np.asarray(args.devices), (_AXIS,))
    jit = functools.partial(jax.jit, compiler_options=_compiler_options(args.devices, remaining, args.environment))
    programs = _Programs(args)
    replicated = NamedSharding(mesh, P())
    optimizer = ppo_optimizer.make_optimizer(hp.learning_rate, hp.max_grad_norm, hp.learning_rate_schedule)
    key = jax.random.PRNGKey(hp.seed)
    key_init, key_run, key_env, key_eval, key_randomize = jax.random.split(key, 5)
    # One global array over the mesh, as every saved array must be when several processes write one checkpoint.
    key_run = jax.jit(lambda k: k, out_shardings=replicated)(key_run)

    # ---- environments. Built before the networks so that the observation size comes from the reset the
    # trainer traces anyway: a separate probe would trace the env's reset (MJX forward dynamics) once more.
    env, reset_fn, abstract_env_state = _make_training_env(args, remaining, key_randomize, key_env, mesh, programs)

    # ---- networks, their (checkpoint) configuration, a resumed run's check against it, and the optimiser
    ppo_network, obs_size, config = _make_networks(args, abstract_env_state)
    make_policy = ppo_networks.make_inference_fn(ppo_network)  # the callbacks' and the caller's
    # The rollouts' and evaluations' own: without the distribution parameters, which no unroll needs to carry.
    acting_policy = ppo_networks._inference_fn(ppo_network, False, False, with_distribution=False)
    if args.restore_checkpoint_path is not None:
        checkpoint.check_resume_config(args.restore_checkpoint_path, config, args.allow_config_changes)
    training_state = _init_training_state(ppo_network, optimizer, obs_size, key_init, jit, replicated)

    # ---- restore: parameters to start from, then a checkpoint to resume
    if args.restore_params is not None:
        training_state = _start_from_params(args, training_state, ppo_network, obs_size, optimizer, jit, replicated)
    env_steps = 0
    if args.restore_checkpoint_path is not None:
        training_state, key_run, env_steps = _restore_training(args.restore_checkpoint_path, training_state, key_run)
    checkpoints = _Checkpoints(args, config, key_run, env_steps)
    args.save_first.save = checkpoints.save_latest

    if remaining <= 0:
        if hp.num_timesteps > 0 and args.restore_checkpoint_path is not None:
            logging.info(
                "checkpoint is at %d env steps, num_timesteps is %d: nothing to train", env_steps, hp.num_timesteps
            )
        checkpoints.save(training_state, env_steps, None)
        checkpoints.close()
        return make_policy, _current_params(training_state), {}

    # ---- the compiled functions: training steps (collect unrolls, then the PPO update), reset, evaluation
    env_steps_per_training_step = hp.batch_size * hp.unroll_length * hp.num_minibatches * hp.action_repeat
    training_step = _make_training_step(
        env,
        acting_policy,
        _make_update(args, ppo_network, optimizer),
        unroll_length=hp.unroll_length,
        num_unrolls=hp.batch_size * hp.num_minibatches // hp.num_envs,
        extra_fields=("truncation", "episode_metrics", "episode_done") if hp.log_training_metrics else ("truncation",),
        log_training_metrics=hp.log_training_metrics,
        env_steps_per_training_step=env_steps_per_training_step,
    )
    eval_env, eval_run = _make_evaluation(args, acting_policy, key_randomize, mesh, programs.jit("evaluation", jit))
    schedule = _make_schedule(hp, env_steps, env_steps_per_training_step)
    training_jit = programs.jit(f"training/{schedule.steps_per_call}", jit)  # steps per call: part of the program
    training_fn = _make_training_fn(training_step, schedule.steps_per_call, mesh, training_jit)

    # ---- compile: reset, training and evaluation are traced here and compiled side by side (XLA compiles
    # without the GIL)
    jobs = [(reset_fn, (key_env,)), (training_fn, (training_state, _sharded(abstract_env_state, mesh), key_run))]
    if eval_run is not None:
        jobs.append((eval_run, (_current_params(training_state), key_eval)))
    compiled = _compile_in_parallel(jobs)
    reset_fn, training_fn = compiled[0], compiled[1]

    env_state = reset_fn(key_env)
    if args.restore_checkpoint_path is not None:
        env_state = checkpoint.restore_env_state(args.restore_checkpoint_path, env_state) or env_state
    checkpoints.track(training_state, env_state, env_steps)
    initial_evaluation = hp.num_evals > 1
    evaluator = None
    if args.evaluate:
        skipped = schedule.evaluations_before_start(initial_evaluation)
        evaluator = _make_evaluator(args, eval_env, acting_policy, key_eval, compiled[2], skipped)

    # ---- the outer loop: an epoch of training (saved at its end), then report and evaluate
    metrics: dict[str, float] = {}
    start = time.time()
    counters = _Counters(env_steps)
    if evaluator is not None and schedule.evaluates_at_start(initial_evaluation):
        initial = _current_params(training_state)
        metrics = _evaluate(evaluator, initial, {"eval/walltime": 0.0}, args.progress_fn, env_steps)

    args.policy_params_fn(counters.env_steps, make_policy, _copied(_current_params(training_state)))
    report = args.progress_fn if hp.log_training_metrics else None  # training metrics as they come
    for calls in _epochs(schedule):
        training_state, env_state, training_metrics = _train_epoch(
            training_fn,
            reset_fn,
            training_state,
            env_state,
            key_run,
            key_env,
            schedule,
            calls,
            schedule.steps_per_call * env_steps_per_training_step,
            counters,
            checkpoints,
            report,
        )
        if hp.log_training_metrics:
            metrics = training_metrics
        params = _current_params(training_state)
        args.policy_params_fn(counters.env_steps, make_policy, _copied(params))
        if evaluator is not None:
            metrics = _evaluate(evaluator, params, training_metrics, args.progress_fn, counters.env_steps)
        elif hp.num_evals > 0 and not hp.log_training_metrics:
            metrics = training_metrics
            args.progress_fn(counters.env_steps, dict(metrics))

    logging.info("total steps: %s, wall time %.1f s", counters.env_steps, time.time() - start)
    checkpoints.close()
    return make_policy, _current_params(training_state), metrics


# ------------------------------------------------------------------------------------------ the steps of train


def _make_training_env(
    args: _Arguments, remaining: int, key_randomize: jax.Array, key_env: jax.Array, mesh: Mesh, programs: _Programs
) -> tuple[Env | None, Any, Any]:
    """One device's training envs, their jitted reset and its abstract output (``None``s with nothing to train)."""
    if remaining <= 0:
        return None, None, None
    local_envs = args.hp.num_envs // len(args.devices)
    env = _wrap_for(args.environment, local_envs, key_randomize, **args.env_options)
    reset_options = compile_options.reset_compiler_options(args.devices[0].platform)
    reset_jit = programs.jit("reset", functools.partial(jax.jit, compiler_options=reset_options))
    reset_fn = _make_reset_fn(env, mesh, local_envs, reset_jit)
    return env, reset_fn, reset_fn.eval_shape(key_env)


def _make_networks(
    args: _Arguments, abstract_env_state: Any | None
) -> tuple[ppo_networks.PPONetworks, Any, dict[str, Any] | None]:
    """The PPO networks, the observation size they take and, for a run that saves or resumes, its checkpoint
    config."""
    batched_obs = abstract_env_state.obs if args.wrap_env is True and abstract_env_state is not None else None
    obs_size = _observation_size(args.environment, batched_obs)
    action_size = args.environment.action_size
    if (args.vision or args.augment_pixels) and not networks_vision.has_pixels(obs_size):
        flag = "vision=True" if args.vision else "augment_pixels=True"
        raise ValueError(
            f"{flag} needs dict observations with image views (keys starting with 'pixels/'); the environment's "
            f"observation_size is {obs_size!r}"
        )
    normalize = args.hp.normalize_observations
    preprocess = running_statistics.normalize if normalize else types.identity_observation_preprocessor
    ppo_network = args.network_factory(obs_size, action_size, preprocess_observations_fn=preprocess)
    if args.evaluate and args.eval_env is not None:
        checkpoint.check_observation_size("eval_env", args.eval_env.observation_size, obs_size)
    config = None
    if args.save_checkpoint_path is not None or args.restore_checkpoint_path is not None:
        # Only a run that saves needs every network argument to be nameable in JSON.
        config = checkpoint.run_config(
            obs_size, action_size, normalize, args.network_factory, args.hp, required=args.save_checkpoint_path
        )
    return ppo_network, obs_size, config


def _init_training_state(
    ppo_network: ppo_networks.PPONetworks,
    optimizer: optax.GradientTransformation,
    obs_size: Any,
    key: jax.Array,
    jit: Callable[..., Any],
    replicated: NamedSharding,
) -> TrainingState:
    """Fresh parameters, optimiser state and observation statistics, replicated over the devices."""
    if isinstance(obs_size, Mapping):
        # Image views get no running statistics (Brax's layout: networks normalise state keys only).
        obs_template: Any = {
            k: jax.ShapeDtypeStruct(tuple(v) if not isinstance(v, int) else (v,), jnp.float32)
            for k, v in networks_vision.remove_pixels(obs_size).items()
        }
    else:
        obs_template = jax.ShapeDtypeStruct((int(obs_size),), jnp.float32)

    def init(key: jax.Array) -> TrainingState:
        key_policy, key_value = jax.random.split(key)
        params = ppo_losses.PPONetworkParams(
            policy=ppo_network.policy_network.init(key_policy), value=ppo_network.value_network.init(key_value)
        )
        return TrainingState(
            optimizer_state=optimizer.init(params),
            params=params,
            normalizer_params=running_statistics.init_state(obs_template),
            env_steps=jnp.zeros((2,), jnp.uint32),
            training_step=jnp.zeros((), jnp.int32),
        )

    return jit(init, out_shardings=replicated)(key)


def _start_from_params(
    args: _Arguments,
    training_state: TrainingState,
    ppo_network: ppo_networks.PPONetworks,
    obs_size: Any,
    optimizer: optax.GradientTransformation,
    jit: Callable[..., Any],
    replicated: NamedSharding,
) -> TrainingState:
    """``training_state`` starting from ``restore_params`` (its value parameters only with ``restore_value_fn``),
    once they are checked to fit the networks."""
    restore_params = args.restore_params
    target = checkpoint.abstract_params(ppo_network, obs_size)
    checkpoint.check_params_fit("restore_params", restore_params, target, args.restore_value_fn)
    value = restore_params.value_params if args.restore_value_fn else training_state.params.value
    params = ppo_losses.PPONetworkParams(policy=restore_params.policy_params, value=value)
    normalizer = restore_params.normalizer_params
    if isinstance(normalizer, running_statistics.RunningStatisticsState):
        # The run's normalize_observations_std_eps applies; a loaded state's setting would only retrace.
        normalizer = normalizer.replace(std_eps=training_state.normalizer_params.std_eps)
    return training_state.replace(
        params=jax.device_put(params, replicated),
        normalizer_params=jax.device_put(normalizer, replicated),
        optimizer_state=jit(optimizer.init, out_shardings=replicated)(params),
    )


def _restore_training(
    path: str, training_state: TrainingState, key_run: jax.Array
) -> tuple[TrainingState, jax.Array, int]:
    """Loads the complete training state saved at ``path`` into the shardings of ``training_state``."""
    config = checkpoint.load_config_json(path)
    params_target = PPOTrainingParams(
        training_state.normalizer_params, training_state.params.policy, training_state.params.value
    )
    params = checkpoint.restore_item(path, "params", params_target)
    state_target = {
        "optimizer_state": training_state.optimizer_state,
        "env_steps": training_state.env_steps,
        "training_step": training_state.training_step,
        "key": key_run,
    }
    state = checkpoint.restore_item(path, "state", state_target)
    env_steps = int(config["env_steps"])
    if pair_to_steps(jax.device_get(state["env_steps"])) != env_steps:
        raise ValueError(f"checkpoint at {path!r} is inconsistent: its step counters disagree")
    restored = training_state.replace(
        optimizer_state=state["optimizer_state"],
        params=ppo_losses.PPONetworkParams(policy=params.policy_params, value=params.value_params),
        normalizer_params=params.normalizer_params,
        env_steps=state["env_steps"],
        training_step=state["training_step"],
    )
    return restored, state["key"], env_steps


def _copied(tree: Any) -> Any:
    """Fresh device buffers holding ``tree``'s values: the training call donates the state's own buffers, which
    then read as deleted wherever a callback kept them."""
    return jax.tree.map(jnp.copy, tree)


def _current_params(ts: TrainingState) -> PPOTrainingParams:
    """The parameters of ``ts`` in the form ``make_policy``, callbacks and checkpoints take."""
    return PPOTrainingParams(ts.normalizer_params, ts.params.policy, ts.params.value)


class _Checkpoints:
    """Writes the run's checkpoints into ``args.save_checkpoint_path`` (nothing when there is none), at most one
    per step count, and keeps the run's latest state for a failing callback to save."""

    def __init__(self, args: _Arguments, config: dict[str, Any] | None, key_run: jax.Array, env_steps: int):
        path = args.save_checkpoint_path
        self._saver = checkpoint.Saver(path, max_to_keep=args.hp.max_to_keep) if path else None
        self._config = config
        self._key_run = key_run
        self._saved_at: list[int] = []
        self._latest: tuple[TrainingState, Any, int] | None = None
        # The step a run resumes from is already saved when it was restored from this save path.
        restored = args.restore_checkpoint_path
        if self._saver is not None and restored and os.path.dirname(restored) == self._saver.path:
            self._saved_at.append(env_steps)

    def save(self, ts: TrainingState, env_steps: int, env_state: Any | None) -> str | None:
        """Saves ``ts`` (and ``env_state`` when given) as the checkpoint at ``env_steps``; returns its directory."""
        if self._saver is None:
            return None
        if self._saved_at and self._saved_at[-1] == env_steps:
            return os.path.join(self._saver.path, checkpoint.step_name(env_steps))
        state = {
            "optimizer_state": ts.optimizer_state,
            "env_steps": ts.env_steps,
            "training_step": ts.training_step,
            "key": self._key_run,
        }
        self._saved_at.append(env_steps)
        config = {**self._config, "env_steps": env_steps}
        return self._saver.save(env_steps, _current_params(ts), state, config, env_state)

    def track(self, ts: TrainingState, env_state: Any, env_steps: int) -> None:
        """Records the run as it stands (the arrays a failing callback would have saved)."""
        self._latest = (ts, env_state, env_steps)

    def save_latest(self) -> str | None:
        """Saves the run as it last stood (see ``track``)."""
        if self._latest is None:
            return None
        ts, env_state, env_steps = self._latest
        return self.save(ts, env_steps, env_state)

    def close(self) -> None:
        """Closes the writer."""
        if self._saver is not None:
            self._saver.close()


def _make_update(
    args: _Arguments, ppo_network: ppo_networks.PPONetworks, optimizer: optax.GradientTransformation
) -> Callable[[TrainingState, types.Transition, jax.Array], tuple[TrainingState, dict[str, jax.Array]]]:
    """The PPO update (``make_ppo_update``) with the loss and the observation statistics ``args`` ask for."""
    hp = args.hp
    loss_fn = functools.partial(
        ppo_losses.compute_ppo_loss,
        ppo_network=ppo_network,
        entropy_cost=hp.entropy_cost,
        discounting=hp.discounting,
        reward_scaling=hp.reward_scaling,
        gae_lambda=hp.gae_lambda,
        clipping_epsilon=hp.clipping_epsilon,
        normalize_advantage=hp.normalize_advantage,
        vf_loss_coefficient=hp.vf_loss_coefficient,
        bootstrap_on_timeout=hp.bootstrap_on_timeout,
        clipping_epsilon_value=hp.clipping_epsilon_value,
        use_distributional_critic=hp.use_distributional_critic,
    )
    normalizer_update = functools.partial(
        running_statistics.update,
        pmap_axis_name=_AXIS,
        until_count=hp.normalize_until_count,
        std_eps=hp.normalize_observations_std_eps,
        mode=hp.normalize_observations_mode,
    )
    return make_ppo_update(
        ppo_network,
        optimizer,
        loss_fn,
        num_minibatches=hp.num_minibatches,
        num_updates_per_batch=hp.num_updates_per_batch,
        normalizer_update=normalizer_update if hp.normalize_observations else None,
        learning_rate_schedule=hp.learning_rate_schedule,
        desired_kl=hp.desired_kl,
        learning_rate_schedule_min_lr=hp.learning_rate_schedule_min_lr,
        learning_rate_schedule_max_lr=hp.learning_rate_schedule_max_lr,
        clipping_epsilon_value=hp.clipping_epsilon_value,
        use_distributional_critic=hp.use_distributional_critic,
        augment_pixels=args.augment_pixels,
    )


def _make_training_step(
    env: Env,
    make_policy: Callable[..., types.Policy],
    update: Callable[..., tuple[TrainingState, dict[str, jax.Array]]],
    *,
    unroll_length: int,
    num_unrolls: int,
    extra_fields: tuple[str, ...],
    log_training_metrics: bool,
    env_steps_per_training_step: int,
) -> Callable[..., tuple[TrainingState, Any, dict[str, jax.Array]]]:
    """One device's training step: collect ``num_unrolls`` unrolls from every env with the current policy, then
    update on them (``make_ppo_update``). ``training_step(ts, env_state, key) -> (ts, env_state, metrics)``."""

    def training_step(ts: TrainingState, env_state: Any, key: jax.Array):
        key_sgd, key_generate = jax.random.split(key)
        policy = make_policy((ts.normalizer_params, ts.params.policy))

        def unroll(carry, _):
            state, k = carry
            k, k_unroll = jax.random.split(k)
            state, data = acting.generate_unroll(env, state, policy, k_unroll, unroll_length, extra_fields)
            return (state, k), data

        (env_state, _), data = jax.lax.scan(unroll, (env_state, key_generate), (), length=num_unrolls)
        # [unrolls, T, envs, ...] -> [unrolls * envs, T, ...]: the batch-major layout the loss expects.
        data = jax.tree.map(lambda x: jnp.reshape(jnp.swapaxes(x, 1, 2), (-1,) + x.shape[1:2] + x.shape[3:]), data)
        ts, metrics = update(ts, data, key_sgd)
        if log_training_metrics:
            done = data.extras["state_extras"]["episode_done"]
            episodes = data.extras["state_extras"]["episode_metrics"]
            metrics["episode_count"] = jnp.sum(done)
            for name, value in episodes.items():
                metrics[f"episode_sum/{name}"] = jnp.sum(value * done)
        ts = ts.replace(
            env_steps=_add_steps(ts.env_steps, env_steps_per_training_step), training_step=ts.training_step + 1
        )
        return ts, env_state, metrics

    return training_step


def _make_training_fn(training_step: Callable[..., Any], num_steps: int, mesh: Mesh, jit: Callable[..., Any]) -> Any:
    """The compiled call of ``num_steps`` training steps on every device:
    ``training_fn(ts, env_state, key_run) -> (ts, env_state, metrics)``, metrics reduced over the devices."""

    def run_training_steps(ts: TrainingState, env_state: Any, key_run: jax.Array):
        device_index = jax.lax.axis_index(_AXIS)

        def one(carry, _):
            ts, env_state = carry
            # The step's key follows its count, not the call it runs in: resumed runs repeat unbroken ones.
            key = jax.random.fold_in(jax.random.fold_in(key_run, ts.training_step), device_index)
            ts, env_state, metrics = training_step(ts, env_state, key)
            return (ts, env_state), metrics

        (ts, env_state), metrics = jax.lax.scan(one, (ts, env_state), (), length=num_steps)
        summed = {k: jax.lax.psum(jnp.sum(v), _AXIS) for k, v in metrics.items() if k.startswith("episode")}
        averaged = {k: jax.lax.pmean(jnp.mean(v), _AXIS) for k, v in metrics.items() if not k.startswith("episode")}
        return ts, env_state, {**averaged, **summed}

    fn = jax.shard_map(
        run_training_steps,
        mesh=mesh,
        in_specs=(P(), P(_AXIS), P()),
        out_specs=(P(), P(_AXIS), P()),
        check_vma=False,
    )
    return jit(fn, donate_argnums=(0, 1))


def _make_evaluation(
    args: _Arguments,
    make_policy: Callable[..., types.Policy],
    key_randomize: jax.Array,
    mesh: Mesh,
    jit: Callable[..., Any],
) -> tuple[Env | None, Any]:
    """The evaluation envs of one device and their jitted evaluation run (``None``s when nothing is evaluated)."""
    if not args.evaluate:
        return None, None
    hp = args.hp
    local_eval_envs = hp.num_eval_envs // len(args.devices)
    if args.eval_env is None:
        eval_key = jax.random.fold_in(key_randomize, 1)
        eval_env = make_eval_env(args.environment, local_eval_envs, eval_key, **args.env_options)
    else:
        eval_env = make_eval_env(args.eval_env, local_eval_envs, None, **args.env_options)
    eval_steps = -(-hp.episode_length // hp.action_repeat)
    eval_policy = functools.partial(make_policy, deterministic=hp.deterministic_eval)
    return eval_env, _make_eval_run(eval_env, eval_policy, local_eval_envs, eval_steps, mesh, jit)


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
        _wrap_for(
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


def _make_eval_run(
    eval_env: Env,
    eval_policy: Callable[[Any], types.Policy],
    local_eval_envs: int,
    eval_steps: int,
    mesh: Mesh,
    jit: Callable[..., Any],
) -> Any:
    """The jitted evaluation of ``local_eval_envs`` episodes per device: ``(policy_params, key) -> eval metrics``
    (means and stds over every device's episodes)."""

    def per_device_eval(policy_params: Any, key: jax.Array) -> dict[str, jax.Array]:
        key = jax.random.fold_in(key, jax.lax.axis_index(_AXIS))
        state = acting.evaluation_rollout(eval_env, eval_policy(policy_params), key, local_eval_envs, eval_steps)
        return acting.summarize_eval(state.info["eval_metrics"], axis_name=_AXIS)

    return jit(jax.shard_map(per_device_eval, mesh=mesh, in_specs=(P(), P()), out_specs=P(), check_vma=False))


def _make_evaluator(
    args: _Arguments,
    eval_env: Env,
    make_policy: Callable[..., types.Policy],
    key: jax.Array,
    run_fn: Any,
    skipped_evaluations: int,
) -> acting.Evaluator:
    """Brax's ``Evaluator`` over the compiled evaluation run ``run_fn``, its key past the ``skipped_evaluations``
    an unbroken run made before a resumed one starts."""
    hp = args.hp
    for _ in range(skipped_evaluations):
        key = jax.random.split(key)[0]  # the key each earlier evaluation took, as Evaluator splits
    return acting.Evaluator(
        eval_env,
        functools.partial(make_policy, deterministic=hp.deterministic_eval),
        num_eval_envs=hp.num_eval_envs,
        episode_length=hp.episode_length,
        action_repeat=hp.action_repeat,
        key=key,
        run_fn=run_fn,
    )


def _make_schedule(hp: PPOConfig, env_steps: int, env_steps_per_training_step: int) -> resume.Schedule:
    """The whole run's schedule (not the remainder's), so that a resumed run continues the unbroken plan."""
    # A count between training steps comes from another batch size: the remainder is planned on its own.
    done, rest = divmod(env_steps, env_steps_per_training_step)
    remaining = hp.num_timesteps - env_steps
    return resume.make_schedule(
        -(-(hp.num_timesteps if rest == 0 else remaining) // env_steps_per_training_step),
        num_evals=hp.num_evals,
        num_resets_per_eval=hp.num_resets_per_eval,
        steps_between_reports=(
            max(1, (hp.training_metrics_steps or 0) // env_steps_per_training_step) if hp.log_training_metrics else None
        ),
        steps_done=done if rest == 0 else 0,
    )


def _epochs(schedule: resume.Schedule) -> list[range]:
    """The calls this process runs, grouped by epoch (the first group starts where a resumed run starts)."""
    calls = schedule.calls()
    per_epoch = schedule.calls_per_epoch
    starts = range(calls.start - calls.start % per_epoch, calls.stop, per_epoch)
    return [range(max(first, calls.start), first + per_epoch) for first in starts]


def _sharded(abstract_env_state: Any, mesh: Mesh) -> Any:
    """The abstract env state laid out over the devices as the training call takes it."""
    sharded = NamedSharding(mesh, P(_AXIS))
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharded), abstract_env_state)


def _compile_in_parallel(jobs: list[tuple[Any, tuple[Any, ...]]]) -> list[Any]:
    """Lowers each ``(jitted_fn, args)`` in turn on this thread, compiling each on a thread pool as soon as it is
    lowered (so the first ones compile while the next ones are traced)."""
    t = time.time()
    compiled = compile_options.compile_side_by_side(fn.lower(*args) for fn, args in jobs)
    logging.info("traced, lowered and compiled %d functions in %.1f s", len(jobs), time.time() - t)
    return compiled


@dataclasses.dataclass
class _Counters:
    """What the host counts over a run: env steps, seconds in training calls, the last training-episode means."""

    env_steps: int
    training_walltime: float = 0.0
    last_episode: dict[str, float] = dataclasses.field(default_factory=dict)


def _train_epoch(
    training_fn: Any,
    reset_fn: Any,
    ts: TrainingState,
    env_state: Any,
    key_run: jax.Array,
    key_env: jax.Array,
    schedule: resume.Schedule,
    calls: range,
    env_steps_per_call: int,
    counters: _Counters,
    checkpoints: _Checkpoints,
    report: Callable[[int, Mapping[str, Any]], None] | None,
) -> tuple[TrainingState, Any, dict[str, float]]:
    """Runs ``calls``, the compiled calls of one epoch (the envs reset before a segment's first call where the
    schedule says so): ``(ts, env_state, the last call's training metrics)``. The checkpoint at the epoch's end is
    saved before ``report`` (set: given each call's training metrics) sees that call, so a failing callback
    costs no work."""
    training_metrics: dict[str, float] = {}
    for call in calls:
        if schedule.resets_before(call):
            reset_key = jax.random.fold_in(key_env, int(jax.device_get(ts.training_step)))
            env_state = reset_fn(reset_key)
        t = time.time()
        ts, env_state, step_metrics = training_fn(ts, env_state, key_run)
        step_metrics = jax.device_get(step_metrics)  # waits for the call: the timing below is honest
        elapsed = time.time() - t
        counters.training_walltime += elapsed
        counters.env_steps += env_steps_per_call
        checkpoints.track(ts, env_state, counters.env_steps)
        sps = env_steps_per_call / max(elapsed, 1e-9)
        training_metrics = _training_metrics(step_metrics, sps, counters.training_walltime, counters.last_episode)
        if schedule.ends_epoch(call):
            if pair_to_steps(jax.device_get(ts.env_steps)) % _TWO_32 != counters.env_steps % _TWO_32:
                raise RuntimeError("internal error: device and host env-step counts disagree")
            checkpoints.save(ts, counters.env_steps, env_state)
        if report is not None:
            logging.info(training_metrics)
            report(counters.env_steps, dict(training_metrics))
    return ts, env_state, training_metrics


def _evaluate(
    evaluator: acting.Evaluator,
    params: PPOTrainingParams,
    training_metrics: Mapping[str, Any],
    progress_fn: Callable[[int, Mapping[str, Any]], None],
    env_steps: int,
) -> dict[str, float]:
    """Evaluates ``params`` and reports the metrics (with ``training_metrics``) to ``progress_fn``."""
    metrics = evaluator.run_evaluation(params, training_metrics=training_metrics)
    logging.info(metrics)
    progress_fn(env_steps, metrics)
    return metrics


def _training_metrics(
    step_metrics: Mapping[str, Any], sps: float, walltime: float, last_episode: dict[str, float]
) -> dict[str, float]:
    """Host-side training metrics.

    ``episode/*`` are means over the training episodes that ended since the last report (the previous values are
    kept when none ended; ``episode/count`` is how many ended).
    """
    out = {f"training/{k}": float(v) for k, v in step_metrics.items() if not k.startswith("episode")}
    out["training/sps"] = sps
    out["training/walltime"] = walltime
    count = float(step_metrics.get("episode_count", 0.0))
    for k, v in step_metrics.items():
        if k.startswith("episode_sum/"):
            name = f"episode/{k.split('/', 1)[1]}"
            if count > 0:
                last_episode[name] = float(v) / count
            else:
                # Until the first episode ends the keys exist with 0.0 (and episode/count says none ended yet).
                last_episode.setdefault(name, 0.0)
    if "episode_count" in step_metrics:
        out.update(last_episode)
        out["episode/count"] = count
    return out


# ----------------------------------------------------------------------------------------------- the update


def make_ppo_update(
    ppo_network: ppo_networks.PPONetworks,
    optimizer: optax.GradientTransformation,
    loss_fn: Callable[..., Any],
    *,
    num_minibatches: int,
    num_updates_per_batch: int,
    normalizer_update: Callable[..., running_statistics.RunningStatisticsState] | None = None,
    learning_rate_schedule: ppo_optimizer.LRSchedule | None = None,
    desired_kl: float = 0.01,
    learning_rate_schedule_min_lr: float = 1e-5,
    learning_rate_schedule_max_lr: float = 1e-2,
    clipping_epsilon_value: float | None = None,
    use_distributional_critic: bool = False,
    augment_pixels: bool = False,
    axis_name: str = _AXIS,
) -> Callable[[TrainingState, types.Transition, jax.Array], tuple[TrainingState, dict[str, jax.Array]]]:
    """The PPO update of one collected batch: ``update(ts, data, key) -> (ts, metrics)``.

    ``data`` is one device's share of the batch, batch-major (``[unrolls, T, ...]``). The update runs inside a
    ``shard_map`` over ``axis_name``: gradients and observation statistics are averaged over that axis, so one
    device holding the whole batch and several devices holding equal shares of it compute the same update (up to
    the per-device parts PPO keeps local, as in Brax: minibatch shuffling, advantage normalisation and the
    sampled entropy estimate). ``normalizer_update`` is ``running_statistics.update`` with its options bound
    (``None``: the observation statistics are left as they are). The step counters of ``ts`` are not changed.
    """
    adaptive_kl = learning_rate_schedule == ppo_optimizer.LRSchedule.ADAPTIVE_KL
    old_values = clipping_epsilon_value is not None and not use_distributional_critic
    loss_and_pgrad_fn = gradients.loss_and_pgrad(loss_fn, pmap_axis_name=axis_name, has_aux=True)

    def minibatch_step(carry, data: types.Transition, normalizer_params):
        optimizer_state, params, key = carry
        key, key_loss = jax.random.split(key)
        (_, metrics), grads = loss_and_pgrad_fn(params, normalizer_params, data, key_loss)
        if adaptive_kl:
            # The rate for this minibatch's step already follows its KL (measured before the step), as in Brax.
            optimizer_state, metrics["learning_rate"] = ppo_optimizer.adaptive_kl_learning_rate(
                optimizer_state,
                jax.lax.pmean(metrics["kl_mean"], axis_name),
                desired_kl,
                learning_rate_schedule_min_lr,
                learning_rate_schedule_max_lr,
            )
        updates, optimizer_state = optimizer.update(grads, optimizer_state, params)
        params = optax.apply_updates(params, updates)
        return (optimizer_state, params, key), metrics

    def sgd_step(carry, _, data: types.Transition, normalizer_params):
        optimizer_state, params, key = carry
        if augment_pixels:
            key, key_shift = jax.random.split(key)
            data = _shift_pixels(data, key_shift)
        key, key_perm, key_grad = jax.random.split(key, 3)
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(minibatch_step, normalizer_params=normalizer_params),
            (optimizer_state, params, key_grad),
            _shuffled_minibatches(data, key_perm, num_minibatches),
        )
        return (optimizer_state, params, key), metrics

    def update(ts: TrainingState, data: types.Transition, key: jax.Array) -> tuple[TrainingState, dict[str, jax.Array]]:
        data = _with_behaviour_outputs(ppo_network, ts, data, values=old_values, distribution=adaptive_kl)
        normalizer_params = ts.normalizer_params
        # ADAPTIVE_KL measures the KL against the behaviour policy, so the statistics it was collected with stay
        # in place until after SGD.
        if normalizer_update is not None and not adaptive_kl:
            normalizer_params = normalizer_update(normalizer_params, networks_vision.remove_pixels(data.observation))
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),
            (ts.optimizer_state, ts.params, key),
            (),
            length=num_updates_per_batch,
        )
        if normalizer_update is not None and adaptive_kl:
            normalizer_params = normalizer_update(normalizer_params, networks_vision.remove_pixels(data.observation))
        ts = ts.replace(optimizer_state=optimizer_state, params=params, normalizer_params=normalizer_params)
        return ts, jax.tree.map(jnp.mean, metrics)

    return update


def _with_behaviour_outputs(
    ppo_network: ppo_networks.PPONetworks,
    ts: TrainingState,
    data: types.Transition,
    *,
    values: bool,
    distribution: bool,
) -> types.Transition:
    """``data`` with what the loss compares against the behaviour policy: its values (clipped value loss) and its
    distribution parameters (ADAPTIVE_KL). The parameters did not change during collection, so one pass over the
    batch gives what the actor would have recorded step by step."""
    extras = dict(data.extras["policy_extras"])
    if values:
        extras["value"] = ppo_network.value_network.apply(ts.normalizer_params, ts.params.value, data.observation)
    if distribution:
        extras["distribution_params"] = ppo_network.policy_network.apply(
            ts.normalizer_params, ts.params.policy, data.observation
        )
    return data._replace(extras={**data.extras, "policy_extras": extras})


def _shift_pixels(data: types.Transition, key: jax.Array) -> types.Transition:
    """``data`` with its observations and next observations shifted alike (``random_shift_pixels``)."""
    return data._replace(
        observation=random_shift_pixels(data.observation, key),
        next_observation=random_shift_pixels(data.next_observation, key),
    )


def _shuffled_minibatches(data: types.Transition, key: jax.Array, num_minibatches: int) -> types.Transition:
    """``data``'s unrolls in a random order, split into ``num_minibatches`` minibatches (a leading axis)."""
    local_batch = jax.tree.leaves(data.reward)[0].shape[0]
    permutation = jax.random.permutation(key, local_batch)
    return jax.tree.map(lambda x: jnp.reshape(x[permutation], (num_minibatches, -1) + x.shape[1:]), data)


def random_shift_pixels(observation: Any, key: jax.Array, max_shift: int = 4) -> Any:
    """Image views of a ``[batch, time, H, W, C]`` dict observation, each moved by a random offset.

    Every view of every batch entry gets its own offset of up to ``max_shift`` pixels along both image axes, the same
    at every time step of the unroll, and the pixels moved in from outside repeat the edge (random-shift
    augmentation as in DrQ). Non-image entries are returned unchanged; the same ``key`` gives the same offsets, so
    an observation and the next one move together.
    """
    if not isinstance(observation, Mapping):
        return observation
    views = sorted(k for k in observation if str(k).startswith(networks_vision.PIXEL_PREFIX))
    out = dict(observation)
    for index, name in enumerate(views):
        images = observation[name]
        batch = images.shape[0]
        offsets = jax.random.randint(jax.random.fold_in(key, index), (batch, 2), 0, 2 * max_shift + 1)
        pad = ((0, 0), (max_shift, max_shift), (max_shift, max_shift), (0, 0))

        def shift(unroll: jax.Array, offset: jax.Array, pad=pad) -> jax.Array:
            padded = jnp.pad(unroll, pad, mode="edge")
            start = (0, offset[0], offset[1], 0)
            return jax.lax.dynamic_slice(padded, start, unroll.shape)

        out[name] = jax.vmap(shift)(images, offsets)
    return out
