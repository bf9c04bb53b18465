"""MJX's constraint solve as a loop JAX can differentiate in reverse mode, for the programs that are differentiated.

MJX's ``solver.solve`` runs its Newton (or CG) iterations in a ``jax.lax.while_loop`` whenever a model asks for more
than one (``opt.iterations > 1``), and JAX has no reverse pass for a ``while_loop``. ``fixed_count_solve`` computes
the same solve as a ``scan`` of exactly ``opt.iterations`` steps, each applying one solver iteration only while
MJX's own stopping rule says the solve is not finished; an iteration that is not applied leaves the solver's state
as it is, so the scan stops where the ``while_loop`` stops and its forward pass is the shipped physics. The pieces
of an iteration (line search, constraint and gradient updates, the stopping rule's rescaling) are MJX's own
functions, imported.

``reversible_physics()`` is the switch: physics traced inside it (``PipelineEnv.pipeline_step`` and
``pipeline_init``, and any ``mjx.forward``/``mjx.step`` a user's env calls) solves with ``fixed_count_solve``; outside
it MJX's ``solve`` runs untouched. Only the differentiated programs enter it: the bridge's differentiable step
(``brax_bridge.differentiable.forward``) and the forward of ``finite_gradient_step`` that the JAX APG's unroll is
differentiated through. MJX's ``solve`` is replaced, the first time the switch is used, by a function that reads
the switch when it is traced and calls MJX's own otherwise, so programs traced outside the switch are unchanged.

Batched by brax_core's wrappers (``VmapWrapper``, ``DomainRandomizationVmapWrapper``), whose ``vmap`` names its axis
``ENV_AXIS``, an iteration runs while any env of the batch is not finished and is skipped once all are, as MJX's
batched ``while_loop`` does, so the differentiable step, forward and backward, pays for the iterations the batch
takes, not for ``opt.iterations`` of them. Under another ``vmap`` each env decides alone, and every iteration runs.
Each iteration is rematerialised in the backward pass (``jax.checkpoint``): the forward pass keeps the solver's state
per iteration, not the line search's intermediates (``opt.ls_iterations`` of them per iteration), so an iteration the
batch skips costs next to nothing, and one it takes runs once more in the backward pass.

Within a batch an iteration that is not applied to an env still runs for it, on a solve that has finished: its
search direction is about zero, and the line search's reverse pass divides by its square, which can give NaN even
with a zero cotangent (``brax_core.envs.wrappers.gradients`` measured it on a solve that starts converged). Its
inputs are therefore cut from the gradient in the envs where it is not applied, so its reverse pass contributes
exact zeros there, whatever it computes.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
from mujoco.mjx._src import math as mjx_math
from mujoco.mjx._src import solver as mjx_solver
from mujoco.mjx._src.types import Data, DisableBit, Model, OptionJAX, SolverType

ENV_AXIS = "brax_core_envs"  # the axis name of brax_core's batching vmaps
_REVERSIBLE: contextvars.ContextVar[bool] = contextvars.ContextVar("brax_core_reversible_physics", default=False)
_install_lock = threading.Lock()
_mjx_solve: Any = None  # MJX's own solve, kept once the dispatching one is installed


def reversible_physics_active() -> bool:
    """Whether physics traced now solves its constraints with ``fixed_count_solve``."""
    return _REVERSIBLE.get()


def batch_axis_bound() -> bool:
    """Whether the code traced now runs inside a ``vmap`` over ``ENV_AXIS`` (a batch of brax_core's wrappers)."""
    try:
        jax.lax.axis_size(ENV_AXIS)
    except NameError:
        return False
    return True


def trace_key() -> tuple[bool, bool]:
    """What decides the solve traced now: whether it is ``fixed_count_solve``, and whether that one can skip the
    iterations its whole batch has finished. Jitted physics takes it as a static argument."""
    active = _REVERSIBLE.get()
    return active, active and batch_axis_bound()


@contextlib.contextmanager
def reversible_physics(enabled: bool = True) -> Iterator[None]:
    """Physics traced inside solves its constraints with ``fixed_count_solve`` (``enabled=False``: with MJX's own
    ``solve``, as outside). It decides what is traced, not what runs: a function jitted inside must be traced
    inside, and one traced already is reused as it was traced, so jitted physics takes the switch as a static
    argument (``PipelineEnv``'s ``_traced_step`` and ``_traced_init`` do)."""
    if not isinstance(enabled, bool):
        raise ValueError(f"enabled must be True or False, got {enabled!r}")
    if enabled:
        _install()
    token = _REVERSIBLE.set(enabled)
    try:
        yield
    finally:
        _REVERSIBLE.reset(token)


def _install() -> None:
    """Puts the dispatching solve where MJX's ``forward`` looks it up (``solver.solve``, read at each call)."""
    global _mjx_solve
    with _install_lock:
        if _mjx_solve is not None:
            return
        original = mjx_solver.solve

        @functools.wraps(original)  # same name, so the named scope MJX's forward gives it is unchanged
        def solve(m: Model, d: Data) -> Data:
            return fixed_count_solve(m, d) if _REVERSIBLE.get() else original(m, d)

        _mjx_solve = original
        mjx_solver.solve = solve


def _not_finished(m: Model, d: Data, ctx: mjx_solver.Context) -> jax.Array:
    """Whether MJX's stopping rule lets the solve go on: it stops once the iteration budget is spent, or the cost's
    improvement or the gradient (rescaled by the trace of the mass matrix) is below ``opt.tolerance``. Written as
    the negation of "finished" so that a NaN improvement keeps iterating, as in MJX."""
    improvement = mjx_solver._rescale(m, d, ctx.prev_cost - ctx.cost)
    gradient = mjx_solver._rescale(m, d, mjx_math.norm(ctx.grad))
    finished = (ctx.solver_niter >= m.opt.iterations) | (improvement < m.opt.tolerance)
    return ~(finished | (gradient < m.opt.tolerance))


def _iteration(m: Model, d: Data, ctx: mjx_solver.Context) -> mjx_solver.Context:
    """One solver iteration: a line search along ``ctx.search``, the constraint forces and the cost's gradient at
    the point reached, and the next search direction (Newton: the preconditioned gradient; CG: Polak-Ribiere)."""
    ctx = mjx_solver._linesearch(m, d, ctx)
    grad_before, mgrad_before = ctx.grad, ctx.Mgrad
    ctx = mjx_solver._update_gradient(m, d, mjx_solver._update_constraint(m, d, ctx))
    if m.opt.solver == SolverType.NEWTON:
        search = -ctx.Mgrad
    else:
        denominator = jnp.maximum(jnp.dot(grad_before, mgrad_before), mujoco.mjMINVAL)
        beta = jnp.maximum(0.0, jnp.dot(ctx.grad, ctx.Mgrad - mgrad_before) / denominator)
        search = -ctx.Mgrad + beta * ctx.search
    return ctx.replace(search=search, solver_niter=ctx.solver_niter + 1)


def _cut_unless(applied: jax.Array, tree: Any) -> Any:
    """``tree`` as it is, with its gradient cut wherever ``applied`` is False (a select, so no NaN passes)."""

    def cut(x: Any) -> Any:
        if not hasattr(x, "dtype") or not jnp.issubdtype(x.dtype, jnp.inexact):
            return x
        return jnp.where(applied, x, jax.lax.stop_gradient(x))

    return jax.tree.map(cut, tree)


def fixed_count_solve(m: Model, d: Data) -> Data:
    """MJX's ``solver.solve`` with its iteration loop as a ``scan`` of ``m.opt.iterations`` steps, which JAX can
    differentiate in reverse mode; the same forward pass. Inside a ``vmap`` over ``ENV_AXIS`` the iterations are
    skipped once every env of the batch has finished. A model that asks for one iteration gets MJX's own solve (it
    applies that iteration without a loop)."""
    if not isinstance(m.opt._impl, OptionJAX) or m.opt.iterations == 1:
        return (_mjx_solve or mjx_solver.solve)(m, d)

    # The starting acceleration, as MJX picks it: last step's (the warm start) where its cost is lower.
    qacc = d.qacc_smooth
    if not m.opt.disableflags & DisableBit.WARMSTART:
        warm = mjx_solver.Context.create(m, d.replace(qacc=d.qacc_warmstart), grad=False)
        cold = mjx_solver.Context.create(m, d.replace(qacc=d.qacc_smooth), grad=False)
        qacc = jnp.where(warm.cost < cold.cost, d.qacc_warmstart, d.qacc_smooth)
    d = d.replace(qacc=qacc)

    batched = batch_axis_bound()

    def step(ctx: mjx_solver.Context, _: None) -> tuple[mjx_solver.Context, None]:
        applied = _not_finished(m, d, ctx)

        @functools.partial(jax.checkpoint, prevent_cse=False)
        def advance(c: mjx_solver.Context) -> mjx_solver.Context:
            stepped = _iteration(m, _cut_unless(applied, d), _cut_unless(applied, c))
            return jax.tree.map(lambda new, old: jnp.where(applied, new, old), stepped, c)

        # The whole batch's count of unfinished envs (the same in every env): a cond on it is skipped, forward and
        # backward, once every env has finished; an env's own ``applied`` is batched, and a cond on it would run
        # both sides for every env.
        anyone = jax.lax.psum(applied.astype(jnp.int32), ENV_AXIS) > 0 if batched else applied
        return jax.lax.cond(anyone, advance, lambda c: c, ctx), None

    ctx = jax.lax.scan(step, mjx_solver.Context.create(m, d), None, length=m.opt.iterations)[0]
    return d.tree_replace(
        {"qfrc_constraint": ctx.qfrc_constraint, "qacc": ctx.qacc, "_impl.efc_force": ctx.efc_force}
    )


__all__ = [
    "ENV_AXIS",
    "batch_axis_bound",
    "fixed_count_solve",
    "reversible_physics",
    "reversible_physics_active",
    "trace_key",
]
