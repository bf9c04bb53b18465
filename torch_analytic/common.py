"""What both torch gradient trainers share: the argument check of an environment, the start of training (scrambled
episode clocks), the evaluation between epochs and the policy function a run returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from brax_bridge import TorchEnv
from brax_core import envs
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




def resume_from(
    state: Mapping[str, Any],
    modules: Mapping[str, nn.Module],
    optimizers: Mapping[str, torch.optim.Optimizer],
    generator: torch.Generator,
    env: TorchEnv,
    evaluator: BridgeEvaluator,
) -> tuple[int, int, torch.Tensor]:
    """A loaded checkpoint's run put back: networks, optimisers, generator, the evaluations made, the training envs;
    returns ``(the epoch to continue from, the updates made, the observation reached)``."""
    checkpoint.restore(state, modules, optimizers, generator)
    counters = state["counters"]
    evaluator.runs = counters["evaluations"]
    env.reset()
    observation = env.load_state_dict(state["env"])
    return counters["epoch"], counters["updates"], observation


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
    deterministic_eval: bool,
    num_evals: int,
    progress_fn: Callable[[int, Metrics], None],
) -> tuple[int, int, torch.Tensor, Metrics]:
    """A run's start: a new one evaluates first (with ``num_evals > 1``, reported as epoch 0) and starts its envs
    (``first_observation``); a restored one continues its checkpoint (``resume_from``). Returns ``(first epoch,
    updates made, observation, metrics)``."""
    if saved is not None:
        return (*resume_from(saved, modules, optimizers, generator, env, evaluator), {})
    metrics: Metrics = {}
    policy = modules["policy"]
    if num_evals > 1:
        metrics = evaluate(evaluator, SimpleNamespace(policy=policy), policy, deterministic_eval, generator, {})
        progress_fn(0, metrics)
    return 0, 0, first_observation(env, env.episode_length, generator), metrics
