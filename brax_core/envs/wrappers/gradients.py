"""Gradients of a batched env step that stay finite where MJX's constraint solver's reverse pass is not.

MJX's line search (``mujoco.mjx._src.solver._linesearch``) takes Newton steps ``alpha - deriv_0 / deriv_1`` along the
solver's search direction. When a solve starts converged (no constraint active and ``qacc_smooth`` already the
minimum, as in the first steps after a reset, where the state is small), the search direction is rounding noise and
``deriv_1`` is about 1e-20; the reverse pass of the division squares it, which underflows to zero in float32, and
``0 * inf`` turns that env's whole cotangent into NaN although the step's outputs are finite (the branch it comes
from was not even taken: under ``vmap`` both sides of the solver's ``cond`` run). One NaN would reach every parameter
through the gradient's sum.

``cut_nonfinite`` zeroes, per env, the cotangents of an env whose cotangent holds a non-finite value: that env's
gradient is cut at that step, as an episode end cuts it, and every other env's is untouched. It returns how many envs
it cut, which the trainers report (``gradient_cuts``). ``finite_gradient_step`` puts it into a step's reverse pass
for code that differentiates with ``jax.grad`` (the JAX APG); the bridge's ``TorchEnv(differentiable=True)`` applies
it in its own backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from brax_core.envs.reversible import reversible_physics


def _is_float(x: Any) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.inexact)


def float_part(tree: Any) -> Any:
    """``tree`` with every leaf that is not floating (step counters, RNG keys, flags) replaced by ``None``."""
    return jax.tree.map(lambda x: x if _is_float(x) else None, tree)


def other_part(tree: Any) -> Any:
    """``tree`` with every floating leaf replaced by ``None``: the complement of ``float_part``."""
    return jax.tree.map(lambda x: None if _is_float(x) else x, tree)


def merge(floats: Any, others: Any) -> Any:
    """The tree ``float_part`` and ``other_part`` were taken from."""
    return jax.tree.map(lambda f, o: o if f is None else f, floats, others, is_leaf=lambda x: x is None)


def cut_nonfinite(cotangents: Any, num_envs: int) -> tuple[Any, jax.Array]:
    """``cotangents`` (a pytree whose batched leaves lead with ``num_envs``) with every leaf zeroed for each env where
    any leaf holds a NaN or an infinity, and the number of such envs (float32).

    A leaf without the env axis (a model-wide constant) that is not finite counts against every env.
    """
    leaves = [x for x in jax.tree.leaves(cotangents) if x is not None]
    bad = jnp.zeros((num_envs,), bool)
    for leaf in leaves:
        finite = jnp.isfinite(leaf)
        if leaf.ndim and leaf.shape[0] == num_envs:
            bad = bad | ~finite.reshape(num_envs, -1).all(axis=1)
        else:
            bad = bad | ~finite.all()

    def keep(leaf: jax.Array) -> jax.Array:
        if leaf.ndim and leaf.shape[0] == num_envs:
            return jnp.where(bad.reshape((num_envs,) + (1,) * (leaf.ndim - 1)), jnp.zeros_like(leaf), leaf)
        return jnp.where(bad.any(), jnp.zeros_like(leaf), leaf)

    return jax.tree.map(lambda x: None if x is None else keep(x), cotangents, is_leaf=lambda x: x is None), bad.sum(
        dtype=jnp.float32
    )


def _float0_zeros(tree: Any) -> Any:
    """The cotangent JAX expects for non-floating inputs of a ``custom_vjp`` function."""
    return jax.tree.map(lambda x: None if x is None else np.zeros(np.shape(x), jax.dtypes.float0), tree)


def finite_gradient_step(step: Callable[[Any, jax.Array], Any]) -> Callable[[Any, jax.Array, jax.Array], Any]:
    """``step(state, action)`` of a batched env as ``finite_step(state, action, cuts)``: the same outputs, and a
    reverse pass that applies ``cut_nonfinite`` to the cotangents of ``state`` and ``action``.

    ``cuts`` is a float32 scalar the step does not read; its gradient is the number of envs cut, so ``jax.grad``
    with respect to a zero passed to every step of an unroll counts the cuts of the whole unroll.
    """

    @jax.custom_vjp
    def run(floats: Any, others: Any, action: jax.Array, cuts: jax.Array) -> Any:
        del cuts
        return step(merge(floats, others), action)

    def run_forward(floats: Any, others: Any, action: jax.Array, cuts: jax.Array):
        del cuts

        def float_step(floats_in: Any, act: jax.Array):
            out = step(merge(floats_in, others), act)
            return float_part(out), other_part(out)

        with reversible_physics():  # the forward of a step that is differentiated: a solve JAX can reverse
            out_floats, vjp_fn, out_others = jax.vjp(float_step, floats, action, has_aux=True)
        return merge(out_floats, out_others), (vjp_fn, others)

    def run_backward(residuals: Any, out_cotangent: Any):
        vjp_fn, others = residuals
        ct_floats, ct_action = vjp_fn(float_part(out_cotangent))
        (ct_floats, ct_action), cut = cut_nonfinite((ct_floats, ct_action), ct_action.shape[0])
        return ct_floats, _float0_zeros(others), ct_action, cut

    run.defvjp(run_forward, run_backward)

    def finite_step(state: Any, action: jax.Array, cuts: jax.Array) -> Any:
        return run(float_part(state), other_part(state), action, cuts)

    return finite_step


__all__ = ["cut_nonfinite", "finite_gradient_step", "float_part", "merge", "other_part"]
