"""Learning-rate schedules for PPO (``brax.training.agents.ppo.optimizer`` counterpart).

``ADAPTIVE_KL`` adapts the learning rate at every minibatch from the KL divergence between the behaviour policy and
the current one (``adaptive_kl``: the rule both trainers apply).
"""

from __future__ import annotations

import enum
from typing import Any

import jax
import jax.numpy as jnp
import optax

from brax_core.training.agents.ppo import adaptive_kl

__all__ = ["LRSchedule", "adapt_learning_rate", "adaptive_kl_learning_rate", "make_optimizer"]


class LRSchedule(enum.StrEnum):
    """Learning-rate schedules ``train`` accepts (also by name, or as Brax's enum of the same values)."""

    NONE = "NONE"
    ADAPTIVE_KL = adaptive_kl.NAME


def adapt_learning_rate(
    learning_rate: jax.Array,
    kl_mean: jax.Array,
    desired_kl: float,
    min_learning_rate: float = 1e-5,
    max_learning_rate: float = 1e-2,
) -> jax.Array:
    """The ADAPTIVE_KL rule (``adaptive_kl.adapted_learning_rate``): the next learning rate from the current one and
    the minibatch's mean KL."""
    return adaptive_kl.adapted_learning_rate(
        learning_rate,
        jax.lax.stop_gradient(kl_mean),
        desired_kl,
        min_learning_rate,
        max_learning_rate,
        where=jnp.where,
        at_least=lambda x, bound: jnp.maximum(bound, x),
        at_most=lambda x, bound: jnp.minimum(bound, x),
    )


def _injected(state: Any) -> Any:
    """The ``inject_hyperparams`` state inside ``state`` (itself, or the last element of a chain's states)."""
    if hasattr(state, "hyperparams"):
        return state
    if isinstance(state, tuple) and state and hasattr(state[-1], "hyperparams"):
        return state[-1]
    raise ValueError(
        "the ADAPTIVE_KL schedule needs an optimizer built with optax.inject_hyperparams (see make_optimizer); "
        f"got a state of type {type(state).__name__}"
    )


def adaptive_kl_learning_rate(
    optimizer_state: optax.OptState,
    kl_mean: jax.Array,
    desired_kl: float,
    min_learning_rate: float = 1e-5,
    max_learning_rate: float = 1e-2,
) -> tuple[optax.OptState, jax.Array]:
    """Applies ``adapt_learning_rate`` to the learning rate held in ``optimizer_state``.

    Returns ``(new optimizer state, new learning rate)``; the input state is not modified.
    """
    injected = _injected(optimizer_state)
    learning_rate = adapt_learning_rate(
        injected.hyperparams["learning_rate"], kl_mean, desired_kl, min_learning_rate, max_learning_rate
    )
    updated = injected._replace(hyperparams={**injected.hyperparams, "learning_rate": learning_rate})
    if injected is not optimizer_state:
        return (*optimizer_state[:-1], updated), learning_rate
    return updated, learning_rate


def make_optimizer(
    learning_rate: float, max_grad_norm: float | None, schedule: str | None
) -> optax.GradientTransformation:
    """Adam (after global-norm clipping when ``max_grad_norm`` is set); with ``ADAPTIVE_KL`` its learning rate is a
    hyperparameter held in the optimizer state, where ``adaptive_kl_learning_rate`` changes it."""
    if schedule == LRSchedule.ADAPTIVE_KL:
        adam = optax.inject_hyperparams(optax.adam)(learning_rate=jnp.float32(learning_rate))
    else:
        adam = optax.adam(learning_rate=learning_rate)
    if max_grad_norm is None:
        return adam
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), adam)
