"""SHAC, Short-Horizon Actor-Critic (Xu et al., "Accelerated Policy Learning with Parallel Differentiable
Simulation", ICLR 2022), in PyTorch through the bridge's differentiable ``TorchEnv``.

Every update unrolls a window of ``horizon_length // action_repeat`` policy steps of ``num_envs`` envs from where the
last window stopped. The actor's loss is minus the window's discounted return, closed by a value: at the window's end
``gamma^k V(s_k)``, at an episode's end inside the window ``0`` where it terminated and ``gamma^k V(final
observation)`` where the time limit cut it; the discount restarts after each reset, and the sum is averaged over
steps and envs. Its gradient runs through the actions (reparametrised tanh-normal samples), MJX's physics and the
value's input into the actor; the value network's own weights take no step from it. The gradient is cut at each
window's start (``TorchEnv.detach``) and at episode ends (the auto-reset starts a state that depends on no action).
The actor's gradient is clipped to ``max_gradient_norm`` and Adam takes a step.

The critic then fits TD(lambda) targets (lambda-returns of the window's rewards, bootstrapped from the target critic
with the same terminal rule) by mean squared error: ``critic_iterations`` passes over the window's states in
``num_critic_batches`` minibatches, in order, each step clipped and taken by Adam; the target critic moves to
``alpha * target + (1 - alpha) * critic`` (``target_critic_alpha``). Last, the observation statistics take the window's
observations: the actor, the critic and the targets of one update all see the statistics it started with.

Defaults are the reference implementation's Ant and Cheetah configurations (NVlabs/DiffRL,
``examples/cfg/shac/ant.yaml`` and ``cheetah.yaml``, with ``algorithms/shac.py``): a 32-step horizon, 64 envs,
``gamma`` 0.99, ``td_lambda`` 0.95, 16 critic passes of 4 minibatches, ``target_critic_alpha`` 0.2, learning rates
2e-3 for both networks decayed linearly towards 1e-5 over the run, Adam betas (0.7, 0.95), gradient norms clipped at
1.0 (the critic's too), an actor of (128, 64, 32) and a critic of (64, 64) units with ELU and layer normalisation,
and normalised observations. The bootstrap values in the actor's loss come from the target critic, as there. The
actor is ``APGPolicy``'s tanh-normal, whose scale depends on the state, where the reference has a learned
state-independent log-std (initially -1). Episode clocks start scrambled over the time limit, as the torch APG's,
so resets spread over the windows.

The algorithm is ``shac_actor_loss`` (one window's loss from explicit noise, and the window's record),
``actor_step``, ``td_lambda_targets``, ``critic_step`` and ``update_target``; ``train`` checks its arguments, builds
the env, networks and optimisers, and runs epochs of updates, each followed by a checkpoint and an evaluation,
through the run driver both PPO trainers use (``torch_analytic.common.run_epochs``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from brax_bridge import TorchEnv
from brax_core.training import resume
from brax_core.training import validation as v
from brax_core.training.agents.apg.arguments import adam_betas, epochs_of, updates_per_epoch
from torch_analytic import checkpoint
from torch_analytic.common import (
    EpochBackend,
    build_envs,
    check_environment,
    ignore,
    make_policy,
    run_epochs,
    save_epoch,
    start_run,
    user_networks,
)
from torch_analytic.networks import APGPolicy, SHACCritic
from torch_ppo.arguments import resolve_device
from torch_ppo.network_factory import name_of
from torch_ppo.networks import ACTIVATIONS
from torch_ppo.update import global_norm, global_norm_scale

Metrics = dict[str, float]
LR_SCHEDULES = ("linear", "constant")
# The reference implementation's linear schedule ends here rather than at zero.
FINAL_LEARNING_RATE = 1e-5


class Window(NamedTuple):
    """One window of ``steps`` policy steps of ``envs`` envs, detached: what the critic's update needs.

    ``observations`` ``[steps, envs, obs]``: the (raw) observation each action saw. ``rewards`` ``[steps, envs]``:
    the rewards times ``reward_scaling``. ``final_observations`` ``[steps, envs, obs]``: the observation each step
    reached, before any auto-reset. ``next_values`` ``[steps, envs]``: the value network's value of those, not
    zeroed where an episode terminated. ``terminated``, ``done`` ``[steps, envs]`` (bool): the step ended its
    episode by termination / by termination or the time limit. ``observation`` ``[envs, obs]``: the observation
    reached (after any auto-reset), where the next window starts.
    """

    observations: torch.Tensor
    rewards: torch.Tensor
    final_observations: torch.Tensor
    next_values: torch.Tensor
    terminated: torch.Tensor
    done: torch.Tensor
    observation: torch.Tensor


def shac_actor_loss(
    env: TorchEnv,
    policy: APGPolicy,
    critic: Callable[[torch.Tensor], torch.Tensor],
    observation: torch.Tensor,
    noise: torch.Tensor,
    gamma: float,
    reward_scaling: float = 1.0,
) -> tuple[torch.Tensor, Window]:
    """SHAC's actor loss over a window of ``len(noise)`` policy steps of ``env`` from its current state, where
    ``observation`` is; returns ``(loss, the window's record)``.

    ``noise`` (``[steps, envs, action_size]``, standard normal) gives the actions ``tanh(loc + scale * noise)``.
    ``critic`` maps observations normalised by ``policy.normalizer`` to values ``[envs, 1]`` (``train`` passes the
    target critic). Per env, the loss sums ``-gamma^k r_k`` over the window's steps, ``k`` counting from the window's
    start or the last reset, and ``-gamma^(k+1) V`` where a return closes: ``V`` of the final observation at the
    window's last step and where the time limit ended an episode, zero where it terminated. The total is divided by
    ``steps * envs``. Nothing in the window is detached: ``loss.backward()`` takes the gradient through the actions,
    the physics and the critic's input.
    """
    steps, num_envs = noise.shape[0], noise.shape[1]
    discount = torch.ones(num_envs, device=observation.device)
    total = torch.zeros((), device=observation.device)
    record: dict[str, list[torch.Tensor]] = {name: [] for name in Window._fields[:-1]}
    for t, step_noise in enumerate(noise):
        record["observations"].append(observation.detach())
        nxt = env.step(policy.act(observation, step_noise)).get("next")
        reward = nxt.get("reward").squeeze(-1) * reward_scaling
        done, terminated = nxt.get("done").squeeze(-1), nxt.get("terminated").squeeze(-1)
        final = nxt.get("final_observation")
        value = critic(policy.normalizer(final)).squeeze(-1)
        closes = done if t < steps - 1 else torch.ones_like(done)  # every return closes at the window's end
        bootstrap = torch.where(closes & ~terminated, value, 0.0)
        total = total - (discount * (reward + gamma * bootstrap)).sum()
        discount = torch.where(done, 1.0, discount * gamma)
        observation = nxt.get("observation")
        for name, tensor in zip(Window._fields[1:-1], (reward, final, value, terminated, done), strict=True):
            record[name].append(tensor.detach())
    window = Window(*(torch.stack(record[name]) for name in Window._fields[:-1]), observation.detach())
    return total / (steps * num_envs), window


def td_lambda_targets(
    rewards: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    done: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """The lambda-returns of a window (``[steps, envs]`` each; flags bool), the critic's targets.

    ``next_values[t]``: the value of the observation step ``t`` reached before any reset. The bootstrap of step ``t``
    is that value, or zero where the step terminated its episode. Backwards from the window's end, where the return
    is ``r + gamma * bootstrap``: ``G_t = r_t + gamma * bootstrap_t`` where step ``t`` ended an episode, else
    ``G_t = r_t + gamma * ((1 - lam) * bootstrap_t + lam * G_(t+1))``. ``lam = 1`` gives the discounted return to
    the episode's or window's end plus the bootstrap there, ``lam = 0`` the one-step target ``r_t + gamma *
    bootstrap_t``. The reference implementation's ``compute_target_values`` ('td-lambda') computes the same.
    """
    bootstrap = torch.where(terminated, 0.0, next_values)
    targets = torch.empty_like(rewards)
    following = bootstrap[-1]  # at the window's end the lambda-mixture is the bootstrap alone
    for t in range(rewards.shape[0] - 1, -1, -1):
        mixed = torch.where(done[t], bootstrap[t], (1.0 - lam) * bootstrap[t] + lam * following)
        following = rewards[t] + gamma * mixed
        targets[t] = following
    return targets


def actor_step(policy: nn.Module, optimizer: torch.optim.Optimizer, max_gradient_norm: float) -> torch.Tensor:
    """Scales the gradients in ``policy``'s parameters (``loss.backward()`` filled them) to ``max_gradient_norm``
    when their global norm exceeds it, then takes ``optimizer``'s step; returns the norm before the scaling (the
    ``grad_norm`` metric)."""
    grads = [p.grad for p in policy.parameters() if p.grad is not None]
    norm = global_norm(grads)
    torch._foreach_mul_(grads, global_norm_scale(norm, max_gradient_norm))
    optimizer.step()
    return norm


def critic_step(
    critic: nn.Module,
    optimizer: torch.optim.Optimizer,
    observations: torch.Tensor,
    targets: torch.Tensor,
    num_batches: int,
    iterations: int,
    max_gradient_norm: float,
) -> torch.Tensor:
    """Fits ``critic`` to ``targets`` (``[n]``) at ``observations`` (``[n, obs]``, normalised): ``iterations``
    passes over the rows in order, in minibatches of ``n // num_batches`` rows (a remainder makes one more), each a
    mean-squared-error step with the gradient's global norm clipped to ``max_gradient_norm``. Returns the last
    pass's mean loss."""
    size = max(observations.shape[0] // num_batches, 1)
    batches = list(zip(observations.split(size), targets.split(size), strict=True))
    params = list(critic.parameters())
    passed = torch.zeros((), device=observations.device)
    for _ in range(iterations):
        passed = torch.zeros((), device=observations.device)
        for batch_observations, batch_targets in batches:
            loss = (critic(batch_observations).squeeze(-1) - batch_targets).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grads = [p.grad for p in params if p.grad is not None]
            torch._foreach_mul_(grads, global_norm_scale(global_norm(grads), max_gradient_norm))
            optimizer.step()
            passed = passed + loss.detach()
    return passed / len(batches)


@torch.no_grad()
def update_target(target: nn.Module, source: nn.Module, alpha: float) -> None:
    """Polyak averaging: every parameter of ``target`` becomes ``alpha * target + (1 - alpha) * source``."""
    torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), 1.0 - alpha)


def train(
    environment: Any,
    episode_length: int,
    policy_updates: int,
    horizon_length: int = 32,
    num_envs: int = 64,
    num_evals: int = 1,
    action_repeat: int = 1,
    num_eval_envs: int = 128,
    actor_learning_rate: float = 2e-3,
    critic_learning_rate: float = 2e-3,
    lr_schedule: str = "linear",
    adam_b: tuple[float, float] = (0.7, 0.95),
    gamma: float = 0.99,
    td_lambda: float = 0.95,
    critic_iterations: int = 16,
    num_critic_batches: int = 4,
    target_critic_alpha: float = 0.2,
    max_gradient_norm: float = 1.0,
    reward_scaling: float = 1.0,
    seed: int = 0,
    normalize_observations: bool = True,
    deterministic_eval: bool = False,
    actor_hidden_layer_sizes: Sequence[int] = (128, 64, 32),
    critic_hidden_layer_sizes: Sequence[int] = (64, 64),
    activation: str | Callable[..., Any] = "elu",
    layer_norm: bool = True,
    progress_fn: Callable[[int, Metrics], None] = ignore,
    eval_env: Any = None,
    randomization_fn: Callable[..., Any] | None = None,
    device: Any = None,
    network_factory: Callable[[int, int], tuple[Any, Any]] | None = None,
    save_checkpoint_path: str | os.PathLike | None = None,
    restore_checkpoint_path: str | os.PathLike | None = None,
) -> tuple[Callable[..., Any], APGPolicy, Metrics]:
    """Trains a policy with SHAC (see the module docstring): ``policy_updates`` windows, each an actor step and a
    critic fit.

    ``environment``: a registered name, a brax_core ``Env`` or a MuJoCo Playground ``MjxEnv``; its step must be
    differentiable (a ``TorchEnv(differentiable=True)`` is built from it). ``horizon_length``: env steps per window
    (``horizon_length // action_repeat`` policy steps); ``gamma`` discounts per policy step. ``lr_schedule``:
    'linear' (both learning rates from their value at the first update towards 1e-5 at the last) or 'constant'.
    ``adam_b``: both optimisers' Adam betas. ``reward_scaling`` multiplies the rewards of both losses.
    ``layer_norm`` and ``activation`` apply to both networks. ``num_evals``, ``action_repeat``, ``num_eval_envs``,
    ``deterministic_eval``, ``eval_env``, ``randomization_fn``, ``device`` and ``progress_fn(epoch, metrics)`` (after
    every evaluation; epoch 0: before training, with ``num_evals > 1``) mean what they mean to ``apg.train``.

    Metrics: ``eval/*`` as the other trainers report; per epoch the means over its updates of
    ``training/actor_loss``, ``training/critic_loss`` (the last critic pass's), ``training/grad_norm`` (the actor's
    gradient norm before clipping) and ``training/value_mean`` (the target critic's values of the states reached),
    with ``training/sps``, ``training/walltime`` and ``training/gradient_cuts`` (the epoch's env steps whose gradient
    was cut because the physics' reverse pass was not finite there: ``TorchEnv.gradient_cuts``).

    ``network_factory``: networks of the user's own, as torch_ppo takes them (``fn(observation_size, action_size) ->
    (policy_module, value_module)``): the actor and the critic, the actor behind the normaliser and the tanh-normal,
    the critic on normalised observations (the hidden sizes, ``activation`` and ``layer_norm`` then keep their
    defaults).
    ``save_checkpoint_path``: a checkpoint of the whole run at every epoch's end, before ``progress_fn`` sees it
    (``torch_analytic.checkpoint``); ``restore_checkpoint_path`` (a step directory, or the newest under a save path)
    continues that run exactly, with the same arguments (other settings are refused by name).

    Returns ``(make_policy, policy, metrics)``: ``make_policy(policy, deterministic=False)`` gives
    ``act(observation) -> action``; ``policy`` is the trained ``APGPolicy``; ``metrics`` the last reported.
    """
    environment = check_environment("environment", environment)
    episode_length = v.positive_int("episode_length", episode_length)
    policy_updates = v.positive_int("policy_updates", policy_updates)
    horizon_length = v.positive_int("horizon_length", horizon_length)
    num_envs, num_evals = v.positive_int("num_envs", num_envs), v.positive_int("num_evals", num_evals)
    action_repeat = v.positive_int("action_repeat", action_repeat)
    num_eval_envs = v.positive_int("num_eval_envs", num_eval_envs)
    if horizon_length < action_repeat:
        raise ValueError(
            f"horizon_length ({horizon_length}) must be at least action_repeat ({action_repeat}): a window unrolls "
            "horizon_length // action_repeat policy steps"
        )
    steps = horizon_length // action_repeat
    actor_learning_rate = v.real("actor_learning_rate", actor_learning_rate, low=0.0, open_low=True)
    critic_learning_rate = v.real("critic_learning_rate", critic_learning_rate, low=0.0, open_low=True)
    lr_schedule = v.check(v.FieldSpec("choice", "", choices=LR_SCHEDULES, name="lr_schedule"), lr_schedule)
    adam_b = adam_betas(adam_b)
    gamma = v.real("gamma", gamma, low=0.0, high=1.0)
    td_lambda = v.real("td_lambda", td_lambda, low=0.0, high=1.0)
    critic_iterations = v.positive_int("critic_iterations", critic_iterations)
    num_critic_batches = v.positive_int("num_critic_batches", num_critic_batches)
    if num_critic_batches > steps * num_envs:
        raise ValueError(
            f"num_critic_batches ({num_critic_batches}) must be at most the states of a window, "
            f"horizon_length // action_repeat * num_envs ({steps * num_envs})"
        )
    target_critic_alpha = v.real("target_critic_alpha", target_critic_alpha, low=0.0, high=1.0)
    max_gradient_norm = v.real("max_gradient_norm", max_gradient_norm, low=0.0, open_low=True)
    reward_scaling = v.real("reward_scaling", reward_scaling, low=0.0, open_low=True)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    normalize_observations = v.boolean("normalize_observations", normalize_observations)
    deterministic_eval, layer_norm = (
        v.boolean("deterministic_eval", deterministic_eval),
        v.boolean("layer_norm", layer_norm),
    )
    actor_hidden_layer_sizes = _sizes("actor_hidden_layer_sizes", actor_hidden_layer_sizes)
    critic_hidden_layer_sizes = _sizes("critic_hidden_layer_sizes", critic_hidden_layer_sizes)
    activation = v.check(v.FieldSpec("activation", "", choices=tuple(ACTIVATIONS), name="activation"), activation)
    progress_fn = resume.check_callback("progress_fn", progress_fn, "(epoch, metrics)")
    if randomization_fn is not None:
        v.callable_arg("randomization_fn", randomization_fn)
    eval_env = check_environment("eval_env", eval_env) if eval_env is not None else environment
    device = resolve_device(device, environment)
    settings = checkpoint.plain_settings({
        "environment": environment, "episode_length": episode_length, "policy_updates": policy_updates,
        "horizon_length": horizon_length, "num_envs": num_envs, "num_evals": num_evals, "action_repeat": action_repeat,
        "num_eval_envs": num_eval_envs, "actor_learning_rate": actor_learning_rate,
        "critic_learning_rate": critic_learning_rate, "lr_schedule": lr_schedule, "adam_b": adam_b, "gamma": gamma,
        "td_lambda": td_lambda, "critic_iterations": critic_iterations, "num_critic_batches": num_critic_batches,
        "target_critic_alpha": target_critic_alpha, "max_gradient_norm": max_gradient_norm,
        "reward_scaling": reward_scaling, "seed": seed, "normalize_observations": normalize_observations,
        "deterministic_eval": deterministic_eval, "actor_hidden_layer_sizes": actor_hidden_layer_sizes,
        "critic_hidden_layer_sizes": critic_hidden_layer_sizes, "activation": activation, "layer_norm": layer_norm,
        "network_factory": None if network_factory is None else name_of(network_factory),
    })
    saved = checkpoint.resumable(restore_checkpoint_path, "shac", settings)

    env, evaluator = build_envs(
        "SHAC", environment, eval_env, num_envs, num_eval_envs, episode_length, action_repeat, device, seed,
        randomization_fn,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        own = user_networks(network_factory, env.observation_size, env.action_size, {
            "actor_hidden_layer_sizes": (actor_hidden_layer_sizes, (128, 64, 32)),
            "critic_hidden_layer_sizes": (critic_hidden_layer_sizes, (64, 64)), "activation": (activation, "elu"),
            "layer_norm": (layer_norm, True),
        })
        policy = APGPolicy(
            env.observation_size,
            env.action_size,
            actor_hidden_layer_sizes,
            activation,
            layer_norm,
            normalize_observations,
            module=None if own is None else own[0],
        ).to(device)
        critic = SHACCritic(
            env.observation_size, critic_hidden_layer_sizes, activation, layer_norm,
            module=None if own is None else own[1],
        ).to(device)
    target_critic = copy.deepcopy(critic).requires_grad_(False)
    actor_optimizer = torch.optim.Adam(policy.parameters(), lr=actor_learning_rate, betas=adam_b)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=critic_learning_rate, betas=adam_b)
    generator = torch.Generator(device=device).manual_seed(seed)
    num_epochs, per_epoch = epochs_of(num_evals), updates_per_epoch(policy_updates, num_evals)
    total_updates = max(num_epochs * per_epoch, 1)
    modules = {"policy": policy, "critic": critic, "target_critic": target_critic}
    optimizers = {"actor": actor_optimizer, "critic": critic_optimizer}
    first_epoch, updates, observation = start_run(saved, modules, optimizers, generator, env, evaluator)

    def update(count: int) -> torch.Tensor:
        """One actor and critic update (the ``count``-th of the run); its actor loss, critic loss, the actor's
        gradient norm and the mean value that closed the windows."""
        nonlocal observation
        fraction = count / total_updates if lr_schedule == "linear" else 0.0
        for optimizer, rate in ((actor_optimizer, actor_learning_rate), (critic_optimizer, critic_learning_rate)):
            for group in optimizer.param_groups:
                group["lr"] = rate + (min(FINAL_LEARNING_RATE, rate) - rate) * fraction
        noise = torch.randn((steps, num_envs, env.action_size), generator=generator, device=device)
        loss, window = shac_actor_loss(env, policy, target_critic, observation, noise, gamma, reward_scaling)
        actor_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = actor_step(policy, actor_optimizer, max_gradient_norm)
        env.detach()  # the next window's gradient starts here
        observation = window.observation
        with torch.no_grad():
            targets = td_lambda_targets(
                window.rewards, window.next_values, window.terminated, window.done, gamma, td_lambda
            )
            inputs = policy.normalizer(window.observations.reshape(-1, env.observation_size))
        critic_loss = critic_step(
            critic, critic_optimizer, inputs, targets.reshape(-1), num_critic_batches, critic_iterations,
            max_gradient_norm,
        )
        update_target(target_critic, critic, target_critic_alpha)
        policy.normalizer.update(window.observations.reshape(-1, env.observation_size))
        return torch.stack([loss.detach(), critic_loss, grad_norm, window.next_values.mean()])

    env_steps_per_update = num_envs * steps * action_repeat

    def save(epoch: int, updates: int) -> str:
        return save_epoch(save_checkpoint_path, "shac", settings, epoch, updates, env_steps_per_update, modules,
                          optimizers, generator, env, evaluator)

    backend = EpochBackend(
        update, ("actor_loss", "critic_loss", "grad_norm", "value_mean"), env, evaluator, policy, deterministic_eval,
        generator, save, first_epoch, updates,
    )
    metrics = run_epochs(
        backend, num_evals=num_evals, updates_per_epoch=per_epoch, env_steps_per_update=env_steps_per_update,
        progress_fn=progress_fn, save_checkpoint_path=save_checkpoint_path,
        restore_checkpoint_path=restore_checkpoint_path,
    )
    return make_policy, policy, metrics


def _sizes(name: str, sizes: Any) -> tuple[int, ...]:
    return v.check(v.FieldSpec("sizes", "", name=name), sizes)


__all__ = [
    "APGPolicy",
    "SHACCritic",
    "Window",
    "actor_step",
    "critic_step",
    "make_policy",
    "shac_actor_loss",
    "td_lambda_targets",
    "train",
    "update_target",
]
