"""Differentiable stepping: torch autograd through the JAX physics equals jax.grad of the same rollout.

``inverted_pendulum``'s own reward is a constant 1 per step (its gradient is zero), so the objective here is
a smooth one computed inside the jitted step by ``reward_fn`` (pole angle and cart position of the observation
each step reached, plus an action cost), plus the sum of the next observations the env returns. Both paths
(torch autograd via the bridge, and ``jax.grad`` of a ``lax.scan`` over the same wrapped env) compute exactly
this objective, so their gradients with respect to every action must agree.
"""

import gc
import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from brax_bridge import TorchEnv

N, T = 3, 10


def _shaped_reward(state, action):
    reached = state.info["final_obs"]
    return -(reached[:, 1] ** 2) - 0.1 * reached[:, 0] ** 2 - 0.01 * jnp.sum(action**2, axis=-1)


def _torch_objective(env: TorchEnv, actions: torch.Tensor) -> torch.Tensor:
    total = torch.zeros(())
    for t in range(actions.shape[0]):
        nxt = env.step(actions[t])["next"]
        total = total + nxt["reward"].sum() + 0.5 * nxt["observation"].sum()
    return total


def _jax_objective(wrapped, reward_fn, actions, state):
    def body(state, action):
        state = wrapped.step(state, action)
        reward = state.reward if reward_fn is None else reward_fn(state, action)
        return state, reward.sum() + 0.5 * state.obs.sum()

    return jax.lax.scan(body, state, actions)[1].sum()


def _compare(env: TorchEnv, reward_fn, seed: int, scale: float):
    env.reset(seed=seed)
    start = jax.tree.map(jnp.copy, env.state)
    actions = (scale * torch.randn(T, env.num_envs, env.action_size, generator=torch.Generator().manual_seed(seed)))
    actions.requires_grad_(True)
    value = _torch_objective(env, actions)
    value.backward()
    reference = jax.jit(jax.value_and_grad(_jax_objective, argnums=2), static_argnums=(0, 1), compiler_options=_FAST)
    ref_value, ref_grad = reference(
        env.jax_env, reward_fn, jnp.asarray(actions.detach().numpy()), start
    )
    assert value.item() == pytest.approx(float(ref_value), rel=1e-5)
    np.testing.assert_allclose(actions.grad.numpy(), np.asarray(ref_grad), rtol=1e-4, atol=1e-6)
    return actions.grad


_FAST = {"xla_backend_optimization_level": 0}  # compile time dominates these tiny CPU runs


@pytest.fixture(scope="module")
def pendulum():
    return TorchEnv("inverted_pendulum", num_envs=N, differentiable=True, reward_fn=_shaped_reward)


def test_gradient_through_inverted_pendulum_matches_jax_grad(pendulum):
    grad = _compare(pendulum, _shaped_reward, seed=3, scale=0.3)
    assert grad.abs().min() > 0  # every action influences the objective through the physics
    assert grad[0].abs().sum() > grad[-1].abs().sum()  # early actions act on more later states
    assert pendulum.num_compiles == 1


@pytest.mark.slow  # tests/test_memory.py counts live arrays across backward windows in the default suite
def test_memory_does_not_grow_across_iterations(pendulum):
    counts = []
    for it in range(4):
        pendulum.reset(seed=it)
        value = _torch_objective(pendulum, torch.zeros(T, N, 1, requires_grad=True))
        if it < 3:
            value.backward()
        del value  # iteration 3 drops its graph without backward: its residuals must go too
        pendulum.detach()
        gc.collect()
        counts.append(len(jax.live_arrays()))
    assert counts[1] == counts[2] == counts[3], counts


def _point_mass():
    """The smooth point mass of examples/differentiable_simulation.py (``fast`` has no gradient in the action)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                        "differentiable_simulation.py")
    spec = importlib.util.spec_from_file_location("example_differentiable_simulation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PointMass()


def test_gradient_across_auto_resets_on_a_point_mass():
    env = TorchEnv(_point_mass(), num_envs=4, episode_length=4, differentiable=True)
    grad = _compare(env, None, seed=1, scale=0.5)
    assert (grad != 0).float().mean() > 0.9  # actions move the point and so the rewards that follow


def test_without_grad_the_step_keeps_no_residuals():
    env = TorchEnv("fast", num_envs=2, differentiable=True)
    env.reset()
    with torch.no_grad():
        nxt = env.step(torch.zeros(2, 1, requires_grad=True))["next"]
    assert not nxt["observation"].requires_grad
    out = env.step(torch.zeros(2, 1, requires_grad=True))["next"]
    assert out["observation"].requires_grad and out["reward"].requires_grad
    assert not out["done"].requires_grad


def test_an_env_whose_solver_iterates_is_built_differentiable():
    # reacher's model asks MJX's constraint solver for 2 Newton iterations, which MJX runs in a while_loop JAX
    # cannot reverse; the differentiable step traces that solve as a fixed-count loop, so the env is accepted (its
    # gradients: tests/test_every_env_differentiates.py). Its backward is traced from shapes when it is built.
    env = TorchEnv("reacher", num_envs=2, differentiable=True)
    assert env.differentiable


def test_a_while_loop_of_the_users_own_step_is_refused_when_built():
    """Not MJX's solver: the step's gradient is traced, and a loop JAX cannot reverse is found there."""
    point_mass = type(_point_mass())

    class Settling(point_mass):
        def step(self, state, action):
            state = super().step(state, action)
            # a fixed point found by iterating until it settles: a while_loop over the differentiated state
            settle = lambda x: jax.lax.while_loop(lambda y: jnp.abs(y).max() > 1.0, lambda y: 0.5 * y, x)  # noqa: E731
            obs = settle(state.obs)
            return state.replace(pipeline_state=obs, obs=obs)

    with pytest.raises(ValueError, match=r"Settling's step cannot be differentiated in reverse mode: .*while_loop"):
        TorchEnv(Settling(), num_envs=2, differentiable=True)
    TorchEnv(Settling(), num_envs=2)
