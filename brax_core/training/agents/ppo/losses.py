"""Proximal policy optimisation losses (``brax.training.agents.ppo.losses`` counterpart).

See: https://arxiv.org/pdf/1707.06347.pdf. These definitions are the specification the torch trainer
reproduces; tests compare both on identical inputs.
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp

from brax_core.training import types
from brax_core.training.agents.ppo import networks as ppo_networks


@flax.struct.dataclass
class PPONetworkParams:
    """Contains training state for the learner."""

    policy: Any
    value: Any


def compute_gae(
    truncation: jax.Array,
    termination: jax.Array,
    rewards: jax.Array,
    values: jax.Array,
    bootstrap_value: jax.Array,
    lambda_: float = 1.0,
    discount: float = 0.99,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation with Brax's semantics (time-major ``[T, B]`` inputs).

    TD errors ``r_t + γ(1−term_t)V_{t+1} − V_t`` are zeroed where ``truncation`` is set, the λ-return
    ``vs`` comes from a reverse scan (the trace is cut at terminations and truncations), and the advantages are
    one-step TD errors against the *targets*: ``(r_t + γ(1−term_t)·vs_{t+1} − V_t)·(1−trunc_t)`` with
    ``vs_T = bootstrap_value``.

    Returns:
      ``(vs, advantages)``, both ``[T, B]`` and without gradient.
    """
    truncation_mask = 1.0 - truncation
    continuation = discount * (1.0 - termination)
    values_t_plus_1 = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)
    deltas = (rewards + continuation * values_t_plus_1 - values) * truncation_mask

    def backward(acc: jax.Array, xs: tuple[jax.Array, jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        mask, delta, cont = xs
        acc = delta + cont * mask * lambda_ * acc
        return acc, acc

    _, vs_minus_v = jax.lax.scan(
        backward, jnp.zeros_like(bootstrap_value), (truncation_mask, deltas, continuation), reverse=True
    )
    vs = vs_minus_v + values
    vs_t_plus_1 = jnp.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    advantages = (rewards + continuation * vs_t_plus_1 - values) * truncation_mask
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(advantages)


def compute_gae_bootstrapped(
    truncation: jax.Array,
    termination: jax.Array,
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    lambda_: float = 1.0,
    discount: float = 0.99,
) -> tuple[jax.Array, jax.Array]:
    """GAE that keeps time-limit steps and bootstraps them from the value of the true final observation.

    ``next_values[t]`` is ``V`` of the observation transition ``t`` reached (``info['final_obs']``), so at a
    truncation the target is ``r_t + γ·V(final_obs_t)`` instead of dropping the step. The λ-trace is cut at every
    episode end; elsewhere the recursion and the advantage definition are those of ``compute_gae`` (the last
    step bootstraps from ``next_values[-1]``).
    """
    episode_continues = 1.0 - truncation
    continuation = discount * (1.0 - termination)
    deltas = rewards + continuation * next_values - values

    def backward(acc: jax.Array, xs: tuple[jax.Array, jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        keep, delta, cont = xs
        acc = delta + cont * keep * lambda_ * acc
        return acc, acc

    _, vs_minus_v = jax.lax.scan(
        backward, jnp.zeros_like(next_values[-1]), (episode_continues, deltas, continuation), reverse=True
    )
    vs = vs_minus_v + values
    following_vs = jnp.concatenate([vs[1:], next_values[-1:]], axis=0)
    next_targets = jnp.where(truncation > 0, next_values, following_vs)
    advantages = rewards + continuation * next_targets - values
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(advantages)


def quantile_huber_loss(quantiles: jax.Array, targets: jax.Array, kappa: float = 1.0) -> jax.Array:
    """The quantile regression loss of a distributional critic, with a Huber core (QR-DQN's).

    Args:
      quantiles: ``[T, B, N]``, the predicted quantiles at the levels ``tau_i = (i + 0.5) / N``.
      targets: ``[T, B]`` return targets (no gradient flows into them through this loss's use in PPO).
      kappa: where the Huber core turns from quadratic to linear.

    Returns:
      The mean over ``T``, ``B`` and ``N`` of ``|tau_i - 1[u < 0]| * H_kappa(u)`` with ``u = target - quantile_i`` and
      ``H_kappa(u) = u^2 / 2`` for ``|u| <= kappa``, else ``kappa * (|u| - kappa / 2)``.
    """
    num_quantiles = quantiles.shape[-1]
    tau = (jnp.arange(num_quantiles, dtype=quantiles.dtype) + 0.5) / num_quantiles
    error = targets[..., None] - quantiles
    magnitude = jnp.abs(error)
    huber = jnp.where(magnitude <= kappa, 0.5 * error * error, kappa * (magnitude - 0.5 * kappa))
    # Over-estimates (error < 0) are weighted by 1 - tau, under-estimates by tau.
    weight = jnp.abs(tau - (error < 0).astype(quantiles.dtype))
    return jnp.mean(weight * huber)


def normal_kl(old_loc: jax.Array, old_scale: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """``KL(old || new)`` of diagonal normals, summed over the last (action) axis.

    The pre-squash normals of the behaviour and current policies; the tanh squashing is the same map for both, so
    the squashed distributions have the same divergence. (Brax adds 1e-5 inside the log ratio, which makes the KL of
    an unchanged policy positive; here it is 0.)
    """
    ratio_term = jnp.log(scale) - jnp.log(old_scale)
    spread = (jnp.square(old_scale) + jnp.square(old_loc - loc)) / (2.0 * jnp.square(scale))
    return jnp.sum(ratio_term + spread - 0.5, axis=-1)


def explained_variance(predicted: jax.Array, returns: jax.Array) -> jax.Array:
    """``1 - Var(returns - predicted) / Var(returns)`` over all elements: 1 for a perfect critic, 0 for one that
    predicts the mean, NaN when the returns are constant (CleanRL's definition)."""
    variance = jnp.var(returns)
    residual = jnp.var(returns - predicted)
    safe = jnp.where(variance > 0, variance, 1.0)
    return jnp.where(variance > 0, 1.0 - residual / safe, jnp.nan)


def compute_ppo_loss(
    params: PPONetworkParams,
    normalizer_params: Any,
    data: types.Transition,
    rng: jax.Array,
    ppo_network: ppo_networks.PPONetworks,
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
) -> tuple[jax.Array, types.Metrics]:
    """Computes PPO loss.

    Args:
      params: network parameters (``.policy``, ``.value``).
      normalizer_params: observation normaliser parameters.
      data: batch-major ``[B, T]`` transitions; ``extras['policy_extras']`` holds the behaviour ``raw_action``
        and ``log_prob``, ``extras['state_extras']['truncation']`` the time-limit flags. ``discount`` is
        ``1 − done``.
      rng: random key for the entropy estimate.
      ppo_network: PPO networks.
      entropy_cost: weight of the entropy bonus.
      discounting: discount γ.
      reward_scaling: rewards are multiplied by this.
      gae_lambda: GAE λ.
      clipping_epsilon: PPO ratio clip.
      normalize_advantage: whether advantages are standardised over the batch.
      vf_loss_coefficient: the value loss is ``mean((vs − V)²) · 0.5 · vf_loss_coefficient``.
      bootstrap_on_timeout: keep time-limit steps and bootstrap them from ``next_observation`` (the true final
        observation) instead of dropping them as Brax does.
      clipping_epsilon_value: with the scalar critic, the clipped value loss: ``V`` is also clipped to
        ``V_old ± clipping_epsilon_value`` around the collection-time values ``extras['policy_extras']['value']``
        and the larger of the two squared errors is used. With the distributional critic, the quantile Huber
        loss's kappa (required).
      use_distributional_critic: the value network returns ``(value, quantiles)``; the value loss is
        ``quantile_huber_loss(quantiles, advantages + V) · vf_loss_coefficient`` with the advantages before
        normalisation (Brax's targets, the one-step return on the λ-return of the next step).

    Returns:
      ``(total_loss, metrics)`` with metrics ``total_loss, policy_loss, v_loss, entropy_loss``, the diagnostics
      ``approx_kl`` and ``old_approx_kl`` (two estimators of ``KL(behaviour || current)``), ``clip_fraction`` (the
      share of ratios outside ``1 ± clipping_epsilon``) and ``explained_variance`` (``explained_variance`` of the
      critic's values for the λ-returns), and
      ``kl_mean`` (mean ``KL(behaviour || current)``, see ``normal_kl``) when ``extras['policy_extras']`` holds the
      behaviour policy's ``distribution_params``.
    """
    distribution = ppo_network.parametric_action_distribution
    policy_apply = ppo_network.policy_network.apply
    value_apply = ppo_network.value_network.apply

    # Put the time dimension first.
    data = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), data)
    policy_logits = policy_apply(normalizer_params, params.policy, data.observation)
    if use_distributional_critic:
        if clipping_epsilon_value is None:
            raise ValueError("use_distributional_critic needs clipping_epsilon_value (the quantile Huber kappa)")
        baseline, quantiles = value_apply(normalizer_params, params.value, data.observation)

        def value_apply(*args: Any) -> jax.Array:  # bootstrap values: the quantiles' mean
            return ppo_network.value_network.apply(*args)[0]

    else:
        baseline = value_apply(normalizer_params, params.value, data.observation)

    rewards = data.reward * reward_scaling
    truncation = data.extras["state_extras"]["truncation"]
    termination = (1.0 - data.discount) * (1.0 - truncation)

    if bootstrap_on_timeout:
        next_values = value_apply(normalizer_params, params.value, data.next_observation)
        vs, advantages = compute_gae_bootstrapped(
            truncation, termination, rewards, baseline, next_values, gae_lambda, discounting
        )
    else:
        terminal_obs = jax.tree.map(lambda x: x[-1], data.next_observation)
        bootstrap_value = value_apply(normalizer_params, params.value, terminal_obs)
        vs, advantages = compute_gae(
            truncation, termination, rewards, baseline, bootstrap_value, gae_lambda, discounting
        )
    if use_distributional_critic:
        value_targets = jax.lax.stop_gradient(advantages + baseline)
    if normalize_advantage:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

    target_log_probs = distribution.log_prob(policy_logits, data.extras["policy_extras"]["raw_action"])
    behaviour_log_probs = data.extras["policy_extras"]["log_prob"]
    log_ratio = target_log_probs - behaviour_log_probs
    rho_s = jnp.exp(log_ratio)
    surrogate_loss1 = rho_s * advantages
    surrogate_loss2 = jnp.clip(rho_s, 1.0 - clipping_epsilon, 1.0 + clipping_epsilon) * advantages
    policy_loss = -jnp.mean(jnp.minimum(surrogate_loss1, surrogate_loss2))

    if use_distributional_critic:
        v_loss = quantile_huber_loss(quantiles, value_targets, clipping_epsilon_value) * vf_loss_coefficient
    else:
        v_error = vs - baseline
        v_squared = v_error * v_error
        if clipping_epsilon_value is not None:
            old_values = data.extras["policy_extras"]["value"]
            clipped = old_values + jnp.clip(baseline - old_values, -clipping_epsilon_value, clipping_epsilon_value)
            v_squared = jnp.maximum(v_squared, jnp.square(vs - clipped))
        v_loss = jnp.mean(v_squared) * 0.5 * vf_loss_coefficient

    entropy = jnp.mean(distribution.entropy(policy_logits, rng))
    entropy_loss = entropy_cost * -entropy

    total_loss = policy_loss + v_loss + entropy_loss
    # CleanRL's diagnostics: KL(behaviour || current) by the low-variance estimator E[(r - 1) - log r] (Schulman,
    # 2020) and by the plain E[-log r], the share of clipped ratios and the returns' variance the critic explains.
    log_ratio, rho_s = jax.lax.stop_gradient(log_ratio), jax.lax.stop_gradient(rho_s)
    metrics = {
        "total_loss": total_loss,
        "policy_loss": policy_loss,
        "v_loss": v_loss,
        "entropy_loss": entropy_loss,
        "approx_kl": jnp.mean((rho_s - 1.0) - log_ratio),
        "old_approx_kl": jnp.mean(-log_ratio),
        "clip_fraction": jnp.mean((jnp.abs(rho_s - 1.0) > clipping_epsilon).astype(rho_s.dtype)),
        "explained_variance": explained_variance(jax.lax.stop_gradient(baseline), jax.lax.stop_gradient(vs)),
    }
    behaviour_params = data.extras["policy_extras"].get("distribution_params")
    if behaviour_params is not None:
        old_dist = distribution.create_dist(behaviour_params)
        new_dist = distribution.create_dist(policy_logits)
        kl = normal_kl(old_dist.loc, old_dist.scale, new_dist.loc, new_dist.scale)
        metrics["kl_mean"] = jax.lax.stop_gradient(jnp.mean(kl))
    return total_loss, metrics
