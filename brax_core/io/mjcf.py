"""Loading MJCF models into MuJoCo MJX (``brax.io.mjcf`` counterpart)."""

from __future__ import annotations

import os

import mujoco
import numpy as np
from mujoco import mjx

from brax_core import _quiet  # noqa: F401

# mjx.Model is an immutable pytree and cannot carry the native model, so the native model of every
# system loaded here is remembered by identity (both are kept alive together).
_NATIVE: dict[int, tuple[mjx.Model, mujoco.MjModel]] = {}


def put(mj_model: mujoco.MjModel) -> mjx.Model:
    """Places a native model on the default JAX device and remembers the native model."""
    sys = mjx.put_model(mj_model)
    _NATIVE[id(sys)] = (sys, mj_model)
    return sys


def load_model(path: str | os.PathLike) -> mujoco.MjModel:
    """Loads a native ``mujoco.MjModel`` from an MJCF file, naming the path on failure."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"MJCF file not found: {path}")
    return mujoco.MjModel.from_xml_path(path)


def load(path: str | os.PathLike) -> mjx.Model:
    """Loads an MJCF file as an ``mjx.Model`` (the ``sys`` of a ``PipelineEnv``)."""
    return put(load_model(path))


def loads(xml: str) -> mjx.Model:
    """Loads MJCF text as an ``mjx.Model``."""
    return put(mujoco.MjModel.from_xml_string(xml))


def native_model(sys: mjx.Model) -> mujoco.MjModel:
    """The native model ``sys`` was made from (for rendering and reference physics).

    ``sys`` may also be derived from a loaded model by ``replace``/``tree_replace`` (as Brax scripts do with
    ``env.sys.tree_replace({'opt.timestep': env.dt})``): it is then matched by its topology and geometry.
    """
    entry = _NATIVE.get(id(sys))
    if entry is not None and entry[0] is sys:
        return entry[1]
    if not isinstance(sys, mjx.Model):
        raise ValueError(f"sys must be an mjx.Model; got {type(sys).__name__}")
    fingerprint = _fingerprint(sys)
    for loaded, mj_model in reversed(list(_NATIVE.values())):
        if _fingerprint(loaded) == fingerprint:
            return mj_model
    raise ValueError(
        "sys was not loaded through brax_core.io.mjcf (load/loads/put), nor derived from a model that was; "
        "pass mj_model= to PipelineEnv"
    )


def _fingerprint(sys: mjx.Model) -> tuple:
    """What ``replace``/``tree_replace`` of physical parameters leaves unchanged: sizes, tree and geometry."""
    sizes = tuple(int(getattr(sys, n)) for n in ("nq", "nv", "nu", "nbody", "njnt", "ngeom", "nsite"))
    arrays = tuple(
        np.asarray(getattr(sys, n)).tobytes() for n in ("body_parentid", "jnt_type", "geom_type", "geom_bodyid")
    )
    return sizes + arrays
