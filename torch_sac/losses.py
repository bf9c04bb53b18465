"""SAC's three losses in torch, each the JAX SAC's (``brax_core.training.agents.sac.losses``) on the same inputs and
weights: the entropy temperature's, the twin critics' and the actor's.

A batch is a TensorDict of transitions with the replay buffer's keys (``observation``, ``action``, ``reward``,
``discount``, ``truncation``, ``next_observation``); observations come in normalised by the run's statistics. The
random draws are explicit standard-normal ``noise`` tensors (``[batch, action_size]``), so a loss is a pure function
of its inputs. Where an episode was cut by the time limit (``truncation`` 1, ``discount`` 0), the critics' target
bootstraps from ``next_observation``, the observation the step reached (the bridge's ``final_observation``), as the
JAX SAC does; ``bootstrap_on_timeout=False`` leaves such transitions out of the critics' loss, as Brax's SAC.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torch_sac.networks import SACActor, TwinQ, tanh_normal_log_prob


def target_entropy(action_size: int) -> float:
    """The temperature's entropy target, ``-0.5 * action_size`` (the JAX SAC's, Brax's)."""
    return -0.5 * action_size


def sampled_action(actor: SACActor, normalized: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A reparametrised action of the policy at ``normalized`` observations (squashed) and its log-probability."""
    loc, scale = actor.distribution(normalized)
    raw = loc + scale * noise
    return torch.tanh(raw), tanh_normal_log_prob(loc, scale, raw)


def bootstrap_weight(batch: TensorDictBase, bootstrap_on_timeout: bool) -> torch.Tensor:
    """How much of the next state's value a target keeps (before discounting): 0 where the episode ended on its own,
    1 where it goes on, and with ``bootstrap_on_timeout`` also 1 where the time limit cut it."""
    discount = batch.get("discount")
    return torch.maximum(discount, batch.get("truncation")) if bootstrap_on_timeout else discount


def alpha_loss(log_alpha: torch.Tensor, actor: SACActor, batch: TensorDictBase, noise: torch.Tensor,
               entropy_target: float) -> torch.Tensor:
    """The temperature's loss: ``alpha`` rises while the policy's entropy is below ``entropy_target``."""
    with torch.no_grad():
        _, log_prob = sampled_action(actor, batch.get("observation"), noise)
    return torch.mean(log_alpha.exp() * (-log_prob - entropy_target))


def critic_loss(critic: TwinQ, target_critic: TwinQ, actor: SACActor, alpha: torch.Tensor, batch: TensorDictBase,
                noise: torch.Tensor, reward_scaling: float, discounting: float,
                bootstrap_on_timeout: bool = True) -> torch.Tensor:
    """Half the mean squared error of both critics against the soft Bellman target of the target critics."""
    q_taken = critic(batch.get("observation"), batch.get("action"))
    with torch.no_grad():
        next_observation = batch.get("next_observation")
        next_action, next_log_prob = sampled_action(actor, next_observation, noise)
        next_q = target_critic(next_observation, next_action)
        next_value = next_q.min(-1).values - alpha * next_log_prob
        weight = bootstrap_weight(batch, bootstrap_on_timeout)
        target = batch.get("reward") * reward_scaling + weight * discounting * next_value
    error = q_taken - target[..., None]
    if not bootstrap_on_timeout:  # Brax's: a truncated transition has no target, so it weighs nothing
        error = error * (1 - batch.get("truncation"))[..., None]
    return 0.5 * error.square().mean()


def actor_loss(actor: SACActor, critic: TwinQ, alpha: torch.Tensor, batch: TensorDictBase,
               noise: torch.Tensor) -> torch.Tensor:
    """The policy's loss: entropy-weighted log-probability minus the smaller critic's value of its action."""
    observation = batch.get("observation")
    action, log_prob = sampled_action(actor, observation, noise)
    return torch.mean(alpha * log_prob - critic(observation, action).min(-1).values)


__all__ = ["actor_loss", "alpha_loss", "bootstrap_weight", "critic_loss", "sampled_action", "target_entropy"]
