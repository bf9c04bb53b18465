"""Gradients through MJX's step stay finite where the solver's reverse pass is not: the env whose cotangent is NaN
is cut at that step, every other env keeps its exact gradient, and the trainers count the cuts.

The physics case is a real one: an ``inverted_pendulum`` state a few steps after a reset, where MJX's line search
starts converged and its reverse pass divides by the square of a second derivative that underflows in float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from test_torch_analytic_checkpoint import Drift  # smooth: no cut is due

from brax_bridge import TorchEnv
from brax_core import envs
from brax_core.envs.wrappers import training as env_training
from brax_core.envs.wrappers.gradients import cut_nonfinite, finite_gradient_step, float_part, merge, other_part
from brax_core.training.agents.apg import train as jax_apg
from torch_analytic import apg, shac

# Found by an APG run (64 envs, seed 0): the pole's state at the first step after an auto-reset.
CONVERGED_QPOS = [0.004143502563238144, -0.001730861607939005]
CONVERGED_QVEL = [0.007338897790759802, -0.0018402599962428212]
ORDINARY_QPOS, ORDINARY_QVEL = [0.05, 0.1], [0.3, -0.2]


def test_cut_nonfinite_zeroes_each_env_where_a_cotangent_is_not_finite():
    tree = {
        "qpos": jnp.arange(6.0).reshape(3, 2),
        "obs": jnp.ones((3, 4)).at[1, 2].set(jnp.nan),
        "action": jnp.ones((3, 1)).at[2, 0].set(jnp.inf),
        "counter": None,
    }
    kept, cut = cut_nonfinite(tree, 3)
    assert float(cut) == 2.0 and kept["counter"] is None
    np.testing.assert_array_equal(kept["qpos"], [[0, 1], [0, 0], [0, 0]])  # env 1 and env 2 cut in every leaf
    np.testing.assert_array_equal(kept["obs"][0], np.ones(4))
    assert np.isfinite(np.asarray(kept["obs"])).all() and np.isfinite(np.asarray(kept["action"])).all()
    shared, cut = cut_nonfinite({"model": jnp.array([1.0, jnp.nan]), "qpos": jnp.ones((3, 2))}, 3)
    assert float(cut) == 3.0 and not np.asarray(shared["qpos"]).any()  # a leaf without the env axis: every env
    untouched, cut = cut_nonfinite({"qpos": jnp.ones((3, 2))}, 3)
    assert float(cut) == 0.0 and np.asarray(untouched["qpos"]).all()


def _pendulum_states():
    """Two pendulum envs, batched: the converged start (env 0) and an ordinary state (env 1)."""
    env = envs.get_environment("inverted_pendulum")
    pipeline = [
        env.pipeline_init(jnp.array(q, jnp.float32), jnp.array(qd, jnp.float32))
        for q, qd in ((CONVERGED_QPOS, CONVERGED_QVEL), (ORDINARY_QPOS, ORDINARY_QVEL))
    ]
    state = env.reset(jax.random.PRNGKey(0))
    states = [state.replace(pipeline_state=p, obs=jnp.concatenate([p.qpos, p.qvel])) for p in pipeline]
    return env_training.VmapWrapper(env), jax.tree.map(lambda *x: jnp.stack(x), *states)


def _next_position_sum(step):
    def of_action(state, action, *cuts):
        return step(state, action, *cuts).pipeline_state.qpos.sum(axis=1)

    return of_action


def test_the_solvers_nan_is_cut_to_its_env_and_the_other_env_keeps_its_gradient():
    env, state = _pendulum_states()
    action = jnp.zeros((2, 1), jnp.float32)
    floats, others = float_part(state), other_part(state)

    def raw(floats, action):
        return _next_position_sum(lambda s, a: env.step(s, a))(merge(floats, others), action)

    out, vjp = jax.jit(lambda f, a: jax.vjp(raw, f, a))(floats, action)
    raw_action_ct = np.asarray(jax.jit(lambda f, a: jax.vjp(raw, f, a)[1](jnp.ones(2))[1])(floats, action))
    assert np.isfinite(np.asarray(out)).all()
    assert np.isnan(raw_action_ct[0]).all() and np.isfinite(raw_action_ct[1]).all()  # MJX's reverse pass, as is

    finite = _next_position_sum(finite_gradient_step(env.step))
    grad = jax.jit(jax.grad(lambda a, c: finite(state, a, c).sum(), argnums=(0, 1)))
    action_grad, cuts = grad(action, jnp.zeros((), jnp.float32))
    assert float(cuts) == 1.0
    np.testing.assert_array_equal(np.asarray(action_grad)[0], 0.0)
    np.testing.assert_allclose(np.asarray(action_grad)[1], raw_action_ct[1], rtol=1e-6)
    assert abs(float(np.asarray(action_grad)[1, 0])) > 1e-4  # the ordinary env's gradient is a real one
    np.testing.assert_array_equal(jax.jit(finite)(state, action, jnp.zeros(())), out)  # the outputs are unchanged


def test_the_bridge_cuts_the_same_env_and_counts_it():
    env = TorchEnv("inverted_pendulum", num_envs=2, episode_length=1000, differentiable=True, seed=0)
    env.reset()
    env.set_physics(
        qpos=torch.tensor([CONVERGED_QPOS, ORDINARY_QPOS]), qvel=torch.tensor([CONVERGED_QVEL, ORDINARY_QVEL])
    )
    assert float(env.gradient_cuts) == 0.0
    action = torch.zeros(2, 1, requires_grad=True)
    position = env.step(action).get(("next", "observation"))[:, :2].sum()
    position.backward()
    assert torch.isfinite(action.grad).all()
    assert action.grad[0, 0] == 0.0 and abs(float(action.grad[1, 0])) > 1e-4
    assert float(env.gradient_cuts) == 1.0


@pytest.mark.parametrize("trainer", ["jax_apg", "torch_apg", "torch_shac"])
def test_every_gradient_trainer_reports_its_cuts(trainer):
    """Each gradient trainer reports ``training/gradient_cuts`` every epoch: a count of env steps (zero on a smooth
    env), never NaN."""
    reports = []
    common = dict(episode_length=20, num_envs=4, num_evals=2, num_eval_envs=4, seed=0)
    if trainer == "jax_apg":
        jax_apg.train(Drift(), policy_updates=2, horizon_length=4, progress_fn=lambda s, m: reports.append(m),
                      **common)
    elif trainer == "torch_apg":
        apg.train(Drift(), policy_updates=2, horizon_length=4, progress_fn=lambda e, m: reports.append(m), **common)
    else:
        shac.train(Drift(), policy_updates=2, horizon_length=4, progress_fn=lambda e, m: reports.append(m), **common)
    trained = [m for m in reports if "training/gradient_cuts" in m]
    assert trained and all(m["training/gradient_cuts"] == 0.0 for m in trained)
