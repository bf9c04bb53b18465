"""GAE and the PPO loss, with the JAX PPO's semantics (``brax_core.training.agents.ppo.losses``).

``compute_gae`` is time-major (``[T, B]``) like its JAX twin. ``ppo_loss`` takes a ``Batch``, the loss's inputs by
name: ``Batch.of`` reads them from a collected rollout TensorDict ``[B, T]`` and ``Batch.time_major`` gives the
``[T, B]`` layout the loss computes in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from tensordict import TensorDictBase

from torch_ppo.networks import PPOModules


def _discounted_sums(deltas: torch.Tensor, decay: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """``acc_t = deltas_t + decay_t * acc_{t+1}`` backwards in time from ``acc_T = last``, as a contiguous ``[T, B]``.

    The step loop runs for every minibatch: rows are split off once and each sum is written straight into its
    output row, so a step costs its multiply and add only (not ``addcmul``, which rounds differently, fused).
    """
    if torch.compiler.is_compiling():
        # Traced, the same sums without writes into a view: a program that scans minibatch steps (the compiled
        # update's pass) takes no mutation inside its body.
        acc, sums = last, []
        for t in range(deltas.shape[0] - 1, -1, -1):
            acc = deltas[t] + decay[t] * acc
            sums.append(acc)
        return torch.stack(sums[::-1])
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
    """The loss and its diagnostics for one minibatch; every field but ``total_loss`` carries no gradient except
    the three loss terms that sum to it."""

    total_loss: torch.Tensor
    policy_loss: torch.Tensor
    v_loss: torch.Tensor
    entropy_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor  # E[(r - 1) - log r]: KL(behaviour || current), low variance
    old_approx_kl: torch.Tensor  # E[-log r]: the same KL's plain estimator
    clip_fraction: torch.Tensor  # the share of samples whose ratio lies outside 1 ± clipping_epsilon
    explained_variance: torch.Tensor  # 1 - Var(returns - V) / Var(returns); NaN when the returns are constant
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


@dataclasses.dataclass(frozen=True)
class Batch:
    """The loss's inputs by name, ``[rows, T, ...]`` as collected (``[T, rows, ...]`` after ``time_major``).

    The behaviour's values (``old_value``, for the clipped value loss) and distribution (``old_loc``, ``old_scale``,
    for ``kl_mean``) are ``None`` where the loss does not compare with them; the episode-end flags are floats.
    """

    observation: Any  # a tensor, or a TensorDict of named observations
    final_observation: Any  # the observation each transition reached, before any auto-reset
    raw_action: torch.Tensor  # the policy's sample before the tanh squashing
    behaviour_log_prob: torch.Tensor
    reward: torch.Tensor
    truncation: torch.Tensor
    termination: torch.Tensor
    old_value: torch.Tensor | None = None
    old_loc: torch.Tensor | None = None
    old_scale: torch.Tensor | None = None

    @classmethod
    def of(cls, rollout: TensorDictBase) -> Batch:
        """The inputs of a collected ``[rows, T]`` TensorDict with TorchRL's keys (``("next", "reward")``, ...);
        ``loc`` and ``scale`` when it holds them."""
        reward = rollout.get(("next", "reward")).squeeze(-1)
        flag = lambda key: rollout.get(("next", key)).squeeze(-1).to(reward.dtype)  # noqa: E731
        return cls(
            observation=rollout.get("observation"),
            final_observation=rollout.get(("next", "final_observation")),
            raw_action=rollout.get("raw_action"),
            behaviour_log_prob=rollout.get("action_log_prob"),
            reward=reward,
            truncation=flag("truncated"),
            termination=flag("terminated"),
            old_loc=rollout.get("loc", None),
            old_scale=rollout.get("scale", None),
        )

    def map(self, fn: Callable[[Any], Any]) -> Batch:
        """``fn`` applied to every input present."""
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        return Batch(**{name: None if value is None else fn(value) for name, value in values.items()})

    def time_major(self) -> Batch:
        """The same inputs ``[T, rows, ...]``, the layout ``ppo_loss`` takes."""
        return self.map(lambda x: x.transpose(0, 1))


def ppo_loss(modules: PPOModules, config: LossConfig, batch: Batch, entropy_noise: torch.Tensor) -> LossTerms:
    """The clipped-surrogate PPO loss of a time-major minibatch (``Batch.time_major``): the JAX
    ``compute_ppo_loss`` line for line, tensors in and out (so ``torch.compile`` and ``DistributedDataParallel`` can
    wrap it).

    ``entropy_noise`` (``[T, B, action_size]``, standard normal) is the sample at which the entropy estimate
    evaluates the tanh jacobian, passed in so the loss is a pure function of its inputs. ``batch.old_value`` is needed
    by ``clipping_epsilon_value`` with the scalar critic; ``old_loc`` and ``old_scale`` give ``kl_mean``.
    """
    observation, final_observation, raw_action = batch.observation, batch.final_observation, batch.raw_action
    reward, truncation, termination = batch.reward, batch.truncation, batch.termination
    old_value, old_loc, old_scale = batch.old_value, batch.old_loc, batch.old_scale
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
    log_ratio = target_log_prob - batch.behaviour_log_prob
    rho = torch.exp(log_ratio)
    surrogate1 = rho * advantages
    clipped_rho = rho.clamp(1.0 - config.clipping_epsilon, 1.0 + config.clipping_epsilon)
    surrogate2 = clipped_rho * advantages
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
    with torch.no_grad():
        # CleanRL's diagnostics, as on the JAX side: two estimators of KL(behaviour || current), the clipped share
        # and how much of the returns' variance the critic explains.
        approx_kl = ((rho - 1.0) - log_ratio).mean()
        old_approx_kl = (-log_ratio).mean()
        # the clamp changed exactly the ratios outside 1 ± clipping_epsilon: the JAX side's |r - 1| > epsilon
        clip_fraction = (clipped_rho != rho).to(rho.dtype).mean()
        explained_variance = explained_variance_of(vs, vs - baseline if config.use_distributional_critic else v_error)
        if old_loc is not None and old_scale is not None:
            kl_mean = normal_kl(old_loc, old_scale, loc, scale).mean()
        else:
            kl_mean = torch.zeros_like(approx_kl)
    return LossTerms(
        total,
        policy_loss,
        v_loss,
        entropy_loss,
        entropy.detach(),
        approx_kl,
        old_approx_kl,
        clip_fraction,
        explained_variance,
        kl_mean,
    )


def explained_variance_of(returns: torch.Tensor, errors: torch.Tensor) -> torch.Tensor:
    """``1 - Var(errors) / Var(returns)`` over all elements, ``errors`` being the returns less the predicted values: 1
    for a perfect critic, 0 for one that predicts the mean, NaN when the returns are constant (CleanRL's
    definition)."""
    variance = returns.var(correction=0)
    residual = errors.var(correction=0)
    return torch.where(variance > 0, 1.0 - residual / variance, torch.full_like(variance, float("nan")))
