"""Locating and loading the MJCF models shipped with brax_core."""

from __future__ import annotations

import os

import mujoco
from mujoco import mjx

from brax_core.io import mjcf

ASSET_DIR = os.path.join(os.path.dirname(__file__), "assets")


def load(name: str) -> tuple[mjx.Model, mujoco.MjModel]:
    """Loads ``assets/<name>.xml``, returning the MJX model and the native model it was made from."""
    mj_model = mjcf.load_model(os.path.join(ASSET_DIR, f"{name}.xml"))
    return mjcf.put(mj_model), mj_model
