"""halfcheetah, ant and humanoid: sizes, rewards, termination, typing, and physics against native MuJoCo.

Each model's wrapped ``reset`` and ``step`` are compiled once per module (XLA's cheapest optimisation level:
these tests measure correctness, not speed) and shared by every test of that model.

Physics check: the MJX env and native ``mujoco.mj_step`` on the same ``MjModel`` start from the same state,
receive the same controls (held for ``n_frames`` physics steps per env step) and must agree on ``qpos`` within
``QPOS_ATOL`` and on ``qvel`` within ``QVEL_ATOL`` over ``HORIZON`` env steps (25 physics steps). MJX runs in
float32 and native MuJoCo in float64; measured errors over this horizon are about 1e-6 (qpos) and 5e-5 (qvel),
ground contacts included. Over 100 physics steps a contact can switch on in one and not the other, so the long
comparison (``slow``) uses a looser tolerance.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_core import envs
from brax_core.envs import training

FAST_COMPILE = {"xla_backend_optimization_level": 0}
BATCH = 2
HORIZON = 5  # env steps = 25 physics steps at n_frames 5
QPOS_ATOL = 1e-4
QVEL_ATOL = 2e-3
SLOW_HORIZON = 20  # 100 physics steps
SLOW_QPOS_ATOL = 5e-3
SLOW_QVEL_ATOL = 0.1

SPEC = {
    # name: (observation size, action size, dt, metric names)
    "halfcheetah": (17, 6, 0.05, {"x_position", "x_velocity", "reward_run", "reward_ctrl"}),
    "ant": (27, 8, 0.05, {"reward_forward", "reward_survive", "reward_ctrl", "reward_contact", "x_position",
                          "y_position", "distance_from_origin", "x_velocity", "y_velocity", "forward_reward"}),
    "humanoid": (244, 17, 0.015, {"forward_reward", "reward_linvel", "reward_quadctrl", "reward_alive",
                                  "x_position", "y_position", "distance_from_origin", "x_velocity", "y_velocity"}),
}


class Compiled:
    """One env, wrapped for training, with reset and step compiled once."""

    def __init__(self, name: str, episode_length: int = 1000):
        self.env = envs.get_environment(name)
        self.wrapped = training.wrap(self.env, episode_length=episode_length)
        keys = jax.random.split(jax.random.PRNGKey(7), BATCH)
        self.reset = jax.jit(self.wrapped.reset).lower(keys).compile(FAST_COMPILE)
        self.first = self.reset(keys)
        action = jnp.zeros((BATCH, self.env.action_size), jnp.float32)
        self.step = jax.jit(self.wrapped.step).lower(self.first, action).compile(FAST_COMPILE)

    def actions(self, n: int, seed: int = 0) -> np.ndarray:
        shape = (n, BATCH, self.env.action_size)
        return np.asarray(jax.random.uniform(jax.random.PRNGKey(seed), shape, jnp.float32, -1.0, 1.0))

    def ctrl(self, action: np.ndarray) -> np.ndarray:
        to_ctrl = getattr(self.env, "action_to_ctrl", None)
        return np.asarray(to_ctrl(jnp.asarray(action))) if to_ctrl is not None else action


@functools.cache
def compiled(name: str) -> Compiled:
    return Compiled(name)


@pytest.fixture(scope="module")
def cheetah() -> Compiled:
    return compiled("halfcheetah")


@pytest.fixture(scope="module")
def ant() -> Compiled:
    return compiled("ant")


@pytest.fixture(scope="module")
def humanoid() -> Compiled:
    return compiled("humanoid")


def _native_from(c: Compiled, state: envs.State, slot: int) -> mujoco.MjData:
    data = mujoco.MjData(c.env.mj_model)
    data.qpos[:] = np.asarray(state.pipeline_state.qpos[slot], np.float64)
    data.qvel[:] = np.asarray(state.pipeline_state.qvel[slot], np.float64)
    return data


def compare_with_native(c: Compiled, horizon: int, seed: int = 0) -> tuple[float, float, int, envs.State]:
    """Max |qpos|, |qvel| differences MJX vs native over ``horizon`` env steps, and native contacts seen."""
    state = c.first
    natives = [_native_from(c, state, b) for b in range(BATCH)]
    actions = c.actions(horizon, seed)
    worst_q = worst_v = 0.0
    contacts = 0
    for t in range(horizon):
        state = c.step(state, jnp.asarray(actions[t]))
        # an auto-reset would replace the physics state; the comparison needs unbroken episodes
        assert not np.any(np.asarray(state.done)), f"episode ended at env step {t}"
        for b, data in enumerate(natives):
            data.ctrl[:] = c.ctrl(actions[t, b])
            for _ in range(c.env.n_frames):
                mujoco.mj_step(c.env.mj_model, data)
                contacts += data.ncon
            worst_q = max(worst_q, float(np.max(np.abs(np.asarray(state.pipeline_state.qpos[b]) - data.qpos))))
            worst_v = max(worst_v, float(np.max(np.abs(np.asarray(state.pipeline_state.qvel[b]) - data.qvel))))
    return worst_q, worst_v, contacts, state


# --- sizes, defaults, typing and bad input ------------------------------------------


@pytest.mark.parametrize("fixture", ["cheetah", "ant", "humanoid"])
def test_sizes_defaults_and_output_types(fixture, request):
    c = request.getfixturevalue(fixture)
    env = c.env
    obs_size, act_size, dt, metric_names = SPEC[type(env).__name__.lower()]
    assert env.observation_size == obs_size
    assert env.action_size == act_size == env.mj_model.nu
    assert float(env.dt) == pytest.approx(dt)
    assert type(env).default_episode_length == 1000 and env.n_frames == 5
    state = c.first
    assert state.obs.shape == (BATCH, obs_size) and state.obs.dtype == jnp.float32
    assert set(state.metrics) == metric_names
    for leaf in (state.reward, state.done, *state.metrics.values()):
        assert leaf.shape == (BATCH,) and leaf.dtype == jnp.float32 and not leaf.weak_type
    assert np.all(np.isfinite(np.asarray(state.obs)))


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("ant", {"healthy_z_range": (1.0, 0.2)}, "healthy_z_range"),
        ("ant", {"healthy_z_range": 0.5}, "healthy_z_range"),
        ("ant", {"use_contact_forces": True}, "use_contact_forces"),
        ("humanoid", {"healthy_z_range": ("a", 2)}, "healthy_z_range"),
        ("halfcheetah", {"n_frames": 0}, "n_frames"),
    ],
)
def test_bad_arguments_name_the_argument(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        envs.get_environment(name, **kwargs)


def test_wrong_action_shape_fails_before_compiling(ant):
    with pytest.raises(ValueError, match=r"expected shape \(2, 8\)"):
        jax.eval_shape(ant.wrapped.step, ant.first, jnp.zeros((BATCH, 17), jnp.float32))


def test_models_collide_only_with_the_floor():
    """The speed choice in the MJCF: body geoms never collide with each other, only chosen ones touch the floor."""
    expected_touching = {
        "halfcheetah": {"torso", "head", "bthigh", "bfoot", "fthigh", "ffoot"},
        "ant": {"foot1", "foot2", "foot3", "foot4"},
        "humanoid": {"left_foot", "right_foot"},
    }
    for name, touching in expected_touching.items():
        m = envs.get_environment(name).mj_model
        body = m.geom_bodyid != 0
        assert not np.any(m.geom_conaffinity[body]), name  # no body-body contacts
        names = {m.geom(i).name for i in np.flatnonzero(body & (m.geom_contype != 0))}
        assert names == touching, name


# --- physics against native MuJoCo ----------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["cheetah", "ant", "humanoid"])
def test_mjx_matches_native_mujoco(fixture, request):
    c = request.getfixturevalue(fixture)
    worst_q, worst_v, _, _ = compare_with_native(c, HORIZON)
    assert worst_q < QPOS_ATOL, f"qpos differs by {worst_q:.2e} over {HORIZON * c.env.n_frames} physics steps"
    assert worst_v < QVEL_ATOL, f"qvel differs by {worst_v:.2e} over {HORIZON * c.env.n_frames} physics steps"


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["cheetah", "ant", "humanoid"])
def test_mjx_matches_native_mujoco_long_horizon_with_contacts(fixture, request):
    c = request.getfixturevalue(fixture)
    worst_q, worst_v, contacts, _ = compare_with_native(c, SLOW_HORIZON, seed=3)
    assert contacts > 0, "the comparison should cover ground contacts"
    assert worst_q < SLOW_QPOS_ATOL and worst_v < SLOW_QVEL_ATOL, (worst_q, worst_v)


# --- rewards, metrics, typing of the compiled step -------------------------------------------------------------


def _avals(tree) -> list[tuple]:
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return [(jax.tree_util.keystr(p), x.shape, x.dtype, x.weak_type) for p, x in leaves]


def _assert_step_is_stable(c: Compiled, state: envs.State, after: envs.State) -> None:
    # identical shapes, dtypes and weak types in and out is what lets jax.jit(step) run without recompiling
    assert _avals(after) == _avals(state)
    assert set(after.metrics) == SPEC[type(c.env).__name__.lower()][3]
    assert after.reward.dtype == jnp.float32 and after.done.dtype == jnp.float32


def test_halfcheetah_reward_is_forward_velocity_minus_control_cost(cheetah):
    c = cheetah
    action = jnp.asarray(c.actions(1, seed=5)[0])
    after = c.step(c.first, action)
    _assert_step_is_stable(c, c.first, after)
    x0 = np.asarray(c.first.pipeline_state.xpos[:, 1, 0])
    x1 = np.asarray(after.pipeline_state.xpos[:, 1, 0])
    velocity = (x1 - x0) / 0.05
    ctrl_cost = 0.1 * np.sum(np.square(np.asarray(action)), axis=-1)
    np.testing.assert_allclose(after.metrics["x_velocity"], velocity, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(after.metrics["reward_ctrl"], -ctrl_cost, rtol=1e-5)
    np.testing.assert_allclose(after.reward, velocity - ctrl_cost, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(after.done, 0.0)
    # the observation leaves out rootx and is qpos[1:] then qvel
    expected_obs = np.concatenate([after.pipeline_state.qpos[:, 1:], after.pipeline_state.qvel], axis=-1)
    np.testing.assert_array_equal(after.obs, expected_obs)


def test_halfcheetah_x_velocity_integrates_to_displacement(cheetah):
    """x_velocity (Δx/dt per step) sums to the distance run; obs index 8 is the torso x velocity."""
    c = cheetah
    state = c.first
    total = np.zeros(BATCH)
    for t in range(HORIZON):
        state = c.step(state, jnp.asarray(c.actions(1, seed=11 + t)[0]))
        total += np.asarray(state.metrics["x_velocity"]) * 0.05
    np.testing.assert_allclose(
        total, np.asarray(state.pipeline_state.xpos[:, 1, 0] - c.first.pipeline_state.xpos[:, 1, 0]), atol=1e-4
    )
    np.testing.assert_allclose(state.obs[:, 8], state.pipeline_state.qvel[:, 0])


def _displaced(state: envs.State, heights: list[float]) -> envs.State:
    """Moves each slot's torso to a height; slot 0 is also turned upside down so its legs cannot push it up."""
    qpos = state.pipeline_state.qpos.at[:, 2].set(jnp.asarray(heights, jnp.float32))
    qpos = qpos.at[0, 3:7].set(jnp.asarray([0.0, 1.0, 0.0, 0.0], jnp.float32))
    return state.replace(pipeline_state=state.pipeline_state.replace(qpos=qpos))


def test_ant_reset_reward_and_termination(ant):
    c = ant
    home = c.env.mj_model.key("home").qpos
    qpos = np.asarray(c.first.pipeline_state.qpos)
    assert np.all(np.abs(qpos - home) <= 0.1 + 1e-6)  # reset noise scale 0.1 around the keyframe
    assert np.all(np.abs(qpos - home).max(axis=-1) > 0.01)  # and the noise is really there

    action = jnp.asarray(c.actions(1, seed=5)[0])
    after = c.step(c.first, action)
    _assert_step_is_stable(c, c.first, after)
    torso0, torso1 = np.asarray(c.first.pipeline_state.xpos[:, 1]), np.asarray(after.pipeline_state.xpos[:, 1])
    velocity = (torso1[:, 0] - torso0[:, 0]) / 0.05
    ctrl_cost = 0.5 * np.sum(np.square(np.asarray(action)), axis=-1)
    np.testing.assert_allclose(after.metrics["reward_forward"], velocity, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(after.metrics["reward_ctrl"], -ctrl_cost, rtol=1e-5)
    np.testing.assert_allclose(after.reward, velocity + 1.0 - ctrl_cost, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(after.done, 0.0)
    np.testing.assert_array_equal(after.obs, np.concatenate([after.pipeline_state.qpos[:, 2:],
                                                             after.pipeline_state.qvel], axis=-1))

    # slot 0 below the healthy range, slot 1 above it: both terminate (not truncate) on the next step
    ended = c.step(_displaced(c.first, [0.1, 1.5]), jnp.zeros((BATCH, 8), jnp.float32))
    np.testing.assert_array_equal(ended.done, [1.0, 1.0])
    np.testing.assert_array_equal(ended.info["truncation"], [0.0, 0.0])
    np.testing.assert_array_equal(ended.metrics["reward_survive"], [1.0, 1.0])  # paid on the last step too
    final_z = np.asarray(ended.info["final_obs"][:, 0])
    assert final_z[0] < 0.2 and final_z[1] > 1.0
    assert np.all(np.abs(np.asarray(ended.obs[:, 0]) - 0.55) <= 0.1 + 1e-6)  # auto-reset to a fresh start


def test_humanoid_observation_reward_and_termination(humanoid):
    c = humanoid
    action = jnp.asarray(c.actions(1, seed=5)[0])
    after = c.step(c.first, action)
    _assert_step_is_stable(c, c.first, after)
    ps = after.pipeline_state
    np.testing.assert_array_equal(after.obs[:, :22], ps.qpos[:, 2:])
    np.testing.assert_array_equal(after.obs[:, 22:45], ps.qvel)
    np.testing.assert_array_equal(after.obs[:, 45:155], ps.cinert[:, 1:].reshape(BATCH, -1))
    np.testing.assert_array_equal(after.obs[:, 155:221], ps.cvel[:, 1:].reshape(BATCH, -1))
    np.testing.assert_array_equal(after.obs[:, 221:], ps.qfrc_actuator)

    ctrl = np.asarray(ps.ctrl)
    np.testing.assert_allclose(ctrl, 0.4 * np.asarray(action), rtol=1e-6, atol=1e-7)  # [-1, 1] -> [-0.4, 0.4]
    com0, com1 = np.asarray(c.first.pipeline_state.subtree_com[:, 1]), np.asarray(ps.subtree_com[:, 1])
    velocity = (com1[:, 0] - com0[:, 0]) / 0.015
    ctrl_cost = 0.1 * np.sum(np.square(ctrl), axis=-1)
    np.testing.assert_allclose(after.metrics["forward_reward"], 1.25 * velocity, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(after.reward, 1.25 * velocity + 5.0 - ctrl_cost, rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(after.done, 0.0)

    ended = c.step(_displaced(c.first, [0.6, 2.5]), jnp.zeros((BATCH, 17), jnp.float32))
    np.testing.assert_array_equal(ended.done, [1.0, 1.0])
    np.testing.assert_array_equal(ended.info["truncation"], [0.0, 0.0])
    final_z = np.asarray(ended.info["final_obs"][:, 0])
    assert final_z[0] < 1.0 and final_z[1] > 2.0
