"""The JAX side of the bridge: what ``TorchEnv`` runs, compiled once per configuration.

The traced functions (reset, step, the held step and the partial reset, and what a step hands to torch), the
bundle of their jitted forms for one configuration (``Programs``; its ``SystemPrograms`` are the same programs
taking ``set_system``'s fields as an argument, see ``brax_bridge.system``), the XLA options they compile with,
their lowering (through ``brax_core.program_cache`` where the configuration can be described) and the module-level
cache that lets every ``TorchEnv`` of a configuration share one bundle (``programs_for``).
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
from brax_bridge import system as _system
from brax_bridge.wrapper_checks import check_wrapped
from brax_core import compile as compile_options
from brax_core import envs as _envs
from brax_core import program_cache as _program_cache
from brax_core.envs.base import Env, PipelineEnv, State
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


def check_reverse_mode(
    compiled: Programs, key: jax.Array, num_envs: int, action_size: int, env: Any, device: jax.Device
) -> None:
    """``differentiable=True`` needs a step JAX can differentiate in reverse mode. MJX's constraint solver is traced
    for it as a loop JAX can reverse (``brax_core.envs.reversible``), whatever the model's solver iterations; a
    step that still holds a loop JAX cannot reverse (a ``while_loop`` of a user's own step over the state or the
    action) is found here, when its backward is traced from shapes (nothing compiles), and refused now rather than
    at the first ``backward``. The traces are those of the jitted forward and backward, laid out as the real calls'
    are (``lower``), so those calls reuse them instead of tracing the physics again."""
    on_device = SingleDeviceSharding(device)

    def abstract(x: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device, weak_type=x.weak_type)

    state = jax.tree.map(abstract, compiled.reset.trace(abstract(key)).out_info[1])
    action = jax.ShapeDtypeStruct((num_envs, action_size), jnp.float32, sharding=on_device)
    try:
        new_state, out, vjp_fn = jax.tree.map(abstract, compiled.diff_forward.trace(state, action).out_info)
        cuts = jax.ShapeDtypeStruct((), jnp.float32, sharding=on_device)
        compiled.diff_backward.trace(vjp_fn, _diff.float_part(new_state), _diff.float_part(out), cuts)
    except ValueError as err:
        if "Reverse-mode differentiation does not work" not in str(err):
            raise
        name = env if isinstance(env, str) else type(compiled.base).__name__
        raise ValueError(
            f"differentiable=True: {name}'s step cannot be differentiated in reverse mode: it runs a loop JAX cannot "
            "reverse (a jax.lax.while_loop, or a fori_loop with traced bounds, over the state or the action). "
            "Write that loop as a jax.lax.scan of a fixed length, or step the env without differentiable=True"
        ) from None


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


def _with_system(
    wrapper: _system.SystemWrapper,
    randomized: tuple[Any, Any] | None,
    num_envs: int,
    fn: Callable[..., Any],
    *args: Any,
) -> Any:
    """``fn(*args[:-1])`` traced with ``args[-1]``, the system fields, applied inside ``wrapper`` (with what derives
    from them, computed once here: ``system.with_derived``)."""
    *given, fields = args
    fields = _system.with_derived(fields, wrapper.env.sys, randomized, num_envs)
    with _system.applying(wrapper, fields):
        return fn(*given)


@dataclasses.dataclass
class SystemPrograms:
    """The programs of ``Programs`` with one more argument, last: the system fields (``brax_bridge.system``). jit
    traces each once per layout of the fields; new values of a layout run the same compiled program."""

    wrapper: _system.SystemWrapper
    reset: Any
    step: Any
    held_step: Any
    partial_reset: Any
    diff_forward: Any
    diff_backward: Any  # (vjp_fn, ct_state, ct_out, cuts, shared field names)


@dataclasses.dataclass
class Programs:
    """The jitted functions of one configuration, shared by every TorchEnv built with it.

    ``reset`` and ``step`` are replaced when first lowered (``lower``) by the programs kept on disk by
    ``brax_core.program_cache`` where the configuration can be described, so that a later run of it skips tracing.
    ``system``: the same programs taking ``set_system``'s fields (None for an env that takes none);
    ``randomized``: what ``randomization_fn`` returned, ``(batched_sys, in_axes)``, or None.
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
    system: SystemPrograms | None = None
    randomized: tuple[Any, Any] | None = None


# Configuration (the key ``programs_for`` makes) -> its compiled programs, shared by every TorchEnv of it in this
# process.
_COMPILED: dict[tuple, Programs] = {}
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


def compile_programs(
    env: Env,
    base: Env,
    num_envs: int,
    reward_fn: RewardFn | None,
    donate: bool,
    device: jax.Device,
    cpu_opt_level: int | None,
    system_wrapper: _system.SystemWrapper | None = None,
    randomized: tuple[Any, Any] | None = None,
) -> Programs:
    """The jitted programs of a wrapped env (traced at their first call or lowering); ``system_wrapper``, the
    ``SystemWrapper`` inside ``env``'s wrappers, adds ``SystemPrograms``; ``randomized``: what the env's
    ``randomization_fn`` returned, ``(batched_sys, in_axes)``, or None."""
    step = functools.partial(_step, env, reward_fn)
    reset = functools.partial(_reset, env, num_envs)
    held_step = functools.partial(_held_step, env, reward_fn)
    partial_reset = functools.partial(_partial_reset, env, num_envs)
    jit = functools.partial(jax.jit, compiler_options=compiler_options(device, cpu_opt_level))
    step_jit = functools.partial(jit, donate_argnums=(0,) if donate else ())
    reset_jit = functools.partial(jax.jit, compiler_options=reset_compiler_options(device))
    partial_reset_jit = functools.partial(reset_jit, donate_argnums=(1,) if donate else ())
    system = None
    if system_wrapper is not None:

        def applied(fn: Callable[..., Any]) -> Callable[..., Any]:
            return functools.partial(_with_system, system_wrapper, randomized, num_envs, fn)

        system = SystemPrograms(
            wrapper=system_wrapper,
            reset=reset_jit(applied(reset)),
            step=step_jit(applied(step)),
            held_step=step_jit(applied(held_step)),
            partial_reset=partial_reset_jit(applied(partial_reset)),
            diff_forward=jit(functools.partial(_diff.forward_with_system, applied(step))),
            diff_backward=jit(_diff.backward_with_system, static_argnames="shared"),
        )
    return Programs(
        env=env,
        base=base,
        reset=reset_jit(reset),
        step=step_jit(step),
        held_step=step_jit(held_step),
        partial_reset=partial_reset_jit(partial_reset),
        diff_forward=jit(functools.partial(_diff.forward, step)),
        diff_backward=jit(_diff.backward),
        reset_fn=reset,
        step_fn=step,
        reset_jit=reset_jit,
        step_jit=step_jit,
        reward_fn=reward_fn,
        system=system,
        randomized=randomized,
    )


def programs_for(
    env: str | Env,
    base: Env | None,
    env_kwargs: dict[str, Any],
    *,
    num_envs: int,
    episode_length: int,
    action_repeat: int,
    device: jax.Device,
    cpu_opt_level: int,
    differentiable: bool,
    seed: int,
    randomization_fn: Callable[..., Any] | None,
    full_reset: bool,
    reward_fn: RewardFn | None,
    wrap_env_fn: Callable[..., Env] | None,
) -> Programs:
    """The compiled programs of a ``TorchEnv``'s configuration (its arguments, checked): shared through the
    in-process cache when the env is given by name, without a randomisation function, and its kwargs, reward_fn
    and wrap_env_fn are hashable. ``base``: the env object given (None for a name, built here)."""
    key = None
    kwargs_key = tuple(sorted(env_kwargs.items()))
    if isinstance(env, str) and randomization_fn is None and _hashable((kwargs_key, reward_fn, wrap_env_fn)):
        setting = compile_options.cpu_opt_level_setting()
        # What decides the step's CPU level: BRAX_CORE_CPU_OPT_LEVEL when set, else cpu_opt_level (so that envs
        # differing only in an overridden cpu_opt_level share their programs).
        level_key = cpu_opt_level if setting == "auto" else setting
        key = (env, kwargs_key, num_envs, episode_length, device, level_key, action_repeat, full_reset, reward_fn,
               wrap_env_fn, differentiable)
        if key in _COMPILED:
            return _COMPILED[key]
    if base is None:
        base = _envs.get_environment(env, **env_kwargs)
    rand, randomized = None, []
    if randomization_fn is not None:
        rng = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), 1), num_envs)

        def rand(sys: Any) -> Any:
            result = randomization_fn(sys, rng=rng)
            randomized.append(result)  # kept for TorchEnv.system: the fields it batched, per env
            return result

    # set_system's fields reach the physics through a wrapper innermost in brax_core's training wrappers; a custom
    # wrap_env_fn gets the env itself, as it always has.
    system_wrapper = None
    if wrap_env_fn is None and isinstance(base, PipelineEnv):
        system_wrapper = _system.SystemWrapper(base)
    if wrap_env_fn is None:
        wrapped = _training.wrap(system_wrapper or base, episode_length, action_repeat, rand, full_reset)
    else:
        wrapped = wrap_env_fn(base, episode_length=episode_length, action_repeat=action_repeat, randomization_fn=rand)
        check_wrapped(wrapped, num_envs)
    # Differentiable mode keeps state buffers alive as VJP residuals, so they must never be donated.
    compiled = compile_programs(
        wrapped, base, num_envs, reward_fn, not differentiable, device, cpu_opt_level, system_wrapper,
        randomized[-1] if randomized else None,
    )
    compiled.keeps_observations = wrap_env_fn is None
    if key is not None:
        _COMPILED[key] = compiled
    return compiled


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@jax.jit
def copy_tree(tree: Any) -> Any:
    """``tree`` with every leaf in a fresh buffer."""
    # Outputs of a jitted function never alias its (undonated) inputs: every leaf lands in a fresh buffer.
    return jax.tree.map(jnp.copy, tree)


@jax.jit
def zeros_like_tree(tree: Any) -> Any:
    """Zeros of ``tree``'s structure, shapes and dtypes."""
    # One program for the whole tree: leaf by leaf, each zeros_like of a new shape compiles a program of its own.
    return jax.tree.map(jnp.zeros_like, tree)


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


def lower(
    compiled: Programs,
    key: jax.Array,
    num_envs: int,
    action_size: int,
    device: jax.Device,
    differentiable: bool,
    system: _system.SystemArgs | None = None,
    with_step: bool = True,
) -> Iterator[jax.stages.Lowered]:
    """Traces and lowers reset, then step, for abstract arguments laid out as the real calls' are (committed to
    ``device``, the env's), so that those calls find the compiled programs in jit's cache; yields each when
    lowered, so that reset can compile while step is traced. With ``system`` (the fields ``set_system`` set), the
    ``SystemPrograms`` for them. ``with_step=False``: reset only (the step compiles at its first call, if any)."""
    on_device = SingleDeviceSharding(device)

    def abstract(x: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device, weak_type=x.weak_type)

    key = abstract(key)
    if system is not None:
        yield from _lower_system(compiled, key, system, num_envs, action_size, differentiable, abstract, with_step)
        return
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
    if with_step:
        step = compiled.diff_forward if differentiable else compiled.step
        yield step.trace(state, action).lower()


def _lower_system(
    compiled: Programs,
    key: jax.ShapeDtypeStruct,
    system: Any,
    num_envs: int,
    action_size: int,
    differentiable: bool,
    abstract: Callable[[Any], jax.ShapeDtypeStruct],
    with_step: bool,
) -> Iterator[jax.stages.Lowered]:
    """``lower`` for the ``SystemPrograms`` (never kept on disk: the fields' layouts vary)."""
    programs = compiled.system
    system = jax.tree.map(abstract, system)
    reset = programs.reset.trace(key, system)
    yield reset.lower()
    if compiled.keeps_observations:
        compiled.base.remember_observation_size(reset.out_info[2])
    state = jax.tree.map(abstract, reset.out_info[1])
    if with_step:
        action = jax.ShapeDtypeStruct((num_envs, action_size), jnp.float32, sharding=key.sharding)
        step = programs.diff_forward if differentiable else programs.step
        yield step.trace(state, action, system).lower()
