"""The JAX PPO's compiled programs: the envs' reset, the training call and the evaluation, each on the device mesh.

The envs are data-parallel over a one-axis device mesh (``shard_map``): every device steps its share of the envs,
gradients and the observation normaliser are averaged across devices, and the parameters are replicated. (The env
code's scans start from unvarying constants, so ``shard_map`` runs with ``check_vma=False``; every replicated output
is the result of a cross-device mean or sum, and a two-device test checks that the devices' copies agree.) One
compiled call runs a whole epoch (or, with ``log_training_metrics``, one metrics interval) of training steps.

A later run of the same configuration lowers the programs from disk instead of tracing them
(``brax_core.program_cache``), and they compile side by side.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from brax_core import compile as compile_options
from brax_core import program_cache
from brax_core.envs.base import Env
from brax_core.training import acting, types
from brax_core.training.agents.ppo.arguments import Arguments
from brax_core.training.agents.ppo.environments import make_eval_env, wrap_for
from brax_core.training.agents.ppo.training_step import AXIS, TrainingState


def compiler_options(
    devices: list[jax.Device], env_steps_to_run: int, environment: Any = None
) -> dict[str, Any] | None:
    """Short CPU runs are dominated by compiling, so they compile at LLVM level 0, longer ones at level 1; "short"
    depends on whether the environment's model has contacts (``compile.auto_level_for_run``;
    ``BRAX_CORE_CPU_OPT_LEVEL`` overrides)."""
    model = getattr(getattr(environment, "unwrapped", environment), "mj_model", None)
    auto_level = compile_options.auto_level_for_run(env_steps_to_run, model)
    return compile_options.compiler_options(devices[0].platform, auto_level)


def run_programs(args: Arguments) -> program_cache.Programs:
    """The run's reset, training and evaluation programs through ``brax_core.program_cache``: a later run of the same
    configuration lowers them from disk instead of tracing them (MJX under ``vmap``: seconds of Python per program).

    The programs are functions of ``train``'s arguments (environment, hyperparameters, network factory, wrappers,
    devices, resume point) and of the code of the packages the cache key covers, so those arguments make up their
    description; a run with user code among them (a user's env class, randomisation or wrapper function, network
    factory) or over several processes traces as usual.
    """
    platform = args.devices[0].platform
    if program_cache.folder() is None or jax.process_count() > 1:
        return program_cache.Programs(None, platform)
    try:
        description = dict(
            owner="brax_core.training.agents.ppo.train",
            config=program_cache.describe(program_cache.run_config(args.config, args.randomization_fn is not None)),
            environment=program_cache.describe(args.environment),
            eval_env=program_cache.describe(args.eval_env),
            wrap_env=program_cache.describe(args.wrap_env),
            randomization_fn=program_cache.describe(args.randomization_fn),
            network_factory=program_cache.describe(args.network_factory),
            devices=program_cache.describe(args.devices),
            evaluate=args.evaluate,
            vision=args.vision,
            augment_pixels=args.augment_pixels,
            restore_value_fn=args.restore_value_fn,
            restore_params=args.restore_params is not None,
            env_steps_restored=args.env_steps_restored,
        )
    except TypeError as reason:
        logging.info("programs traced each run: %s", reason)
        description = None
    return program_cache.Programs(description, platform)


def compile_in_parallel(jobs: list[tuple[Any, tuple[Any, ...]]]) -> list[Any]:
    """Lowers each ``(jitted_fn, args)`` in turn on this thread, compiling each on a thread pool as soon as it is
    lowered (so the first ones compile while the next ones are traced)."""
    t = time.time()
    compiled = compile_options.compile_side_by_side(fn.lower(*args) for fn, args in jobs)
    logging.info("traced, lowered and compiled %d functions in %.1f s", len(jobs), time.time() - t)
    return compiled


def sharded(abstract_env_state: Any, mesh: Mesh) -> Any:
    """The abstract env state laid out over the devices as the training call takes it."""
    sharded = NamedSharding(mesh, P(AXIS))
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharded), abstract_env_state)


def make_training_env(
    args: Arguments,
    remaining: int,
    key_randomize: jax.Array,
    key_env: jax.Array,
    mesh: Mesh,
    programs: program_cache.Programs,
) -> tuple[Env | None, Any, Any]:
    """One device's training envs, their jitted reset and its abstract output (``None``s with nothing to train)."""
    if remaining <= 0:
        return None, None, None
    local_envs = args.config.env.num_envs // len(args.devices)
    env = wrap_for(args.environment, local_envs, key_randomize, **args.env_options)
    reset_options = compile_options.reset_compiler_options(args.devices[0].platform)
    reset_jit = programs.jit("reset", functools.partial(jax.jit, compiler_options=reset_options))
    reset_fn = make_reset_fn(env, mesh, local_envs, reset_jit)
    return env, reset_fn, reset_fn.eval_shape(key_env)


def make_reset_fn(env: Env, mesh: Mesh, local_envs: int, jit: Callable[..., Any]) -> Any:
    """The jitted reset of every device's ``local_envs`` envs, each device from its own keys."""

    def per_device_reset(key: jax.Array):
        key = jax.random.fold_in(key, jax.lax.axis_index(AXIS))
        return env.reset(jax.random.split(key, local_envs))

    return jit(jax.shard_map(per_device_reset, mesh=mesh, in_specs=P(), out_specs=P(AXIS), check_vma=False))


def make_training_fn(training_step: Callable[..., Any], num_steps: int, mesh: Mesh, jit: Callable[..., Any]) -> Any:
    """The compiled call of ``num_steps`` training steps on every device:
    ``training_fn(ts, env_state, key_run) -> (ts, env_state, metrics)``, metrics reduced over the devices."""

    def run_training_steps(ts: TrainingState, env_state: Any, key_run: jax.Array):
        device_index = jax.lax.axis_index(AXIS)

        def one(carry, _):
            ts, env_state = carry
            # The step's key follows its count, not the call it runs in: resumed runs repeat unbroken ones.
            key = jax.random.fold_in(jax.random.fold_in(key_run, ts.training_step), device_index)
            ts, env_state, metrics = training_step(ts, env_state, key)
            return (ts, env_state), metrics

        (ts, env_state), metrics = jax.lax.scan(one, (ts, env_state), (), length=num_steps)
        summed = {k: jax.lax.psum(jnp.sum(v), AXIS) for k, v in metrics.items() if k.startswith("episode")}
        averaged = {k: jax.lax.pmean(jnp.mean(v), AXIS) for k, v in metrics.items() if not k.startswith("episode")}
        return ts, env_state, {**averaged, **summed}

    fn = jax.shard_map(
        run_training_steps,
        mesh=mesh,
        in_specs=(P(), P(AXIS), P()),
        out_specs=(P(), P(AXIS), P()),
        check_vma=False,
    )
    return jit(fn, donate_argnums=(0, 1))


def make_evaluation(
    args: Arguments,
    make_policy: Callable[..., types.Policy],
    key_randomize: jax.Array,
    mesh: Mesh,
    jit: Callable[..., Any],
) -> tuple[Env | None, Any]:
    """The evaluation envs of one device and their jitted evaluation run (``None``s when nothing is evaluated)."""
    if not args.evaluate:
        return None, None
    config = args.config
    local_eval_envs = config.env.num_eval_envs // len(args.devices)
    if args.eval_env is None:
        eval_key = jax.random.fold_in(key_randomize, 1)
        eval_env = make_eval_env(args.environment, local_eval_envs, eval_key, **args.env_options)
    else:
        eval_env = make_eval_env(args.eval_env, local_eval_envs, None, **args.env_options)
    eval_steps = -(-config.env.episode_length // config.env.action_repeat)
    eval_policy = functools.partial(make_policy, deterministic=config.run.deterministic_eval)
    return eval_env, make_eval_run(eval_env, eval_policy, local_eval_envs, eval_steps, mesh, jit)


def make_eval_run(
    eval_env: Env,
    eval_policy: Callable[[Any], types.Policy],
    local_eval_envs: int,
    eval_steps: int,
    mesh: Mesh,
    jit: Callable[..., Any],
) -> Any:
    """The jitted evaluation of ``local_eval_envs`` episodes per device: ``(policy_params, key) -> eval metrics``
    (means and stds over every device's episodes)."""

    def per_device_eval(policy_params: Any, key: jax.Array) -> dict[str, jax.Array]:
        key = jax.random.fold_in(key, jax.lax.axis_index(AXIS))
        state = acting.evaluation_rollout(eval_env, eval_policy(policy_params), key, local_eval_envs, eval_steps)
        return acting.summarize_eval(state.info["eval_metrics"], axis_name=AXIS)

    return jit(jax.shard_map(per_device_eval, mesh=mesh, in_specs=(P(), P()), out_specs=P(), check_vma=False))
