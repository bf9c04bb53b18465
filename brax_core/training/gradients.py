"""Gradient utilities (``brax.training.gradients`` counterpart)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import optax


def loss_and_pgrad(
    loss_fn: Callable[..., Any], pmap_axis_name: str | None, has_aux: bool = False
) -> Callable[..., Any]:
    """``value_and_grad`` of ``loss_fn`` whose gradients are averaged over ``pmap_axis_name``."""
    g = jax.value_and_grad(loss_fn, has_aux=has_aux)

    def h(*args: Any, **kwargs: Any) -> Any:
        value, grad = g(*args, **kwargs)
        return value, (jax.lax.pmean(grad, axis_name=pmap_axis_name) if pmap_axis_name is not None else grad)

    return h


def gradient_update_fn(
    loss_fn: Callable[..., Any],
    optimizer: optax.GradientTransformation,
    pmap_axis_name: str | None,
    has_aux: bool = False,
) -> Callable[..., Any]:
    """Wrapper of the loss function that applies gradient updates.

    Returns:
      ``f(*args, optimizer_state) -> (value, params, optimizer_state)``; the parameters to update are the first
      argument of ``loss_fn``.
    """
    loss_and_pgrad_fn = loss_and_pgrad(loss_fn, pmap_axis_name=pmap_axis_name, has_aux=has_aux)

    def f(*args: Any, optimizer_state: Any) -> tuple[Any, Any, Any]:
        value, grads = loss_and_pgrad_fn(*args)
        params_update, optimizer_state = optimizer.update(grads, optimizer_state, args[0])
        params = optax.apply_updates(args[0], params_update)
        return value, params, optimizer_state

    return f
