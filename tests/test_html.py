"""brax_core.io.html: a self-contained trajectory viewer whose embedded data matches the states given."""

import json
import os
import re
import tomllib

import jax
import mujoco
import numpy as np
import pytest
from mujoco import mjx

from brax_core import envs
from brax_core.envs import _assets
from brax_core.io import html, image

SCENE_XML = """
<mujoco>
  <asset><mesh name="tet" vertex="0 0 0  1 0 0  0 1 0  0 0 1"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1" rgba="0.5 0.5 0.5 1"/>
    <geom name="hidden" type="box" size="1 1 1" group="3"/>
    <body name="ball" pos="0 0 1">
      <freejoint/>
      <geom name="s" type="sphere" size="0.1"/>
      <geom name="c" type="capsule" fromto="0 0 0 0.3 0 0" size="0.05"/>
      <geom name="y" type="cylinder" size="0.05 0.1" pos="0 0.2 0"/>
      <geom name="b" type="box" size="0.1 0.2 0.3" pos="0 -0.2 0"/>
      <geom name="e" type="ellipsoid" size="0.1 0.2 0.05" pos="0.3 0.3 0"/>
      <geom name="m" type="mesh" mesh="tet"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def pendulum():
    sys, mj_model = _assets.load("inverted_pendulum")
    data = mujoco.MjData(mj_model)
    frames = []
    for _ in range(12):
        data.ctrl[:] = 0.3
        mujoco.mj_step(mj_model, data)
        frames.append(mjx.put_data(mj_model, data))  # real mjx.Data, made without compiling anything
    return sys, mj_model, frames


def _payload(page: str) -> dict:
    match = re.search(r'<script id="bb-data" type="application/json">(.*?)</script>', page, re.S)
    assert match, "the trajectory JSON block is missing"
    return json.loads(match.group(1))


def test_page_is_self_contained_and_data_matches_states(pendulum):
    sys, mj_model, frames = pendulum
    page = html.render(sys, frames, height=300)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "http://" not in page and "https://" not in page and "src=" not in page  # nothing fetched
    assert "height:300px" in page
    data = _payload(page)
    assert data["frames"] == 12 and data["nbody"] == mj_model.nbody
    np.testing.assert_allclose(data["xpos"][5], np.asarray(frames[5].xpos), atol=1e-5)
    np.testing.assert_allclose(data["xquat"][11], np.asarray(frames[11].xquat), atol=1e-5)
    names = {g["name"]: g for g in data["geoms"]}
    assert set(names) == {"rail", "cart", "pole"}
    assert names["pole"]["type"] == "capsule" and names["pole"]["body"] == 2
    np.testing.assert_allclose(names["pole"]["size"][:2], mj_model.geom_size[2][:2], atol=1e-5)
    assert data["dt"] == pytest.approx(float(mj_model.opt.timestep))


def test_batched_pipeline_state_and_states_holding_it(pendulum):
    sys, _, frames = pendulum
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *frames)  # one mjx.Data with a leading time axis
    from_stacked = _payload(html.render(sys, stacked, dt=0.04))
    from_list = _payload(html.render(sys, frames, dt=0.04))
    assert from_stacked["xpos"] == from_list["xpos"] and from_stacked["dt"] == 0.04

    class Holder:  # a brax_core State carries the physics in .pipeline_state
        def __init__(self, data):
            self.pipeline_state = data

    assert _payload(html.render(sys, [Holder(f) for f in frames]))["xquat"] == from_list["xquat"]
    assert "height:100vh" in html.render(sys, frames, colab=False)


def test_every_geom_type_is_exported_and_hidden_groups_are_not():
    model = mujoco.MjModel.from_xml_string(SCENE_XML)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    payload = _payload(html.render(model, [data]))
    kinds = {g["name"]: g["type"] for g in payload["geoms"]}
    assert kinds == {
        "floor": "plane",
        "s": "sphere",
        "c": "capsule",
        "y": "cylinder",
        "b": "box",
        "e": "ellipsoid",
        "m": "mesh",
    }
    mesh = next(g for g in payload["geoms"] if g["type"] == "mesh")["mesh"]
    assert len(mesh["vert"]) == 3 * 4 and len(mesh["face"]) == 3 * 4  # a tetrahedron


def test_bad_input_is_named(pendulum):
    sys, mj_model, frames = pendulum
    with pytest.raises(ValueError, match="states is empty"):
        html.render(sys, [])
    with pytest.raises(TypeError, match="xpos"):
        html.render(sys, [np.zeros(3)])
    batched = jax.tree.map(lambda *xs: np.stack(xs), *frames)
    two_envs = jax.tree.map(lambda x: np.stack([x, x], axis=1), batched)
    with pytest.raises(ValueError, match="indexed to one"):
        html.render(sys, two_envs)
    with pytest.raises(ValueError, match="height"):
        html.render(sys, frames, height=10)
    with pytest.raises(TypeError, match="sys must be"):
        html.render(object(), frames)
    with pytest.raises(ValueError, match="dt"):
        html.render(sys, frames, dt=0.0)


def _require_rendering() -> None:
    # tests/fresh_install.sh installs Mesa's headless OpenGL where it is missing; a machine without any is a skip
    # that the report shows, never a pass.
    if image.backend_available() is None:
        pytest.skip("no headless OpenGL backend (EGL or OSMesa) on this machine: the frames cannot be drawn")


def test_without_a_backend_rendering_says_which_to_install(pendulum, monkeypatch):
    sys, _, frames = pendulum

    def no_library(name):  # as on a machine without Mesa's EGL and OSMesa libraries
        raise ImportError(f"cannot load {name}'s library: no such file")

    monkeypatch.setattr(image.importlib, "import_module", no_library)
    monkeypatch.setattr(image, "_context_cache", {})
    monkeypatch.setenv("MUJOCO_GL", "glfw")  # a windowed backend: refused, with the headless ones named
    expected = r"egl: ImportError: .*osmesa: ImportError: .*MUJOCO_GL='glfw' is not a headless backend.*libosmesa6"
    with pytest.raises(image.RenderingUnavailable, match=expected):
        image.render_array(sys, frames[:2])
    assert image.backend_available() is None


def test_video_frames_are_drawn_and_saved_as_a_gif(pendulum, tmp_path):
    sys, _, frames = pendulum
    _require_rendering()
    pixels = image.render_array(sys, frames[:3], height=48, width=64)
    assert pixels.shape == (3, 48, 64, 3) and pixels.dtype == np.uint8
    # the scene was drawn: shaded bodies over a floor and sky give many colours, where a blank or cleared frame has one
    assert all(len(np.unique(frame.reshape(-1, 3), axis=0)) > 20 for frame in pixels)
    assert not np.array_equal(pixels[0], pixels[2])  # the pendulum moved between the frames
    path = image.save_video(tmp_path / "a.gif", pixels, fps=25)
    from PIL import Image

    with Image.open(path) as gif:
        assert gif.n_frames == 3
    with pytest.raises(ValueError, match=".gif or .mp4"):
        image.save_video(tmp_path / "a.avi", pixels, fps=25)


def test_viewer_script_is_package_data_inlined_into_every_page(pendulum):
    sys, _, frames = pendulum
    script = html.viewer_script()
    assert script.startswith("(function") and "getContext('webgl'" in script
    page = html.render(sys, frames)
    assert page.count(script) == 1  # inlined whole, so the page still opens offline
    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as f:
        package_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["brax_core"]
    assert "io/viewer.js" in package_data  # shipped in wheels, not only in a source checkout


def test_json_module_writes_the_document_the_viewer_plays(pendulum, tmp_path):
    from brax_core.io import json as brax_json  # Brax's brax.io.json

    sys, mj_model, frames = pendulum
    text = brax_json.dumps(sys, frames)
    assert json.loads(text) == _payload(html.render(sys, frames))
    written = brax_json.save(tmp_path / "trajectory.json", sys, frames, dt=0.05)
    with open(written, encoding="utf-8") as f:
        data = json.load(f)
    assert data["frames"] == 12 and data["dt"] == 0.05
    np.testing.assert_allclose(data["xpos"][7], np.asarray(frames[7].xpos), atol=1e-5)
    with pytest.raises(ValueError, match="dt must be a positive"):
        brax_json.dumps(sys, frames, dt=0.0)


def test_pipeline_env_renders_a_trajectory_as_brax_does(pendulum):
    # Brax: env.render(trajectory, height=240, width=320, camera=None) -> frames.
    _, _, frames = pendulum
    env = envs.get_environment("inverted_pendulum")
    _require_rendering()
    pixels = env.render(frames[:2], height=32, width=40)
    assert pixels.shape == (2, 32, 40, 3) and pixels.dtype == np.uint8
    assert all(len(np.unique(frame.reshape(-1, 3), axis=0)) > 20 for frame in pixels)  # a drawn scene
    np.testing.assert_array_equal(pixels, image.render_array(env.sys, frames[:2], height=32, width=40))
    with pytest.raises(ValueError, match="camera 'nope' is not in the model"):
        env.render(frames[:1], camera="nope")
