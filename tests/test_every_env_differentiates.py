"""Every env of brax_core differentiates in reverse mode through ``TorchEnv(differentiable=True)``, with the shipped
physics, and so does a user's own MJCF env whose solver iterates.

MJX solves constraints in a ``while_loop`` when a model asks for more than one Newton iteration (hopper, walker2d,
reacher, inverted_double_pendulum, and MuJoCo's default of 100 for a user's model); the differentiable step traces
that solve as a fixed-count loop instead (``brax_core.envs.reversible``). Checked here:

* the differentiable step's forward pass is the ordinary step's, output for output, on every env whose solver
  iterates and on one that does not, and each program holds the solve it should (the ordinary one MJX's
  ``while_loop``, the differentiable one none), whichever is traced first; on states where every iteration moves
  the solution, the fixed-count solve stops where MJX's loop stops;
* on every env, the action gradient of ``f = sum over K steps of (reward + observation)`` taken by torch's backward
  equals central differences of ``f`` along random directions, and is not zero (``fast``: zero, as its dynamics
  are a step function of the action); the JAX APG's ``finite_gradient_step`` gives the bridge's gradient;
* ``inverted_pendulum``'s default reward has no action gradient; its ``reward="upright"`` has one.

Why the finite-difference tolerance holds (float32, K = 3 steps from a reset, actions in ±[0.1, 0.6], so no
actuator saturates and ``fast``'s threshold at 0 is never crossed). ``f`` is piecewise smooth: the central
difference ``(f(a + e v) - f(a - e v)) / 2e`` differs from the directional derivative by O(e²) on a smooth piece,
plus float32 rounding of about 1e-7 |f| / e, unless a contact starts or ends, or a constraint becomes active or
inactive, between ``a - e v`` and ``a + e v``: then by up to the jump in slope, which can exceed the derivative.
Measured on the CPU, at the step sizes 1e-2, 3e-3 and 1e-3 whose interval held no such event, every direction of
every env agreed to 7e-3 or better (most to 1e-3), and each had such a step size: an event spoils a step size only
if it lies within that distance of ``a``, and one within 1e-3 would spoil all three. So each direction must agree
to 2e-2 relative at one step size at least. A wrong gradient is off at every step size: a gradient cut to zero (a
non-finite cotangent), a solver iteration lost or added in the reverse pass, or a missing term shifts the
derivative itself, not the differences.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from mujoco import mjx

from brax_bridge import TorchEnv
from brax_core import envs
from brax_core.envs import PipelineEnv, State
from brax_core.envs.reversible import ENV_AXIS, reversible_physics, reversible_physics_active
from brax_core.envs.wrappers.gradients import finite_gradient_step
from brax_core.io import mjcf

N, K = 2, 3
STEP_SIZES = (1e-2, 3e-3, 1e-3)
RTOL = 2e-2
ITERATING = ["inverted_double_pendulum", "reacher", "hopper", "walker2d"]  # opt.iterations > 1
ONE_ITERATION = "inverted_pendulum"
EVERY_ENV = ["fast", "inverted_pendulum", "inverted_double_pendulum", "reacher", "halfcheetah", "hopper",
             "walker2d", "ant", "humanoid"]

# A user's own robot, as docs/guides/own-robot.md writes one: MJCF text with MuJoCo's default solver settings
# (100 Newton iterations, so MJX's solve is a while_loop), a cart whose rail ends are joint limits (constraints the
# solver works on) and a pole hinged on it.
CART_POLE_XML = """
<mujoco model="cart_pole">
  <option timestep="0.01"/>
  <worldbody>
    <body name="cart">
      <joint name="slider" type="slide" axis="1 0 0" limited="true" range="-0.2 0.2" damping="0.1"/>
      <geom type="box" size="0.05 0.03 0.03" mass="1" contype="0" conaffinity="0"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.4" size="0.02" mass="0.1" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="slider" gear="10" ctrllimited="true" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""


class LimitedCartPole(PipelineEnv):
    """Starts against its rail's right end, so the limit is active and the solver iterates from the first step."""

    default_episode_length = 100

    def __init__(self, iterations: int | None = None, **kwargs):
        sys = mjcf.loads(CART_POLE_XML)
        if iterations is not None:
            sys = sys.replace(opt=sys.opt.replace(iterations=iterations))
        super().__init__(sys, n_frames=2, **kwargs)

    def reset(self, rng: jax.Array) -> State:
        noise = jax.random.uniform(rng, (2,), jnp.float32, -0.01, 0.01)
        pipeline_state = self.pipeline_init(jnp.array([0.195, 0.1]) + noise, jnp.array([0.3, 0.0]))
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state, self._obs(pipeline_state), zero, zero)

    def step(self, state: State, action: jax.Array) -> State:
        pipeline_state = self.pipeline_step(state.pipeline_state, action)
        obs = self._obs(pipeline_state)
        reward = jnp.cos(obs[1]) - 0.1 * obs[0] ** 2
        return state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward)

    @staticmethod
    def _obs(pipeline_state) -> jax.Array:
        return jnp.concatenate([pipeline_state.qpos, pipeline_state.qvel])


_BUILT: dict[str, TorchEnv] = {}


def _env(name: str, **kwargs) -> TorchEnv:
    """One differentiable TorchEnv per env for the whole module: its forward, backward and ordinary step compile
    once and serve every test."""
    key = f"{name}{sorted(kwargs.items())}"
    if key not in _BUILT:
        env = LimitedCartPole() if name == "user" else name
        _BUILT[key] = TorchEnv(env, num_envs=N, differentiable=True, seed=0, cpu_opt_level=0, **kwargs)
    return _BUILT[key]


def _actions(env: TorchEnv, seed: int = 0) -> torch.Tensor:
    """[K, N, act] in ±[0.1, 0.6]: away from the actuators' limits at ±1 and from ``fast``'s threshold at 0."""
    generator = torch.Generator().manual_seed(seed)
    size = 0.1 + 0.5 * torch.rand(K, N, env.action_size, generator=generator)
    sign = torch.where(torch.rand(K, N, env.action_size, generator=generator) < 0.5, -1.0, 1.0)
    return size * sign


def _rollout(env: TorchEnv, actions: torch.Tensor, reward_weight: float = 1.0, obs_weight: float = 1.0):
    """``f`` (module docstring) from the env's reset with seed 1, and the per-step outputs. Actions that require a
    gradient run the differentiable step; others (no_grad) the ordinary one."""
    env.reset(seed=1)
    total, outputs = torch.zeros(()), []
    for t in range(K):
        nxt = env.step(actions[t].clone())["next"]  # a tensor of its own: JAX views it without a copy
        outputs.append({k: nxt[k].detach().clone() for k in ("observation", "final_observation", "reward")})
        total = total + reward_weight * nxt["reward"].sum() + obs_weight * nxt["observation"].sum()
    return total, outputs


def _gradient(env: TorchEnv, actions: torch.Tensor, **weights) -> torch.Tensor:
    leaf = actions.clone().requires_grad_(True)
    _rollout(env, leaf, **weights)[0].backward()
    env.detach()
    return leaf.grad


def _central_differences(env: TorchEnv, actions: torch.Tensor, direction: torch.Tensor, step: float, **weights):
    """The central difference along ``direction``, over the perturbation float32 actually applied. ``f`` is
    evaluated by the differentiable step's forward pass, the function whose gradient is checked (the test above
    shows it is the ordinary step's), so no other program compiles for it."""
    plus, minus = actions + step * direction, actions - step * direction
    rise = _rollout(env, plus.requires_grad_(True), **weights)[0].item()
    rise -= _rollout(env, minus.requires_grad_(True), **weights)[0].item()
    env.detach()
    return rise, (plus - minus).detach()


def _check_against_differences(env: TorchEnv, actions: torch.Tensor, grad: torch.Tensor, **weights) -> None:
    for seed in (10, 11):
        direction = torch.randn(actions.shape, generator=torch.Generator().manual_seed(seed))
        direction /= direction.norm()
        derivative = float((grad * direction).sum())
        assert abs(derivative) > 1e-2, derivative  # the action reaches f through the physics
        errors = []
        for step in STEP_SIZES:
            rise, applied = _central_differences(env, actions, direction, step, **weights)
            predicted = float((grad * applied).sum())  # the gradient's prediction of the same rise
            errors.append(abs(rise - predicted) / abs(predicted))
        assert min(errors) < RTOL, (seed, derivative, errors)


def _primitives(jaxpr) -> set[str]:
    """Every primitive of a jaxpr, its sub-jaxprs' included (loop and branch bodies)."""
    seen, stack = set(), [jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr]
    while stack:
        current = stack.pop()
        for eqn in current.eqns:
            seen.add(eqn.primitive.name)
            for value in eqn.params.values():
                for item in value if isinstance(value, tuple | list) else (value,):
                    if isinstance(item, jax.extend.core.ClosedJaxpr):
                        stack.append(item.jaxpr)
                    elif isinstance(item, jax.extend.core.Jaxpr):
                        stack.append(item)
    return seen


# ------------------------------------------------------------------------------------- the forward is the physics


@pytest.mark.parametrize("name", [*ITERATING, ONE_ITERATION, "user"])
def test_the_differentiable_forward_is_the_shipped_physics(name):
    env = _env(name)
    actions = _actions(env)
    _, differentiable = _rollout(env, actions.clone().requires_grad_(True))
    env.detach()
    _, ordinary = _rollout(env, actions)  # no gradient wanted: the ordinary step's program
    for t in range(K):
        for key in ("observation", "final_observation", "reward"):
            # The same operations on the same inputs; XLA may fuse a scan differently from a while_loop, so allow
            # float32 rounding. (Most of these solves converge before their budget of iterations: the next test
            # makes one where each iteration counts.)
            np.testing.assert_allclose(differentiable[t][key], ordinary[t][key], rtol=1e-5, atol=1e-5, err_msg=key)
    assert not torch.equal(ordinary[0]["observation"], ordinary[-1]["observation"])  # the physics moved

    # Each program holds its own solve: traced again now that both were traced, in either order.
    compiled = env._compiled
    state, action = env.state, jnp.zeros((N, env.action_size), jnp.float32)
    ordinary_program = _primitives(jax.make_jaxpr(compiled.step_fn)(state, action))
    differentiable_program = _primitives(compiled.diff_forward.trace(state, action).jaxpr)
    assert "while" not in differentiable_program
    assert ("while" in ordinary_program) == (name != ONE_ITERATION)


def test_the_fixed_count_solve_takes_mjxs_iterations_exactly():
    """On walker2d's contact states with a budget of 2 iterations and no tolerance, the second iteration moves the
    solution (one iteration is far off), and the fixed-count solve, batched by a named axis (brax_core's wrappers)
    or not, stops where MJX's loop stops."""
    env = _env("walker2d")
    _rollout(env, _actions(env))  # ordinary steps: the feet are on the ground
    data = env.state.pipeline_state
    sys = env.unwrapped_env.sys

    def qacc(iterations: int, reversible: bool, axis_name: str | None = ENV_AXIS) -> np.ndarray:
        model = sys.replace(opt=sys.opt.replace(iterations=iterations, tolerance=0.0))

        def one(d):
            with reversible_physics(reversible):
                return mjx.forward(model, d).qacc

        return np.asarray(jax.jit(jax.vmap(one, axis_name=axis_name))(data))

    shipped = qacc(2, reversible=False)
    scale = np.abs(shipped).max()
    assert np.abs(qacc(1, reversible=False) - shipped).max() > 1e-3 * scale  # the second iteration counts here
    for axis_name in (ENV_AXIS, None):
        np.testing.assert_allclose(qacc(2, True, axis_name), shipped, rtol=1e-5, atol=1e-5 * scale)


def _ordinary_program(env: TorchEnv) -> set[str]:
    """The primitives of ``env``'s ordinary step, traced from shapes now."""
    compiled = env._compiled
    state = jax.eval_shape(compiled.reset_fn, jax.random.PRNGKey(0))[1]
    return _primitives(jax.make_jaxpr(compiled.step_fn)(state, jnp.zeros((N, env.action_size), jnp.float32)))


def test_a_plain_and_a_differentiable_env_of_one_model_each_run_their_own_program():
    # By name: the bridge's in-process cache keeps the programs of each configuration, differentiable or not.
    differentiable = _env("hopper")
    plain = TorchEnv("hopper", num_envs=N, seed=0, cpu_opt_level=0)
    assert plain._compiled is not differentiable._compiled
    assert "while" in _ordinary_program(plain)

    # A model no program has traced yet (7 iterations): ordinary first, then differentiable, then ordinary again.
    model = LimitedCartPole(iterations=7)
    plain = TorchEnv(model, num_envs=N, seed=0, cpu_opt_level=0)
    assert "while" in _ordinary_program(plain)
    differentiable = TorchEnv(model, num_envs=N, seed=0, cpu_opt_level=0, differentiable=True)  # traced its backward
    state = jax.eval_shape(differentiable._compiled.reset_fn, jax.random.PRNGKey(0))[1]
    action = jax.ShapeDtypeStruct((N, 1), jnp.float32)
    assert "while" not in _primitives(differentiable._compiled.diff_forward.trace(state, action).jaxpr)
    assert "while" in _ordinary_program(plain) and "while" in _ordinary_program(differentiable)


# ------------------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", EVERY_ENV + ["user"])
def test_the_action_gradient_equals_central_differences(name):
    env = _env(name)
    actions = _actions(env)
    grad = _gradient(env, actions)
    assert torch.isfinite(grad).all()
    if name == "fast":
        # Its velocity grows by dt where the action is positive: a step function of the action, flat elsewhere.
        assert torch.count_nonzero(grad) == 0
        for step in STEP_SIZES:
            rise, _ = _central_differences(env, actions, torch.ones_like(actions) / actions.numel() ** 0.5, step)
            assert rise == 0.0
        flipped = _rollout(env, -actions)[0].item()
        assert flipped != _rollout(env, actions)[0].item()  # the action does matter, through the step
        return
    _check_against_differences(env, actions, grad)
    assert torch.count_nonzero(grad[0]) == grad[0].numel()  # the first actions reach every later step


def test_the_jax_apg_step_gives_the_bridges_gradient():
    """``finite_gradient_step``, which the JAX APG's unroll is differentiated through, on a solver that iterates."""
    env = _env("user")
    actions = _actions(env)
    grad = _gradient(env, actions)
    env.reset(seed=1)
    start = jax.tree.map(jnp.copy, env.state)
    step = finite_gradient_step(env.jax_env.step)

    def objective(actions: jax.Array) -> jax.Array:
        def body(state, action):
            state = step(state, action, jnp.zeros((), jnp.float32))
            return state, state.reward.sum() + state.obs.sum()

        return jax.lax.scan(body, start, actions)[1].sum()

    reference = jax.jit(jax.grad(objective))(jnp.asarray(actions.numpy()))
    np.testing.assert_allclose(grad.numpy(), np.asarray(reference), rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # the default suite checks the step the APG differentiates (above); this trains end to end
def test_the_jax_apg_trains_an_env_whose_solver_iterates():
    from brax_core.training.agents.apg import train as apg

    _, params, metrics = apg.train(
        LimitedCartPole(), episode_length=12, policy_updates=2, horizon_length=4, num_envs=2, num_eval_envs=2,
        num_evals=2, learning_rate=3e-3,
    )
    assert metrics["training/grad_norm"] > 0.0 and np.isfinite(metrics["training/grad_norm"])
    assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(params))


# ------------------------------------------------------------------------------------- inverted_pendulum's rewards


def test_inverted_pendulums_default_reward_has_no_action_gradient():
    env = _env("inverted_pendulum")
    actions = _actions(env)
    reward_grad = _gradient(env, actions, obs_weight=0.0)
    assert torch.equal(reward_grad, torch.zeros_like(reward_grad))  # 1 per step, whatever the action
    observation_grad = _gradient(env, actions, reward_weight=0.0)
    assert observation_grad.abs().sum() > 0  # the gradient does reach the physics


def test_inverted_pendulums_upright_reward_has_one_that_equals_central_differences():
    env = _env("inverted_pendulum", reward="upright")
    actions = _actions(env)
    reward_grad = _gradient(env, actions, obs_weight=0.0)
    assert torch.count_nonzero(reward_grad) == reward_grad.numel()
    _check_against_differences(env, actions, reward_grad, obs_weight=0.0)
    with pytest.raises(ValueError, match="reward must be one of 'alive', 'upright'; got 'dense'"):
        envs.get_environment("inverted_pendulum", reward="dense")


def test_the_upright_reward_is_cos_of_the_pole_angle_less_the_action_cost():
    env = envs.get_environment("inverted_pendulum", reward="upright")
    state = env.reset(jax.random.PRNGKey(0))
    action = jnp.array([0.5], jnp.float32)
    stepped = jax.jit(env.step)(state, action)
    np.testing.assert_allclose(float(stepped.reward), np.cos(float(stepped.obs[1])) - 0.01 * 0.25, rtol=1e-6)
    alive = jax.jit(functools.partial(envs.get_environment("inverted_pendulum").step))(state, action)
    assert float(alive.reward) == 1.0
    np.testing.assert_array_equal(np.asarray(alive.obs), np.asarray(stepped.obs))  # the same physics


def test_the_switch_nests_and_refuses_anything_but_a_bool():
    assert not reversible_physics_active()
    with reversible_physics():
        assert reversible_physics_active()
        with reversible_physics(False):
            assert not reversible_physics_active()
        assert reversible_physics_active()
    assert not reversible_physics_active()
    with pytest.raises(ValueError, match="enabled must be True or False, got 1"):
        with reversible_physics(1):
            pass
