"""``ppo.train``'s arguments: what each means (``TRAIN_DOC``, the text ``help(train)`` shows) and their checks.

The hyperparameters are checked by building a ``PPOConfig`` (``config.py``), the schema the torch trainer and the
command line share, so all three accept the same values and word their refusals alike; what is left here is checked
in ``validated``, before anything compiles, and every error names the argument.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax

from brax_core import envs
from brax_core.envs.base import Env
from brax_core.envs.wrappers import training as env_training
from brax_core.training import resume
from brax_core.training.agents.ppo import checkpoint
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo.config import KEYWORD_FIELDS, NETWORK_FIELDS, NetworkConfig, PPOConfig
from brax_core.training.agents.ppo.networks import PPOTrainingParams
from brax_core.training.run import checkpoints as run_checkpoints
from brax_core.training.validation import boolean as _bool
from brax_core.training.validation import callable_arg as _callable
from brax_core.training.validation import positive_int as _positive_int

TRAIN_DOC = """PPO training.

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


@dataclasses.dataclass(frozen=True)
class Arguments:
    """``train``'s arguments once checked: the hyperparameters as the schema validated them, and how to run."""

    config: PPOConfig
    environment: Env
    eval_env: Env | None
    wrap_env: bool | Callable[..., Env]
    randomization_fn: Callable[..., Any] | None
    network_factory: Callable[..., ppo_networks.PPONetworks]
    progress_fn: Callable[[int, Mapping[str, Any]], None]
    policy_params_fn: Callable[..., None]
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
        """The keyword arguments of ``environments.wrap_for`` shared by the training and the evaluation envs."""
        config = self.config
        return dict(
            wrap_env=self.wrap_env,
            episode_length=config.env.episode_length,
            action_repeat=config.env.action_repeat,
            randomization_fn=self.randomization_fn,
        )


def validated(
    arguments: Mapping[str, Any],
    find_devices: Callable[[int | None], list[jax.Device]],
    config: PPOConfig | None = None,
) -> Arguments:
    """``train``'s keyword arguments, checked in one place before anything compiles (errors name the argument);
    ``find_devices(max_devices_per_host)`` lists the devices to train on. ``config``: the run's ``PPOConfig``
    (``train_from_config``), validated already; without it the config is built from the keyword arguments."""
    environment = arguments["environment"]
    if environment is None and config is not None:
        environment = config.env.name
    if not (isinstance(environment, str) or envs.is_env(environment)):
        raise TypeError(
            "environment must be a brax_core Env, a MuJoCo Playground MjxEnv or a registered environment name "
            f"('playground:<task>' too; or a config whose env.name is one), got {environment!r}"
        )
    name = environment if isinstance(environment, str) else None
    environment = envs.as_env(environment)
    network_factory = arguments["network_factory"]
    if config is None:
        config = config_of_keywords(arguments)
    elif network_factory is None:
        network_factory = functools.partial(ppo_networks.make_ppo_networks, **dataclasses.asdict(config.network))
    elif config.network != NetworkConfig():
        changed = [f.name for f in dataclasses.fields(NetworkConfig) if getattr(config.network, f.name) != f.default]
        raise ValueError(
            f"config.network sets {', '.join(changed)} but a network_factory is given, which builds the networks "
            "instead: set those in network_factory, or leave network_factory out to build the networks from "
            "config.network"
        )
    if config.run.trainer not in (None, "jax"):
        raise ValueError(
            f"config.run.trainer is {config.run.trainer!r}; this is the JAX trainer: use config.replace(trainer='jax') "
            "(or None) to train the config here"
        )
    # The env's own episode length where the config leaves it open, and the env's name where it was given by name.
    resolved = {"trainer": "jax"}
    if config.env.episode_length is None:
        resolved["episode_length"] = int(getattr(environment.unwrapped, "default_episode_length", 1000))
    if config.env.name is None and name is not None:
        resolved["name"] = name
    config = config.replace(**resolved)
    run_evals = _bool("run_evals", arguments["run_evals"])
    max_devices_per_host = arguments["max_devices_per_host"]
    if max_devices_per_host is not None:
        max_devices_per_host = _positive_int("max_devices_per_host", max_devices_per_host)
    restore_value_fn = _bool("restore_value_fn", arguments["restore_value_fn"])
    # Not schema fields: like run_evals they say how to run, and the command line has no image environments.
    vision, augment_pixels = _bool("vision", arguments["vision"]), _bool("augment_pixels", arguments["augment_pixels"])
    if vision and config.env.action_repeat != 1:
        # Brax's rule: repeated actions would render frames no policy sees; a pixel env repeats physics itself.
        raise ValueError(
            f"vision=True needs action_repeat=1 (got {config.env.action_repeat}); repeat physics steps inside the env "
            "instead"
        )
    madrona_backend = arguments["madrona_backend"]
    if madrona_backend is not False:
        raise ValueError(f"madrona_backend must be False: brax_core has no batch renderer, got {madrona_backend!r}")
    progress_fn, policy_params_fn = resume.checked_callbacks(arguments["progress_fn"], arguments["policy_params_fn"])
    allow_config_changes = resume.check_allow("allow_config_changes", arguments["allow_config_changes"])
    network_factory = _checked_network_factory(network_factory, config.algorithm.use_distributional_critic)
    randomization_fn = arguments["randomization_fn"]
    if randomization_fn is not None:
        _callable("randomization_fn", randomization_fn)
    eval_env = arguments["eval_env"]
    if eval_env is not None:
        if not envs.is_env(eval_env):
            raise TypeError(f"eval_env must be a brax_core Env, a MuJoCo Playground MjxEnv or None, got {eval_env!r}")
        eval_env = envs.as_env(eval_env)
    wrap_env = _checked_wrap_env(arguments["wrap_env"], arguments["wrap_env_fn"])
    check_wrapping("environment", environment, wrap_env)
    if eval_env is not None:
        check_wrapping("eval_env", eval_env, wrap_env)
    devices = find_devices(max_devices_per_host)
    evaluate = config.run.num_evals > 0 and run_evals
    _check_device_split(config, len(devices), evaluate)
    restore_params = arguments["restore_params"]
    if restore_params is not None:
        restore_params = PPOTrainingParams(*_three_params(restore_params))
    save_checkpoint_path, restore_checkpoint_path = run_checkpoints.checked_paths(
        arguments["save_checkpoint_path"], arguments["restore_checkpoint_path"]
    )
    env_steps_restored = (
        int(checkpoint.load_config_json(restore_checkpoint_path)["env_steps"]) if restore_checkpoint_path else 0
    )
    return Arguments(
        config=config,
        environment=environment,
        eval_env=eval_env,
        wrap_env=wrap_env,
        randomization_fn=randomization_fn,
        network_factory=network_factory,
        progress_fn=progress_fn,
        policy_params_fn=policy_params_fn,
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


def config_of_keywords(arguments: Mapping[str, Any]) -> PPOConfig:
    """The ``PPOConfig`` of Brax's keyword arguments: each field by its name, and the network fields from a
    ``network_factory`` that is ``make_ppo_networks`` bound to some of them (a factory of other arguments keeps
    its own; ``config.network`` then holds the defaults)."""
    values = {name: arguments[name] for name in KEYWORD_FIELDS if name in arguments}
    factory = arguments["network_factory"]
    keywords = dict(getattr(factory, "keywords", None) or {})
    keywords.pop("use_distributional_critic", None)  # a train field, checked against the factory's below
    if getattr(factory, "func", None) is ppo_networks.make_ppo_networks and not factory.args:
        if set(keywords) <= set(NETWORK_FIELDS):
            values.update(keywords)
    return PPOConfig.from_flat(values)


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


def check_wrapping(name: str, env: Env, wrap_env: bool | Callable[..., Env]) -> None:
    """Refuses an env that ``wrap_env`` would wrap twice, or train on unbatched: both fail later, deep inside JAX
    (an already batched env's reset given one key per env, an unbatched one under ``shard_map``)."""
    what = env_training.describe_wrapping(env)
    unwrapped = type(env.unwrapped).__name__
    if wrap_env is not False and env_training.training_wrappers(env):
        given = "True" if wrap_env is True else "a wrapper callable"
        raise ValueError(
            f"wrap_env={given} wraps {name} for training, but {name} is {what}: pass wrap_env=False to train on it "
            f"as it is, or pass the env before wrapping ({name}.unwrapped: the {unwrapped} env) with wrap_env={given}"
        )
    if wrap_env is False and not env_training.is_batched(env):
        raise ValueError(
            f"wrap_env=False trains on {name} as it is, which must be batched and auto-resetting, but {name} is "
            f"{what}: pass wrap_env=True (the default) to have train wrap it, or wrap it yourself with "
            "brax_core.envs.training.wrap(env, episode_length=..., action_repeat=...) and keep wrap_env=False"
        )


def _check_device_split(config: PPOConfig, device_count: int, evaluate: bool) -> None:
    """Refuses env and batch counts that the training devices cannot share equally."""
    if config.env.num_envs % device_count != 0:
        raise ValueError(
            f"num_envs ({config.env.num_envs}) must be divisible by the number of devices ({device_count})"
        )
    if config.algorithm.batch_size % device_count != 0:
        raise ValueError(
            f"batch_size ({config.algorithm.batch_size}) must be divisible by the number of devices ({device_count})"
        )
    if evaluate and config.env.num_eval_envs % device_count != 0:
        raise ValueError(
            f"num_eval_envs ({config.env.num_eval_envs}) must be divisible by the number of devices ({device_count})"
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
