"""The planar models (inverted_pendulum, inverted_double_pendulum, reacher, hopper, walker2d): sizes, typing,
auto-reset, and physics against native MuJoCo.

MJX compiles dominate CPU test time, so each environment's ``reset`` and ``step`` are jitted once and driven through
one rollout that every default test of that environment reads:

* ``HORIZON`` = 25 environment steps with small random controls, compared step by step with native MuJoCo
  (``mujoco.mj_step`` ``n_frames`` times per step on the env's own ``MjModel``, same controls, same initial state):
  50 physics steps for inverted_double_pendulum and reacher, 100 (with foot contacts) for hopper and walker2d;
* the same jitted step then runs a falling double pendulum to its termination.

The batched training step (``training.wrap``: vmap, time limit, auto-reset) compiles about twice as much MJX code
(the reset runs inside the step), so its compile-once test runs by default for inverted_double_pendulum (the
cheapest model) and under ``-m slow`` for the other three.

Tolerances compare float32 MJX with float64 MuJoCo; they are 20-30x the largest error seen on a 2-core x86_64 CPU
(``PHYSICS_ATOL`` below, with the errors seen).
"""

from __future__ import annotations

import dataclasses
import inspect
import types

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from compiled_envs import compiled_env
from mujoco import mjx

from brax_core import envs
from brax_core.envs import training

HORIZON = 25
# The cart-pole falls over within about a second whatever open-loop controls it gets, so its compared horizon
# stops before the pole passes the termination angle.
HORIZONS = {"inverted_pendulum": 10}

# name -> (observation size, action size, action scale of the random controls)
SIZES = {
    "inverted_pendulum": (4, 1, 0.05),
    "inverted_double_pendulum": (8, 1, 0.1),
    "reacher": (11, 2, 1.0),
    "hopper": (11, 3, 0.3),
    "walker2d": (17, 6, 0.3),
}
NAMES = sorted(SIZES)

# (qpos atol, qvel atol) between MJX (float32) and native MuJoCo (float64) over HORIZON env steps. Largest errors
# seen (2-core x86_64 CPU, jax 0.10.2, mujoco 4.0.0): inverted_pendulum 3.5e-9 / 3.2e-8 (its 10 steps),
# idp 8e-7 / 5e-6, reacher 1.2e-6 / 1.7e-5, hopper 3.4e-7 / 5e-6,
# walker2d 6e-6 / 7e-5 (with |qvel| up to 6, 16, 2 and 15); each tolerance is 20-30x that.
PHYSICS_ATOL = {
    "inverted_pendulum": (1e-7, 1e-6),
    "inverted_double_pendulum": (2e-5, 1e-4),
    "reacher": (3e-5, 5e-4),
    "hopper": (1e-5, 1e-4),
    "walker2d": (2e-4, 2e-3),
}


@dataclasses.dataclass
class Rollout:
    env: envs.PipelineEnv
    actions: np.ndarray  # (HORIZON, nu)
    first: dict  # reset outputs (numpy)
    steps: list[dict]  # per step outputs (numpy): qpos, qvel, obs, reward, done, metrics, dtypes
    step_fn: object  # jax.jit(env.step)
    reset_fn: object  # jax.jit(env.reset)
    weak_leaves: list[str]


def _numpy_state(state) -> dict:
    ps = state.pipeline_state
    return {
        "qpos": np.asarray(ps.qpos, np.float64),
        "qvel": np.asarray(ps.qvel, np.float64),
        "obs": np.asarray(state.obs),
        "reward": np.asarray(state.reward),
        "done": np.asarray(state.done),
        "metrics": {k: np.asarray(v) for k, v in state.metrics.items()},
        "dtypes": {"reward": state.reward.dtype, "done": state.done.dtype, "obs": state.obs.dtype},
    }


def _weak_leaves(tree) -> list[str]:
    return [jax.tree_util.keystr(p) for p, x in jax.tree_util.tree_leaves_with_path(tree) if x.weak_type]


def _make_rollout(name: str) -> Rollout:
    env, reset_fn, step_fn = compiled_env(name)
    state = reset_fn(jax.random.PRNGKey(0))
    first = _numpy_state(state)
    weak = _weak_leaves(state)
    scale = SIZES[name][2]
    horizon = HORIZONS.get(name, HORIZON)
    actions = (scale * np.random.default_rng(1).uniform(-1.0, 1.0, (horizon, env.action_size))).astype(np.float32)
    steps = []
    for action in actions:
        state = step_fn(state, jnp.asarray(action))
        steps.append(_numpy_state(state))
        weak += _weak_leaves(state)
    return Rollout(env, actions, first, steps, step_fn, reset_fn, weak)


@pytest.fixture(scope="module")
def rollouts():
    """Lazily builds (and keeps) one rollout per environment for this module."""
    cache: dict[str, Rollout] = {}

    def get(name: str) -> Rollout:
        if name not in cache:
            cache[name] = _make_rollout(name)
        return cache[name]

    return get


def _native_trajectory(mj_model: mujoco.MjModel, qpos, qvel, actions, n_frames: int):
    """(qpos, qvel, ncon) after each env step of native MuJoCo from one initial state.

    Actions in [-1, 1] map onto each motor's control range, as the envs map them.
    """
    data = mujoco.MjData(mj_model)
    data.qpos[:], data.qvel[:] = qpos, qvel
    low, high = mj_model.actuator_ctrlrange[:, 0], mj_model.actuator_ctrlrange[:, 1]
    out = []
    for action in actions:
        data.ctrl[:] = low + (action + 1.0) * 0.5 * (high - low)
        ncon = 0
        for _ in range(n_frames):
            mujoco.mj_step(mj_model, data)
            ncon = max(ncon, data.ncon)
        out.append((data.qpos.copy(), data.qvel.copy(), ncon))
    return out


def _forward(mj_model: mujoco.MjModel, qpos, qvel=None) -> mujoco.MjData:
    data = mujoco.MjData(mj_model)
    data.qpos[:] = qpos
    if qvel is not None:
        data.qvel[:] = qvel
    mujoco.mj_forward(mj_model, data)
    return data


# ---------------------------------------------------------------------------------------------------------------
# every environment


@pytest.mark.parametrize("name", NAMES)
def test_sizes_match_docstring(name):
    env = envs.get_environment(name)
    obs_size, action_size, _ = SIZES[name]
    assert env.observation_size == obs_size
    assert env.action_size == action_size
    doc = inspect.getmodule(type(env)).__doc__
    assert f"Observation ({obs_size})" in doc and f"Action ({action_size})" in doc
    assert type(env).default_episode_length == 1000
    assert f"``n_frames`` {env.n_frames}" in doc


@pytest.mark.parametrize("name", NAMES)
def test_step_is_strongly_typed_and_compiles_once(name, rollouts):
    r = rollouts(name)
    assert r.step_fn._cache_size() == 1
    assert r.weak_leaves == []
    for s in [r.first, *r.steps]:
        assert s["obs"].shape == (SIZES[name][0],)
        assert s["dtypes"] == {"reward": jnp.float32, "done": jnp.float32, "obs": jnp.float32}
        assert set(s["metrics"]) == set(r.first["metrics"])  # metrics keys fixed from reset on
        assert np.all(np.isfinite(s["obs"]))
    np.testing.assert_array_equal([s["done"] for s in r.steps], 0.0)  # the compared horizon has no termination


def _wrapped_compile_once(name: str) -> None:
    env = training.wrap(envs.get_environment(name), episode_length=3)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state = reset(jax.random.split(jax.random.PRNGKey(0), 2))
    action = jnp.zeros((2, env.action_size), jnp.float32)
    dones = []
    for _ in range(5):  # the time limit ends every episode at step 3, so the auto-reset path runs
        state = step(state, action)
        dones.append(np.asarray(state.done))
    assert step._cache_size() == 1
    assert _weak_leaves(state) == []
    np.testing.assert_array_equal(dones[2], 1.0)
    np.testing.assert_array_equal(np.asarray(state.info["steps"]), 2.0)
    assert state.obs.shape == (2, SIZES[name][0]) and state.reward.dtype == jnp.float32


def test_wrapped_step_compiles_once_across_auto_reset():
    _wrapped_compile_once("inverted_double_pendulum")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hopper", "reacher", "walker2d"])
def test_wrapped_step_compiles_once_across_auto_reset_slow(name):
    _wrapped_compile_once(name)


@pytest.mark.parametrize("name", NAMES)
def test_physics_matches_native_mujoco(name, rollouts):
    r = rollouts(name)
    qpos_atol, qvel_atol = PHYSICS_ATOL[name]
    native = _native_trajectory(r.env.mj_model, r.first["qpos"], r.first["qvel"], r.actions, r.env.n_frames)
    for t, (qpos, qvel, _) in enumerate(native):
        np.testing.assert_allclose(r.steps[t]["qpos"], qpos, rtol=0, atol=qpos_atol, err_msg=f"qpos step {t}")
        np.testing.assert_allclose(r.steps[t]["qvel"], qvel, rtol=0, atol=qvel_atol, err_msg=f"qvel step {t}")
    if name in ("hopper", "walker2d"):
        assert max(ncon for _, _, ncon in native) > 0, "the compared horizon must include foot contacts"
    # and the states really moved, so agreement is not trivial
    assert np.abs(r.steps[-1]["qvel"] - r.first["qvel"]).max() > 0.05


# ---------------------------------------------------------------------------------------------------------------
# inverted_double_pendulum


def test_double_pendulum_tip_is_the_rotated_tip_site():
    env = envs.get_environment("inverted_double_pendulum")
    rng = np.random.default_rng(0)
    qs = np.stack(
        [rng.uniform(-0.9, 0.9, 16), rng.uniform(-np.pi, np.pi, 16), rng.uniform(-np.pi, np.pi, 16)], axis=1
    ).astype(np.float32)
    blank = mjx.make_data(env.sys)
    tips = np.asarray(jax.jit(jax.vmap(lambda q: env.tip_position(blank.replace(qpos=q))))(jnp.asarray(qs)))
    tip_id = mujoco.mj_name2id(env.mj_model, mujoco.mjtObj.mjOBJ_SITE, "tip")
    pole2_id = mujoco.mj_name2id(env.mj_model, mujoco.mjtObj.mjOBJ_BODY, "pole2")
    wrong = []
    for q, tip in zip(qs, tips, strict=True):
        data = _forward(env.mj_model, q)
        np.testing.assert_allclose(tip, data.site_xpos[tip_id], rtol=0, atol=1e-5)
        wrong.append(np.abs(data.xpos[pole2_id] + [0.0, 0.0, 0.6] - data.site_xpos[tip_id]).max())
    # the states are tilted enough that ignoring the pole rotation would be caught
    assert np.median(wrong) > 0.1 and max(wrong) > 0.5


def test_double_pendulum_reward_and_tip_follow_the_reached_state(rollouts):
    r = rollouts("inverted_double_pendulum")
    tip_id = mujoco.mj_name2id(r.env.mj_model, mujoco.mjtObj.mjOBJ_SITE, "tip")
    for s in r.steps:
        qpos, qvel = s["qpos"], s["qvel"]
        x, _, z = _forward(r.env.mj_model, qpos).site_xpos[tip_id]
        np.testing.assert_allclose(s["metrics"]["tip_z"], z, atol=1e-5)
        expected = 10.0 - (0.01 * x**2 + (z - 2.0) ** 2) - (1e-3 * qvel[1] ** 2 + 5e-3 * qvel[2] ** 2)
        np.testing.assert_allclose(s["reward"], expected, rtol=1e-5, atol=1e-5)
        obs = np.concatenate([qpos[:1], np.sin(qpos[1:]), np.cos(qpos[1:]), np.clip(qvel, -10, 10)])
        np.testing.assert_allclose(s["obs"], obs, rtol=1e-5, atol=1e-6)


def test_double_pendulum_falling_terminates_without_alive_bonus(rollouts):
    r = rollouts("inverted_double_pendulum")
    state = r.reset_fn(jax.random.PRNGKey(3))
    push = jnp.ones((1,), jnp.float32)  # full force on the cart topples the poles
    tip_z, done = [], []
    for _ in range(50):
        state = r.step_fn(state, push)
        tip_z.append(float(state.metrics["tip_z"]))
        done.append(float(state.done))
        if done[-1]:
            break
    assert done[-1] == 1.0 and not any(done[:-1])
    assert tip_z[-1] <= 1.0 and min(tip_z[:-1]) > 1.0
    tip_id = mujoco.mj_name2id(r.env.mj_model, mujoco.mjtObj.mjOBJ_SITE, "tip")
    native_z = _forward(r.env.mj_model, np.asarray(state.pipeline_state.qpos, np.float64)).site_xpos[tip_id][2]
    np.testing.assert_allclose(tip_z[-1], native_z, atol=1e-5)
    metrics = {k: float(v) for k, v in state.metrics.items()}
    assert metrics["alive_bonus"] == 0.0
    penalties = metrics["distance_penalty"] + metrics["velocity_penalty"]
    np.testing.assert_allclose(float(state.reward), -penalties, rtol=1e-6)
    assert r.step_fn._cache_size() == 1


# ---------------------------------------------------------------------------------------------------------------
# reacher


def test_reacher_observation_and_reward_match_native(rollouts):
    r = rollouts("reacher")
    m = r.env.mj_model
    tip_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "fingertip")
    target_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "target")
    velocity = np.zeros(6)
    for s, action in zip(r.steps, r.actions, strict=True):
        qpos, qvel = s["qpos"], s["qvel"]
        data = _forward(m, qpos, qvel)
        mujoco.mj_objectVelocity(m, data, mujoco.mjtObj.mjOBJ_SITE, tip_id, velocity, 0)
        to_target = data.site_xpos[tip_id] - data.xpos[target_id]
        obs = np.concatenate([np.cos(qpos[:2]), np.sin(qpos[:2]), qpos[2:], velocity[3:5], to_target])
        np.testing.assert_allclose(s["obs"], obs, rtol=1e-4, atol=1e-5)
        reward = -np.linalg.norm(to_target) - np.sum(np.square(action))
        np.testing.assert_allclose(s["reward"], reward, rtol=1e-5, atol=1e-5)
    # the target was drawn inside the 0.2 m disk and never moves
    target = r.first["qpos"][2:]
    assert 0.0 < np.linalg.norm(target) <= 0.2
    np.testing.assert_array_equal(np.stack([s["qpos"][2:] for s in r.steps]), np.broadcast_to(target, (HORIZON, 2)))


# ---------------------------------------------------------------------------------------------------------------
# hopper and walker2d


@pytest.mark.parametrize("name", ["hopper", "walker2d"])
def test_locomotion_observation_and_reward(name, rollouts):
    r = rollouts(name)
    dt = float(r.env.dt)
    previous = r.first["qpos"]
    for s, action in zip(r.steps, r.actions, strict=True):
        qpos, qvel = s["qpos"], s["qvel"]
        np.testing.assert_allclose(s["obs"], np.concatenate([qpos[1:], np.clip(qvel, -10, 10)]), rtol=1e-6, atol=1e-6)
        x_velocity = (qpos[0] - previous[0]) / dt
        np.testing.assert_allclose(s["reward"], x_velocity + 1.0 - 1e-3 * np.sum(np.square(action)), atol=1e-4)
        np.testing.assert_allclose(s["metrics"]["x_position"], qpos[0], atol=1e-6)
        previous = qpos
    assert abs(dt - 0.008) < 1e-9
    # reset noise is uniform in [-0.005, 0.005] around the standing pose
    assert np.all(np.abs(r.first["qpos"] - r.env.mj_model.qpos0) <= 0.005) and np.all(np.abs(r.first["qvel"]) <= 0.005)


@pytest.mark.parametrize(
    "name, qpos_changes, healthy",
    [
        ("hopper", {}, True),
        ("hopper", {1: 0.69}, False),  # torso too low (healthy z is (0.7, inf))
        ("hopper", {1: 5.0}, True),
        ("hopper", {2: 0.21}, False),  # torso tilted (healthy angle is (-0.2, 0.2))
        ("hopper", {2: -0.19}, True),
        ("hopper", {4: 101.0}, False),  # state out of (-100, 100)
        ("hopper", {1: float("nan")}, False),
        ("walker2d", {}, True),
        ("walker2d", {1: 0.79}, False),  # healthy z is (0.8, 2.0)
        ("walker2d", {1: 2.01}, False),
        ("walker2d", {2: 0.99}, True),  # healthy angle is (-1, 1)
        ("walker2d", {2: -1.01}, False),
        ("walker2d", {5: float("inf")}, False),
    ],
)
def test_locomotion_termination_thresholds(name, qpos_changes, healthy):
    env = envs.get_environment(name)
    qpos = np.array(env.mj_model.qpos0, np.float32)
    for index, value in qpos_changes.items():
        qpos[index] = value
    state = types.SimpleNamespace(qpos=jnp.asarray(qpos), qvel=jnp.zeros(env.sys.nv, jnp.float32))
    assert bool(env.is_healthy(state)) is healthy


@pytest.mark.parametrize("name", NAMES)
def test_a_diverged_step_ends_its_episode_with_finite_outputs(name, rollouts):
    # A runaway velocity overflows the integrator to inf/NaN in one step (a fallen pendulum driven round its hinge
    # gets there by itself): the step must end the episode, pay 0 and hand out zeros instead of NaN.
    r = rollouts(name)
    state = r.reset_fn(jax.random.PRNGKey(0))
    state = state.replace(pipeline_state=state.pipeline_state.replace(qvel=state.pipeline_state.qvel.at[0].set(3e38)))
    state = r.step_fn(state, jnp.zeros((r.env.action_size,), jnp.float32))
    assert not np.all(np.isfinite(np.asarray(state.pipeline_state.qpos)))  # the simulation did diverge
    assert float(state.done) == 1.0 and float(state.reward) == 0.0
    np.testing.assert_array_equal(state.obs, np.zeros(SIZES[name][0], np.float32))
    assert all(float(value) == 0.0 for value in state.metrics.values())
