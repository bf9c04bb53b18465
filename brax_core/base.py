"""Physics state types with Brax's field names (``brax.base`` counterpart).

``brax_core`` simulates with MuJoCo MJX, so the pipeline state is an ``mjx.Data``. ``State`` here is that
same data with Brax's read-only views on top (``q``, ``qd`` and ``x``, the body transforms), so user code
that reads ``state.pipeline_state.x.pos`` ports unchanged.
"""

from __future__ import annotations

import dataclasses

from brax_core import _quiet  # noqa: F401  (before mujoco.mjx: hides its import-time stdout line)

# isort: split
import jax
from flax import struct
from mujoco import mjx

System = mjx.Model


@struct.dataclass
class Transform:
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
