"""Loading MJCF models into MuJoCo MJX (``brax.io.mjcf`` counterpart)."""

from __future__ import annotations

import os

import mujoco
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
    """The native model ``sys`` was made from (for rendering and reference physics)."""
    entry = _NATIVE.get(id(sys))
    if entry is None or entry[0] is not sys:
        raise ValueError(
            "sys was not loaded through brax_core.io.mjcf (load/loads/put); pass mj_model= to PipelineEnv"
        )
    return entry[1]
