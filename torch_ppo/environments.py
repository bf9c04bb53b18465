"""The environments torch_ppo trains and evaluates on: the training ``TorchEnv``, the evaluator (the JAX trainer's
compiled rollout, or the torch actor on a bridge env), both compiled side by side before anything runs."""

from __future__ import annotations

import itertools
import logging
import time
from typing import Any

import torch

from brax_bridge import TorchEnv, compile_envs
from brax_core import compile as compile_options
from brax_core import envs
from torch_ppo.arguments import TrainArguments
from torch_ppo.evaluation import JaxEvaluator, UnsupportedActor
from torch_ppo.fused_collection import FusedCollection
from torch_ppo.networks import PPOModules
from torch_training.evaluation import BridgeEvaluator

Evaluator = JaxEvaluator | BridgeEvaluator


def make_env(
    environment: Any,
    num_envs: int,
    episode_length: int | None,
    action_repeat: int,
    device: torch.device,
    seed: int,
    randomization_fn: Any,
    wrap_env_fn: Any = None,
    num_timesteps: int | None = None,
) -> Any:
    """The training ``TorchEnv`` of this process's ``num_envs`` envs (nothing compiles until its first reset); a ready
    one is checked and used as it is. A registered name stays a name, so TorchEnvs of the same configuration share
    one compiled step."""
    if isinstance(environment, TorchEnv):
        if environment.num_envs != num_envs:
            raise ValueError(
                f"the TorchEnv has num_envs={environment.num_envs}; expected num_envs={num_envs} (per process)"
            )
        if episode_length is not None and episode_length != environment.episode_length:
            raise ValueError(
                f"episode_length={episode_length} differs from the TorchEnv's episode_length="
                f"{environment.episode_length}; give the TorchEnv that episode length, or leave episode_length None"
            )
        return environment
    if isinstance(environment, str):
        envs.get_environment_class(environment)  # unknown names raise here, listing the registered ones
    elif not isinstance(environment, envs.Env):
        raise TypeError(
            f"environment must be a registered name, a brax_core Env or a brax_bridge.TorchEnv; "
            f"got {type(environment).__name__}"
        )
    return TorchEnv(
        environment,
        num_envs,
        episode_length=episode_length,
        action_repeat=action_repeat,
        device=device,
        seed=seed,
        randomization_fn=randomization_fn,
        wrap_env_fn=wrap_env_fn,
        cpu_opt_level=None if num_timesteps is None else cpu_opt_level(environment, num_timesteps),
    )


def cpu_opt_level(environment: str | envs.Env, num_timesteps: int, step_only: bool = True) -> int:
    """The LLVM level on a CPU for a run of ``num_timesteps`` env steps on this model: 0 while compiling would
    dominate the run, else 1 (``brax_core.compile.auto_level_for_run``). ``step_only``: for the training env's step,
    a physics step compiled alone; otherwise the JAX trainer's choice, which the evaluation follows. A name is built
    here only to read its model (milliseconds once its module is imported); the TorchEnv keeps the name, so envs of
    one configuration still share their compiled programs."""
    env = envs.get_environment(environment) if isinstance(environment, str) else environment
    model = getattr(getattr(env, "unwrapped", env), "mj_model", None)
    return compile_options.auto_level_for_run(num_timesteps, model, step_only=step_only)


def make_evaluator(args: TrainArguments, env: TorchEnv, modules: PPOModules, device: torch.device) -> Evaluator:
    """The evaluation of ``args`` for the training env ``env``: the JAX trainer's compiled rollout with the actor's
    weights unless ``eval_backend='torch'``, a ready ``TorchEnv`` as ``eval_env`` or an actor brax_core's networks
    cannot express asks for the bridge."""
    config = args.config
    if args.eval_env is not None:
        source, randomization = args.eval_env, None  # used as it is, never randomised
    else:
        source = args.environment.unwrapped_env if isinstance(args.environment, TorchEnv) else args.environment
        randomization = args.randomization_fn
    # The level the JAX trainer would choose for the run.
    eval_level = cpu_opt_level(env.unwrapped_env, config.run.num_timesteps, step_only=False)
    if args.eval_backend != "torch" and not isinstance(source, TorchEnv):
        try:
            return JaxEvaluator(
                env.unwrapped_env if args.eval_env is None else source,
                modules,
                num_eval_envs=config.env.num_eval_envs,
                episode_length=env.episode_length,
                action_repeat=env.action_repeat,
                deterministic=config.run.deterministic_eval,
                wrap_env_fn=args.wrap_env_fn,
                randomization_fn=randomization,
                seed=config.run.seed + 104_729,
                jax_device=env.jax_device,
                cpu_opt_level=eval_level,
            )
        except UnsupportedActor as reason:
            if args.eval_backend == "jax":
                raise ValueError(f"eval_backend='jax': the actor cannot be evaluated in JAX: {reason}") from reason
            logging.info("evaluating through the bridge: %s", reason)
    eval_env = source
    if not isinstance(source, TorchEnv):
        eval_env = TorchEnv(
            source,
            config.env.num_eval_envs,
            episode_length=env.episode_length,
            action_repeat=env.action_repeat,
            device=device,
            seed=config.run.seed + 104_729,
            randomization_fn=randomization,
            wrap_env_fn=args.wrap_env_fn,  # as the JAX trainer wraps its evaluation env
            cpu_opt_level=eval_level,
        )
    num_steps = -(-env.episode_length // env.action_repeat)
    return BridgeEvaluator(eval_env, num_steps, env.action_repeat, config.run.seed)


def compile_programs(env: TorchEnv, evaluator: Evaluator | None, fused: FusedCollection | None = None) -> None:
    """Compiles the training env's reset and step, the collection in one program (``fused``) and the evaluator's
    programs (its bridge env's reset and step, or its JAX rollout) side by side before anything runs, as the JAX
    trainer compiles its programs: on a CPU they compile in about the time of the slowest."""
    start = time.perf_counter()
    envs, programs = (env,), iter(()) if fused is None else fused.lower()
    if evaluator is not None:
        envs, programs = (*envs, *evaluator.torch_envs), itertools.chain(programs, evaluator.lower())
    # the collection's program steps the training env itself: its own step program would go unused
    compiled = compile_envs(*envs, programs=programs, resets_only=() if fused is None else (env,))
    if fused is not None:
        fused.use(compiled[:1])
    if evaluator is not None:
        evaluator.use(compiled[0 if fused is None else 1 :])
    logging.info("compiled the envs' programs and the evaluation in %.1f s", time.perf_counter() - start)
