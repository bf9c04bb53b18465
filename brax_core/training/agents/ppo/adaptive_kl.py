"""The ``ADAPTIVE_KL`` learning-rate rule of both trainers (RSL-RL's schedule), over any array library.

At every minibatch the rate is divided by ``FACTOR`` (not below ``min_learning_rate``) when the KL divergence between
the behaviour policy and the current one exceeds ``2 * desired_kl``, multiplied by ``FACTOR`` (not above
``max_learning_rate``) when it is positive and below ``desired_kl / 2``, and kept otherwise. A rate already outside
the bounds is only moved into them by a change in that direction (the bounds clip the changed value, as in Brax).

Standard library only: the JAX trainer applies the rule with ``jax.numpy``, torch_ppo with torch, each passing its
own ``where`` and bounds, and the schema (``config.py``) quotes the factor in its help.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NAME = "ADAPTIVE_KL"
FACTOR = 1.5


def adapted_learning_rate(
    learning_rate: Any,
    kl_mean: Any,
    desired_kl: float,
    min_learning_rate: float,
    max_learning_rate: float,
    *,
    where: Callable[[Any, Any, Any], Any],
    at_least: Callable[[Any, float], Any],
    at_most: Callable[[Any, float], Any],
) -> Any:
    """The next learning rate from the current one and the minibatch's mean KL (arrays of any library whose
    ``where(condition, x, y)``, ``at_least(x, bound)`` and ``at_most(x, bound)`` are given)."""
    lowered = at_least(learning_rate / FACTOR, min_learning_rate)
    raised = at_most(learning_rate * FACTOR, max_learning_rate)
    learning_rate = where(kl_mean > 2.0 * desired_kl, lowered, learning_rate)
    return where((kl_mean < desired_kl / 2.0) & (kl_mean > 0.0), raised, learning_rate)
