"""SAC's losses (``brax.training.agents.sac.losses`` counterpart; Haarnoja et al., 2018,
https://arxiv.org/abs/1812.05905): the entropy temperature's, the twin critics' and the actor's.

Where this differs from Brax: a transition whose episode was cut by the time limit (``truncation`` 1) is not dropped
from the critic's loss (Brax multiplies its error by 0, so the last step before every time limit is never learned);
its target bootstraps from the observation the step reached, which ``acting.actor_step`` records as
``next_observation`` (``info['final_obs']``, kept by the auto-reset wrapper), as if the episode went on.
``bootstrap_on_timeout=False`` gives Brax's behaviour, for envs whose wrappers keep no final observation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from brax_core.training import types
from brax_core.training.agents.sac import networks as sac_networks

Transition = types.Transition


def bootstrap_weight(transitions: Transition, bootstrap_on_timeout: bool) -> jax.Array:
    """How much of the next state's value a transition's target keeps (before discounting): 0 where the episode
    ended on its own, 1 where it goes on, and with ``bootstrap_on_timeout`` also 1 where the time limit cut it."""
    if not bootstrap_on_timeout:
        return transitions.discount
    truncation = transitions.extras["state_extras"]["truncation"]
    return jnp.maximum(transitions.discount, truncation)


def make_losses(
    sac_network: sac_networks.SACNetworks,
    reward_scaling: float,
    discounting: float,
    action_size: int,
    bootstrap_on_timeout: bool = True,
) -> tuple[Callable[..., jax.Array], Callable[..., jax.Array], Callable[..., jax.Array]]:
    """``(alpha_loss, critic_loss, actor_loss)`` with Brax 0.14.2's signatures; the entropy target is
    ``-0.5 * action_size``, as Brax's."""
    target_entropy = -0.5 * action_size
    policy_network = sac_network.policy_network
    q_network = sac_network.q_network
    action_distribution = sac_network.parametric_action_distribution

    def sampled_action(policy_params: Any, normalizer_params: Any, observation: Any, key: jax.Array):
        """A reparametrised action of the policy at ``observation`` (squashed) and its log-probability."""
        logits = policy_network.apply(normalizer_params, policy_params, observation)
        raw = action_distribution.sample_no_postprocessing(logits, key)
        return action_distribution.postprocess(raw), action_distribution.log_prob(logits, raw)

    def alpha_loss(log_alpha: jax.Array, policy_params: Any, normalizer_params: Any, transitions: Transition,
                   key: jax.Array) -> jax.Array:
        """The temperature's loss (the paper's eq. 18): raise alpha while the policy's entropy is below target."""
        _, log_prob = sampled_action(policy_params, normalizer_params, transitions.observation, key)
        return jnp.mean(jnp.exp(log_alpha) * jax.lax.stop_gradient(-log_prob - target_entropy))

    def critic_loss(q_params: Any, policy_params: Any, normalizer_params: Any, target_q_params: Any,
                    alpha: jax.Array, transitions: Transition, key: jax.Array) -> jax.Array:
        """Half the mean squared error of both critics against the soft Bellman target of the target critics."""
        q_taken = q_network.apply(normalizer_params, q_params, transitions.observation, transitions.action)
        next_action, next_log_prob = sampled_action(policy_params, normalizer_params,
                                                    transitions.next_observation, key)
        next_q = q_network.apply(normalizer_params, target_q_params, transitions.next_observation, next_action)
        next_value = jnp.min(next_q, axis=-1) - alpha * next_log_prob
        weight = bootstrap_weight(transitions, bootstrap_on_timeout)
        target = jax.lax.stop_gradient(
            transitions.reward * reward_scaling + weight * discounting * next_value
        )
        error = q_taken - target[..., None]
        if not bootstrap_on_timeout:  # Brax's: a truncated transition has no target, so it weighs nothing
            error = error * (1 - transitions.extras["state_extras"]["truncation"])[..., None]
        return 0.5 * jnp.mean(jnp.square(error))

    def actor_loss(policy_params: Any, normalizer_params: Any, q_params: Any, alpha: jax.Array,
                   transitions: Transition, key: jax.Array) -> jax.Array:
        """The policy's loss: entropy-weighted log-probability minus the smaller critic's value of its action."""
        action, log_prob = sampled_action(policy_params, normalizer_params, transitions.observation, key)
        q_action = q_network.apply(normalizer_params, q_params, transitions.observation, action)
        return jnp.mean(alpha * log_prob - jnp.min(q_action, axis=-1))

    return alpha_loss, critic_loss, actor_loss
