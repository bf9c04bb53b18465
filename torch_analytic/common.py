"""What both torch gradient trainers share: their options beside the configuration and their checks, the envs and
the evaluator, the start of training (scrambled episode clocks) or of a resumed run, the run itself (the run driver
every trainer's run goes through, over an ``AnalyticBackend``, planned by ``plan_updates``), and the policy function
a run returns."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from brax_bridge import TorchEnv
from brax_core import envs
from brax_core.training import resume
from brax_core.training import validation as v
from brax_core.training.config import Config
from brax_core.training.run.driver import ReportedMetrics, RunDriver, ignore
from brax_core.training.run.schedule import plan_updates
from torch_analytic import checkpoint
from torch_analytic.networks import APGPolicy
from torch_training import network_factory as network_factory_checks
from torch_training.device import resolve_device
from torch_training.evaluation import BridgeEvaluator

# train_from_config's options: the arguments of the trainers' train that are not configuration fields.
OPTIONS = (
    "progress_fn", "policy_params_fn", "eval_env", "randomization_fn", "network_factory", "save_checkpoint_path",
    "restore_checkpoint_path",
)


@dataclasses.dataclass(frozen=True)
class Options:
    """A run's arguments besides its configuration, checked: the env, callbacks, checkpoint paths, the device."""

    environment: Any
    eval_env: Any
    progress_fn: Callable[[int, Mapping[str, Any]], None]
    policy_params_fn: Callable[..., None]
    randomization_fn: Callable[..., Any] | None
    network_factory: Callable[[int, int], tuple[Any, Any]] | None
    save_checkpoint_path: str | os.PathLike | None
    restore_checkpoint_path: str | os.PathLike | None
    device: torch.device


def checked_options(config: Config, config_type: type, environment: Any, options: Mapping[str, Any]) -> Options:
    """``train_from_config``'s arguments checked before anything is built: ``config`` of ``config_type``, the env
    (``None``: ``config.env.name``) and ``options`` by name (``OPTIONS``; a config field among them is refused,
    naming how to set it)."""
    config_type.check_train_options(config, options, OPTIONS)
    if environment is None:
        environment = config.env.name
    if environment is None:
        raise ValueError("environment: give an env, or a config whose env.name names a registered environment")
    environment = check_environment("environment", environment)
    eval_env = options.get("eval_env")
    eval_env = environment if eval_env is None else check_environment("eval_env", eval_env)
    randomization_fn = options.get("randomization_fn")
    if randomization_fn is not None:
        v.callable_arg("randomization_fn", randomization_fn)
    network_factory = options.get("network_factory")
    if network_factory is not None:
        network_factory = network_factory_checks.check_factory(network_factory)
    progress_fn = resume.check_callback(
        "progress_fn", v.callable_arg("progress_fn", options.get("progress_fn", ignore)), "(epoch, metrics)"
    )
    policy_params_fn = resume.check_callback(
        "policy_params_fn", v.callable_arg("policy_params_fn", options.get("policy_params_fn", ignore)),
        "(env_steps, make_policy, params)",
    )
    return Options(
        environment=environment, eval_env=eval_env, progress_fn=progress_fn, policy_params_fn=policy_params_fn,
        randomization_fn=randomization_fn, network_factory=network_factory,
        save_checkpoint_path=options.get("save_checkpoint_path"),
        restore_checkpoint_path=options.get("restore_checkpoint_path"),
        device=resolve_device(config.run.device, environment),
    )


def make_policy(policy: APGPolicy, deterministic: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """``act(observation) -> action``: the mode with ``deterministic``, else a sample (torch's global generator)."""

    @torch.inference_mode()
    def act(observation: torch.Tensor) -> torch.Tensor:
        if deterministic:
            return policy.mode(observation)
        loc, _ = policy(observation)
        return policy.act(observation, torch.randn_like(loc))

    return act


def first_observation(env: TorchEnv, episode_length: int, generator: torch.Generator) -> torch.Tensor:
    """The envs reset with their episode clocks scrambled over the time limit (the JAX APG's ``scramble_steps``),
    then one step with zero actions, as the JAX APG starts; the observation reached."""
    env.reset()
    steps = torch.rand(env.num_envs, generator=generator, device=env.device) * episode_length
    env.set_episode_steps(torch.round(steps).clamp(max=episode_length - 1))
    with torch.no_grad():
        zero = torch.zeros(env.num_envs, env.action_size, device=env.device)
        observation = env.step(zero).get(("next", "observation"))
    env.detach()
    return observation


def check_environment(name: str, environment: Any) -> Any:
    """The argument ``name`` as a trainer takes it: a registered name (checked), or an env as a brax_core ``Env``;
    ``TypeError`` naming what is accepted otherwise."""
    if isinstance(environment, str):
        envs.get_environment_class(environment)  # unknown names raise here, listing the registered ones
        return environment
    if envs.is_env(environment):
        return envs.as_env(environment)
    raise TypeError(
        f"{name} must be a registered environment name, a brax_core Env or a MuJoCo Playground MjxEnv, "
        f"got {environment!r}"
    )


def user_networks(
    network_factory: Any, config: Config, observation_size: int, action_size: int
) -> tuple[nn.Module, nn.Module] | None:
    """``network_factory``'s ``(policy_module, value_module)`` (torch_ppo's convention, their outputs checked), or
    ``None`` without one. The configuration's own network fields, which a factory replaces, must keep their
    defaults beside it: one changed is refused by name."""
    if network_factory is None:
        return None
    defaults = type(config).defaults()
    changed = sorted(name for name, value in dataclasses.asdict(config.network).items() if value != defaults[name])
    if changed:
        raise ValueError(
            f"{', '.join(changed)} configure the trainer's own networks, which network_factory replaces: leave them "
            "at their defaults beside network_factory"
        )
    return network_factory_checks.build(network_factory, observation_size, action_size)


def build_envs(algo: str, config: Config, options: Options) -> tuple[TorchEnv, BridgeEvaluator]:
    """The differentiable training envs and the evaluator on their own envs (seeded apart), as both trainers use
    them; flat array observations only."""
    env_config, seed = config.env, config.run.seed
    common = dict(episode_length=env_config.episode_length, action_repeat=env_config.action_repeat,
                  device=options.device, randomization_fn=options.randomization_fn)
    training_length = getattr(config.algorithm, "training_episode_length", None) or env_config.episode_length
    env = TorchEnv(options.environment, env_config.num_envs, seed=seed, differentiable=True,
                   **{**common, "episode_length": training_length})
    if not isinstance(env.observation_size, int):
        raise NotImplementedError(
            f"{algo} trains on flat array observations; the environment's observation_size is "
            f"{env.observation_size!r} (as the JAX APG)"
        )
    evaluator = BridgeEvaluator(
        TorchEnv(options.eval_env, env_config.num_eval_envs, seed=seed + 104_729, **common),
        -(-env_config.episode_length // env_config.action_repeat), env_config.action_repeat, seed,
    )
    return env, evaluator


def with_episode_length(config: Config, environment: Any) -> Config:
    """``config`` with the env's own episode length where it gives none."""
    if config.env.episode_length is not None:
        return config
    env = envs.get_environment(environment) if isinstance(environment, str) else environment
    return config.replace(episode_length=int(getattr(env.unwrapped, "default_episode_length", 1000)))


@dataclasses.dataclass
class Modules:
    """A run's networks and optimisers by name, its generator, and the envs and evaluator they train on: what a
    checkpoint saves and a resumed run puts back."""

    networks: dict[str, nn.Module]
    optimizers: dict[str, torch.optim.Optimizer]
    generator: torch.Generator
    env: TorchEnv
    evaluator: BridgeEvaluator


def start_run(saved: Mapping[str, Any] | None, modules: Modules) -> tuple[int, torch.Tensor]:
    """A run's start: a new one starts its envs (``first_observation``); a restored one puts its checkpoint back
    (networks, optimisers, generator, the evaluations made, the training envs). Returns ``(updates made,
    observation)``."""
    env = modules.env
    if saved is None:
        return 0, first_observation(env, env.episode_length, modules.generator)
    checkpoint.restore(saved, modules.networks, modules.optimizers, modules.generator)
    counters = saved["counters"]
    modules.evaluator.runs = counters["evaluations"]
    env.reset()
    return counters["updates"], env.load_state_dict(saved["env"])


class AnalyticBackend:
    """A torch gradient trainer's side of the run driver (``brax_core.training.run.driver.Backend``): one training
    step is one update.

    ``update(updates_so_far) -> tensor`` runs one update and returns its metrics (named by ``metric_names``), which
    an epoch averages with one host read at its end; ``gradient_cuts`` adds the env steps whose gradient the
    differentiable step cut (``TorchEnv.gradient_cuts``). Checkpoints go to ``save_checkpoint_path``.
    """

    def __init__(
        self,
        algo: str,
        config: Config,
        update: Callable[[int], torch.Tensor],
        metric_names: Sequence[str],
        modules: Modules,
        policy: APGPolicy,
        updates: int,
        epoch: int,
        save_checkpoint_path: str | os.PathLike | None,
        network_factory: Any,
    ):
        self._algo, self._config, self._update, self._names = algo, config, update, tuple(metric_names)
        self._modules, self._policy, self._path = modules, policy, save_checkpoint_path
        self._network_factory = network_factory
        self.updates, self.epoch = updates, epoch  # made so far (a restored run's included)
        self._metrics: dict[str, float] = {}
        self._sums: torch.Tensor | None = None

    def skip_evaluations(self, count: int) -> None:
        """Nothing to skip: the evaluations draw from the run's generator, which a checkpoint restores."""

    def train(self, num_steps: int) -> None:
        """``num_steps`` updates, with no host read: their metrics are summed on the device."""
        env = self._modules.env
        cuts_before = env.gradient_cuts
        sums = torch.zeros(len(self._names), device=env.device)
        for _ in range(num_steps):
            sums += self._update(self.updates)
            self.updates += 1
        self.epoch += 1
        cuts = (env.gradient_cuts - cuts_before).to(sums.device)
        self._sums = torch.cat([sums / max(num_steps, 1), cuts[None]])
        if env.device.type == "cuda":
            torch.cuda.synchronize(env.device)  # the driver times the call

    def training_metrics(self) -> Mapping[str, float]:
        """The last epoch's means, read to the host (the epoch's one host read)."""
        if self._sums is not None:
            self._metrics = dict(zip((*self._names, "gradient_cuts"), self._sums.tolist(), strict=True))
            self._sums = None
        return self._metrics

    def evaluate(self, training_metrics: Mapping[str, float]) -> ReportedMetrics:
        policy = self._policy
        policy.eval()
        # The evaluator acts with ``.policy`` of what it is given, as it reads torch_ppo's modules.
        metrics = self._modules.evaluator.run(
            SimpleNamespace(policy=policy), self._config.run.deterministic_eval, self._modules.generator
        )
        policy.train()
        return {**training_metrics, **metrics}

    def save(self, env_steps: int) -> None:
        if self._path is None:
            return
        modules = self._modules
        counters = {"epoch": self.epoch, "updates": self.updates, "evaluations": modules.evaluator.runs}
        checkpoint.save(
            self._path, self._algo, self._config, env_steps, counters, modules.networks, modules.optimizers,
            modules.generator, modules.env.state_dict(), self._network_factory,
        )

    def params(self) -> APGPolicy:
        return self._policy


def run(backend: AnalyticBackend, config: Config, options: Options) -> ReportedMetrics:
    """The run from ``backend.updates`` to its end through the run driver (``plan_updates``: Brax's epochs, a
    resumed run continuing the unbroken plan); at each epoch's end the checkpoint (before any callback sees the
    epoch), the evaluation and ``progress_fn(epoch, metrics)``; an evaluation before training with ``num_evals > 1``
    (epoch 0) and where a restored run starts. A callback that raises has the run saved first and its exception
    names it. Returns the last metrics reported."""
    steps_per_update = config.env_steps_per_update
    schedule = plan_updates(config.policy_updates, config.run.num_evals, backend.updates, steps_per_update)
    backend.epoch = schedule.calls_done
    driver = RunDriver(
        backend, num_evals=config.run.num_evals, progress_fn=options.progress_fn,
        policy_params_fn=options.policy_params_fn, save_checkpoint_path=options.save_checkpoint_path,
        restore_checkpoint_path=options.restore_checkpoint_path, make_policy=make_policy,
        env_steps=backend.updates * steps_per_update,
        report_step=lambda _: backend.epoch,  # Brax's APG reports epochs
    )
    return driver.run(schedule, evaluate=True)
