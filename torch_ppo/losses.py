"""GAE and the PPO loss, with the JAX PPO's semantics (``brax_core.training.agents.ppo.losses``).

``compute_gae`` is time-major (``[T, B]``) like its JAX twin; ``compute_ppo_loss`` takes a minibatch TensorDict in
the rollout layout ``[B, T]`` and transposes internally.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from tensordict import TensorDictBase

from torch_ppo.networks import PPOModules


def _discounted_sums(deltas: torch.Tensor, decay: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """``acc_t = deltas_t + decay_t * acc_{t+1}`` backwards in time from ``acc_T = last``, as a contiguous ``[T, B]``.

    The step loop runs for every minibatch: rows are split off once and each sum is written straight into its
    output row, so a step costs its multiply and add only (not ``addcmul``, which rounds differently, fused).
    """
    out = torch.empty(deltas.shape, dtype=deltas.dtype, device=deltas.device)
    rows, delta_rows, decay_rows = out.unbind(0), deltas.unbind(0), decay.unbind(0)
    acc = last
    for t in range(len(rows) - 1, -1, -1):
        acc = torch.add(delta_rows[t], decay_rows[t] * acc, out=rows[t])
    return out


@torch.no_grad()
def compute_gae(
    truncation: torch.Tensor,
    termination: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    lambda_: float = 1.0,
    discount: float = 0.99,
) -> tuple[torch.Tensor, torch.Tensor]:
    """λ-returns ``vs`` and advantages, time-major ``[T, B]`` (``bootstrap_value`` is ``[B]``).

    TD errors are masked by truncation; advantages are the one-step TD error against the value *targets*:
    ``(r_t + γ(1 - term_t) vs_{t+1} - V_t)(1 - trunc_t)``. Neither output carries gradient.
    """
    truncation_mask = 1.0 - truncation
    continuation = discount * (1.0 - termination)
    values_next = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
    deltas = (rewards + continuation * values_next - values) * truncation_mask
    decay = continuation * truncation_mask * lambda_
    vs = _discounted_sums(deltas, decay, torch.zeros_like(bootstrap_value)) + values
    vs_next = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
    advantages = (rewards + continuation * vs_next - values) * truncation_mask
    return vs, advantages


@torch.no_grad()
def compute_gae_bootstrapped(
    truncation: torch.Tensor,
    termination: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    lambda_: float = 1.0,
    discount: float = 0.99,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE that keeps time-limit steps, bootstrapping them from ``next_values`` (V of the true final observation).

    ``next_values[t]`` is the value of the observation transition ``t`` reached. The λ-trace is cut at every episode
    end; a truncated step's target is ``r_t + γ V(final_obs_t)``. Time-major ``[T, B]``.
    """
    episode_continues = 1.0 - truncation
    continuation = discount * (1.0 - termination)
    deltas = rewards + continuation * next_values - values
    decay = continuation * episode_continues * lambda_
    vs = _discounted_sums(deltas, decay, torch.zeros_like(next_values[-1])) + values
    following_vs = torch.cat([vs[1:], next_values[-1:]], dim=0)
    next_targets = torch.where(truncation > 0, next_values, following_vs)
    advantages = rewards + continuation * next_targets - values
    return vs, advantages


def quantile_huber_loss(quantiles: torch.Tensor, targets: torch.Tensor, kappa: float = 1.0) -> torch.Tensor:
    """The JAX ``losses.quantile_huber_loss``: quantile regression with a Huber core, averaged over ``[T, B, N]``.

    ``quantiles`` are ``[T, B, N]`` at the levels ``(i + 0.5) / N``, ``targets`` ``[T, B]``; errors
    ``u = target - quantile`` are weighted by ``|tau - 1[u < 0]|``.
    """
    num_quantiles = quantiles.shape[-1]
    tau = (torch.arange(num_quantiles, dtype=quantiles.dtype, device=quantiles.device) + 0.5) / num_quantiles
    error = targets.unsqueeze(-1) - quantiles
    magnitude = error.abs()
    huber = torch.where(magnitude <= kappa, 0.5 * error * error, kappa * (magnitude - 0.5 * kappa))
    weight = (tau - (error < 0).to(quantiles.dtype)).abs()
    return (weight * huber).mean()


def normal_kl(old_loc: torch.Tensor, old_scale: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``KL(old || new)`` of diagonal normals summed over the last axis (the JAX ``losses.normal_kl``)."""
    spread = (old_scale.square() + (old_loc - loc).square()) / (2.0 * scale.square())
    return (torch.log(scale) - torch.log(old_scale) + spread - 0.5).sum(-1)


class LossTerms(NamedTuple):
    total_loss: torch.Tensor
    policy_loss: torch.Tensor
    v_loss: torch.Tensor
    entropy_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    kl_mean: torch.Tensor  # KL(behaviour || current); 0 unless the behaviour's loc and scale are given


class LossConfig(NamedTuple):
    """The loss hyperparameters (names and defaults of the JAX ``compute_ppo_loss``)."""

    entropy_cost: float = 1e-4
    discounting: float = 0.9
    reward_scaling: float = 1.0
    gae_lambda: float = 0.95
    clipping_epsilon: float = 0.3
    normalize_advantage: bool = True
    vf_loss_coefficient: float = 0.5
    bootstrap_on_timeout: bool = False
    clipping_epsilon_value: float | None = None
    use_distributional_critic: bool = False


LOSS_KEYS = (
    "observation",
    "raw_action",
    "action_log_prob",
    ("next", "final_observation"),
    ("next", "reward"),
    ("next", "terminated"),
    ("next", "truncated"),
)
# What the loss compares with the behaviour policy when present: its values (clipped value loss) and its
# distribution (mean KL, for the ADAPTIVE_KL schedule), under TorchRL's names.
BEHAVIOUR_KEYS = ("state_value", "loc", "scale")


def compute_ppo_loss(
    modules: PPOModules,
    batch: TensorDictBase,
    entropy_noise: torch.Tensor,
    entropy_cost: float = 1e-4,
    discounting: float = 0.9,
    reward_scaling: float = 1.0,
    gae_lambda: float = 0.95,
    clipping_epsilon: float = 0.3,
    normalize_advantage: bool = True,
    vf_loss_coefficient: float = 0.5,
    bootstrap_on_timeout: bool = False,
    clipping_epsilon_value: float | None = None,
    use_distributional_critic: bool = False,
) -> LossTerms:
    """Clipped-surrogate PPO loss on a ``[B, T]`` minibatch TensorDict.

    ``batch`` holds ``observation``, ``raw_action``, ``action_log_prob`` (behaviour), ``("next", "reward")``,
    ``("next", "terminated")``, ``("next", "truncated")`` and ``("next", "final_observation")`` (the observation
    each transition reached, before any auto-reset; the JAX side's ``next_observation`` is the same).
    ``entropy_noise`` (``[T, B, action_size]``, standard normal) is the sample at which the entropy estimate
    evaluates the tanh jacobian, passed in so the loss is a pure function of its inputs. ``state_value``
    (``[B, T, 1]``, the values at collection time) is needed by ``clipping_epsilon_value`` with the scalar critic;
    ``loc`` and ``scale`` (the behaviour distribution) give ``kl_mean``. The new arguments mean what they mean in
    the JAX ``compute_ppo_loss``.
    """
    config = LossConfig(
        entropy_cost,
        discounting,
        reward_scaling,
        gae_lambda,
        clipping_epsilon,
        normalize_advantage,
        vf_loss_coefficient,
        bootstrap_on_timeout,
        clipping_epsilon_value,
        use_distributional_critic,
    )
    old_value, old_loc, old_scale = unpack_behaviour(batch)
    return ppo_loss_from_tensors(
        modules, config, *unpack_batch(batch), entropy_noise, old_value=old_value, old_loc=old_loc, old_scale=old_scale
    )


def rollout_behaviour(batch: TensorDictBase) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """``(state_value [B, T], loc, scale)`` of a ``[B, T]`` batch in its own layout; ``None`` for those it lacks."""
    value, loc, scale = (batch.get(key, None) for key in BEHAVIOUR_KEYS)
    return (None if value is None else value.squeeze(-1), loc, scale)


def unpack_behaviour(batch: TensorDictBase) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """``(state_value [T, B], loc, scale)`` of a ``[B, T]`` batch, time-major; ``None`` for those it lacks."""
    return tuple(None if x is None else x.transpose(0, 1) for x in rollout_behaviour(batch))


def rollout_tensors(batch: TensorDictBase) -> tuple[torch.Tensor | TensorDictBase, ...]:
    """The loss inputs of a ``[B, T]`` batch in its own layout ``[B, T, ...]`` (flags as float), in the order
    ``ppo_loss_from_tensors`` takes them; ``unpack_batch`` is their time-major view."""
    reward = batch.get(("next", "reward")).squeeze(-1)
    flag = lambda key: batch.get(("next", key)).squeeze(-1).to(reward.dtype)
    return (
        batch.get("observation"),
        batch.get(("next", "final_observation")),
        batch.get("raw_action"),
        batch.get("action_log_prob"),
        reward,
        flag("truncated"),
        flag("terminated"),
    )


def unpack_batch(batch: TensorDictBase) -> tuple[torch.Tensor | TensorDictBase, ...]:
    """The loss inputs of a ``[B, T]`` batch, time-major ``[T, B, ...]`` (flags as float)."""
    return tuple(x.transpose(0, 1) for x in rollout_tensors(batch))


def ppo_loss_from_tensors(
    modules: PPOModules,
    config: LossConfig,
    observation: torch.Tensor | TensorDictBase,
    final_observation: torch.Tensor | TensorDictBase,
    raw_action: torch.Tensor,
    behaviour_log_prob: torch.Tensor,
    reward: torch.Tensor,
    truncation: torch.Tensor,
    termination: torch.Tensor,
    entropy_noise: torch.Tensor,
    old_value: torch.Tensor | None = None,
    old_loc: torch.Tensor | None = None,
    old_scale: torch.Tensor | None = None,
) -> LossTerms:
    """The PPO loss on time-major tensors: the JAX ``compute_ppo_loss`` line for line (plain tensors in and out,
    so it can be wrapped by ``torch.compile`` and ``DistributedDataParallel``)."""
    num_steps = observation.shape[0]
    # One value pass over observations and bootstrap observations: [T + 1, B] (or [2T, B] with bootstrapping).
    bootstrap_obs = final_observation if config.bootstrap_on_timeout else final_observation[-1:]
    value_inputs = torch.cat([observation, bootstrap_obs], dim=0)
    if config.use_distributional_critic:
        if config.clipping_epsilon_value is None:
            raise ValueError("use_distributional_critic needs clipping_epsilon_value (the quantile Huber kappa)")
        all_quantiles = modules.value.quantiles(value_inputs)
        all_values = all_quantiles.mean(-1)
    else:
        all_values = modules.value(value_inputs).squeeze(-1)
    baseline = all_values[:num_steps]
    next_values = all_values[num_steps:].detach()
    rewards = reward * config.reward_scaling

    policy = modules.policy
    loc, scale = policy(observation)
    target_log_prob = policy.log_prob(loc, scale, raw_action)

    if config.bootstrap_on_timeout:
        vs, advantages = compute_gae_bootstrapped(
            truncation, termination, rewards, baseline.detach(), next_values, config.gae_lambda, config.discounting
        )
    else:
        vs, advantages = compute_gae(
            truncation, termination, rewards, baseline.detach(), next_values[0], config.gae_lambda, config.discounting
        )
    if config.use_distributional_critic:
        value_targets = advantages + baseline.detach()  # Brax's targets, before advantage normalisation
    if config.normalize_advantage:
        advantages = (advantages - advantages.mean()) / (advantages.std(correction=0) + 1e-8)
    log_ratio = target_log_prob - behaviour_log_prob
    rho = torch.exp(log_ratio)
    surrogate1 = rho * advantages
    surrogate2 = rho.clamp(1.0 - config.clipping_epsilon, 1.0 + config.clipping_epsilon) * advantages
    policy_loss = -torch.minimum(surrogate1, surrogate2).mean()

    if config.use_distributional_critic:
        v_loss = (
            quantile_huber_loss(all_quantiles[:num_steps], value_targets, config.clipping_epsilon_value)
            * config.vf_loss_coefficient
        )
    else:
        v_error = vs - baseline
        v_squared = v_error * v_error
        if config.clipping_epsilon_value is not None:
            if old_value is None:
                raise ValueError("clipping_epsilon_value needs the collection-time values (state_value)")
            eps = config.clipping_epsilon_value
            clipped = old_value + (baseline - old_value).clamp(-eps, eps)
            v_squared = torch.maximum(v_squared, (vs - clipped).square())
        v_loss = v_squared.mean() * 0.5 * config.vf_loss_coefficient

    entropy = policy.entropy(loc, scale, entropy_noise).mean()
    entropy_loss = -config.entropy_cost * entropy
    total = policy_loss + v_loss + entropy_loss
    # Low-variance estimator E[(r - 1) - log r] of KL(behaviour || current), as on the JAX side.
    approx_kl = ((rho - 1.0) - log_ratio).mean().detach()
    if old_loc is not None and old_scale is not None:
        kl_mean = normal_kl(old_loc, old_scale, loc, scale).mean().detach()
    else:
        kl_mean = torch.zeros_like(approx_kl)
    return LossTerms(total, policy_loss, v_loss, entropy_loss, entropy.detach(), approx_kl, kl_mean)
