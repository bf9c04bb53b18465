"""``apg.train``'s arguments: what each means (``TRAIN_DOC``, the text ``help(train)`` shows) and their checks.

Every argument is checked in ``validated`` before anything is traced or compiled, and every refusal names the
argument and what it accepts (the messages come from ``brax_core.training.validation``, as PPO's do).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import jax

from brax_core import envs
from brax_core.envs.base import Env
from brax_core.training import resume
from brax_core.training import validation as v
from brax_core.training.agents.apg import networks as apg_networks
from brax_core.training.agents.ppo.arguments import check_wrapping

TRAIN_DOC = """Direct trajectory optimisation training: the analytic policy gradient (APG).

Each policy update unrolls ``horizon_length // action_repeat`` policy steps in every training env and follows the
gradient of minus the mean reward of the unroll, computed by differentiating through the environment's own dynamics
(MJX's step is differentiable; ``fast``, ``inverted_pendulum``, ``halfcheetah``, ``ant`` and ``humanoid`` pass
useful gradients). The next update starts where the last unroll stopped.

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

Returns:
  ``(make_policy, params, metrics)``: the inference function factory (``make_inference_fn``'s), the
  ``(normalizer_params, policy_params)`` pair it takes and the metrics of the last evaluation
  (``eval/episode_reward`` and the other ``eval/*`` metrics, with ``training/sps``, ``training/walltime``,
  ``training/grad_norm``, ``training/params_norm`` and ``training/gradient_cuts``, the epoch's env steps whose
  gradient was cut because the physics' reverse pass was not finite there: ``brax_core.envs.wrappers.gradients``).
"""


@dataclasses.dataclass(frozen=True)
class Arguments:
    """``train``'s arguments once checked, with the wrapper to apply resolved and the devices found."""

    environment: Env
    eval_env: Env
    wrap_env: bool | Callable[..., Env]
    episode_length: int
    policy_updates: int
    horizon_length: int
    num_envs: int
    num_evals: int
    action_repeat: int
    num_eval_envs: int
    learning_rate: float
    adam_b: tuple[float, float]
    use_schedule: bool
    use_float64: bool
    schedule_decay: float
    seed: int
    max_gradient_norm: float
    normalize_observations: bool
    deterministic_eval: bool
    network_factory: Callable[..., apg_networks.APGNetworks]
    progress_fn: Callable[[int, Mapping[str, Any]], None]
    randomization_fn: Callable[..., Any] | None
    devices: tuple[jax.Device, ...]

    @property
    def num_epochs(self) -> int:
        """Training epochs, each followed by an evaluation (Brax's ``num_evals_after_init``)."""
        return epochs_of(self.num_evals)

    @property
    def updates_per_epoch(self) -> int:
        return updates_per_epoch(self.policy_updates, self.num_evals)

    @property
    def steps_per_update(self) -> int:
        """Policy steps in the unroll of one update (each repeated ``action_repeat`` times in the env)."""
        return self.horizon_length // self.action_repeat

    @property
    def envs_per_device(self) -> int:
        return self.num_envs // len(self.devices)

    @property
    def env_options(self) -> dict[str, Any]:
        """The keyword arguments of ``ppo.environments.wrap_for`` shared by the training and evaluation envs."""
        return dict(
            wrap_env=self.wrap_env,
            episode_length=self.episode_length,
            action_repeat=self.action_repeat,
            randomization_fn=self.randomization_fn,
        )


def epochs_of(num_evals: int) -> int:
    return max(num_evals - 1, 1)


def updates_per_epoch(policy_updates: int, num_evals: int) -> int:
    """Brax's share of updates per epoch: rounded to the nearest integer, halves to even."""
    return round(policy_updates / epochs_of(num_evals))


def validated(arguments: Mapping[str, Any], find_devices: Callable[[int | None], list[jax.Device]]) -> Arguments:
    """``train``'s keyword arguments, checked before anything compiles; ``find_devices(max_devices_per_host)`` lists
    the devices to train on."""
    environment = _env("environment", arguments["environment"], allow_name=True)
    eval_env = arguments["eval_env"]
    eval_env = environment if eval_env is None else _env("eval_env", eval_env, allow_name=False)
    episode_length = v.positive_int("episode_length", arguments["episode_length"])
    policy_updates = v.positive_int("policy_updates", arguments["policy_updates"])
    num_evals = v.check(v.FieldSpec("int", "", minimum=0, name="num_evals"), arguments["num_evals"])
    if updates_per_epoch(policy_updates, num_evals) < 1:
        epochs = epochs_of(num_evals)
        raise ValueError(
            f"policy_updates ({policy_updates}) leaves no update for each of the {epochs} epochs that "
            f"num_evals={num_evals} makes (round(policy_updates / max(num_evals - 1, 1)) must be at least 1): "
            f"pass policy_updates >= {epochs // 2 + 1} or fewer num_evals"
        )
    action_repeat = v.positive_int("action_repeat", arguments["action_repeat"])
    horizon_length = v.positive_int("horizon_length", arguments["horizon_length"])
    if horizon_length < action_repeat:
        raise ValueError(
            f"horizon_length ({horizon_length}) must be at least action_repeat ({action_repeat}): an update unrolls "
            "horizon_length // action_repeat policy steps"
        )
    num_envs = v.positive_int("num_envs", arguments["num_envs"])
    num_eval_envs = v.positive_int("num_eval_envs", arguments["num_eval_envs"])
    max_devices_per_host = arguments["max_devices_per_host"]
    if max_devices_per_host is not None:
        max_devices_per_host = v.positive_int("max_devices_per_host", max_devices_per_host)
    learning_rate = v.real("learning_rate", arguments["learning_rate"], low=0.0, open_low=True)
    adam_b = adam_betas(arguments["adam_b"])
    use_schedule = v.boolean("use_schedule", arguments["use_schedule"])
    use_float64 = v.boolean("use_float64", arguments["use_float64"])
    if use_float64 and not jax.config.jax_enable_x64:
        raise ValueError(
            "use_float64=True keeps the observation statistics in float64, which JAX only has with "
            "jax.config.update('jax_enable_x64', True); enable it first or pass use_float64=False"
        )
    schedule_decay = v.real("schedule_decay", arguments["schedule_decay"], low=0.0, high=1.0, open_low=True)
    seed = v.check(v.FieldSpec("int", "", minimum=0, name="seed"), arguments["seed"])
    max_gradient_norm = v.real("max_gradient_norm", arguments["max_gradient_norm"], low=0.0, open_low=True)
    normalize_observations = v.boolean("normalize_observations", arguments["normalize_observations"])
    deterministic_eval = v.boolean("deterministic_eval", arguments["deterministic_eval"])
    network_factory = v.callable_arg("network_factory", arguments["network_factory"])
    progress_fn = resume.check_callback(
        "progress_fn", v.callable_arg("progress_fn", arguments["progress_fn"]), "(num_steps, metrics)"
    )
    randomization_fn = arguments["randomization_fn"]
    if randomization_fn is not None:
        v.callable_arg("randomization_fn", randomization_fn)
    wrap_env = _wrapper(arguments["wrap_env"], arguments["wrap_env_fn"])
    check_wrapping("environment", environment, wrap_env)
    if arguments["eval_env"] is not None:
        check_wrapping("eval_env", eval_env, wrap_env)
    devices = tuple(find_devices(max_devices_per_host))
    if num_envs % len(devices) != 0:
        raise ValueError(f"num_envs ({num_envs}) must be divisible by the number of devices ({len(devices)})")
    return Arguments(
        environment=environment,
        eval_env=eval_env,
        wrap_env=wrap_env,
        episode_length=episode_length,
        policy_updates=policy_updates,
        horizon_length=horizon_length,
        num_envs=num_envs,
        num_evals=num_evals,
        action_repeat=action_repeat,
        num_eval_envs=num_eval_envs,
        learning_rate=learning_rate,
        adam_b=adam_b,
        use_schedule=use_schedule,
        use_float64=use_float64,
        schedule_decay=schedule_decay,
        seed=seed,
        max_gradient_norm=max_gradient_norm,
        normalize_observations=normalize_observations,
        deterministic_eval=deterministic_eval,
        network_factory=network_factory,
        progress_fn=progress_fn,
        randomization_fn=randomization_fn,
        devices=devices,
    )


def _env(name: str, env: Any, allow_name: bool) -> Env:
    if (allow_name and isinstance(env, str)) or envs.is_env(env):
        return envs.as_env(env)
    names = ", a registered environment name" if allow_name else ""
    raise TypeError(f"{name} must be a brax_core Env, a MuJoCo Playground MjxEnv{names}, got {env!r}")


def adam_betas(adam_b: Any) -> tuple[float, float]:
    """``adam_b`` as two floats in ``[0, 1)``: Adam's decay rates of its first and second moments."""
    if isinstance(adam_b, tuple | list) and len(adam_b) == 2:
        if all(isinstance(b, numbers.Real) and not isinstance(b, bool) and 0.0 <= b < 1.0 for b in adam_b):
            return float(adam_b[0]), float(adam_b[1])
    raise ValueError(f"adam_b must be a pair (b1, b2) of numbers in [0, 1), got {adam_b!r}")


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
