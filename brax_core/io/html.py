"""A self-contained HTML trajectory viewer (``brax.io.html`` counterpart).

``render(sys, states)`` returns one HTML document holding the model's geoms, the trajectory (body
positions and orientations per frame) as JSON, and a small WebGL renderer written for this project
(``viewer.js`` in this package, inlined into each page).
Nothing is fetched from the network, so the file opens offline, in a notebook, or attached to a report.

Geoms drawn: planes, spheres, capsules, ellipsoids, cylinders, boxes and meshes (height fields are
skipped). Drag to orbit, scroll to zoom, space to play/pause, arrow keys to step.
"""

from __future__ import annotations

import functools
import html as _html
import json
import os
from collections.abc import Sequence
from importlib import resources
from typing import Any

import mujoco
import numpy as np

from brax_core import _quiet  # noqa: F401
from brax_core.io import mjcf

# MuJoCo's visualiser shows geom groups 0-2 by default; higher groups hold collision-only geoms.
_VISIBLE_GROUPS = 3
_SUPPORTED_TYPES = {
    int(mujoco.mjtGeom.mjGEOM_PLANE): "plane",
    int(mujoco.mjtGeom.mjGEOM_SPHERE): "sphere",
    int(mujoco.mjtGeom.mjGEOM_CAPSULE): "capsule",
    int(mujoco.mjtGeom.mjGEOM_ELLIPSOID): "ellipsoid",
    int(mujoco.mjtGeom.mjGEOM_CYLINDER): "cylinder",
    int(mujoco.mjtGeom.mjGEOM_BOX): "box",
    int(mujoco.mjtGeom.mjGEOM_MESH): "mesh",
}
_DECIMALS = 5


def to_mj_model(sys: Any) -> mujoco.MjModel:
    """The native ``mujoco.MjModel`` behind an mjx model loaded through ``mjcf``, an env, or the model itself."""
    if isinstance(sys, mujoco.MjModel):
        return sys
    mj_model = getattr(sys, "mj_model", None)  # a PipelineEnv carries its native model
    if isinstance(mj_model, mujoco.MjModel):
        return mj_model
    try:
        return mjcf.native_model(sys)
    except ValueError as err:
        raise TypeError(
            "sys must be an mjx.Model loaded through brax_core.io.mjcf, a mujoco.MjModel, or an env with "
            f"mj_model; got {type(sys).__name__} ({err})"
        ) from None


def _pipeline(item: Any) -> Any:
    return getattr(item, "pipeline_state", item)


def _trajectory(states: Any, nbody: int) -> tuple[np.ndarray, np.ndarray]:
    """Body positions ``[T, nbody, 3]`` and quaternions ``[T, nbody, 4]`` from the accepted inputs."""
    if isinstance(states, (list, tuple)):
        if not states:
            raise ValueError("states is empty; pass at least one state")
        items = [_pipeline(s) for s in states]
        missing = [type(s).__name__ for s in items if not (hasattr(s, "xpos") and hasattr(s, "xquat"))]
        if missing:
            raise TypeError(f"states must hold mjx.Data (with xpos and xquat); got {missing[0]}")
        xpos = np.stack([np.asarray(s.xpos, np.float64) for s in items])
        xquat = np.stack([np.asarray(s.xquat, np.float64) for s in items])
    else:
        data = _pipeline(states)
        if not (hasattr(data, "xpos") and hasattr(data, "xquat")):
            raise TypeError(
                "states must be a list of mjx.Data (or of States holding them) or one mjx.Data with a leading "
                f"time axis; got {type(data).__name__} without xpos/xquat"
            )
        xpos, xquat = np.asarray(data.xpos, np.float64), np.asarray(data.xquat, np.float64)
        if xpos.ndim == 2:
            xpos, xquat = xpos[None], xquat[None]
    if xpos.ndim != 3 or xpos.shape[1:] != (nbody, 3) or xquat.shape != (*xpos.shape[:2], 4):
        raise ValueError(
            f"states have xpos of shape {xpos.shape} and xquat of shape {xquat.shape}; expected [time, {nbody}, 3] "
            f"and [time, {nbody}, 4] for this model (a batch of environments must be indexed to one first)"
        )
    if not (np.all(np.isfinite(xpos)) and np.all(np.isfinite(xquat))):
        raise ValueError("states contain non-finite body positions or orientations")
    return xpos, xquat


def _round(array: np.ndarray) -> list:
    return np.round(np.asarray(array, np.float64), _DECIMALS).tolist()


def _geom_color(m: mujoco.MjModel, i: int) -> np.ndarray:
    matid = int(m.geom_matid[i])
    return m.mat_rgba[matid] if matid >= 0 else m.geom_rgba[i]


def _mesh(m: mujoco.MjModel, mesh_id: int) -> dict[str, list]:
    vstart, vnum = int(m.mesh_vertadr[mesh_id]), int(m.mesh_vertnum[mesh_id])
    fstart, fnum = int(m.mesh_faceadr[mesh_id]), int(m.mesh_facenum[mesh_id])
    return {
        "vert": _round(m.mesh_vert[vstart : vstart + vnum].reshape(-1)),
        "face": m.mesh_face[fstart : fstart + fnum].reshape(-1).astype(int).tolist(),
    }


def scene(sys: Any) -> dict[str, Any]:
    """The static part of the viewer's data: one entry per drawable geom."""
    m = to_mj_model(sys)
    geoms = []
    for i in range(m.ngeom):
        kind = _SUPPORTED_TYPES.get(int(m.geom_type[i]))
        rgba = _geom_color(m, i)
        if kind is None or m.geom_group[i] >= _VISIBLE_GROUPS or rgba[3] <= 0.0:
            continue
        geom = {
            "name": mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) or f"geom{i}",
            "type": kind,
            "body": int(m.geom_bodyid[i]),
            "size": _round(m.geom_size[i]),
            "pos": _round(m.geom_pos[i]),
            "quat": _round(m.geom_quat[i]),
            "rgba": _round(rgba),
        }
        if kind == "mesh":
            geom["mesh"] = _mesh(m, int(m.geom_dataid[i]))
        geoms.append(geom)
    return {"nbody": int(m.nbody), "geoms": geoms, "timestep": float(m.opt.timestep)}


def trajectory_json(sys: Any, states: Any, dt: float | None = None) -> dict[str, Any]:
    """Everything the viewer draws, as a JSON-ready dict (scene + per-frame body poses)."""
    data = scene(sys)
    xpos, xquat = _trajectory(states, data["nbody"])
    if dt is None:
        dt = data["timestep"]
    dt = float(dt)
    if not dt > 0:
        raise ValueError(f"dt must be a positive number of seconds per frame, got {dt!r}")
    data.update(dt=dt, frames=int(xpos.shape[0]), xpos=_round(xpos), xquat=_round(xquat))
    return data


def render(
    sys: Any, states: Sequence[Any] | Any, height: int = 480, colab: bool = True, dt: float | None = None
) -> str:
    """Returns a self-contained HTML page that plays ``states`` of ``sys`` in 3D.

    Args:
      sys: an ``mjx.Model`` loaded through ``brax_core.io.mjcf`` (or a ``mujoco.MjModel``, or a PipelineEnv).
      states: a list of ``mjx.Data`` (or of ``State``s holding them), or one ``mjx.Data`` whose leaves have a
        leading time axis (e.g. a scanned rollout's pipeline state, indexed to one environment).
      height: height of the viewer in pixels.
      colab: ``True`` gives a fixed-height viewer for notebooks (``IPython.display.HTML``); ``False`` fills the
        browser window, for a standalone file.
      dt: seconds between frames, for real-time playback (default: the model's timestep; pass ``env.dt``).
    """
    if isinstance(height, bool) or not isinstance(height, int) or height < 64:
        raise ValueError(f"height must be an integer number of pixels >= 64, got {height!r}")
    data = trajectory_json(sys, states, dt)
    # "</" inside a script block would end it early; JSON allows escaping the slash.
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    size_css = f"height:{height}px" if colab else "height:100vh"
    title = _html.escape(f"brax-bridge trajectory ({data['frames']} frames)")
    return _PAGE.replace("__TITLE__", title).replace("__SIZE_CSS__", size_css).replace("__DATA__", payload).replace(
        "__JS__", viewer_script()
    )


@functools.cache
def viewer_script() -> str:
    """The WebGL player every page embeds (``viewer.js``, shipped as package data next to this module)."""
    return resources.files(__package__).joinpath("viewer.js").read_text(encoding="utf-8")


def save(
    path: str | os.PathLike, sys: Any, states: Sequence[Any] | Any, height: int = 480, dt: float | None = None
) -> str:
    """Writes a full-window viewer page to ``path`` and returns the path."""
    path = os.fspath(path)
    text = render(sys, states, height=height, colab=False, dt=dt)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
 body{margin:0;font:13px system-ui,sans-serif;background:#1d2025;color:#ddd}
 #bb-wrap{position:relative;width:100%;__SIZE_CSS__}
 #bb-canvas{width:100%;height:100%;display:block;cursor:grab}
 #bb-bar{position:absolute;left:0;right:0;bottom:0;display:flex;gap:8px;align-items:center;padding:6px 10px;
  background:rgba(20,22,26,.75)}
 #bb-bar input[type=range]{flex:1}
 #bb-bar button,#bb-bar select{background:#2c313a;color:#ddd;border:1px solid #444;border-radius:4px;padding:2px 8px}
 #bb-msg{position:absolute;top:10px;left:10px;color:#f88}
</style></head><body>
<div id="bb-wrap"><canvas id="bb-canvas"></canvas><div id="bb-msg"></div>
<div id="bb-bar"><button id="bb-play" title="space">pause</button>
<input id="bb-slider" type="range" min="0" value="0" step="1">
<span id="bb-label"></span>
<select id="bb-speed" title="playback speed"><option value="0.25">0.25x</option><option value="0.5">0.5x</option>
<option value="1" selected>1x</option><option value="2">2x</option><option value="4">4x</option></select>
<label><input id="bb-track" type="checkbox" checked> follow</label></div></div>
<script id="bb-data" type="application/json">__DATA__</script>
<script>
__JS__
</script></body></html>
"""
