"""What both torch gradient trainers share: the argument check of an environment, the start of training (scrambled
episode clocks), the run itself (``run_epochs``: the run driver both PPO trainers' runs go through,
over an ``EpochBackend``), the evaluation between epochs and the policy function a run returns."""

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
from brax_core.training.agents.apg.arguments import epochs_of
from brax_core.training.run.driver import RunDriver
from brax_core.training.run.schedule import Schedule
from torch_analytic import checkpoint
from torch_analytic.networks import APGPolicy
from torch_ppo import network_factory as network_factory_checks
from torch_ppo.evaluation import BridgeEvaluator

Metrics = dict[str, float]


def ignore(*args: Any) -> None:
    """The default ``progress_fn``: does nothing."""


def make_policy(policy: APGPolicy, deterministic: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """``act(observation) -> action``: the mode with ``deterministic``, else a sample (torch's global generator)."""

    @torch.inference_mode()
    def act(observation: torch.Tensor) -> torch.Tensor:
        if deterministic:
            return policy.mode(observation)
        loc, _ = policy(observation)
        return policy.act(observation, torch.randn_like(loc))

    return act


def evaluate(
    evaluator: BridgeEvaluator, evaluated: Any, policy: APGPolicy, deterministic: bool, generator: torch.Generator,
    training: Mapping[str, float],
) -> Metrics:
    """``policy`` evaluated (in eval mode) by ``evaluator``: its ``eval/*`` metrics after the ``training`` ones."""
    policy.eval()
    metrics = evaluator.run(evaluated, deterministic, generator)
    policy.train()
    return {**training, **metrics}


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


def save_epoch(
    path: Any,
    algo: str,
    settings: Mapping[str, Any],
    epoch: int,
    updates: int,
    env_steps_per_update: int,
    modules: Mapping[str, nn.Module],
    optimizers: Mapping[str, torch.optim.Optimizer],
    generator: torch.Generator,
    env: TorchEnv,
    evaluator: BridgeEvaluator,
) -> str:
    """The checkpoint of a run after ``epoch`` epochs and ``updates`` updates (at ``updates *
    env_steps_per_update`` env steps); returns its step directory."""
    counters = {"epoch": epoch, "updates": updates, "evaluations": evaluator.runs}
    return checkpoint.save(
        path, algo, settings, updates * env_steps_per_update, counters, modules, optimizers, generator,
        env.state_dict(),
    )


def user_networks(
    network_factory: Any, observation_size: int, action_size: int, built_in: Mapping[str, tuple[Any, Any]]
) -> tuple[nn.Module, nn.Module] | None:
    """``network_factory``'s ``(policy_module, value_module)`` (torch_ppo's convention, their outputs checked), or
    ``None`` without one. ``built_in``: the trainer's own networks' options as ``{name: (value, default)}``, which a
    factory replaces: one changed beside it is refused by name."""
    if network_factory is None:
        return None
    factory = network_factory_checks.check_factory(network_factory)
    changed = sorted(name for name, (value, default) in built_in.items() if value != default)
    if changed:
        raise ValueError(
            f"{', '.join(changed)} configure the trainer's own networks, which network_factory replaces: leave them "
            "at their defaults beside network_factory"
        )
    return network_factory_checks.build(factory, observation_size, action_size)


def build_envs(
    algo: str, environment: Any, eval_env: Any, num_envs: int, num_eval_envs: int, episode_length: int,
    action_repeat: int, device: Any, seed: int, randomization_fn: Any,
) -> tuple[TorchEnv, BridgeEvaluator]:
    """The differentiable training envs and the evaluator on their own envs (seeded apart), as both trainers use
    them; flat array observations only."""
    env = TorchEnv(
        environment, num_envs, episode_length=episode_length, action_repeat=action_repeat, device=device, seed=seed,
        randomization_fn=randomization_fn, differentiable=True,
    )
    if not isinstance(env.observation_size, int):
        raise NotImplementedError(
            f"{algo} trains on flat array observations; the environment's observation_size is "
            f"{env.observation_size!r} (as the JAX APG)"
        )
    evaluator = BridgeEvaluator(
        TorchEnv(eval_env, num_eval_envs, episode_length=episode_length, action_repeat=action_repeat, device=device,
                 seed=seed + 104_729, randomization_fn=randomization_fn),
        -(-episode_length // action_repeat), action_repeat, seed,
    )
    return env, evaluator


def start_run(
    saved: Mapping[str, Any] | None,
    modules: Mapping[str, nn.Module],
    optimizers: Mapping[str, torch.optim.Optimizer],
    generator: torch.Generator,
    env: TorchEnv,
    evaluator: BridgeEvaluator,
) -> tuple[int, int, torch.Tensor]:
    """A run's start: a new one starts its envs (``first_observation``); a restored one puts its checkpoint back
    (networks, optimisers, generator, the evaluations made, the training envs). Returns ``(first epoch, updates made,
    observation)``."""
    if saved is None:
        return 0, 0, first_observation(env, env.episode_length, generator)
    checkpoint.restore(saved, modules, optimizers, generator)
    counters = saved["counters"]
    evaluator.runs = counters["evaluations"]
    env.reset()
    return counters["epoch"], counters["updates"], env.load_state_dict(saved["env"])


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """What the run driver reads of a run's settings (``hp.run``): its evaluations; training metrics are reported
    at the evaluations only."""

    num_evals: int
    log_training_metrics: bool = False


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    run: RunSettings


@dataclasses.dataclass(frozen=True)
class DriverArguments:
    """A gradient trainer's arguments as the run driver reads them (``brax_core.training.run.driver.RunArguments``)."""

    hp: Hyperparameters
    progress_fn: Callable[[int, Mapping[str, Any]], None]
    save_checkpoint_path: str | os.PathLike | None
    restore_checkpoint_path: str | os.PathLike | None
    policy_params_fn: Callable[..., None] = ignore


class EpochBackend:
    """A torch gradient trainer's side of the run driver (``brax_core.training.run.driver.Backend``): one training
    step is one update.

    ``update(updates_so_far) -> tensor`` runs one update and returns its metrics (named by ``metric_names``), which
    an epoch averages with one host read at its end; ``gradient_cuts`` adds the env steps whose gradient the
    differentiable step cut (``TorchEnv.gradient_cuts``). ``save(epoch, updates)`` writes the run's checkpoint.
    """

    def __init__(
        self,
        update: Callable[[int], torch.Tensor],
        metric_names: Sequence[str],
        env: TorchEnv,
        evaluator: BridgeEvaluator,
        policy: APGPolicy,
        deterministic_eval: bool,
        generator: torch.Generator,
        save: Callable[[int, int], str],
        epoch: int,
        updates: int,
    ):
        self._update, self._names, self._env, self._evaluator = update, tuple(metric_names), env, evaluator
        self._policy, self._deterministic, self._generator, self._save = policy, deterministic_eval, generator, save
        self.epoch, self.updates = epoch, updates  # the epochs and updates made (a restored run's included)
        self._metrics: dict[str, float] = {}

    def skip_evaluations(self, count: int) -> None:
        """Nothing to skip: the evaluations draw from the run's generator, which a checkpoint restores."""

    def reset_envs(self, env_steps: int) -> None:
        raise NotImplementedError("the gradient trainers' schedule has no resets between evaluations")

    def train(self, num_steps: int) -> None:
        cuts_before = self._env.gradient_cuts
        sums = torch.zeros(len(self._names), device=self._env.device)
        for _ in range(num_steps):
            sums += self._update(self.updates)
            self.updates += 1
        self.epoch += 1
        cuts = (self._env.gradient_cuts - cuts_before).to(sums.device)
        values = torch.cat([sums / max(num_steps, 1), cuts[None]]).tolist()  # the epoch's one host read
        self._metrics = dict(zip((*self._names, "gradient_cuts"), values, strict=True))

    def training_metrics(self) -> Mapping[str, float]:
        return self._metrics

    def evaluate(self, training_metrics: Mapping[str, float]) -> Metrics:
        policy = self._policy
        return evaluate(self._evaluator, SimpleNamespace(policy=policy), policy, self._deterministic, self._generator,
                        training_metrics)

    def save(self, env_steps: int) -> None:
        self._save(self.epoch, self.updates)

    def params(self) -> APGPolicy:
        return self._policy


def run_epochs(
    backend: EpochBackend,
    *,
    num_evals: int,
    updates_per_epoch: int,
    env_steps_per_update: int,
    progress_fn: Callable[[int, Metrics], None],
    save_checkpoint_path: str | os.PathLike | None,
    restore_checkpoint_path: str | os.PathLike | None,
) -> Metrics:
    """The run from ``backend.epoch`` to its end through the run driver: ``epochs_of(num_evals)`` epochs of
    ``updates_per_epoch`` updates; at each epoch's end the checkpoint (before any callback sees the epoch), the
    evaluation and ``progress_fn(epoch, metrics)``; an evaluation before training with ``num_evals > 1`` (epoch 0)
    and where a restored run starts. A ``progress_fn`` that raises has the run saved first and its exception names
    it. Returns the last metrics reported."""
    schedule = Schedule(
        epochs=epochs_of(num_evals), steps_per_call=updates_per_epoch, calls_per_segment=1, segments_per_epoch=1,
        resets=False, calls_done=backend.epoch, env_steps_per_training_step=env_steps_per_update,
    )
    arguments = DriverArguments(
        Hyperparameters(RunSettings(num_evals)), progress_fn, save_checkpoint_path, restore_checkpoint_path
    )
    driver = RunDriver(
        backend, arguments, make_policy=make_policy, env_steps=backend.updates * env_steps_per_update,
        report_step=lambda _: backend.epoch,  # Brax's APG reports epochs
    )
    return driver.run(schedule, evaluate=True)
