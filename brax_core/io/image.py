"""Pictures and videos of trajectories through MuJoCo's own renderer (``brax.io.image`` counterpart).

Needs an OpenGL backend: EGL (GPU drivers, or Mesa's software EGL on CPU) or OSMesa. The backend is
picked by ``MUJOCO_GL`` when set, else the first of EGL, OSMesa that works, and the GL context is made
here directly, so it works whatever ``MUJOCO_GL`` was when ``mujoco`` was first imported. Where no backend
works, ``RenderingUnavailable`` says so and what to install; the HTML viewer (``brax_core.io.html``) needs
none.

Videos: ``.gif`` through Pillow; ``.mp4`` through ``imageio`` with its ffmpeg plugin (``pip install
imageio[ffmpeg]``).
"""

from __future__ import annotations

import copy
import importlib
import io
import os
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from brax_core import _quiet  # noqa: F401
from brax_core.io import html

_BACKENDS = ("egl", "osmesa")


class RenderingUnavailable(RuntimeError):
    """No OpenGL backend could be started (the message lists what was tried and why it failed)."""


_context_cache: dict[tuple[str, int, int], Any] = {}


def _make_context(width: int, height: int) -> tuple[str, Any]:
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    candidates = (requested,) if requested in _BACKENDS else _BACKENDS
    errors = []
    for name in candidates:
        key = (name, width, height)
        if key in _context_cache:
            return name, _context_cache[key]
        try:
            module = importlib.import_module(f"mujoco.{name}")
            context = module.GLContext(width, height)
            context.make_current()
        except Exception as err:  # each backend fails differently (ImportError, OSError, GL errors)
            errors.append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
            continue
        _context_cache[key] = context
        return name, context
    hint = (
        "set MUJOCO_GL=egl (NVIDIA driver on GPU machines, or Mesa's libegl1 on CPU) or MUJOCO_GL=osmesa "
        "(apt-get install libosmesa6) before starting Python"
    )
    if requested and requested not in _BACKENDS:
        hint = f"MUJOCO_GL={requested!r} is not a headless backend; " + hint
    raise RenderingUnavailable(f"no OpenGL backend for MuJoCo rendering ({'; '.join(errors)}); {hint}")


def backend_available() -> str | None:
    """The name of a working headless OpenGL backend, or ``None``."""
    try:
        return _make_context(64, 64)[0]
    except RenderingUnavailable:
        return None


def _qpos_frames(states: Any, nq: int) -> np.ndarray:
    if isinstance(states, (list, tuple)):
        qpos = np.stack([np.asarray(getattr(s, "pipeline_state", s).qpos, np.float64) for s in states])
    else:
        data = getattr(states, "pipeline_state", states)
        if not hasattr(data, "qpos"):
            raise TypeError(f"states must carry qpos (mjx.Data or States holding it); got {type(data).__name__}")
        qpos = np.asarray(data.qpos, np.float64)
        if qpos.ndim == 1:
            qpos = qpos[None]
    if qpos.ndim != 2 or qpos.shape[1] != nq:
        raise ValueError(f"states have qpos of shape {qpos.shape}; expected [time, {nq}] for this model")
    return qpos


def render_array(
    sys: Any,
    states: Sequence[Any] | Any,
    height: int = 240,
    width: int = 320,
    camera: int | str = -1,
) -> np.ndarray:
    """Frames ``[T, height, width, 3]`` (uint8) of ``states`` (positions are re-run through MuJoCo kinematics).

    Args:
      sys: ``mjx.Model`` loaded through ``brax_core.io.mjcf``, ``mujoco.MjModel``, or a PipelineEnv.
      states: list of ``mjx.Data``/``State`` or one ``mjx.Data`` with a leading time axis (anything with qpos).
      camera: a camera name or id from the model; -1 is a free camera looking at the whole model.
    """
    for name, value in (("height", height), ("width", width)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 16:
            raise ValueError(f"{name} must be an integer number of pixels >= 16, got {value!r}")
    m = html.to_mj_model(sys)
    if isinstance(camera, str):
        camera_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if camera_id < 0:
            raise ValueError(f"camera {camera!r} is not in the model")
    else:
        camera_id = int(camera)
        if not -1 <= camera_id < m.ncam:
            raise ValueError(f"camera must be -1 (free) or an id below {m.ncam}, got {camera!r}")
    qpos = _qpos_frames(states, m.nq)
    # A copy, so the caller's model is untouched: the offscreen buffer must hold the image, and models
    # without lights of their own need a brighter headlight to be visible at all.
    m = copy.copy(m)
    m.vis.global_.offwidth = max(int(m.vis.global_.offwidth), width)
    m.vis.global_.offheight = max(int(m.vis.global_.offheight), height)
    if m.nlight == 0:
        m.vis.headlight.ambient[:] = np.maximum(m.vis.headlight.ambient, 0.4)
        m.vis.headlight.diffuse[:] = np.maximum(m.vis.headlight.diffuse, 0.6)
    _, context = _make_context(width, height)
    context.make_current()
    data = mujoco.MjData(m)
    scene = mujoco.MjvScene(m, maxgeom=10_000)
    cam = mujoco.MjvCamera()
    option = mujoco.MjvOption()
    gl = mujoco.MjrContext(m, mujoco.mjtFontScale.mjFONTSCALE_150)
    try:
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, gl)
        viewport = mujoco.MjrRect(0, 0, width, height)
        if camera_id >= 0:
            cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
            cam.fixedcamid = camera_id
        else:
            mujoco.mjv_defaultFreeCamera(m, cam)
        frames = np.empty((len(qpos), height, width, 3), np.uint8)
        for t, q in enumerate(qpos):
            data.qpos[:] = q
            mujoco.mj_kinematics(m, data)
            mujoco.mj_camlight(m, data)
            mujoco.mjv_updateScene(m, data, option, None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene)
            mujoco.mjr_render(viewport, scene, gl)
            mujoco.mjr_readPixels(frames[t], None, viewport, gl)
        return frames[:, ::-1]  # OpenGL rows run bottom-up
    finally:
        gl.free()


def render(sys: Any, states: Sequence[Any] | Any, height: int = 240, width: int = 320, camera: int | str = -1,
           fmt: str = "png") -> bytes:
    """One image (one state) or an animated GIF (several) as bytes, like ``brax.io.image.render``."""
    from PIL import Image

    frames = render_array(sys, states, height, width, camera)
    buffer = io.BytesIO()
    if len(frames) == 1:
        Image.fromarray(frames[0]).save(buffer, format=fmt)
    else:
        images = [Image.fromarray(f) for f in frames]
        images[0].save(buffer, format="gif", save_all=True, append_images=images[1:], duration=40, loop=0)
    return buffer.getvalue()


def save_video(path: str | os.PathLike, frames: np.ndarray, fps: float) -> str:
    """Writes ``frames`` ``[T, H, W, 3]`` as ``.gif`` (Pillow) or ``.mp4`` (imageio + ffmpeg)."""
    path = os.fspath(path)
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or len(frames) == 0:
        raise ValueError(f"frames must be a non-empty uint8 array [T, H, W, 3], got {frames.dtype} {frames.shape}")
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps!r}")
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".gif":
        from PIL import Image

        images = [Image.fromarray(f) for f in frames]
        # GIF delays are whole hundredths of a second; round rather than silently speed up.
        duration = max(20, int(round(1000 / fps / 10)) * 10)
        images[0].save(path, save_all=True, append_images=images[1:], duration=duration, loop=0)
        return path
    if suffix == ".mp4":
        try:
            import imageio.v3 as iio
        except ImportError:
            raise RenderingUnavailable(
                f"writing {path} needs imageio with ffmpeg (pip install 'imageio[ffmpeg]'); .gif needs only Pillow"
            ) from None
        iio.imwrite(path, frames, fps=fps, codec="libx264", macro_block_size=1)
        return path
    raise ValueError(f"video path must end in .gif or .mp4, got {path!r}")
