"""The JAX side of the bridge: what ``TorchEnv`` runs, compiled once per configuration.

The traced functions (reset, step, the held step and the partial reset, and what a step hands to torch), the
bundle of their jitted forms for one configuration (``_Compiled``), the XLA options they compile with, their
lowering (through ``brax_core.program_cache`` where the configuration can be described) and the module-level cache
that lets every ``TorchEnv`` of a configuration share one compiled bundle.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import SingleDeviceSharding

from brax_bridge import differentiable as _diff
from brax_core import compile as compile_options
from brax_core import program_cache as _program_cache
from brax_core.envs.base import Env, State
from brax_core.envs.wrappers import training as _training

RewardFn = Callable[[State, jax.Array], jax.Array]


@struct.dataclass
class StepOutputs:
    """What crosses to torch after a step (fresh buffers, never part of the carried state)."""

    obs: Any
    final_obs: Any
    reward: jax.Array  # float32 [N, 1]
    done: jax.Array  # bool [N, 1]
    terminated: jax.Array
    truncated: jax.Array


def _outputs(state: State, reward: jax.Array) -> StepOutputs:
    done = state.done > 0
    truncated = state.info["truncation"] > 0
    return StepOutputs(
        obs=state.obs,
        final_obs=state.info["final_obs"],
        reward=reward.astype(jnp.float32)[:, None],
        done=done[:, None],
        terminated=(done & ~truncated)[:, None],
        truncated=truncated[:, None],
    )


def _step(env: Env, reward_fn: RewardFn | None, state: State, action: jax.Array) -> tuple[State, StepOutputs]:
    state = env.step(state, action)
    reward = state.reward if reward_fn is None else reward_fn(state, action)
    return state, _outputs(state, reward)


def _held_step(
    env: Env, reward_fn: RewardFn | None, state: State, action: jax.Array, hold: jax.Array
) -> tuple[State, StepOutputs]:
    """``_step`` for the envs where ``hold`` is False; the others keep their state and report nothing happened."""
    new_state, out = _step(env, reward_fn, state, action)
    pick = functools.partial(_training.select_envs, hold)  # (kept, stepped): the held envs keep theirs
    new_state = jax.tree.map(pick, state, new_state)
    column = hold[:, None]
    out = StepOutputs(
        obs=new_state.obs,
        final_obs=jax.tree.map(pick, state.obs, out.final_obs),
        reward=jnp.where(column, 0.0, out.reward),
        done=out.done & ~column,
        terminated=out.terminated & ~column,
        truncated=out.truncated & ~column,
    )
    return new_state, out


def _check_reverse_mode(compiled: _Compiled, key: jax.Array, num_envs: int, action_size: int, env: Any) -> None:
    """``differentiable=True`` needs a step JAX can differentiate in reverse mode. MJX's constraint solver runs a
    ``while_loop`` when the model asks for more than one Newton iteration, and JAX cannot reverse that: found here
    from shapes alone (nothing compiles), so the env is refused now rather than at the first ``backward``."""
    state = jax.eval_shape(compiled.reset_fn, key)[1]
    sys = getattr(getattr(compiled.base, "unwrapped", compiled.base), "sys", None)
    iterations = getattr(getattr(sys, "opt", None), "iterations", None)
    name = env if isinstance(env, str) else type(compiled.base).__name__
    refusal = ValueError(
        f"differentiable=True: {name}'s step cannot be differentiated in reverse mode: its physics runs a "
        f"while_loop (MJX's constraint solver with iterations={iterations}; JAX reverses only a solver with one "
        "Newton iteration, as inverted_pendulum, halfcheetah, ant and humanoid have). Give TorchEnv an env whose "
        "model solves in one iteration (env.sys = env.sys.replace(opt=env.sys.opt.replace(iterations=1)), a "
        "less exact solve), or step it without differentiable=True"
    )
    # MJX's own rule (mujoco/mjx/_src/forward.py, solver.py): with constraint rows, the solver loops when the model
    # asks for more than one iteration. Known from the reset's shapes without tracing the step's gradient, which
    # takes many seconds for a model with contacts.
    constraint_rows = getattr(getattr(getattr(state, "pipeline_state", None), "_impl", None), "efc_J", None)
    if constraint_rows is not None and constraint_rows.size > 0 and isinstance(iterations, int) and iterations > 1:
        raise refusal

    # Any other env: its step's gradient traced, which meets every while_loop a reverse pass cannot take.
    action = jax.ShapeDtypeStruct((num_envs, action_size), jnp.float32)

    def forward_and_back(state: State, action: jax.Array) -> Any:
        new_state, out, vjp_fn = _diff.forward(compiled.step_fn, state, action)
        return vjp_fn((_diff.float_part(new_state), _diff.float_part(out)))

    try:
        jax.eval_shape(forward_and_back, state, action)
    except ValueError as err:
        if "Reverse-mode differentiation does not work" not in str(err):
            raise
        raise refusal from None


def _reset(env: Env, num_envs: int, key: jax.Array) -> tuple[jax.Array, State, Any]:
    key, sub = jax.random.split(key)
    state = env.reset(jax.random.split(sub, num_envs))
    return key, state, state.obs


def _partial_reset(
    env: Env, num_envs: int, key: jax.Array, state: State, mask: jax.Array
) -> tuple[jax.Array, State, Any]:
    """``state`` with a new episode wherever ``mask`` is True, except in envs whose episode ended on the last step:
    the auto-reset already started their new episode (``done`` still says so until the next step)."""
    key, sub = jax.random.split(key)
    start = mask & ~(state.done > 0)

    def restart(carried: State) -> State:
        fresh = env.reset(jax.random.split(sub, num_envs))
        return jax.tree.map(functools.partial(_training.select_envs, start), fresh, carried)

    # TorchRL asks for a reset after every episode end, mostly of envs the auto-reset already restarted: the cond
    # skips the batch's reset then, as brax_core's auto-reset skips it on steps where nothing ended.
    state = jax.lax.cond(jnp.any(start), restart, lambda carried: carried, state)
    return key, state, state.obs


@dataclasses.dataclass
class _Compiled:
    """The jitted functions of one configuration, shared by every TorchEnv built with it.

    ``reset`` and ``step`` are replaced when first lowered (``_lower``) by the programs kept on disk by
    ``brax_core.program_cache`` where the configuration can be described, so that a later run of it skips tracing.
    """

    env: Env
    base: Env
    reset: Any
    step: Any
    held_step: Any
    partial_reset: Any  # jitted at its first call: most envs never reset part of the batch
    diff_forward: Any
    diff_backward: Any
    reset_fn: Callable[..., Any]
    step_fn: Callable[..., Any]
    reset_jit: Callable[[Callable[..., Any]], Any]
    step_jit: Callable[[Callable[..., Any]], Any]
    reward_fn: RewardFn | None = None
    lowered: bool = False
    keeps_observations: bool = False  # brax_core's wrappers: the batched reset shows the env's observation size


# Configuration (the key ``TorchEnv._build`` makes) -> its compiled programs, shared by every TorchEnv of it in
# this process.
_COMPILED: dict[tuple, _Compiled] = {}
# The packages whose code the bridge's reset and step run: part of their program-cache key.
_PACKAGES = ("brax_core", "brax_bridge")


def compiler_options(device: jax.Device, cpu_opt_level: int | None = None) -> dict[str, Any] | None:
    """XLA options of the bridge's jitted step on ``device``: on CPU, LLVM level ``cpu_opt_level`` (None: 1).

    Same knob as brax_core's PPO (see ``brax_core.compile``; ``BRAX_CORE_CPU_OPT_LEVEL``, when set, overrides it); a
    baseline compiled with these differs from the bridge only in what the bridge adds.
    """
    return compile_options.compiler_options(device.platform, auto_level=1 if cpu_opt_level is None else cpu_opt_level)


def reset_compiler_options(device: jax.Device) -> dict[str, Any] | None:
    """XLA options of the bridge's jitted reset on ``device``: brax_core's for every env reset (level 0 on CPU)."""
    return compile_options.reset_compiler_options(device.platform)


def _compile(
    env: Env,
    base: Env,
    num_envs: int,
    reward_fn: RewardFn | None,
    donate: bool,
    device: jax.Device,
    cpu_opt_level: int | None,
) -> _Compiled:
    step = functools.partial(_step, env, reward_fn)
    reset = functools.partial(_reset, env, num_envs)
    jit = functools.partial(jax.jit, compiler_options=compiler_options(device, cpu_opt_level))
    step_jit = functools.partial(jit, donate_argnums=(0,) if donate else ())
    reset_jit = functools.partial(jax.jit, compiler_options=reset_compiler_options(device))
    partial_reset = reset_jit(functools.partial(_partial_reset, env, num_envs), donate_argnums=(1,) if donate else ())
    return _Compiled(
        env=env,
        base=base,
        reset=reset_jit(reset),
        step=step_jit(step),
        held_step=step_jit(functools.partial(_held_step, env, reward_fn)),
        partial_reset=partial_reset,
        diff_forward=jit(functools.partial(_diff.forward, step)),
        diff_backward=jit(_diff.backward),
        reset_fn=reset,
        step_fn=step,
        reset_jit=reset_jit,
        step_jit=step_jit,
        reward_fn=reward_fn,
    )


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@jax.jit
def _copy_tree(tree: Any) -> Any:
    # Outputs of a jitted function never alias its (undonated) inputs: every leaf lands in a fresh buffer.
    return jax.tree.map(jnp.copy, tree)


def _describe(wrapped: Env, reward_fn: RewardFn | None, num_envs: int, differentiable: bool) -> dict[str, Any] | None:
    """What reset and step compute beyond their arguments, for ``brax_core.program_cache``, taken just before
    they are traced; None (trace them each run) when the program cache is off, in differentiable mode (its step
    returns a VJP closure), or when user code is involved (a registered user env, a reward or randomisation
    function, a custom wrapper)."""
    if differentiable or _program_cache.folder() is None:
        return None
    try:
        return dict(
            owner="brax_bridge.TorchEnv",
            env=_program_cache.describe(wrapped),
            reward_fn=_program_cache.describe(reward_fn),
            num_envs=num_envs,
        )
    except TypeError:
        return None


def _lower(
    compiled: _Compiled, key: jax.Array, num_envs: int, action_size: int, device: jax.Device, differentiable: bool
) -> Iterator[jax.stages.Lowered]:
    """Traces and lowers reset, then step, for abstract arguments laid out as the real calls' are (committed to
    ``device``, the env's), so that those calls find the compiled programs in jit's cache; yields each when
    lowered, so that reset can compile while step is traced."""
    on_device = SingleDeviceSharding(device)

    def abstract(x: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device, weak_type=x.weak_type)

    key = abstract(key)
    description = None if compiled.lowered else _describe(compiled.env, compiled.reward_fn, num_envs, differentiable)
    if description is not None:
        platform = device.platform
        describe = lambda program: {**description, "program": program}  # noqa: E731
        compiled.reset, _ = _program_cache.cached(
            compiled.reset_fn, compiled.reset_jit, (key,), describe("reset"), platform, _PACKAGES
        )
    reset = compiled.reset.trace(key)
    yield reset.lower()
    if compiled.keeps_observations:
        compiled.base.remember_observation_size(reset.out_info[2])
    state = jax.tree.map(abstract, reset.out_info[1])
    action = jax.ShapeDtypeStruct((num_envs, action_size), jnp.float32, sharding=on_device)
    if description is not None:
        compiled.step, _ = _program_cache.cached(
            compiled.step_fn, compiled.step_jit, (state, action), describe("step"), platform, _PACKAGES
        )
    compiled.lowered = True
    step = compiled.diff_forward if differentiable else compiled.step
    yield step.trace(state, action).lower()
