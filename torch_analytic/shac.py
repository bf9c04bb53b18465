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
from brax_core.training.agents.apg.config import from_updates
from brax_core.training.agents.shac.config import SHACConfig
from brax_core.training.run.driver import ReportedMetrics, ignore
from torch_analytic import checkpoint, common
from torch_analytic.common import make_policy
from torch_analytic.networks import APGPolicy, SHACCritic
from torch_training.gradients import global_norm, global_norm_scale

# The reference implementation's linear schedule ends here rather than at zero.
FINAL_LEARNING_RATE = 1e-5


class Window(NamedTuple):
    """One window of ``steps`` policy steps of ``envs`` envs, detached: what the critic's update needs.

    ``observations`` ``[steps, envs, obs]``: the (raw) observation each action saw. ``rewards`` ``[steps, envs]``:
    the rewards times ``reward_scaling``. ``final_observations`` ``[steps, envs, obs]``: the observation each step
    reached, before any auto-reset. ``next_values`` ``[steps, envs]``: the value network's value of those, not
    zeroed where an episode terminated. ``terminated``, ``done`` ``[steps, envs]`` (bool): the step ended its
    episode by termination / by termination or the time limit. ``observation`` ``[envs, obs]``: the observation
    reached (after any auto-reset), where the next window starts. ``returns`` ``[envs]``: each env's sum of the
    window's discounted rewards and closing values, the actor loss's terms (its minus, undivided).
    """

    observations: torch.Tensor
    rewards: torch.Tensor
    final_observations: torch.Tensor
    next_values: torch.Tensor
    terminated: torch.Tensor
    done: torch.Tensor
    observation: torch.Tensor
    returns: torch.Tensor


_PER_STEP = Window._fields[:6]  # the fields stacked over the window's steps


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
    returns = torch.zeros(num_envs, device=observation.device)
    record: dict[str, list[torch.Tensor]] = {name: [] for name in _PER_STEP}
    for t, step_noise in enumerate(noise):
        record["observations"].append(observation.detach())
        nxt = env.step(policy.act(observation, step_noise)).get("next")
        reward = nxt.get("reward").squeeze(-1) * reward_scaling
        done, terminated = nxt.get("done").squeeze(-1), nxt.get("terminated").squeeze(-1)
        final = nxt.get("final_observation")
        value = critic(policy.normalizer(final)).squeeze(-1)
        closes = done if t < steps - 1 else torch.ones_like(done)  # every return closes at the window's end
        bootstrap = torch.where(closes & ~terminated, value, 0.0)
        returns = returns + discount * (reward + gamma * bootstrap)
        discount = torch.where(done, 1.0, discount * gamma)
        observation = nxt.get("observation")
        for name, tensor in zip(_PER_STEP[1:], (reward, final, value, terminated, done), strict=True):
            record[name].append(tensor.detach())
    window = Window(*(torch.stack(record[name]) for name in _PER_STEP), observation.detach(), returns.detach())
    return -returns.sum() / (steps * num_envs), window


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


class AdaptiveHorizon(torch.nn.Module):
    """AHAC's adaptive horizon (Georgiev et al., "Adaptive Horizon Actor-Critic for Policy Learning in
    Contact-Rich Differentiable Simulation", ICML 2024): the window's length ``H``, learned between ``minimum`` and
    ``maximum`` by a step along ``mean(R / H) - lambda * H`` (``R``: each env's window return, ``Window.returns``),
    where the dual variable ``lambda`` grows with ``H - minimum``; a window takes ``round(H)`` policy steps. ``H``
    starts at ``minimum``. Its state is two buffers, so a checkpoint holds it."""

    def __init__(self, minimum: int, maximum: int, learning_rate: float, dual_learning_rate: float):
        super().__init__()
        self.minimum, self.maximum = float(minimum), float(maximum)
        self.learning_rate, self.dual_learning_rate = learning_rate, dual_learning_rate
        self.register_buffer("horizon", torch.tensor(float(minimum)))
        self.register_buffer("dual", torch.tensor(0.0))

    def steps(self) -> int:
        """Policy steps of the next window (a host read of one scalar, once per window: the loop's length)."""
        return int(round(float(self.horizon)))

    @torch.no_grad()
    def update(self, returns: torch.Tensor) -> None:
        """One step of the horizon and of its dual after a window whose envs returned ``returns`` ``[envs]``."""
        gradient = (returns / self.horizon - self.dual * self.horizon).mean()
        self.horizon.copy_((self.horizon + self.learning_rate * gradient).clamp(self.minimum, self.maximum))
        self.dual.add_(self.dual_learning_rate * (self.horizon - self.minimum))


@torch.no_grad()
def update_target(target: nn.Module, source: nn.Module, alpha: float) -> None:
    """Polyak averaging: every parameter of ``target`` becomes ``alpha * target + (1 - alpha) * source``."""
    torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), 1.0 - alpha)


def train(
    environment: Any,
    episode_length: int | None,
    policy_updates: int,
    horizon_length: int = 32,
    num_envs: int = 64,
    num_evals: int = 1,
    action_repeat: int = 1,
    num_eval_envs: int = 128,
    actor_learning_rate: float = 2e-3,
    critic_learning_rate: float = 2e-3,
    learning_rate_schedule: str = "linear",
    adam_b: tuple[float, float] = (0.7, 0.95),
    discounting: float = 0.99,
    td_lambda: float = 0.95,
    critic_iterations: int = 16,
    num_critic_batches: int = 4,
    target_critic_alpha: float = 0.2,
    max_grad_norm: float = 1.0,
    reward_scaling: float = 1.0,
    seed: int = 0,
    normalize_observations: bool = True,
    adaptive_horizon: bool = False,
    horizon_min: int = 4,
    horizon_learning_rate: float = 2e-3,
    horizon_dual_learning_rate: float = 1e-4,
    deterministic_eval: bool = False,
    policy_hidden_layer_sizes: Sequence[int] = (128, 64, 32),
    value_hidden_layer_sizes: Sequence[int] = (64, 64),
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
    """Trains a policy with SHAC (see the module docstring): ``policy_updates`` windows, each an actor step and a
    critic fit. The keywords are ``SHACConfig``'s fields (``brax_core.training.agents.shac.config``, each with its
    meaning there) but ``policy_updates``, the run's length in windows; ``train_from_config`` trains a config.

    ``environment``: a registered name, a brax_core ``Env`` or a MuJoCo Playground ``MjxEnv``; its step must be
    differentiable (a ``TorchEnv(differentiable=True)`` is built from it). ``horizon_length``: env steps per window
    (``horizon_length // action_repeat`` policy steps); ``discounting`` is gamma per policy step.
    ``learning_rate_schedule``: 'linear' (both learning rates from their value at the first update towards 1e-5 at
    the last) or 'constant'. ``adam_b``: both optimisers' Adam betas. ``reward_scaling`` multiplies the rewards of
    both losses. ``layer_norm`` and ``activation`` apply to both networks (the actor's hidden sizes
    ``policy_hidden_layer_sizes``, the critic's ``value_hidden_layer_sizes``). ``adaptive_horizon`` learns the
    window's length (AHAC, ``AdaptiveHorizon``) between ``horizon_min`` and ``horizon_length // action_repeat``
    policy steps, an update then holding as many windows as ``horizon_length`` env steps of every env take, so runs
    count env steps alike. ``num_evals``, ``action_repeat``,
    ``num_eval_envs``, ``deterministic_eval``, ``eval_env``, ``randomization_fn``, ``device``, the callbacks and the
    checkpoint paths mean what they mean to ``apg.train``.

    Metrics: ``eval/*`` as the other trainers report; per epoch the means over its updates of
    ``training/actor_loss``, ``training/critic_loss`` (the last critic pass's), ``training/grad_norm`` (the actor's
    gradient norm before clipping), ``training/value_mean`` (the target critic's values of the states reached) and
    ``training/horizon`` (the windows' mean length, policy steps),
    with ``training/sps``, ``training/walltime`` and ``training/gradient_cuts`` (the epoch's env steps whose gradient
    was cut because the physics' reverse pass was not finite there: ``TorchEnv.gradient_cuts``).

    ``network_factory``: networks of the user's own, as torch_ppo takes them (``fn(observation_size, action_size) ->
    (policy_module, value_module)``): the actor and the critic, the actor behind the normaliser and the tanh-normal,
    the critic on normalised observations (the hidden sizes, ``activation`` and ``layer_norm`` then keep their
    defaults).

    Returns ``(make_policy, policy, metrics)``: ``make_policy(policy, deterministic=False)`` gives
    ``act(observation) -> action``; ``policy`` is the trained ``APGPolicy``; ``metrics`` the last reported.
    """
    config = from_updates(SHACConfig, {
        "name": environment if isinstance(environment, str) else None, "episode_length": episode_length,
        "horizon_length": horizon_length, "num_envs": num_envs, "num_evals": num_evals,
        "action_repeat": action_repeat, "num_eval_envs": num_eval_envs, "actor_learning_rate": actor_learning_rate,
        "critic_learning_rate": critic_learning_rate, "learning_rate_schedule": learning_rate_schedule,
        "adam_b": adam_b, "discounting": discounting, "td_lambda": td_lambda, "critic_iterations": critic_iterations,
        "num_critic_batches": num_critic_batches, "target_critic_alpha": target_critic_alpha,
        "max_grad_norm": max_grad_norm, "reward_scaling": reward_scaling, "seed": seed,
        "normalize_observations": normalize_observations, "adaptive_horizon": adaptive_horizon,
        "horizon_min": horizon_min, "horizon_learning_rate": horizon_learning_rate,
        "horizon_dual_learning_rate": horizon_dual_learning_rate, "deterministic_eval": deterministic_eval,
        "policy_hidden_layer_sizes": policy_hidden_layer_sizes, "value_hidden_layer_sizes": value_hidden_layer_sizes,
        "activation": activation, "layer_norm": layer_norm, "device": device, "max_to_keep": max_to_keep,
    }, policy_updates)
    return train_from_config(
        config, environment, progress_fn=progress_fn, eval_env=eval_env, randomization_fn=randomization_fn,
        network_factory=network_factory, save_checkpoint_path=save_checkpoint_path,
        restore_checkpoint_path=restore_checkpoint_path, policy_params_fn=policy_params_fn,
    )


def train_from_config(
    config: SHACConfig, environment: Any = None, **options: Any
) -> tuple[Callable[..., Any], APGPolicy, ReportedMetrics]:
    """Trains ``config`` (a ``SHACConfig``) on ``environment`` (default: ``config.env.name``, a registered name), on
    ``config.run.device`` (``None``: the bridge's device rule). ``options``: ``train``'s arguments that are not
    config fields, by the same names (``common.OPTIONS``). Returns what ``train`` returns."""
    opts = common.checked_options(config, SHACConfig, environment, options)
    config = common.with_episode_length(config, opts.environment)
    if opts.save_checkpoint_path is not None:
        config.to_json()  # a setting JSON cannot hold (a callable activation) is refused before training
    saved = checkpoint.resumable(opts.restore_checkpoint_path, config)

    env, evaluator = common.build_envs("SHAC", config, opts)
    network, algorithm, device, seed = config.network, config.algorithm, opts.device, config.run.seed
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        own = common.user_networks(opts.network_factory, config, env.observation_size, env.action_size)
        policy = APGPolicy(
            env.observation_size, env.action_size, network.policy_hidden_layer_sizes, network.activation,
            network.layer_norm, algorithm.normalize_observations, module=None if own is None else own[0],
        ).to(device)
        critic = SHACCritic(
            env.observation_size, network.value_hidden_layer_sizes, network.activation, network.layer_norm,
            module=None if own is None else own[1],
        ).to(device)
    target_critic = copy.deepcopy(critic).requires_grad_(False)
    actor_optimizer = torch.optim.Adam(policy.parameters(), lr=algorithm.actor_learning_rate, betas=algorithm.adam_b)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=algorithm.critic_learning_rate,
                                        betas=algorithm.adam_b)
    generator = torch.Generator(device=device).manual_seed(seed)
    modules = common.Modules(
        {"policy": policy, "critic": critic, "target_critic": target_critic},
        {"actor": actor_optimizer, "critic": critic_optimizer}, generator, env, evaluator,
    )
    horizon = None
    if algorithm.adaptive_horizon:  # AHAC: the window's length learned; its state checkpointed with the networks
        horizon = AdaptiveHorizon(algorithm.horizon_min, config.policy_steps_per_update,
                                  algorithm.horizon_learning_rate, algorithm.horizon_dual_learning_rate).to(device)
        modules.networks["horizon"] = horizon
    updates, observation = common.start_run(saved, modules)
    steps, gamma = config.policy_steps_per_update, algorithm.discounting
    total_updates = max(config.num_epochs * config.updates_per_epoch, 1)

    def window(length: int) -> torch.Tensor:
        """One window of ``length`` policy steps: an actor step, the critic's fit, the target critic's and the
        normaliser's updates; its actor loss, critic loss, the actor's gradient norm and the mean closing value."""
        nonlocal observation
        noise = torch.randn((length, env.num_envs, env.action_size), generator=generator, device=device)
        loss, record = shac_actor_loss(env, policy, target_critic, observation, noise, gamma,
                                       algorithm.reward_scaling)
        actor_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = actor_step(policy, actor_optimizer, algorithm.max_grad_norm)
        env.detach()  # the next window's gradient starts here
        observation = record.observation
        with torch.no_grad():
            targets = td_lambda_targets(
                record.rewards, record.next_values, record.terminated, record.done, gamma, algorithm.td_lambda
            )
            inputs = policy.normalizer(record.observations.reshape(-1, env.observation_size))
        critic_loss = critic_step(
            critic, critic_optimizer, inputs, targets.reshape(-1), algorithm.num_critic_batches,
            algorithm.critic_iterations, algorithm.max_grad_norm,
        )
        update_target(target_critic, critic, algorithm.target_critic_alpha)
        policy.normalizer.update(record.observations.reshape(-1, env.observation_size))
        if horizon is not None:
            horizon.update(record.returns)
        return torch.stack([loss.detach(), critic_loss, grad_norm, record.next_values.mean()])

    def update(count: int) -> torch.Tensor:
        """One update (the ``count``-th of the run): ``horizon_length`` env steps of every env, one window of them,
        or with the adaptive horizon as many windows of its length as they hold; the windows' mean metrics and
        their mean length (policy steps)."""
        fraction = count / total_updates if algorithm.learning_rate_schedule == "linear" else 0.0
        for optimizer, rate in ((actor_optimizer, algorithm.actor_learning_rate),
                                (critic_optimizer, algorithm.critic_learning_rate)):
            for group in optimizer.param_groups:
                group["lr"] = rate + (min(FINAL_LEARNING_RATE, rate) - rate) * min(fraction, 1.0)
        if horizon is None:
            return torch.cat([window(steps), torch.tensor([float(steps)], device=device)])
        taken, windows, sums = 0, 0, torch.zeros(4, device=device)
        while taken < steps:
            length = min(horizon.steps(), steps - taken)
            sums += window(length)
            taken, windows = taken + length, windows + 1
        return torch.cat([sums / windows, torch.tensor([steps / windows], device=device)])

    backend = common.AnalyticBackend(
        "shac", config, update, ("actor_loss", "critic_loss", "grad_norm", "value_mean", "horizon"), modules, policy,
        updates, 0, opts.save_checkpoint_path, opts.network_factory,
    )
    return make_policy, policy, common.run(backend, config, opts)


__all__ = [
    "APGPolicy",
    "AdaptiveHorizon",
    "SHACCritic",
    "Window",
    "actor_step",
    "critic_step",
    "make_policy",
    "shac_actor_loss",
    "td_lambda_targets",
    "train",
    "train_from_config",
    "update_target",
]
