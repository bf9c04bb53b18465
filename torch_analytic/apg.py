"""Analytic policy gradient in PyTorch through the bridge, with the JAX APG's semantics
(``brax_core.training.agents.apg.train``, Brax 0.14.2's).

Every update unrolls ``horizon_length // action_repeat`` policy steps of ``num_envs`` differentiable ``TorchEnv``
envs from where the last update stopped, and follows the gradient of minus the mean reward, taken through the actions
(reparametrised tanh-normal samples), MJX's physics (``jax.vjp`` of the same compiled step) and every later state;
the gradient is cut at each update's start (``TorchEnv.detach``) and at episode ends (the auto-reset). The step:
the gradient scaled to ``max_gradient_norm`` when its global norm reaches it, each component clipped to
``[-1, 1]``, then Adam with ``adam_b`` at a learning rate decayed by ``schedule_decay`` per update; then the
observation statistics take the unroll's observations. Episode clocks start scrambled over the time limit, so resets
spread over the updates. Evaluation is torch_ppo's bridge evaluator: ``eval/*`` metrics as the JAX trainers report.

The algorithm is ``apg_loss`` (one unroll's loss from explicit noise, so it is a pure function of its inputs) and
``apg_step`` (clipping and Adam); ``train`` turns Brax's keywords into an ``APGConfig`` (the JAX APG's), and
``train_from_config`` builds the env, policy and optimiser and runs epochs of updates, each followed by a checkpoint
and an evaluation, through the run driver every trainer shares (``torch_analytic.common.run``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

from brax_bridge import TorchEnv
from brax_core.training.agents.apg.config import APGConfig
from brax_core.training.run.driver import ReportedMetrics, ignore
from torch_analytic import checkpoint, common
from torch_analytic.common import make_policy
from torch_analytic.networks import APGPolicy
from torch_training.gradients import global_norm, global_norm_scale


def apg_loss(
    env: TorchEnv, policy: APGPolicy, observation: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Minus the mean reward of an unroll of ``len(noise)`` policy steps of ``env`` from its current state, where
    ``observation`` is; returns ``(loss, observations each action saw [steps, envs, obs], the last observation)``.

    ``noise`` (``[steps, envs, action_size]``, standard normal) gives the reparametrised actions
    ``tanh(loc + scale * noise)``. Nothing in the unroll is detached: ``loss.backward()`` takes the analytic gradient
    through the actions, the physics and every later state.
    """
    rewards, observations = [], []
    for step_noise in noise:
        observations.append(observation)
        nxt = env.step(policy.act(observation, step_noise)).get("next")
        rewards.append(nxt.get("reward").squeeze(-1))
        observation = nxt.get("observation")
    return -torch.stack(rewards).mean(), torch.stack(observations).detach(), observation


def apg_step(
    policy: APGPolicy, optimizer: torch.optim.Optimizer, learning_rate: float, max_gradient_norm: float
) -> torch.Tensor:
    """The JAX APG's update of the gradients in ``policy``'s parameters (``loss.backward()`` filled them): scaled to
    ``max_gradient_norm`` when their global norm reaches it (Brax's rule), each component clipped to ``[-1, 1]``,
    then an Adam step at ``learning_rate``; returns the norm after the scaling (the ``grad_norm`` metric)."""
    params = [p for p in policy.parameters() if p.grad is not None]
    grads = [p.grad for p in params]
    norm = global_norm(grads)
    scale = global_norm_scale(norm, max_gradient_norm)
    torch._foreach_mul_(grads, scale)
    for g in grads:
        g.clamp_(-1.0, 1.0)
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
    optimizer.step()
    return norm * scale


def train(
    environment: Any,
    episode_length: int,
    policy_updates: int,
    horizon_length: int = 32,
    num_envs: int = 1,
    num_evals: int = 1,
    action_repeat: int = 1,
    num_eval_envs: int = 128,
    learning_rate: float = 1e-4,
    adam_b: tuple[float, float] = (0.7, 0.95),
    use_schedule: bool = True,
    schedule_decay: float = 0.997,
    seed: int = 0,
    max_gradient_norm: float = 1e9,
    normalize_observations: bool = False,
    deterministic_eval: bool = False,
    hidden_layer_sizes: Sequence[int] = (32,) * 4,
    activation: str | Callable[..., Any] = "elu",
    layer_norm: bool = True,
    progress_fn: Callable[[int, ReportedMetrics], None] = ignore,
    eval_env: Any = None,
    randomization_fn: Callable[..., Any] | None = None,
    device: Any = None,
    network_factory: Callable[[int, int], tuple[Any, Any]] | None = None,
    save_checkpoint_path: str | os.PathLike | None = None,
    restore_checkpoint_path: str | os.PathLike | None = None,
    policy_params_fn: Callable[..., None] = ignore,
    max_to_keep: int | None = None,
) -> tuple[Callable[..., Any], APGPolicy, ReportedMetrics]:
    """Trains a policy with the analytic gradient of its return through the physics (see the module docstring).

    Arguments have the JAX APG's names, meanings and defaults (``help(brax_core.training.agents.apg.train.train)``);
    its ``make_apg_networks`` options are given by name (``hidden_layer_sizes``, ``activation``, ``layer_norm``).
    They become one ``APGConfig`` (``APGConfig.from_train_kwargs``), which ``train_from_config`` trains.
    ``environment``: a registered name, a brax_core ``Env`` or a MuJoCo Playground ``MjxEnv``; its step must be
    differentiable (a ``TorchEnv(differentiable=True)`` is built from it). ``device``: as torch_ppo's (default: JAX's
    default device where torch can reach it, else the CPU). ``progress_fn(epoch, metrics)`` after every evaluation
    (epoch 0: before training, with ``num_evals > 1``), as the JAX APG; ``policy_params_fn(env_steps, make_policy,
    policy)`` before training and after every epoch; a callback that raises has the run saved first and its
    exception names it (the run driver every trainer shares).

    ``network_factory``: networks of the user's own, as torch_ppo takes them (``fn(observation_size, action_size) ->
    (policy_module, value_module)``); APG uses the policy module in place of its MLP, behind the normaliser and the
    tanh-normal (``hidden_layer_sizes``, ``activation`` and ``layer_norm`` then keep their defaults).
    ``save_checkpoint_path``: a checkpoint of the whole run at every epoch's end, before ``progress_fn`` sees it
    (``torch_analytic.checkpoint``; ``torch_analytic.load_policy`` rebuilds the policy from one);
    ``restore_checkpoint_path`` (a step directory, or the newest under a save path) continues that run exactly,
    with the same arguments but ``policy_updates``, which may grow (other settings are refused by name).

    Returns ``(make_policy, policy, metrics)``: ``make_policy(policy, deterministic=False)`` gives
    ``act(observation) -> action``; ``policy`` is the trained ``APGPolicy``; ``metrics`` the last reported.
    """
    config = APGConfig.from_train_kwargs({
        "name": environment if isinstance(environment, str) else None, "episode_length": episode_length,
        "policy_updates": policy_updates, "horizon_length": horizon_length, "num_envs": num_envs,
        "num_evals": num_evals, "action_repeat": action_repeat, "num_eval_envs": num_eval_envs,
        "learning_rate": learning_rate, "adam_b": adam_b, "use_schedule": use_schedule,
        "schedule_decay": schedule_decay, "seed": seed, "max_gradient_norm": max_gradient_norm,
        "normalize_observations": normalize_observations, "deterministic_eval": deterministic_eval,
        "hidden_layer_sizes": hidden_layer_sizes, "activation": activation, "layer_norm": layer_norm,
        "device": device, "max_to_keep": max_to_keep,
    })
    return train_from_config(
        config, environment, progress_fn=progress_fn, eval_env=eval_env, randomization_fn=randomization_fn,
        network_factory=network_factory, save_checkpoint_path=save_checkpoint_path,
        restore_checkpoint_path=restore_checkpoint_path, policy_params_fn=policy_params_fn,
    )


def train_from_config(
    config: APGConfig, environment: Any = None, **options: Any
) -> tuple[Callable[..., Any], APGPolicy, ReportedMetrics]:
    """Trains ``config`` (an ``APGConfig``, the JAX APG's too) on ``environment`` (default: ``config.env.name``, a
    registered name), on ``config.run.device`` (``None``: the bridge's device rule). ``options``: ``train``'s
    arguments that are not config fields, by the same names (``common.OPTIONS``). Returns what ``train`` returns."""
    opts = common.checked_options(config, APGConfig, environment, options)
    config = common.with_episode_length(config, opts.environment)
    if opts.save_checkpoint_path is not None:
        config.to_json()  # a setting JSON cannot hold (a callable activation) is refused before training
    saved = checkpoint.resumable(opts.restore_checkpoint_path, config)

    env, evaluator = common.build_envs("APG", config, opts)
    network, algorithm, device, seed = config.network, config.algorithm, opts.device, config.run.seed
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        own = common.user_networks(opts.network_factory, config, env.observation_size, env.action_size)
        policy = APGPolicy(
            env.observation_size, env.action_size, network.policy_hidden_layer_sizes, network.activation,
            network.layer_norm, algorithm.normalize_observations, module=None if own is None else own[0],
        ).to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=algorithm.learning_rate, betas=algorithm.adam_b, eps=1e-8)
    generator = torch.Generator(device=device).manual_seed(seed)
    modules = common.Modules({"policy": policy}, {"policy": optimizer}, generator, env, evaluator)
    updates, observation = common.start_run(saved, modules)
    steps = config.policy_steps_per_update

    def update(count: int) -> torch.Tensor:
        """One policy update (the ``count``-th of the run); its ``grad_norm`` and ``params_norm``."""
        nonlocal observation
        noise = torch.randn((steps, env.num_envs, env.action_size), generator=generator, device=device)
        loss, observations, reached = apg_loss(env, policy, observation, noise)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        rate = algorithm.learning_rate
        if algorithm.use_schedule:
            rate *= algorithm.schedule_decay**count
        grad_norm = apg_step(policy, optimizer, rate, algorithm.max_grad_norm)
        policy.normalizer.update(observations.reshape(-1, env.observation_size))
        env.detach()  # the next update's gradient starts here
        observation = reached.detach()
        with torch.no_grad():
            params_norm = torch.stack([p.square().sum() for p in policy.parameters()]).sum().sqrt()
        return torch.stack([grad_norm, params_norm])

    backend = common.AnalyticBackend(
        "apg", config, update, ("grad_norm", "params_norm"), modules, policy, updates, 0, opts.save_checkpoint_path,
        opts.network_factory,
    )
    return make_policy, policy, common.run(backend, config, opts)


__all__ = ["APGPolicy", "apg_loss", "apg_step", "make_policy", "train", "train_from_config"]
