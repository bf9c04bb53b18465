"""The gradient benchmarks' task file (benchmarks/gradient_tasks.py), as ``--env FILE:NAME`` loads it: the tracking
task's observation, phase and reward follow its definition."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

TASKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gradient_tasks.py"


def _tasks():
    spec = importlib.util.spec_from_file_location("gradient_tasks", TASKS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tracking_task_observes_the_next_reference_and_pays_for_tracking_it():
    env = _tasks().halfcheetah_tracking()
    assert (env.observation_size, env.action_size) == (25, 6)
    state = jax.jit(env.reset)(jax.random.PRNGKey(3))
    step = jax.jit(env.step)
    action = jnp.asarray([0.5, -0.3, 0.2, -0.4, 0.1, 0.3], jnp.float32)
    phase_step = 2 * math.pi * 1.5 * env.dt
    for _ in range(3):
        before = float(state.info["phase"])
        state = step(state, action)
        phase = float(state.info["phase"])
        np.testing.assert_allclose(phase, (before + phase_step) % (2 * math.pi), atol=1e-5)
        reference = np.asarray(env.reference(jnp.float32(phase)))
        error = float(np.sum((np.asarray(state.pipeline_state.qpos[3:]) - reference) ** 2))
        np.testing.assert_allclose(float(state.metrics["tracking_error"]), error, rtol=1e-5)
        expected = math.exp(-error / 0.1) - 0.01 * float(jnp.sum(action**2))
        np.testing.assert_allclose(float(state.reward), expected, rtol=1e-5, atol=1e-6)
        upcoming = phase + phase_step
        np.testing.assert_allclose(
            np.asarray(state.obs[17:23]), np.asarray(env.reference(jnp.float32(upcoming))), atol=1e-6
        )
        np.testing.assert_allclose(np.asarray(state.obs[23:]), [math.sin(upcoming), math.cos(upcoming)], atol=1e-5)
    # the reference is a gait: back and front thighs in antiphase, within what the motors hold
    quarter = np.asarray([env.reference(jnp.float32(p)) for p in np.linspace(0, 2 * math.pi, 17)])
    np.testing.assert_allclose(quarter[:, 0], -quarter[:, 3], atol=1e-6)
    assert np.abs(quarter).max() <= 0.3 + 1e-6


def test_upright_pendulum_task_has_a_reward_with_an_action_gradient():
    env = _tasks().inverted_pendulum_upright()
    state = env.reset(jax.random.PRNGKey(0))
    reward_gradient = jax.grad(lambda a: env.step(state, a).reward)(jnp.full((env.action_size,), 0.3, jnp.float32))
    assert float(jnp.abs(reward_gradient).sum()) > 0
