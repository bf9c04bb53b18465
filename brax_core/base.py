"""Physics state types with Brax's field names (``brax.base`` counterpart).

``brax_core`` simulates with MuJoCo MJX, so the pipeline state is an ``mjx.Data``. ``State`` here is that
same data with Brax's read-only views on top (``q``, ``qd`` and ``x``, the body transforms), so user code
that reads ``state.pipeline_state.x.pos`` ports unchanged.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from brax_core import _quiet  # noqa: F401  (before mujoco.mjx: hides its import-time stdout line)

# isort: split
import jax
import jax.numpy as jnp
from flax import struct
from mujoco import mjx

System = mjx.Model


class Base:
    """Array-like operations on every leaf of a pytree dataclass, as ``brax.base.Base`` gives its types.

    ``a + b`` and ``a - b`` leaf by leaf with another instance; ``a * s``, ``a / s`` and ``-a`` with a scalar;
    ``reshape``, ``select``, ``slice``, ``take``, ``concatenate``, ``index_set``, ``index_sum`` and ``T`` on the
    leaves' leading axes; ``tree_replace({"pipeline_state.qpos": q})`` replaces nested fields by dotted path.
    """

    def __add__(self, other: Any) -> Any:
        return jax.tree.map(operator.add, self, other)

    def __sub__(self, other: Any) -> Any:
        return jax.tree.map(operator.sub, self, other)

    def __mul__(self, scale: Any) -> Any:
        return jax.tree.map(lambda x: x * scale, self)

    def __neg__(self) -> Any:
        return jax.tree.map(operator.neg, self)

    def __truediv__(self, scale: Any) -> Any:
        return jax.tree.map(lambda x: x / scale, self)

    def reshape(self, shape: Sequence[int]) -> Any:
        return jax.tree.map(lambda x: x.reshape(shape), self)

    def select(self, other: Any, cond: jax.Array) -> Any:
        """``self`` where ``cond`` (over the leading axes) is true, else ``other``."""
        cond = jnp.asarray(cond).astype(bool)

        def pick(x: jax.Array, y: jax.Array) -> jax.Array:
            return jnp.where(cond.reshape(cond.shape + (1,) * (jnp.ndim(x) - cond.ndim)), x, y)

        return jax.tree.map(pick, self, other)

    def slice(self, beg: int, end: int) -> Any:
        return jax.tree.map(lambda x: x[beg:end], self)

    def take(self, i: Any, axis: int = 0) -> Any:
        """Entries ``i`` along ``axis`` (indices out of range wrap around, as in Brax)."""
        return jax.tree.map(lambda x: jnp.take(x, i, axis=axis, mode="wrap"), self)

    def concatenate(self, *others: Any, axis: int = 0) -> Any:
        return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=axis), self, *others)

    def index_set(self, idx: Any, other: Any) -> Any:
        return jax.tree.map(lambda x, y: x.at[idx].set(y), self, other)

    def index_sum(self, idx: Any, other: Any) -> Any:
        return jax.tree.map(lambda x, y: x.at[idx].add(y), self, other)

    @property
    def T(self) -> Any:  # noqa: N802  (Brax's name)
        return jax.tree.map(lambda x: x.T, self)

    def tree_replace(self, params: Mapping[str, Any]) -> Any:
        """A copy with the fields named by dotted paths (``"pipeline_state.qpos"``, ``"info.steps"``) set."""
        if not isinstance(params, Mapping):
            raise TypeError(f"tree_replace takes a mapping of dotted field paths to values, got {params!r}")
        new = self
        for path, value in params.items():
            new = _replaced(new, str(path).split("."), value, str(path))
        return new


def _replaced(node: Any, names: list[str], value: Any, path: str) -> Any:
    """``node`` with the field ``names[0]`` (an attribute of a dataclass, or a key of a dict) replaced."""
    name, rest = names[0], names[1:]
    if isinstance(node, Mapping):
        if rest and name not in node:
            raise KeyError(f"tree_replace: {path!r}: no key {name!r} among {sorted(map(str, node))}")
        return {**node, name: _replaced(node[name], rest, value, path) if rest else value}
    fields = [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []
    if name not in fields:
        raise AttributeError(f"tree_replace: {path!r}: {type(node).__name__} has no field {name!r}; fields: {fields}")
    return node.replace(**{name: _replaced(getattr(node, name), rest, value, path) if rest else value})


@struct.dataclass
class Transform(Base):
    """Positions ``pos`` (..., 3) and unit quaternions ``rot`` (..., 4, w first) of bodies in world frame."""

    pos: jax.Array
    rot: jax.Array


class State(mjx.Data):
    """MJX simulation data with Brax's views ``q``, ``qd`` and ``x`` (world body excluded)."""

    @property
    def q(self) -> jax.Array:
        return self.qpos

    @property
    def qd(self) -> jax.Array:
        return self.qvel

    @property
    def x(self) -> Transform:
        return Transform(pos=self.xpos[..., 1:, :], rot=self.xquat[..., 1:, :])


def from_data(data: mjx.Data) -> State:
    """Views ``mjx.Data`` as a ``State`` (no copy: the same arrays)."""
    if isinstance(data, State):
        return data
    return State(**{f.name: getattr(data, f.name) for f in dataclasses.fields(data)})
