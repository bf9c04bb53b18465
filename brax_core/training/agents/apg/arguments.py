"""``apg.train``'s arguments: what each means (``TRAIN_DOC``, the text ``help(train)`` shows), and the checks of those
that are not configuration fields (``validated``): the envs, wrappers, callbacks, checkpoint paths, devices.

The settings themselves are an ``APGConfig`` (``brax_core.training.agents.apg.config``), checked when it is built;
every refusal names the argument and what it accepts, before anything is traced or compiled.
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
from brax_core.training import networks, resume
from brax_core.training import validation as v
from brax_core.training.agents.apg import networks as apg_networks
from brax_core.training.agents.apg.config import APGConfig
from brax_core.training.agents.ppo.arguments import check_wrapping
from brax_core.training.run.driver import ignore

TRAIN_DOC = """Direct trajectory optimisation training: the analytic policy gradient (APG).

Each policy update unrolls ``horizon_length // action_repeat`` policy steps in every training env and follows the
gradient of minus the mean reward of the unroll, computed by differentiating through the environment's own dynamics
(MJX's step is differentiable in every env of brax_core). The next update starts where the last unroll stopped.

Args:
  environment: the environment to train: an ``Env``, a MuJoCo Playground ``MjxEnv`` or a registered name.
  episode_length: the length of an environment episode (the time limit of the training and evaluation envs).
  policy_updates: the number of policy updates; they are shared out equally among the ``max(num_evals - 1, 1)``
    epochs between evaluations, ``round(policy_updates / max(num_evals - 1, 1))`` each (as in Brax), which must
    be at least one.
  wrap_env: ``True`` wraps ``environment`` (and the evaluation env) for training; ``False`` uses them as they are
    (the training env must already be batched and auto-resetting).
  wrap_env_fn: the wrapper to use when ``wrap_env`` is ``True`` (default ``brax_core.envs.training.wrap``), called
    like Brax's ``wrap_env_fn(env, episode_length=, action_repeat=, randomization_fn=)``.
  horizon_length: env steps per policy update (the unroll the gradient flows through); at least ``action_repeat``.
  num_envs: the number of parallel training environments (across all devices; divisible by the device count).
  num_evals: the number of evaluations: one before training when ``num_evals > 1``, then one after every epoch.
  action_repeat: the number of env steps each action is repeated for.
  max_devices_per_host: maximum number of local devices to train on (default: all).
  num_eval_envs: the number of environments (episodes) per evaluation.
  learning_rate: Adam's learning rate (the initial one with ``use_schedule``).
  adam_b: Adam's ``(b1, b2)``, each in ``[0, 1)``.
  use_schedule: decay the learning rate by ``schedule_decay`` at every policy update.
  use_float64: keep the observation statistics in float64 (needs ``jax_enable_x64``).
  schedule_decay: the learning rate's factor per policy update with ``use_schedule``, in ``(0, 1]``.
  seed: random seed.
  max_gradient_norm: gradients whose global norm reaches this are scaled down to it; each component is then
    clipped to ``[-1, 1]`` before Adam (Brax's ``optax.clip(1.0)``).
  normalize_observations: normalise the policy's inputs with running statistics of the observations.
  deterministic_eval: evaluate with the mode of the policy.
  network_factory: builds the networks, ``network_factory(observation_size, action_size,
    preprocess_observations_fn=...)`` (``make_apg_networks`` or a ``functools.partial`` of it).
  progress_fn: ``progress_fn(epoch: int, metrics: dict[str, float])`` after every evaluation (``0`` for the one
    before training).
  eval_env: an environment for evaluation (default: ``environment``), wrapped and randomised as ``environment``.
  randomization_fn: Brax's ``randomization_fn(sys, rng) -> (batched_sys, in_axes)`` over the MJX model; ``rng`` is
    bound to one key per environment of a device, and the evaluation envs get their own keys.
  policy_params_fn: ``policy_params_fn(env_steps, make_policy, params)`` before training and after every epoch,
    as Brax's PPO calls it.
  save_checkpoint_path: where a checkpoint of the whole run is written at every epoch's end, before
    ``progress_fn`` sees the epoch (``brax_core.training.agents.apg.checkpoint``: ``load_policy`` rebuilds the
    policy from it alone).
  restore_checkpoint_path: a checkpoint (a step directory, or the newest under a save path) to continue exactly,
    with the same settings but ``policy_updates``, which may grow.
  max_to_keep: the most checkpoints kept (``None``: all).

Returns:
  ``(make_policy, params, metrics)``: the inference function factory (``make_inference_fn``'s), the
  ``(normalizer_params, policy_params)`` pair it takes and the metrics of the last evaluation
  (``eval/episode_reward`` and the other ``eval/*`` metrics, with ``training/sps``, ``training/walltime``,
  ``training/grad_norm``, ``training/params_norm`` and ``training/gradient_cuts``, the epoch's env steps whose
  gradient was cut because the physics' reverse pass was not finite there: ``brax_core.envs.wrappers.gradients``).
"""

# train_from_config's options: train's arguments that are not configuration fields.
OPTIONS = (
    "wrap_env", "wrap_env_fn", "max_devices_per_host", "network_factory", "progress_fn", "eval_env",
    "randomization_fn", "policy_params_fn", "save_checkpoint_path", "restore_checkpoint_path",
)


@dataclasses.dataclass(frozen=True)
class Arguments:
    """A run's configuration and its other arguments once checked, with the wrapper to apply resolved and the
    devices found."""

    config: APGConfig
    environment: Env
    eval_env: Env
    wrap_env: bool | Callable[..., Env]
    network_factory: Callable[..., apg_networks.APGNetworks]
    progress_fn: Callable[[int, Mapping[str, Any]], None]
    policy_params_fn: Callable[..., None]
    randomization_fn: Callable[..., Any] | None
    save_checkpoint_path: str | None
    restore_checkpoint_path: str | None
    devices: tuple[jax.Device, ...]

    @property
    def episode_length(self) -> int:
        return self.config.env.episode_length

    @property
    def training_episode_length(self) -> int:
        """The training envs' time limit (``episode_length`` unless the config sets its own)."""
        return self.config.algorithm.training_episode_length or self.episode_length

    @property
    def envs_per_device(self) -> int:
        return self.config.env.num_envs // len(self.devices)

    @property
    def env_options(self) -> dict[str, Any]:
        """The keyword arguments of ``ppo.environments.wrap_for`` shared by the training and evaluation envs."""
        return dict(
            wrap_env=self.wrap_env,
            episode_length=self.episode_length,
            action_repeat=self.config.env.action_repeat,
            randomization_fn=self.randomization_fn,
        )


def validated(
    config: APGConfig,
    environment: Any,
    options: Mapping[str, Any],
    find_devices: Callable[[int | None], list[jax.Device]],
) -> Arguments:
    """The arguments of a run of ``config`` on ``environment`` (``None``: ``config.env.name``), checked before
    anything compiles; ``options`` are ``OPTIONS`` by name; ``find_devices(max_devices_per_host)`` lists the
    devices to train on."""
    APGConfig.check_train_options(config, options, OPTIONS)
    if environment is None:
        environment = config.env.name
    if environment is None:
        raise ValueError("environment: give an Env, or a config whose env.name names a registered environment")
    environment = _env("environment", environment, allow_name=True)
    if config.env.episode_length is None:  # the env's own
        config = config.replace(episode_length=int(getattr(environment.unwrapped, "default_episode_length", 1000)))
    given_eval_env = options.get("eval_env")
    eval_env = environment if given_eval_env is None else _env("eval_env", given_eval_env, allow_name=False)
    if config.algorithm.use_float64 and not jax.config.jax_enable_x64:
        raise ValueError(
            "use_float64=True keeps the observation statistics in float64, which JAX only has with "
            "jax.config.update('jax_enable_x64', True); enable it first or pass use_float64=False"
        )
    max_devices_per_host = options.get("max_devices_per_host")
    if max_devices_per_host is not None:
        max_devices_per_host = v.positive_int("max_devices_per_host", max_devices_per_host)
    network_factory = options.get("network_factory")
    if network_factory is None:
        network_factory = network_factory_of(config)
    network_factory = v.callable_arg("network_factory", network_factory)
    progress_fn = resume.check_callback(
        "progress_fn", v.callable_arg("progress_fn", options.get("progress_fn", ignore)), "(epoch, metrics)"
    )
    policy_params_fn = resume.check_callback(
        "policy_params_fn", v.callable_arg("policy_params_fn", options.get("policy_params_fn", ignore)),
        "(env_steps, make_policy, params)",
    )
    randomization_fn = options.get("randomization_fn")
    if randomization_fn is not None:
        v.callable_arg("randomization_fn", randomization_fn)
    wrap_env = _wrapper(options.get("wrap_env", True), options.get("wrap_env_fn"))
    check_wrapping("environment", environment, wrap_env)
    if given_eval_env is not None:
        check_wrapping("eval_env", eval_env, wrap_env)
    devices = tuple(find_devices(max_devices_per_host))
    if config.env.num_envs % len(devices) != 0:
        raise ValueError(f"num_envs ({config.env.num_envs}) must be divisible by the number of devices "
                         f"({len(devices)})")
    return Arguments(
        config=config, environment=environment, eval_env=eval_env, wrap_env=wrap_env,
        network_factory=network_factory, progress_fn=progress_fn, policy_params_fn=policy_params_fn,
        randomization_fn=randomization_fn, save_checkpoint_path=_path("save_checkpoint_path", options),
        restore_checkpoint_path=_path("restore_checkpoint_path", options), devices=devices,
    )


def network_factory_of(config: APGConfig) -> Callable[..., apg_networks.APGNetworks]:
    """``make_apg_networks`` with ``config.network``'s fields."""
    network = config.network
    return functools.partial(
        apg_networks.make_apg_networks, hidden_layer_sizes=network.policy_hidden_layer_sizes,
        activation=network.activation, layer_norm=network.layer_norm,
    )


def network_fields(network_factory: Any) -> dict[str, Any]:
    """The config's network fields that a ``network_factory`` of Brax's signature sets: those of a
    ``functools.partial`` of ``make_apg_networks`` (an activation by its name where it has one); nothing for any
    other factory, which a run then uses as it is."""
    factory, keywords = networks.factory_keywords(network_factory)
    if factory is not apg_networks.make_apg_networks:
        return {}
    fields = {}
    if "hidden_layer_sizes" in keywords:
        fields["policy_hidden_layer_sizes"] = keywords["hidden_layer_sizes"]
    if "layer_norm" in keywords:
        fields["layer_norm"] = keywords["layer_norm"]
    if (name := networks.activation_name(keywords.get("activation"))) is not None:
        fields["activation"] = name
    return fields


def _path(name: str, options: Mapping[str, Any]) -> str | None:
    value = options.get(name)
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"{name} must be a path (str or os.PathLike) or None, got {value!r}")
    return os.path.abspath(os.fspath(value))


def _env(name: str, env: Any, allow_name: bool) -> Env:
    if (allow_name and isinstance(env, str)) or envs.is_env(env):
        return envs.as_env(env)
    names = ", a registered environment name" if allow_name else ""
    raise TypeError(f"{name} must be a brax_core Env, a MuJoCo Playground MjxEnv{names}, got {env!r}")


def _wrapper(wrap_env: Any, wrap_env_fn: Any) -> bool | Callable[..., Env]:
    """What wraps the envs: ``True`` (brax_core's ``wrap``), ``False`` (nothing) or ``wrap_env_fn``, which Brax uses
    only with ``wrap_env=True``."""
    wrap_env = v.boolean("wrap_env", wrap_env)
    if wrap_env_fn is not None:
        v.callable_arg("wrap_env_fn", wrap_env_fn)
    if not wrap_env:
        return False
    if wrap_env_fn is None or envs.playground.is_playground_training_wrapper(wrap_env_fn):
        return True  # brax_core's wrappers do what Playground's do, on the State PlaygroundEnv returns
    return wrap_env_fn
