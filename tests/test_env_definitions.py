"""Each physics env's observation, reward, termination and metrics against Brax 0.14's definitions.

For every env, states after a few random steps (and states pushed past the termination rule) are stepped by the
env's own compiled ``step``; the test then recomputes the observation, reward, ``done`` and metrics from the raw
MJX data of the states before and after (``state.pipeline_state``) with Brax's formulas, written out below in
numpy (float64), and compares them with what the env returned.

Brax reads body poses (``pipeline_state.x``) from its physics pipeline. On its ``mjx`` backend those are the
poses MuJoCo computed before the last integration of the step (``mjx.step`` leaves ``xpos`` one physics step
behind ``qpos``); its default ``generalized`` pipeline recomputes them for the reached positions. ``POSES`` says
which of the two each env reads, as its docstring documents; the reached poses are recomputed here with native
MuJoCo's forward kinematics. The env's other documented differences from Brax (reacher's fingertip velocity,
humanoid's inertia and velocity layout, extra metrics) are checked against their own definitions, named where
they are used.

Each env's ``reset`` and unbatched ``step`` are compiled once (``compiled_envs.py``, shared with
``test_envs_planar.py``) and every state goes through the same compiled step.
The cheap planar envs run by default; the others are ``slow`` (their compiles take most of this module's time).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from compiled_envs import compiled_env

from brax_core import envs
from brax_core.envs.humanoid import _cinert

# Where Brax's formulas read body poses: "reached" = forward kinematics of the reached qpos (Brax's generalized
# pipeline), "mjx" = the pipeline state's own xpos/xquat/xipos (Brax's mjx backend).
POSES = {
    "inverted_pendulum": "reached",  # reads no pose
    "inverted_double_pendulum": "reached",
    "reacher": "reached",
    "hopper": "reached",
    "walker2d": "reached",
    "halfcheetah": "mjx",
    "ant": "mjx",
    "humanoid": "mjx",
}
DEFAULT = ("inverted_pendulum", "inverted_double_pendulum", "reacher")


def _marked(names) -> list:
    return [name if name in DEFAULT else pytest.param(name, marks=pytest.mark.slow) for name in names]


NAMES = _marked(POSES)

RANDOM_STEPS = 3
# Tolerances: the env computes in float32, the formulas here in float64. Forward velocities divide float32
# positions (about 1 m) by dt (down to 0.008 s), hence the looser reward tolerance.
OBS_TOL = {"rtol": 1e-5, "atol": 1e-5}
REWARD_TOL = {"rtol": 1e-5, "atol": 2e-4}

# Metrics Brax's env reports (besides those, inverted_double_pendulum reports its reward terms and tip height).
BRAX_METRICS = {
    "inverted_pendulum": set(),
    "inverted_double_pendulum": set(),
    "reacher": {"reward_dist", "reward_ctrl"},
    "halfcheetah": {"x_position", "x_velocity", "reward_ctrl", "reward_run"},
    "hopper": {"reward_forward", "reward_ctrl", "reward_healthy", "x_position", "x_velocity"},
    "walker2d": {"reward_forward", "reward_ctrl", "reward_healthy", "x_position", "x_velocity"},
    "ant": {
        "reward_forward",
        "reward_survive",
        "reward_ctrl",
        "reward_contact",
        "x_position",
        "y_position",
        "distance_from_origin",
        "x_velocity",
        "y_velocity",
        "forward_reward",
    },
    "humanoid": {
        "forward_reward",
        "reward_linvel",
        "reward_quadctrl",
        "reward_alive",
        "x_position",
        "y_position",
        "distance_from_origin",
        "x_velocity",
        "y_velocity",
    },
}
EXTRA_METRICS = {"inverted_double_pendulum": {"alive_bonus", "distance_penalty", "velocity_penalty", "tip_z"}}


# --- raw data -------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Physics:
    """One physics state in float64, with Brax's body poses (world body excluded) from the chosen source."""

    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray
    x_pos: np.ndarray  # (nbody - 1, 3) body frame origins
    x_rot: np.ndarray  # (nbody - 1, 4) body orientations, w first
    xi_pos: np.ndarray  # (nbody - 1, 3) body centres of mass
    cinert: np.ndarray  # MuJoCo's per-body inertia, read as the pipeline state holds it
    cvel: np.ndarray
    qfrc_actuator: np.ndarray


def _physics(env: envs.PipelineEnv, pipeline_state, poses: str) -> Physics:
    f64 = functools.partial(np.asarray, dtype=np.float64)
    qpos, qvel = f64(pipeline_state.qpos), f64(pipeline_state.qvel)
    if poses == "reached":
        data = mujoco.MjData(env.mj_model)
        data.qpos[:] = qpos
        mujoco.mj_kinematics(env.mj_model, data)
        x_pos, x_rot, xi_pos = data.xpos[1:].copy(), data.xquat[1:].copy(), data.xipos[1:].copy()
    else:
        x_pos, x_rot = f64(pipeline_state.xpos)[1:], f64(pipeline_state.xquat)[1:]
        xi_pos = f64(pipeline_state.xipos)[1:]
    return Physics(
        qpos=qpos,
        qvel=qvel,
        ctrl=f64(pipeline_state.ctrl),
        x_pos=x_pos,
        x_rot=x_rot,
        xi_pos=xi_pos,
        cinert=f64(_cinert(pipeline_state)),
        cvel=f64(pipeline_state.cvel),
        qfrc_actuator=f64(pipeline_state.qfrc_actuator),
    )


def _rotate(vec: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """``vec`` rotated by the unit quaternion ``quat`` (w, x, y, z)."""
    w, u = quat[0], quat[1:]
    return vec + 2.0 * np.cross(u, np.cross(u, vec) + w * vec)


def _body(env: envs.PipelineEnv, name: str) -> int:
    """Index of a body in Brax's body arrays (MuJoCo's id less the world body)."""
    return env.mj_model.body(name).id - 1


def _action_to_ctrl(env: envs.PipelineEnv, action: np.ndarray) -> np.ndarray:
    low, high = env.mj_model.actuator_ctrlrange[:, 0], env.mj_model.actuator_ctrlrange[:, 1]
    return (action + 1.0) * (high - low) * 0.5 + low


# --- Brax's definitions ---------------------------------------------------------------------------------------
# Each takes the env (for its model and dt), the physics before and after the step and the action, and returns
# (obs, reward, done, metrics) as Brax's env of that name computes them.


def brax_inverted_pendulum(env, before: Physics, after: Physics, action: np.ndarray):
    obs = np.concatenate([after.qpos, after.qvel])
    done = 1.0 if abs(obs[1]) > 0.2 else 0.0
    return obs, 1.0, done, {}


def _double_pendulum_obs(p: Physics) -> np.ndarray:
    return np.concatenate([p.qpos[:1], np.sin(p.qpos[1:]), np.cos(p.qpos[1:]), np.clip(p.qvel, -10, 10)])


def brax_inverted_double_pendulum(env, before: Physics, after: Physics, action: np.ndarray):
    pole2 = _body(env, "pole2")
    x, _, z = after.x_pos[pole2] + _rotate(np.array([0.0, 0.0, 0.6]), after.x_rot[pole2])
    distance_penalty = 0.01 * x**2 + (z - 2.0) ** 2
    velocity_penalty = 1e-3 * after.qvel[1] ** 2 + 5e-3 * after.qvel[2] ** 2
    done = 1.0 if z <= 1.0 else 0.0
    reward = (1.0 - done) * 10.0 - distance_penalty - velocity_penalty
    # not Brax's: the reward terms and the tip height are reported as metrics (documented)
    extra = {
        "alive_bonus": (1.0 - done) * 10.0,
        "distance_penalty": distance_penalty,
        "velocity_penalty": velocity_penalty,
        "tip_z": z,
    }
    return _double_pendulum_obs(after), reward, done, extra


def _reacher_obs(env, p: Physics) -> np.ndarray:
    body1, target = _body(env, "body1"), _body(env, "target")
    offset = np.array([0.11, 0.0, 0.0])  # the fingertip in the elbow link's frame
    tip_pos = p.x_pos[body1] + _rotate(offset, p.x_rot[body1])
    # not Brax's (documented): the fingertip's own velocity, differentiated by hand from the two hinge angles
    # (links 0.1 m and 0.11 m in the plane); Brax's adds a world-x offset crossed with the elbow's spin
    theta0, theta01 = p.qpos[0], p.qpos[0] + p.qpos[1]
    omega0, omega01 = p.qvel[0], p.qvel[0] + p.qvel[1]
    tip_vel = 0.1 * omega0 * np.array([-np.sin(theta0), np.cos(theta0)]) + 0.11 * omega01 * np.array(
        [-np.sin(theta01), np.cos(theta01)]
    )
    return np.concatenate([np.cos(p.qpos[:2]), np.sin(p.qpos[:2]), p.qpos[2:], tip_vel, tip_pos - p.x_pos[target]])


def brax_reacher(env, before: Physics, after: Physics, action: np.ndarray):
    obs = _reacher_obs(env, after)
    reward_dist = -np.linalg.norm(obs[-3:])
    reward_ctrl = -np.sum(np.square(action))
    return obs, reward_dist + reward_ctrl, 0.0, {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl}


def _cheetah_obs(p: Physics) -> np.ndarray:
    return np.concatenate([p.qpos[1:], p.qvel])


def brax_halfcheetah(env, before: Physics, after: Physics, action: np.ndarray):
    x_velocity = (after.x_pos[0, 0] - before.x_pos[0, 0]) / float(env.dt)
    forward_reward = 1.0 * x_velocity
    ctrl_cost = 0.1 * np.sum(np.square(action))
    metrics = {
        "x_position": after.x_pos[0, 0],
        "x_velocity": x_velocity,
        "reward_run": forward_reward,
        "reward_ctrl": -ctrl_cost,
    }
    return _cheetah_obs(after), forward_reward - ctrl_cost, 0.0, metrics


def _planar_walker_obs(p: Physics) -> np.ndarray:
    position = p.qpos.copy()
    position[1] = p.x_pos[0, 2]  # Brax observes the torso body's height in place of rootz
    return np.concatenate([position[1:], np.clip(p.qvel, -10, 10)])


def _planar_walker(env, before, after, action, healthy: bool):
    x_velocity = (after.x_pos[0, 0] - before.x_pos[0, 0]) / float(env.dt)
    forward_reward = 1.0 * x_velocity
    healthy_reward = 1.0  # terminate_when_unhealthy: paid on every step
    ctrl_cost = 1e-3 * np.sum(np.square(action))
    metrics = {
        "reward_forward": forward_reward,
        "reward_ctrl": -ctrl_cost,
        "reward_healthy": healthy_reward,
        "x_position": after.x_pos[0, 0],
        "x_velocity": x_velocity,
    }
    reward = forward_reward + healthy_reward - ctrl_cost
    return _planar_walker_obs(after), reward, 1.0 - float(healthy), metrics


def brax_hopper(env, before: Physics, after: Physics, action: np.ndarray):
    z, angle = after.x_pos[0, 2], after.qpos[2]
    state_vec = np.concatenate([after.qpos[2:], after.qvel])
    healthy = bool(np.all((-100.0 < state_vec) & (state_vec < 100.0)))
    healthy &= 0.7 < z < float("inf") and -0.2 < angle < 0.2
    return _planar_walker(env, before, after, action, healthy)


def brax_walker2d(env, before: Physics, after: Physics, action: np.ndarray):
    z, angle = after.x_pos[0, 2], after.qpos[2]
    healthy = 0.8 < z < 2.0 and -1.0 < angle < 1.0
    return _planar_walker(env, before, after, action, healthy)


def _ant_obs(p: Physics) -> np.ndarray:
    return np.concatenate([p.qpos[2:], p.qvel])


def brax_ant(env, before: Physics, after: Physics, action: np.ndarray):
    velocity = (after.x_pos[0] - before.x_pos[0]) / float(env.dt)
    forward_reward = velocity[0]
    z = after.x_pos[0, 2]
    healthy = 0.0 if z < 0.2 or z > 1.0 else 1.0
    healthy_reward = 1.0
    ctrl_cost = 0.5 * np.sum(np.square(action))
    contact_cost = 0.0
    metrics = {
        "reward_forward": forward_reward,
        "reward_survive": healthy_reward,
        "reward_ctrl": -ctrl_cost,
        "reward_contact": -contact_cost,
        "x_position": after.x_pos[0, 0],
        "y_position": after.x_pos[0, 1],
        "distance_from_origin": np.linalg.norm(after.x_pos[0]),
        "x_velocity": velocity[0],
        "y_velocity": velocity[1],
        "forward_reward": forward_reward,
    }
    reward = forward_reward + healthy_reward - ctrl_cost - contact_cost
    return _ant_obs(after), reward, 1.0 - healthy, metrics


def _humanoid_com(env, p: Physics) -> np.ndarray:
    mass = env.mj_model.body_mass[1:]
    return np.sum(mass[:, None] * p.xi_pos, axis=0) / np.sum(mass)


def _humanoid_obs(env, p: Physics, ctrl: np.ndarray) -> np.ndarray:
    m = env.mj_model
    # Brax's actuator forces: gear * control on each motor's joint (plain motors, no bias)
    qfrc_actuator = np.zeros(m.nv)
    dofs = m.jnt_dofadr[m.actuator_trnid[:, 0]]
    np.add.at(qfrc_actuator, dofs, m.actuator_gear[:, 0] * ctrl)
    # not Brax's (documented): MuJoCo's own cinert and cvel per body in place of Brax's com inertia and velocity
    return np.concatenate([p.qpos[2:], p.qvel, p.cinert[1:].ravel(), p.cvel[1:].ravel(), qfrc_actuator])


def brax_humanoid(env, before: Physics, after: Physics, action: np.ndarray):
    ctrl = _action_to_ctrl(env, action)
    com_before, com_after = _humanoid_com(env, before), _humanoid_com(env, after)
    velocity = (com_after - com_before) / float(env.dt)
    forward_reward = 1.25 * velocity[0]
    z = after.x_pos[0, 2]
    healthy = 0.0 if z < 1.0 or z > 2.0 else 1.0
    healthy_reward = 5.0
    ctrl_cost = 0.1 * np.sum(np.square(ctrl))
    metrics = {
        "forward_reward": forward_reward,
        "reward_linvel": forward_reward,
        "reward_quadctrl": -ctrl_cost,
        "reward_alive": healthy_reward,
        "x_position": com_after[0],
        "y_position": com_after[1],
        "distance_from_origin": np.linalg.norm(com_after),
        "x_velocity": velocity[0],
        "y_velocity": velocity[1],
    }
    reward = forward_reward + healthy_reward - ctrl_cost
    return _humanoid_obs(env, after, ctrl), reward, 1.0 - healthy, metrics


BRAX_STEP = {
    "inverted_pendulum": brax_inverted_pendulum,
    "inverted_double_pendulum": brax_inverted_double_pendulum,
    "reacher": brax_reacher,
    "halfcheetah": brax_halfcheetah,
    "hopper": brax_hopper,
    "walker2d": brax_walker2d,
    "ant": brax_ant,
    "humanoid": brax_humanoid,
}

# Brax's observation at reset, from the reset physics state.
BRAX_RESET_OBS = {
    "inverted_pendulum": lambda env, p: np.concatenate([p.qpos, p.qvel]),
    "inverted_double_pendulum": lambda env, p: _double_pendulum_obs(p),
    "reacher": _reacher_obs,
    "halfcheetah": lambda env, p: _cheetah_obs(p),
    "hopper": lambda env, p: _planar_walker_obs(p),
    "walker2d": lambda env, p: _planar_walker_obs(p),
    "ant": lambda env, p: _ant_obs(p),
    "humanoid": lambda env, p: _humanoid_obs(env, p, np.zeros(env.action_size)),  # Brax observes a zero action
}

# qpos entries set (at rest) before one more step: each env with a termination rule is put just past it, so a
# wrong threshold shows; the others are put in a pose far from the start, where a wrong frame or sign would show.
PUSHES = {
    "inverted_pendulum": {1: 0.22},  # pole leaning past 0.2 rad
    "inverted_double_pendulum": {1: 1.0},  # tip about 0.65 m up, below 1 m
    "reacher": {0: 2.0, 1: -1.2},  # arm turned well away from the x axis
    "halfcheetah": {2: 0.8},  # torso pitched
    "hopper": {2: 0.22},  # torso tilted past 0.2 rad
    "walker2d": {2: 1.05},  # torso tilted past 1 rad
    "ant": {2: 1.05},  # torso above 1 m
    "humanoid": {2: 2.05},  # torso above 2 m
}
TERMINATES = {"inverted_pendulum", "inverted_double_pendulum", "hopper", "walker2d", "ant", "humanoid"}


# --- the env's own outputs ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Transition:
    before: Physics
    action: np.ndarray
    after: Physics
    obs: np.ndarray
    reward: float
    done: float
    metrics: dict[str, float]


@dataclasses.dataclass
class Run:
    env: envs.PipelineEnv
    first: envs.State
    transitions: list[Transition]
    last: envs.State  # the state the last transition reached
    step_compiles: int


def _outputs(state: envs.State) -> dict:
    return {
        "obs": np.asarray(state.obs, np.float64),
        "reward": float(state.reward),
        "done": float(state.done),
        "metrics": {k: float(v) for k, v in state.metrics.items()},
    }


@functools.cache
def run(name: str) -> Run:
    """Resets ``name`` and steps it with random actions, then once more from a pushed pose (one compile each)."""
    env, reset, step = compiled_env(name)  # shared with test_envs_planar.py
    poses = POSES[name]
    rng = np.random.default_rng(0)
    first = reset(jax.random.PRNGKey(1))
    state, transitions = first, []

    def advance(state: envs.State) -> envs.State:
        action = rng.uniform(-1.0, 1.0, env.action_size).astype(np.float32)
        after = step(state, jnp.asarray(action))
        transitions.append(
            Transition(
                before=_physics(env, state.pipeline_state, poses),
                action=action.astype(np.float64),
                after=_physics(env, after.pipeline_state, poses),
                **_outputs(after),
            )
        )
        return after

    for _ in range(RANDOM_STEPS):
        state = advance(state)
    qpos, qvel = state.pipeline_state.qpos, jnp.zeros_like(state.pipeline_state.qvel)
    for index, value in PUSHES[name].items():
        qpos = qpos.at[index].set(value)
    last = advance(state.replace(pipeline_state=state.pipeline_state.replace(qpos=qpos, qvel=qvel)))
    return Run(env, first, transitions, last, step._cache_size())


# --- tests ----------------------------------------------------------------------------------------------------


def _assert_metrics(name: str, got: dict[str, float], expected: dict[str, float], where: str) -> None:
    assert set(got) == BRAX_METRICS[name] | EXTRA_METRICS.get(name, set()), where
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, **REWARD_TOL, err_msg=f"{where}: metrics[{key!r}]")


@pytest.mark.parametrize("name", NAMES)
def test_step_matches_brax_definitions(name):
    r = run(name)
    assert r.step_compiles == 1
    brax_step = BRAX_STEP[name]
    for t, tr in enumerate(r.transitions):
        where = f"{name} transition {t}"
        obs, reward, done, metrics = brax_step(r.env, tr.before, tr.after, tr.action)
        np.testing.assert_allclose(tr.obs, obs, **OBS_TOL, err_msg=f"{where}: obs")
        np.testing.assert_allclose(tr.reward, reward, **REWARD_TOL, err_msg=f"{where}: reward")
        assert tr.done == done, f"{where}: done {tr.done}, Brax's definition gives {done}"
        _assert_metrics(name, tr.metrics, metrics, where)
    # the random steps keep the episode going and the push ends it, so both sides of the rule were compared
    dones = [tr.done for tr in r.transitions]
    assert dones[:-1] == [0.0] * RANDOM_STEPS
    assert dones[-1] == (1.0 if name in TERMINATES else 0.0)


@pytest.mark.parametrize("name", NAMES)
def test_reset_matches_brax_definitions(name):
    r = run(name)
    p = _physics(r.env, r.first.pipeline_state, POSES[name])
    out = _outputs(r.first)
    np.testing.assert_allclose(out["obs"], BRAX_RESET_OBS[name](r.env, p), **OBS_TOL)
    assert out["reward"] == 0.0 and out["done"] == 0.0
    assert set(out["metrics"]) == BRAX_METRICS[name] | EXTRA_METRICS.get(name, set())
    # Brax starts every metric at 0; the documented exceptions report the start pose instead
    starts_at_pose = {"inverted_double_pendulum": {"tip_z"}, "hopper": {"x_position"}, "walker2d": {"x_position"}}
    for key, value in out["metrics"].items():
        if key not in starts_at_pose.get(name, set()):
            assert value == 0.0, key


# Brax 0.14's constructor defaults (n_frames included), argument by argument.
BRAX_DEFAULTS = {
    "inverted_pendulum": {"n_frames": 2},
    "inverted_double_pendulum": {"n_frames": 2},
    "reacher": {"n_frames": 2},
    "halfcheetah": {
        "forward_reward_weight": 1.0,
        "ctrl_cost_weight": 0.1,
        "reset_noise_scale": 0.1,
        "exclude_current_positions_from_observation": True,
        "n_frames": 5,
    },
    "hopper": {
        "forward_reward_weight": 1.0,
        "ctrl_cost_weight": 1e-3,
        "healthy_reward": 1.0,
        "terminate_when_unhealthy": True,
        "healthy_state_range": (-100.0, 100.0),
        "healthy_z_range": (0.7, float("inf")),
        "healthy_angle_range": (-0.2, 0.2),
        "reset_noise_scale": 5e-3,
        "exclude_current_positions_from_observation": True,
        "n_frames": 4,
    },
    "walker2d": {
        "forward_reward_weight": 1.0,
        "ctrl_cost_weight": 1e-3,
        "healthy_reward": 1.0,
        "terminate_when_unhealthy": True,
        "healthy_z_range": (0.8, 2.0),
        "healthy_angle_range": (-1.0, 1.0),
        "reset_noise_scale": 5e-3,
        "exclude_current_positions_from_observation": True,
        "n_frames": 4,
    },
    "ant": {
        "ctrl_cost_weight": 0.5,
        "use_contact_forces": False,
        "contact_cost_weight": 5e-4,
        "healthy_reward": 1.0,
        "terminate_when_unhealthy": True,
        "healthy_z_range": (0.2, 1.0),
        "reset_noise_scale": 0.1,
        "exclude_current_positions_from_observation": True,
        "n_frames": 5,
    },
    "humanoid": {
        "forward_reward_weight": 1.25,
        "ctrl_cost_weight": 0.1,
        "healthy_reward": 5.0,
        "terminate_when_unhealthy": True,
        "healthy_z_range": (1.0, 2.0),
        "reset_noise_scale": 1e-2,
        "exclude_current_positions_from_observation": True,
        "n_frames": 5,
    },
}


@pytest.mark.parametrize("name", list(POSES))
def test_constructor_defaults_are_braxs(name):
    parameters = inspect.signature(envs.get_environment_class(name)).parameters
    defaults = {key: parameters[key].default for key in BRAX_DEFAULTS[name] if key in parameters}
    assert defaults == BRAX_DEFAULTS[name]


# positions Brax leaves out of the observation by default (x for the planar models, x and y for the 3-D ones)
LEFT_OUT = {"halfcheetah": 1, "hopper": 1, "walker2d": 1, "ant": 2, "humanoid": 2}


@pytest.mark.parametrize("name", _marked(LEFT_OUT))
def test_observation_with_current_positions_prepends_them(name):
    # Brax's exclude_current_positions_from_observation=False keeps the same layout with those positions in front
    r = run(name)
    env = envs.get_environment(name, exclude_current_positions_from_observation=False)
    obs = np.asarray(env._get_obs(r.last.pipeline_state), np.float64)
    qpos = np.asarray(r.last.pipeline_state.qpos, np.float64)
    expected = np.concatenate([qpos[: LEFT_OUT[name]], r.transitions[-1].obs])
    np.testing.assert_allclose(obs, expected, **OBS_TOL)
