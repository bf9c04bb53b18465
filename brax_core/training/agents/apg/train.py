"""Analytic policy gradient training (``brax.training.agents.apg.train`` counterpart).

Same signature, argument names, defaults and flow as Brax 0.14.2's ``train`` (``arguments.TRAIN_DOC`` says what
each argument means): the policy is improved by the gradient of the unrolled return taken through the physics
itself, the environment state carrying on from one update to the next.

Reading order: ``train`` checks every argument (``arguments.validated``), builds the envs, networks and optimiser,
compiles two programs (the first env state, and an epoch of policy updates), then alternates epochs and
evaluations. The algorithm is in the pure functions below it: ``make_loss`` (the unroll whose gradient is the
update), ``clip_by_global_norm``, ``make_optimizer`` and ``make_training_epoch``.

Where this differs from Brax (the same on one device): the envs are data-parallel over a device mesh
(``shard_map``) with ``num_envs`` the total over all devices, where Brax's ``pmap`` runs ``num_envs`` on each.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from brax_core import compile as compile_options
from brax_core import devices, program_cache
from brax_core.devices import training_devices
from brax_core.envs.base import Env, State
from brax_core.envs.wrappers.gradients import finite_gradient_step
from brax_core.training import acting, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.apg import arguments, checkpoint
from brax_core.training.agents.apg import networks as apg_networks
from brax_core.training.agents.apg.config import APGConfig
from brax_core.training.agents.ppo import programs as ppo_programs
from brax_core.training.agents.ppo.environments import make_eval_env, wrap_for
from brax_core.training.checkpoint import restore_checked, restore_env_state
from brax_core.training.run.driver import RunDriver, ignore
from brax_core.training.run.schedule import plan_updates

__all__ = [
    "APGBackend", "TrainingState", "clip_by_global_norm", "make_loss", "make_optimizer", "make_training_epoch",
    "train", "train_from_config",
]

AXIS = "i"  # the device mesh's one axis: the training envs are split over it


@flax.struct.dataclass
class TrainingState:
    """Contains training state for the learner (Brax's fields); replicated on every device."""

    optimizer_state: optax.OptState
    normalizer_params: running_statistics.RunningStatisticsState
    policy_params: types.Params


class _Keys(NamedTuple):
    """The run's random keys, split from ``seed`` as Brax splits them, so one seed starts the same networks."""

    policy: jax.Array
    randomize: jax.Array
    run: jax.Array
    eval: jax.Array


def _keys(seed: int) -> _Keys:
    global_key, local_key = jax.random.split(jax.random.PRNGKey(seed))
    randomize, policy = jax.random.split(global_key, 2)
    local_key = jax.random.fold_in(local_key, jax.process_index())
    run, eval_key = jax.random.split(local_key)
    return _Keys(policy=policy, randomize=randomize, run=run, eval=eval_key)


def train(
    environment: Env | str,
    episode_length: int,
    policy_updates: int,
    wrap_env: bool = True,
    wrap_env_fn: Callable[..., Env] | None = None,
    horizon_length: int = 32,
    num_envs: int = 1,
    num_evals: int = 1,
    action_repeat: int = 1,
    max_devices_per_host: int | None = None,
    num_eval_envs: int = 128,
    learning_rate: float = 1e-4,
    adam_b: tuple[float, float] = (0.7, 0.95),
    use_schedule: bool = True,
    use_float64: bool = False,
    schedule_decay: float = 0.997,
    seed: int = 0,
    max_gradient_norm: float = 1e9,
    normalize_observations: bool = False,
    deterministic_eval: bool = False,
    network_factory: Callable[..., apg_networks.APGNetworks] = apg_networks.make_apg_networks,
    progress_fn: Callable[[int, Mapping[str, Any]], None] = ignore,
    eval_env: Env | None = None,
    randomization_fn: Callable[..., Any] | None = None,
    policy_params_fn: Callable[..., None] = ignore,
    save_checkpoint_path: str | os.PathLike | None = None,
    restore_checkpoint_path: str | os.PathLike | None = None,
    max_to_keep: int | None = None,
) -> tuple[Callable[..., types.Policy], tuple[Any, Any], dict[str, float]]:
    # Brax's keywords as one APGConfig (a make_apg_networks partial's keywords become its network fields).
    config = APGConfig.from_train_kwargs({
        "name": environment if isinstance(environment, str) else None, "episode_length": episode_length,
        "policy_updates": policy_updates, "horizon_length": horizon_length, "num_envs": num_envs,
        "num_evals": num_evals, "action_repeat": action_repeat, "num_eval_envs": num_eval_envs,
        "learning_rate": learning_rate, "adam_b": adam_b, "use_schedule": use_schedule, "use_float64": use_float64,
        "schedule_decay": schedule_decay, "seed": seed, "max_gradient_norm": max_gradient_norm,
        "normalize_observations": normalize_observations, "deterministic_eval": deterministic_eval,
        "max_to_keep": max_to_keep, **arguments.network_fields(network_factory),
    })
    return train_from_config(
        config, environment, wrap_env=wrap_env, wrap_env_fn=wrap_env_fn, max_devices_per_host=max_devices_per_host,
        network_factory=network_factory, progress_fn=progress_fn, eval_env=eval_env,
        randomization_fn=randomization_fn, policy_params_fn=policy_params_fn,
        save_checkpoint_path=save_checkpoint_path, restore_checkpoint_path=restore_checkpoint_path,
    )


# What every argument means: arguments.TRAIN_DOC, the text help(train) shows.
train.__doc__ = arguments.TRAIN_DOC


def train_from_config(
    config: APGConfig, environment: Env | str | None = None, **options: Any
) -> tuple[Callable[..., types.Policy], tuple[Any, Any], dict[str, float]]:
    """Trains ``config`` (an ``APGConfig``, validated when it was built) on ``environment`` (default:
    ``config.env.name``, a registered name), on ``config.run.device`` (``None``: where JAX places arrays now).

    ``options``: ``train``'s arguments that are not config fields, by the same names and with the same meanings
    (``progress_fn``, ``policy_params_fn``, ``save_checkpoint_path``, ``restore_checkpoint_path``, ``eval_env``,
    ``randomization_fn``, ``wrap_env``, ``network_factory``, ...: ``arguments.OPTIONS``; see ``help(train)``).
    Without a ``network_factory`` the networks are ``make_apg_networks`` with ``config.network``'s fields.
    Returns what ``train`` returns.
    """
    if not isinstance(config, APGConfig):
        raise TypeError(f"config must be an APGConfig, got {type(config).__name__}")
    with devices.placed(config.run.device):
        return _train(arguments.validated(config, environment, options, training_devices))


def _train(args: arguments.Arguments) -> tuple[Callable[..., types.Policy], tuple[Any, Any], dict[str, float]]:
    """The run of checked arguments: Brax's flow, through the run driver every trainer shares."""
    config = args.config
    keys = _keys(config.run.seed)
    mesh = Mesh(np.asarray(args.devices), (AXIS,))
    replicated = NamedSharding(mesh, P())
    resumed = checkpoint.resumable(args.restore_checkpoint_path, config)

    # ---- environments: one device's share of the training envs, and the evaluation envs
    env = wrap_for(args.environment, args.envs_per_device, keys.randomize,
                   **{**args.env_options, "episode_length": args.training_episode_length})
    obs_size = env.observation_size
    if not isinstance(obs_size, int):
        raise NotImplementedError(
            f"APG trains on flat array observations; the environment's observation_size is {obs_size!r} "
            "(dictionary observations are not implemented in APG, as in Brax)"
        )
    eval_keys = keys.eval if args.randomization_fn is not None else None
    eval_env = make_eval_env(args.eval_env, config.env.num_eval_envs, eval_keys, **args.env_options)

    # ---- networks, optimiser and the first training state
    algorithm = config.algorithm
    preprocess = types.identity_observation_preprocessor
    if algorithm.normalize_observations:
        preprocess = running_statistics.normalize
    apg_network = args.network_factory(obs_size, env.action_size, preprocess_observations_fn=preprocess)
    make_policy = apg_networks.make_inference_fn(apg_network)
    saved_config = None
    if args.save_checkpoint_path is not None:  # refused now, before training, if the networks cannot be named
        saved_config = checkpoint.run_config(obs_size, env.action_size, args.network_factory, config)
    optimizer = make_optimizer(algorithm.learning_rate, algorithm.adam_b, algorithm.use_schedule,
                               algorithm.schedule_decay)
    dtype = jnp.float64 if algorithm.use_float64 else jnp.float32
    init_fn = functools.partial(_init_training_state, apg_network, optimizer, obs_size, dtype)
    training_state = jax.jit(init_fn, out_shardings=replicated)(keys.policy)

    key_first, key_run = jax.random.split(keys.run)
    # Laid out as the epoch returns it, replicated over the mesh: a key on one device would compile the epoch again.
    key_run = jax.device_put(key_run, replicated)
    updates = 0
    if resumed is not None:
        state = restore_checked(resumed, "state", {
            "optimizer_state": training_state.optimizer_state, "key": key_run, "updates": jnp.zeros((), jnp.int32)
        })
        params = tuple(restore_checked(resumed, "params", _params(training_state)))
        training_state = TrainingState(state["optimizer_state"], *params)
        key_run, updates = state["key"], int(state["updates"])
    schedule = plan_updates(config.policy_updates, config.run.num_evals, updates, config.env_steps_per_update)

    # ---- the three programs (the first env state, an epoch of policy updates, an evaluation), traced in turn and
    # compiled side by side; a later run of the same configuration lowers them from disk instead of tracing them
    remaining = (config.policy_updates - updates) * config.env_steps_per_update
    platform = args.devices[0].platform
    model = getattr(getattr(args.environment, "unwrapped", args.environment), "mj_model", None)
    epoch_level = compile_options.auto_level_for_run(remaining, model, differentiated=True)
    evaluated = config.env.num_eval_envs * config.env.episode_length * max(config.run.num_evals, 1)
    eval_level = compile_options.auto_level_for_run(evaluated, model)
    cached = _programs(args)
    first_state_fn = cached.jit("first_state", functools.partial(
        jax.jit, compiler_options=compile_options.reset_compiler_options(platform)
    ))(_make_first_state_fn(env, args, mesh))
    training_epoch = make_training_epoch(
        env,
        make_policy,
        optimizer,
        steps_per_update=config.policy_steps_per_update,
        updates_per_epoch=schedule.steps_per_call,
        max_gradient_norm=algorithm.max_grad_norm,
        axis_name=AXIS,
    )
    epoch_fn = cached.jit(f"epoch/{schedule.steps_per_call}", functools.partial(
        jax.jit, compiler_options=compile_options.compiler_options(platform, epoch_level)
    ))(
        jax.shard_map(
            training_epoch,
            mesh=mesh,
            in_specs=(P(), P(AXIS), P()),
            out_specs=(P(), P(AXIS), P(), P()),
            check_vma=False,  # the scans start from unvarying constants; every replicated output is reduced
        ),
        donate_argnums=(0, 1),
    )
    eval_policy = functools.partial(make_policy, deterministic=config.run.deterministic_eval)
    eval_fn = cached.jit("evaluation", functools.partial(
        jax.jit, compiler_options=compile_options.compiler_options(platform, eval_level)
    ))(acting.evaluation_run(
        eval_env, eval_policy, config.env.num_eval_envs, args.episode_length, config.env.action_repeat
    ))
    # Laid out as the calls' own arguments, so that the compiled programs run them as they are.
    abstract_env_state = ppo_programs.sharded(first_state_fn.eval_shape(key_first), mesh)
    eval_key = jax.device_put(keys.eval, replicated)
    jobs = {"first_state": (first_state_fn, (key_first,))}
    if remaining > 0:
        jobs["epoch"] = (epoch_fn, (training_state, abstract_env_state, key_run))
    if jax.process_index() == 0 and config.run.num_evals > 0:
        jobs["evaluation"] = (eval_fn, (_params(training_state), eval_key))
    compiled = dict(zip(jobs, ppo_programs.compile_in_parallel(list(jobs.values())), strict=True))
    epoch_fn, eval_fn = compiled.get("epoch", epoch_fn), compiled.get("evaluation", eval_fn)
    env_state = compiled["first_state"](key_first)
    if resumed is not None:
        env_state = restore_env_state(resumed, env_state) or env_state

    def make_evaluator(skipped: int) -> acting.Evaluator:
        return acting.Evaluator(
            eval_env,
            eval_policy,
            num_eval_envs=config.env.num_eval_envs,
            episode_length=args.episode_length,
            action_repeat=config.env.action_repeat,
            key=acting.key_after_evaluations(eval_key, skipped),
            run_fn=eval_fn,
        )

    # ---- the run: an evaluation before training (with num_evals > 1), then epochs, each saved, then evaluated
    is_lead = jax.process_index() == 0
    saver = None
    if args.save_checkpoint_path is not None:
        saver = checkpoint.Saver(args.save_checkpoint_path, config.run.max_to_keep)
    backend = APGBackend(training_state, env_state, key_run, updates, schedule.calls_done, epoch_fn, make_evaluator,
                         saver, saved_config)
    driver = RunDriver(
        backend, num_evals=config.run.num_evals, progress_fn=args.progress_fn, policy_params_fn=args.policy_params_fn,
        save_checkpoint_path=args.save_checkpoint_path, restore_checkpoint_path=args.restore_checkpoint_path,
        make_policy=make_policy, env_steps=updates * config.env_steps_per_update, main=is_lead,
        report_step=lambda _: backend.epoch,  # Brax's APG reports epochs
    )
    try:
        metrics = driver.run(schedule, evaluate=is_lead)
    finally:
        backend.close()
    return make_policy, _params(backend.training_state), metrics


def _programs(args: arguments.Arguments) -> program_cache.Programs:
    """The run's programs through ``brax_core.program_cache``, described by ``train``'s arguments (as the JAX PPO's
    are: a run with user code among them, or over several processes, traces as usual)."""
    platform = args.devices[0].platform
    if program_cache.folder() is None or jax.process_count() > 1:
        return program_cache.Programs(None, platform)
    try:
        description = dict(
            owner="brax_core.training.agents.apg.train",
            config=program_cache.describe(program_cache.run_config(args.config, args.randomization_fn is not None)),
            **{name: program_cache.describe(getattr(args, name)) for name in (
                "environment", "eval_env", "wrap_env", "randomization_fn", "network_factory", "devices"
            )},
        )
    except TypeError as reason:
        logging.info("programs traced each run: %s", reason)
        description = None
    return program_cache.Programs(description, platform)


class APGBackend:
    """The JAX APG's side of the run driver (``brax_core.training.run.driver.Backend``): one training step is one
    policy update, one call an epoch (``epoch_fn``, one compiled program); its training state, envs and key, and
    the checkpoint written from them (``saver``: none without a save path)."""

    def __init__(
        self, training_state: TrainingState, env_state: State, key_run: jax.Array, updates: int, epoch: int,
        epoch_fn: Callable[..., Any], make_evaluator: Callable[[int], acting.Evaluator],
        saver: checkpoint.Saver | None, saved_config: Mapping[str, Any] | None,
    ):
        self.training_state, self.env_state, self.key_run = training_state, env_state, key_run
        self.updates, self.epoch = updates, epoch  # made so far, a restored run's included
        self._epoch_fn, self._make_evaluator = epoch_fn, make_evaluator
        self._saver, self._saved_config = saver, saved_config
        self._evaluator: acting.Evaluator | None = None
        self._metrics: dict[str, float] = {}

    def skip_evaluations(self, count: int) -> None:
        self._evaluator = self._make_evaluator(count)

    def train(self, num_steps: int) -> None:
        self.training_state, self.env_state, self.key_run, metrics = self._epoch_fn(
            self.training_state, self.env_state, self.key_run
        )
        # One wait per epoch: it times the epoch, as Brax does.
        self._metrics = {name: float(value) for name, value in jax.device_get(metrics).items()}
        self.updates += num_steps
        self.epoch += 1

    def training_metrics(self) -> Mapping[str, float]:
        return self._metrics

    def evaluate(self, training_metrics: Mapping[str, float]) -> dict[str, float]:
        return self._evaluator.run_evaluation(_params(self.training_state), training_metrics)

    def params(self) -> tuple[Any, Any]:
        # Copies: the next epoch donates the training state's buffers.
        return jax.tree.map(jnp.copy, _params(self.training_state))

    def save(self, env_steps: int) -> None:
        if self._saver is None:
            return
        state = {
            "optimizer_state": self.training_state.optimizer_state,
            "key": self.key_run,
            "updates": jnp.asarray(self.updates, jnp.int32),
        }
        self._saver.save(env_steps, _params(self.training_state), state,
                         {**self._saved_config, "env_steps": int(env_steps)}, self.env_state)

    def close(self) -> None:
        if self._saver is not None:
            self._saver.close()


def _params(training_state: TrainingState) -> tuple[Any, Any]:
    """The ``(normalizer_params, policy_params)`` pair ``make_policy`` takes."""
    return training_state.normalizer_params, training_state.policy_params


def _init_training_state(
    apg_network: apg_networks.APGNetworks,
    optimizer: optax.GradientTransformation,
    obs_size: int,
    dtype: Any,
    key: jax.Array,
) -> TrainingState:
    """The first training state: fresh policy parameters, their optimiser state and empty observation statistics
    (``dtype``: float64 with ``use_float64``). Built in one jitted call so that every leaf is its own buffer, which
    the training program may then donate."""
    policy_params = apg_network.policy_network.init(key)
    statistics = running_statistics.init_state(jax.ShapeDtypeStruct((obs_size,), dtype))
    statistics = jax.tree.map(lambda x: x.astype(dtype), statistics)
    return TrainingState(
        optimizer_state=optimizer.init(policy_params), normalizer_params=statistics, policy_params=policy_params
    )


def make_optimizer(
    learning_rate: float, adam_b: tuple[float, float], use_schedule: bool, schedule_decay: float
) -> optax.GradientTransformation:
    """Brax's APG optimiser: each gradient component clipped to ``[-1, 1]``, then Adam, whose learning rate decays
    by ``schedule_decay`` at every update with ``use_schedule``. Long unrolls through physics give gradients of
    very uneven size, and the clip keeps one exploding component from taking the whole step."""
    if use_schedule:
        learning_rate = optax.exponential_decay(init_value=learning_rate, transition_steps=1, decay_rate=schedule_decay)
    return optax.chain(optax.clip(1.0), optax.adam(learning_rate=learning_rate, b1=adam_b[0], b2=adam_b[1]))


def clip_by_global_norm(updates: Any, max_norm: float) -> Any:
    """``updates`` unchanged while their global norm is below ``max_norm``, else scaled to that norm (Brax's rule:
    a norm equal to ``max_norm`` is scaled too, to itself)."""
    norm = optax.tree.norm(updates)
    keep = norm < max_norm
    return jax.tree.map(lambda t: jnp.where(keep, t, t / norm * max_norm), updates)


def make_loss(
    env: Env, make_policy: Callable[..., types.Policy], steps_per_update: int
) -> Callable[..., tuple[jax.Array, tuple[Any, State]]]:
    """The APG loss: ``loss(policy_params, normalizer_params, env_state, key) -> (loss, (observations, state))``.

    ``loss`` is minus the mean reward of a ``steps_per_update``-step unroll of the batched ``env`` from
    ``env_state`` under the policy, with reparametrised action samples. Nothing in it stops a gradient: its
    gradient with respect to ``policy_params`` is the analytic one, through the actions, the physics and every
    later state, except that an env whose step's reverse pass is not finite has its gradient cut at that step
    (``brax_core.envs.wrappers.gradients``: MJX's solver gives NaN at some converged solves, which would otherwise
    reach every parameter). ``observations`` (``[steps, envs, ...]``, the one each action saw) feed the
    normaliser; ``state`` is where the unroll stopped, the next update's start. The optional ``cuts`` (a float32
    zero) is read by nothing: its gradient is the number of env steps whose gradient was cut.
    """
    env_step = finite_gradient_step(env.step)

    def loss(
        policy_params: Any, normalizer_params: Any, env_state: State, key: jax.Array, cuts: jax.Array | None = None
    ) -> tuple[jax.Array, tuple[Any, State]]:
        policy = make_policy((normalizer_params, policy_params))
        cuts = jnp.zeros((), jnp.float32) if cuts is None else cuts

        def step(carry: tuple[State, jax.Array], _: None) -> tuple[tuple[State, jax.Array], tuple[jax.Array, Any]]:
            state, key = carry
            key, key_sample = jax.random.split(key)
            actions, _ = policy(state.obs, key_sample)
            next_state = env_step(state, actions, cuts)
            return (next_state, key), (next_state.reward, state.obs)

        (final_state, _), (rewards, observations) = jax.lax.scan(step, (env_state, key), (), length=steps_per_update)
        return -jnp.mean(rewards), (observations, final_state)

    return loss


def make_training_epoch(
    env: Env,
    make_policy: Callable[..., types.Policy],
    optimizer: optax.GradientTransformation,
    *,
    steps_per_update: int,
    updates_per_epoch: int,
    max_gradient_norm: float,
    axis_name: str | None = AXIS,
) -> Callable[[TrainingState, State, jax.Array], tuple[TrainingState, State, jax.Array, dict[str, jax.Array]]]:
    """One epoch of policy updates on one device's envs:
    ``epoch(training_state, env_state, key) -> (training_state, env_state, next_key, metrics)``.

    Run under ``shard_map`` over ``axis_name`` (``None``: a single device, no collectives): each device follows the
    gradient of its own envs' unroll, the gradients are averaged over the devices after the norm clip (as Brax's
    ``pmean`` after it), and the observation statistics pool every device's observations, so the state stays
    replicated. ``key`` is replicated; each device draws from it folded with its index. ``metrics`` are the epoch's
    means of ``grad_norm`` (the averaged, clipped gradient's) and ``params_norm`` (after the update), and
    ``gradient_cuts``, the env steps of every device whose gradient was cut as not finite (``make_loss``).
    """
    loss_grad = jax.grad(make_loss(env, make_policy, steps_per_update), argnums=(0, 4), has_aux=True)

    def update(carry: tuple[TrainingState, jax.Array, State], _: None):
        training_state, key, env_state = carry
        key, key_grad = jax.random.split(key)
        (grad, cuts), (observations, env_state) = loss_grad(
            training_state.policy_params, training_state.normalizer_params, env_state, key_grad,
            jnp.zeros((), jnp.float32),
        )
        grad = clip_by_global_norm(grad, max_gradient_norm)
        if axis_name is not None:
            grad = jax.lax.pmean(grad, axis_name)
        params_update, optimizer_state = optimizer.update(grad, training_state.optimizer_state)
        policy_params = optax.apply_updates(training_state.policy_params, params_update)
        normalizer_params = running_statistics.update(
            training_state.normalizer_params, observations, pmap_axis_name=axis_name
        )
        if axis_name is not None:
            cuts = jax.lax.psum(cuts, axis_name)
        metrics = {
            "grad_norm": optax.tree.norm(grad), "params_norm": optax.tree.norm(policy_params), "gradient_cuts": cuts
        }
        training_state = TrainingState(
            optimizer_state=optimizer_state, normalizer_params=normalizer_params, policy_params=policy_params
        )
        return (training_state, key, env_state), metrics

    def epoch(training_state: TrainingState, env_state: State, key: jax.Array):
        key, next_key = jax.random.split(key)
        if axis_name is not None:
            key = jax.random.fold_in(key, jax.lax.axis_index(axis_name))
        (training_state, _, env_state), metrics = jax.lax.scan(
            update, (training_state, key, env_state), (), length=updates_per_epoch
        )
        cuts = metrics.pop("gradient_cuts").sum()
        return training_state, env_state, next_key, {**jax.tree.map(jnp.mean, metrics), "gradient_cuts": cuts}

    return epoch


def _make_first_state_fn(env: Env, args: arguments.Arguments, mesh: Mesh) -> Callable[[jax.Array], State]:
    """``first_state(key)``: every device's training envs reset, their episode clocks scrambled and one step taken
    with zero actions, laid out over ``mesh``.

    Scrambling (Brax's ``scramble_times``) sets each env's step count to a random point of its episode, so the time
    limits, and the resets with them, fall at different updates instead of all at once. The zero-action step makes
    the state the step's own output, which the training program's scan carries unchanged in type.
    """
    local_envs = args.envs_per_device

    def first_env_state(key: jax.Array) -> State:
        key = jax.random.fold_in(key, jax.lax.axis_index(AXIS))
        key_reset, key_scramble = jax.random.split(key)
        state = env.reset(jax.random.split(key_reset, local_envs))
        state = scramble_steps(state, key_scramble, args.training_episode_length)
        return env.step(state, jnp.zeros((local_envs, env.action_size), jnp.float32))

    return jax.shard_map(first_env_state, mesh=mesh, in_specs=P(), out_specs=P(AXIS), check_vma=False)


def scramble_steps(state: State, key: jax.Array, episode_length: int) -> State:
    """``state`` with each env's ``info['steps']`` drawn uniformly from ``[0, episode_length)`` and rounded (an env
    without a step count, one wrapped by a wrapper of the caller's, is left as it is)."""
    if "steps" not in state.info:
        return state
    steps = state.info["steps"]
    drawn = jnp.round(jax.random.uniform(key, steps.shape, maxval=episode_length)).astype(steps.dtype)
    return state.replace(info={**state.info, "steps": drawn})
