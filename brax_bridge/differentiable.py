"""Differentiable stepping: a ``torch.autograd.Function`` whose backward is ``jax.vjp`` of the jitted env step.

JAX side: ``forward`` runs the step and returns its VJP closure (a pytree of residual arrays, so it can leave
``jax.jit``); ``backward`` applies it and cuts the gradient of any env where it is not finite
(``brax_core.envs.wrappers.gradients``). Only floating leaves of the state are differentiated; integer leaves
(step counters, RNG keys) ride along as auxiliary data. ``forward_with_system`` and ``backward_with_system`` do the
same for a step that also takes ``set_system``'s fields, and differentiate with respect to them as well.

Torch side: ``DifferentiableStep`` threads the JAX state through autograd with a zero-size token tensor. Step
t+1 consumes step t's token, so torch runs their backwards in reverse order, and the state cotangent passes
from one to the other through a ``Link`` as a JAX pytree; the physics state never becomes a torch tensor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import torch

from brax_bridge import convert as _convert
from brax_bridge.system import SystemArgs
from brax_core.envs.reversible import reversible_physics
from brax_core.envs.wrappers.gradients import cut_nonfinite, float_part, merge, other_part

# ----------------------------------------------------------------------------- JAX side

def forward(step: Callable[[Any, jax.Array], tuple[Any, Any]], state: Any, action: jax.Array):
    """The step plus its VJP closure; integer leaves (counters, RNG keys) ride along as non-differentiable aux. The
    step is traced under ``reversible_physics``: MJX's constraint solve as a loop JAX can reverse, whatever the
    model's solver iterations."""
    other_in = other_part(state)

    def float_step(float_in: Any, act: jax.Array):
        new_state, out = step(merge(float_in, other_in), act)
        return (float_part(new_state), float_part(out)), (other_part(new_state), other_part(out))

    with reversible_physics():  # a constraint solve JAX can reverse, with the same forward pass
        (state_f, out_f), vjp_fn, (state_o, out_o) = jax.vjp(float_step, float_part(state), action, has_aux=True)
    return merge(state_f, state_o), merge(out_f, out_o), vjp_fn


def forward_with_system(
    step: Callable[[Any, jax.Array, SystemArgs], tuple[Any, Any]], state: Any, action: jax.Array, system: SystemArgs
):
    """``forward`` of a step taking the system fields, differentiated with respect to them too. Every field enters
    the differentiated step per env (a shared one broadcast to ``[num_envs, ...]``), so that the backward can cut
    one env's non-finite cotangent before the envs' contributions to a shared field are summed."""
    num_envs = action.shape[0]
    fields = {
        **{name: jnp.broadcast_to(value, (num_envs, *value.shape)) for name, value in system["shared"].items()},
        **system["per_env"],
    }
    other_in = other_part(state)

    def float_step(float_in: Any, act: jax.Array, per_env: dict[str, jax.Array]):
        new_state, out = step(merge(float_in, other_in), act, {"shared": {}, "per_env": per_env})
        return (float_part(new_state), float_part(out)), (other_part(new_state), other_part(out))

    with reversible_physics():
        (state_f, out_f), vjp_fn, (state_o, out_o) = jax.vjp(
            float_step, float_part(state), action, fields, has_aux=True
        )
    return merge(state_f, state_o), merge(out_f, out_o), vjp_fn


def backward_with_system(
    vjp_fn: Any, ct_state: Any, ct_out: Any, cuts: jax.Array, shared: tuple[str, ...]
) -> tuple[Any, jax.Array, dict[str, jax.Array], jax.Array]:
    """``backward`` of ``forward_with_system``: also the fields' cotangents, each env's cut where it is not finite,
    then summed over the envs for the ``shared`` fields (a static argument: the names)."""
    ct_state_in, ct_action, ct_fields = vjp_fn((ct_state, ct_out))
    (ct_state_in, ct_action, ct_fields), cut = cut_nonfinite((ct_state_in, ct_action, ct_fields), ct_action.shape[0])
    ct_fields = {name: ct.sum(axis=0) if name in shared else ct for name, ct in ct_fields.items()}
    return ct_state_in, ct_action, ct_fields, cuts + cut


def backward(vjp_fn: Any, ct_state: Any, ct_out: Any, cuts: jax.Array) -> tuple[Any, jax.Array, jax.Array]:
    """The step's VJP, with the cotangents of every env where it is not finite zeroed (``cut_nonfinite``: MJX's
    solver can give NaN there from finite outputs); ``cuts`` plus the number of envs cut."""
    ct_state_in, ct_action = vjp_fn((ct_state, ct_out))
    (ct_state_in, ct_action), cut = cut_nonfinite((ct_state_in, ct_action), ct_action.shape[0])
    return ct_state_in, ct_action, cuts + cut


# ----------------------------------------------------------------------------- torch side


class Link:
    """Carries the state cotangent from step t+1's backward to step t's backward (it never leaves JAX)."""

    __slots__ = ("cotangent",)

    def __init__(self) -> None:
        self.cotangent = None


class CutCount:
    """The number of env steps whose gradient the backward has cut so far (``cut_nonfinite``), a JAX scalar that
    each backward replaces: counted without a host read."""

    __slots__ = ("total",)

    def __init__(self, total: jax.Array) -> None:
        self.total = total


@dataclasses.dataclass
class ForwardRecord:
    """One step the env has already run through ``forward``, handed to ``DifferentiableStep`` to join torch's graph.

    ``backward_fn`` is the env's jitted ``backward`` (or ``backward_with_system`` with its static names bound);
    ``zero_state_cotangent()`` gives the state cotangent of a step whose successor contributed no gradient (the last
    step of a rollout); ``cuts`` counts the envs whose gradient a backward cut. ``param_names``: the system fields
    whose tensors ``DifferentiableStep.apply`` takes after the action, in that order.
    """

    out: Any
    vjp_fn: Any
    link_in: Link
    link_out: Link
    backward_fn: Callable[[Any, Any, Any, jax.Array], tuple[Any, jax.Array, jax.Array]]
    zero_state_cotangent: Callable[[], Any]
    device: torch.device
    cuts: CutCount
    param_names: tuple[str, ...] = ()


class DifferentiableStep(torch.autograd.Function):
    """One env step whose backward is ``jax.vjp`` of the same jitted step.

    ``apply(record, token, action, *params)``: the env ran the step in JAX (``record``); this puts its outputs into
    torch's graph as functions of ``token``, ``action`` and ``params`` (the tensors of the system fields that
    require grad, ``record.param_names``). The JAX state is threaded through autograd by the zero-size token: step
    t+1 consumes step t's token, so torch runs their backwards in reverse order, and the state cotangent passes
    between them via a ``Link`` as a JAX pytree.
    """

    @staticmethod
    def forward(ctx, record: ForwardRecord, token: torch.Tensor, action: torch.Tensor, *params: torch.Tensor):
        del token, action, params  # inputs only so that autograd routes their gradients through backward
        out = record.out
        ctx.param_names = record.param_names
        ctx.vjp_fn, ctx.link_in, ctx.link_out = record.vjp_fn, record.link_in, record.link_out
        ctx.backward_fn, ctx.zero_state_cotangent, ctx.device, ctx.cuts = (
            record.backward_fn, record.zero_state_cotangent, record.device, record.cuts
        )
        ctx.out_type = type(out)
        obs_leaves, ctx.obs_tree = jax.tree.flatten(out.obs)
        final_leaves = jax.tree.leaves(out.final_obs)
        ctx.n_obs = len(obs_leaves)
        tensors = [_convert.array_to_tensor(x) for x in (*obs_leaves, *final_leaves, out.reward)]
        flags = [_convert.array_to_tensor(x) for x in (out.done, out.terminated, out.truncated)]
        ctx.mark_non_differentiable(*flags)
        new_token = torch.zeros((), device=record.device)
        return (new_token, *tensors, *flags)

    @staticmethod
    def backward(ctx, _token_grad, *grads):
        n = ctx.n_obs
        ct_state = ctx.link_out.cotangent
        ctx.link_out.cotangent = None
        if ct_state is None:
            ct_state = ctx.zero_state_cotangent()
        to_jax = _convert.tensor_to_array  # broadcast gradients (e.g. of a sum) are non-compact: counted copies
        obs_ct = jax.tree.unflatten(ctx.obs_tree, [to_jax(g) for g in grads[:n]])
        final_ct = jax.tree.unflatten(ctx.obs_tree, [to_jax(g) for g in grads[n : 2 * n]])
        ct_out = ctx.out_type(obs=obs_ct, final_obs=final_ct, reward=to_jax(grads[2 * n]),
                              done=None, terminated=None, truncated=None)
        ct_state_in, ct_action, *ct_fields, ctx.cuts.total = ctx.backward_fn(
            ctx.vjp_fn, ct_state, ct_out, ctx.cuts.total
        )
        ctx.link_in.cotangent = ct_state_in
        ctx.vjp_fn = None  # drop the residuals as soon as they are used
        params = [_convert.array_to_tensor(ct_fields[0][name]) for name in ctx.param_names]
        return None, torch.zeros((), device=ctx.device), _convert.array_to_tensor(ct_action), *params
