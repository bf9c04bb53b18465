"""Soft Actor-Critic training (``brax.training.agents.sac.train`` counterpart; Haarnoja et al., 2018,
https://arxiv.org/abs/1812.05905).

Same signature, argument names, defaults and return value as Brax 0.14.2's ``train``, and its flow: every env steps once
per training step and its transitions go into a uniform replay buffer (after a prefill of ``min_replay_size``
transitions), then ``grad_updates_per_step`` SGD steps each update the temperature, the twin critics and the actor
on a batch of ``batch_size`` drawn from the buffer, and the target critics follow by Polyak averaging (``tau``).
Training runs in ``max(num_evals - 1, 1)`` epochs, each one compiled program, with an evaluation after each (and one
before training when ``num_evals > 1``). The training envs auto-reset to their episode's first state, as Brax's.

Where this differs from Brax (its behaviour where Brax's works):

* a transition cut by the time limit bootstraps from the observation it reached instead of being dropped from the
  critic's loss (``losses``; ``bootstrap_on_timeout=False`` gives Brax's);
* every argument is checked before anything compiles, with an error naming it and what it accepts: a replay buffer
  (``max_replay_size`` given) smaller than a batch or than one step of the envs, ``min_replay_size >=
  num_timesteps``, ``tau`` outside ``(0, 1]``, dict observations (Brax asserts, fails inside JAX or trains on);
* the policy's kernel initialiser's keyword arguments reach it (``networks``);
* the networks and the envs' first state come from Brax's splits of ``seed``; the later random streams (actions,
  replay draws, SGD noise) are split in another order, so a seed gives other samples than Brax's;
* ``num_evals=0`` trains without evaluating (Brax evaluates once anyway); one device (``max_devices_per_host`` is
  accepted and checked).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax

from brax_core import devices, envs
from brax_core.envs.base import Env, State
from brax_core.envs.wrappers import training as env_training
from brax_core.training import acting, gradients, networks, replay_buffers, types
from brax_core.training import validation as v
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo.environments import make_eval_env, wrap_for
from brax_core.training.agents.sac import checkpoint
from brax_core.training.agents.sac import losses as sac_losses
from brax_core.training.agents.sac import networks as sac_networks
from brax_core.training.agents.sac.config import SACConfig, check_flat_observations
from brax_core.training.run.driver import RunDriver
from brax_core.training.run.schedule import plan_updates

Metrics = types.Metrics
Transition = types.Transition

__all__ = ["OPTIONS", "TrainingState", "make_sgd_step", "train", "train_from_config"]


@flax.struct.dataclass
class TrainingState:
    """Contains training state for the learner (Brax's fields)."""

    policy_optimizer_state: optax.OptState
    policy_params: types.Params
    q_optimizer_state: optax.OptState
    q_params: types.Params
    target_q_params: types.Params
    gradient_steps: types.UInt64
    env_steps: types.UInt64
    alpha_optimizer_state: optax.OptState
    alpha_params: types.Params
    normalizer_params: running_statistics.RunningStatisticsState


# train_from_config's options: train's arguments that are not configuration fields.
OPTIONS = ("wrap_env", "wrap_env_fn", "max_devices_per_host", "network_factory", "progress_fn", "eval_env",
           "randomization_fn", "checkpoint_logdir", "restore_checkpoint_path", "save_checkpoint_path",
           "policy_params_fn")


def network_fields(network_factory: Any) -> dict[str, Any]:
    """The config's network fields a ``functools.partial`` of ``make_sac_networks`` sets (an activation by its name
    where it has one); nothing for any other factory, which a run then uses as it is."""
    factory, keywords = networks.factory_keywords(network_factory)
    if factory is not sac_networks.make_sac_networks:
        return {}
    fields: dict[str, Any] = {}
    if "hidden_layer_sizes" in keywords:
        fields["policy_hidden_layer_sizes"] = fields["value_hidden_layer_sizes"] = keywords["hidden_layer_sizes"]
    if keywords.get("q_hidden_layer_sizes") is not None:
        fields["value_hidden_layer_sizes"] = keywords["q_hidden_layer_sizes"]
    if (name := networks.activation_name(keywords.get("activation"))) is not None:
        fields["activation"] = name
    return fields


def network_factory_of(config: SACConfig) -> Callable[..., sac_networks.SACNetworks]:
    """``make_sac_networks`` with ``config.network``'s fields."""
    network = config.network
    return functools.partial(
        sac_networks.make_sac_networks, hidden_layer_sizes=network.policy_hidden_layer_sizes,
        q_hidden_layer_sizes=network.value_hidden_layer_sizes, activation=network.activation,
        policy_network_layer_norm=network.layer_norm, q_network_layer_norm=network.layer_norm,
    )


def check_options(config: SACConfig, environment: Any, options: Mapping[str, Any]) -> Env:
    """``train_from_config``'s environment and options checked by name before anything compiles (the config was
    checked when it was built); returns the environment."""
    SACConfig.check_train_options(config, options, OPTIONS)
    if environment is None:
        environment = config.env.name
        if environment is None:
            raise TypeError("environment must be given when config.env.name is None")
    if isinstance(environment, str):
        environment = envs.get_environment(environment)
    if not isinstance(environment, Env):
        raise TypeError(f"environment must be a brax_core Env or a registered env name, got "
                        f"{type(environment).__name__}")
    eval_env = options.get("eval_env")
    if eval_env is not None and not isinstance(eval_env, Env):
        raise TypeError(f"eval_env must be a brax_core Env or None, got {type(eval_env).__name__}")
    if options.get("max_devices_per_host") is not None:
        v.positive_int("max_devices_per_host", options["max_devices_per_host"])
    v.boolean("wrap_env", options.get("wrap_env", True))
    # None: the default.
    for name in ("network_factory", "progress_fn", "policy_params_fn", "wrap_env_fn", "randomization_fn"):
        if options.get(name) is not None:
            v.callable_arg(name, options[name])
    check_flat_observations("environment", environment.observation_size)
    return environment


def make_sgd_step(
    sac_network: sac_networks.SACNetworks, optimizers: tuple[Any, Any, Any], *, reward_scaling: float,
    discounting: float, action_size: int, tau: float, bootstrap_on_timeout: bool,
) -> Callable[[tuple[TrainingState, jax.Array], Transition], tuple[tuple[TrainingState, jax.Array], Metrics]]:
    """One SGD step on a batch, as Brax's: the temperature, then the critics (with the temperature before this
    step), then the actor (with the critics before this step), then the target critics' Polyak average."""
    alpha_optimizer, policy_optimizer, q_optimizer = optimizers
    alpha_loss, critic_loss, actor_loss = sac_losses.make_losses(
        sac_network, reward_scaling, discounting, action_size, bootstrap_on_timeout=bootstrap_on_timeout
    )
    alpha_update = gradients.gradient_update_fn(alpha_loss, alpha_optimizer, pmap_axis_name=None)
    critic_update = gradients.gradient_update_fn(critic_loss, q_optimizer, pmap_axis_name=None)
    actor_update = gradients.gradient_update_fn(actor_loss, policy_optimizer, pmap_axis_name=None)

    def sgd_step(carry: tuple[TrainingState, jax.Array], transitions: Transition):
        state, key = carry
        key, key_alpha, key_critic, key_actor = jax.random.split(key, 4)
        a_loss, alpha_params, alpha_opt = alpha_update(
            state.alpha_params, state.policy_params, state.normalizer_params, transitions, key_alpha,
            optimizer_state=state.alpha_optimizer_state,
        )
        alpha = jnp.exp(state.alpha_params)
        c_loss, q_params, q_opt = critic_update(
            state.q_params, state.policy_params, state.normalizer_params, state.target_q_params, alpha, transitions,
            key_critic, optimizer_state=state.q_optimizer_state,
        )
        p_loss, policy_params, policy_opt = actor_update(
            state.policy_params, state.normalizer_params, state.q_params, alpha, transitions, key_actor,
            optimizer_state=state.policy_optimizer_state,
        )
        target_q_params = jax.tree.map(lambda t, q: t * (1 - tau) + q * tau, state.target_q_params, q_params)
        state = state.replace(
            policy_optimizer_state=policy_opt, policy_params=policy_params, q_optimizer_state=q_opt,
            q_params=q_params, target_q_params=target_q_params, gradient_steps=state.gradient_steps + 1,
            alpha_optimizer_state=alpha_opt, alpha_params=alpha_params,
        )
        metrics = {"critic_loss": c_loss, "actor_loss": p_loss, "alpha_loss": a_loss, "alpha": jnp.exp(alpha_params)}
        return (state, key), metrics

    return sgd_step


def train(
    environment: Env | str,
    num_timesteps: int,
    episode_length: int,
    wrap_env: bool = True,
    wrap_env_fn: Callable[..., Any] | None = None,
    action_repeat: int = 1,
    num_envs: int = 1,
    num_eval_envs: int = 128,
    learning_rate: float = 1e-4,
    discounting: float = 0.9,
    seed: int = 0,
    batch_size: int = 256,
    num_evals: int = 1,
    normalize_observations: bool = False,
    max_devices_per_host: int | None = None,
    reward_scaling: float = 1.0,
    tau: float = 0.005,
    min_replay_size: int = 0,
    max_replay_size: int | None = None,
    grad_updates_per_step: int = 1,
    deterministic_eval: bool = False,
    network_factory: types.NetworkFactory[sac_networks.SACNetworks] = sac_networks.make_sac_networks,
    progress_fn: Callable[[int, Metrics], None] = lambda *args: None,
    eval_env: Env | None = None,
    randomization_fn: Callable[..., Any] | None = None,
    checkpoint_logdir: str | None = None,
    restore_checkpoint_path: str | None = None,
    bootstrap_on_timeout: bool = True,
    save_checkpoint_path: str | None = None,
    policy_params_fn: Callable[..., None] | None = None,
) -> tuple[Callable[..., types.Policy], tuple[Any, Any], Metrics]:
    """Trains a SAC agent; returns ``(make_policy, (normalizer_params, policy_params), metrics)`` as Brax's.

    Args:
      environment: the brax_core env to train on (unbatched), or a registered env's name.
      num_timesteps, episode_length, action_repeat: env steps to train for, per episode, per policy action.
      wrap_env, wrap_env_fn: wrap the envs for training (time limit, auto-reset to the first state, batching) with
        brax_core's wrappers or ``wrap_env_fn``; ``wrap_env=False``: ``environment`` is batched already.
      num_envs, num_eval_envs: parallel training envs; episodes per evaluation.
      learning_rate: the actor's and the critics' Adam step (the temperature's is 3e-4, as Brax's).
      discounting, reward_scaling: the critics' discount and the factor on rewards in their targets.
      seed: the run's random seed.
      batch_size, grad_updates_per_step: the SGD batch, and SGD steps per env step of all envs.
      num_evals: evaluations over the run (``0``: none).
      normalize_observations: running observation statistics normalise both networks' inputs.
      max_devices_per_host: accepted as Brax's; the run uses one device.
      tau: the share of the critics the target critics take each SGD step, in (0, 1].
      min_replay_size, max_replay_size: transitions collected before training (by the initial policy); the
        buffer's capacity (default ``num_timesteps``).
      deterministic_eval: evaluate the distribution's mode instead of samples.
      network_factory: ``(observation_size, action_size, preprocess_observations_fn) -> SACNetworks``.
      progress_fn: ``progress_fn(env_steps, metrics)`` after each evaluation.
      eval_env: the env to evaluate on (default: ``environment``).
      randomization_fn: domain randomisation ``(sys, rng) -> (sys, in_axes)``, one model per env.
      checkpoint_logdir: where to save ``(normalizer_params, policy_params)`` after each epoch (``checkpoint``).
      restore_checkpoint_path: a SAC checkpoint whose policy and normaliser the run starts from; one of a whole run
        (``save_checkpoint_path``'s) is continued exactly, with the same arguments but ``num_timesteps``.
      bootstrap_on_timeout: targets of transitions cut by the time limit bootstrap from the observation reached
        (``False``: Brax's, which drops them from the critics' loss).
      save_checkpoint_path: where to save the whole run at each epoch's end (the training state, the replay buffer,
        the run's key and the envs' state beside the policy), for ``restore_checkpoint_path`` (an addition to
        Brax's signature, as the other trainers').
      policy_params_fn: ``policy_params_fn(env_steps, make_policy, params)`` before training and after every epoch
        (an addition to Brax's signature, as the other trainers').
    """
    # Brax's keywords as one SACConfig (a make_sac_networks partial's keywords become its network fields).
    config = SACConfig.from_train_kwargs({
        "name": environment if isinstance(environment, str) else None, "num_timesteps": num_timesteps,
        "episode_length": episode_length, "action_repeat": action_repeat, "num_envs": num_envs,
        "num_eval_envs": num_eval_envs, "learning_rate": learning_rate, "discounting": discounting, "seed": seed,
        "batch_size": batch_size, "num_evals": num_evals, "normalize_observations": normalize_observations,
        "reward_scaling": reward_scaling, "tau": tau, "min_replay_size": min_replay_size,
        "max_replay_size": max_replay_size, "grad_updates_per_step": grad_updates_per_step,
        "deterministic_eval": deterministic_eval, "bootstrap_on_timeout": bootstrap_on_timeout,
        **network_fields(network_factory),
    })
    return train_from_config(
        config, environment, wrap_env=wrap_env, wrap_env_fn=wrap_env_fn, max_devices_per_host=max_devices_per_host,
        network_factory=network_factory, progress_fn=progress_fn, eval_env=eval_env,
        randomization_fn=randomization_fn, checkpoint_logdir=checkpoint_logdir,
        restore_checkpoint_path=restore_checkpoint_path, save_checkpoint_path=save_checkpoint_path,
        policy_params_fn=policy_params_fn,
    )


def train_from_config(
    config: SACConfig, environment: Env | str | None = None, **options: Any
) -> tuple[Callable[..., types.Policy], tuple[Any, Any], Metrics]:
    """Trains ``config`` (a ``SACConfig``, checked when it was built) on ``environment`` (default:
    ``config.env.name``, a registered name). ``options``: ``train``'s arguments that are not config fields, by the
    same names and meanings (``OPTIONS``); without a ``network_factory`` the networks are ``make_sac_networks`` with
    ``config.network``'s fields. Runs on ``config.run.device`` (``None``: where JAX places arrays now), as every
    trainer. Returns what ``train`` returns."""
    environment = check_options(config, environment, options)
    with devices.placed(config.run.device):
        return _train(config, environment, options)


def _train(
    config: SACConfig, environment: Env, options: Mapping[str, Any]
) -> tuple[Callable[..., types.Policy], tuple[Any, Any], Metrics]:
    """The run of a checked config on a checked environment (``train_from_config``)."""
    env_cfg, algorithm, run = config.env, config.algorithm, config.run
    episode_length = env_cfg.episode_length or int(getattr(environment.unwrapped, "default_episode_length", 1000))
    num_envs, num_eval_envs, action_repeat = env_cfg.num_envs, env_cfg.num_eval_envs, env_cfg.action_repeat
    wrap_env, wrap_env_fn = options.get("wrap_env", True), options.get("wrap_env_fn")
    randomization_fn, eval_env = options.get("randomization_fn"), options.get("eval_env")
    network_factory = options.get("network_factory") or network_factory_of(config)
    progress_fn = options.get("progress_fn") or (lambda *args: None)
    checkpoint_logdir = options.get("checkpoint_logdir")
    restore_checkpoint_path = options.get("restore_checkpoint_path")
    save_checkpoint_path = options.get("save_checkpoint_path")
    obs_size, action_size = environment.observation_size, environment.action_size
    env_steps_per_actor_step = config.env_steps_per_training_step
    seed, num_evals, batch_size = run.seed, run.num_evals, algorithm.batch_size
    grad_updates_per_step = algorithm.grad_updates_per_step

    # Brax's splits of the seed, so one seed starts the same networks and envs.
    rng, randomize_key = jax.random.split(jax.random.PRNGKey(seed))
    global_key, local_key = jax.random.split(rng)
    local_key = jax.random.fold_in(local_key, jax.process_index())
    local_key, buffer_key, env_key, eval_key = jax.random.split(local_key, 4)

    randomized = randomization_fn is not None
    training_wrap: Any = False if not wrap_env else wrap_env_fn or functools.partial(env_training.wrap,
                                                                                       full_reset=False)
    env_options = dict(episode_length=episode_length, action_repeat=action_repeat, randomization_fn=randomization_fn)
    env = wrap_for(environment, num_envs, randomize_key if randomized else None, wrap_env=training_wrap,
                   **env_options)
    evaluation_env = None if num_evals == 0 else make_eval_env(
        eval_env or environment, num_eval_envs, eval_key if randomized else None,
        wrap_env=(wrap_env_fn or True) if wrap_env else False, **env_options,
    )

    preprocess = types.identity_observation_preprocessor
    if algorithm.normalize_observations:
        preprocess = running_statistics.normalize
    sac_network = network_factory(observation_size=obs_size, action_size=action_size,
                                  preprocess_observations_fn=preprocess)
    make_policy = sac_networks.make_inference_fn(sac_network)
    alpha_optimizer = optax.adam(learning_rate=3e-4)
    policy_optimizer = optax.adam(learning_rate=algorithm.learning_rate)
    q_optimizer = optax.adam(learning_rate=algorithm.learning_rate)

    zeros_obs, zeros_action = jnp.zeros((obs_size,)), jnp.zeros((action_size,))
    dummy = Transition(observation=zeros_obs, action=zeros_action, reward=0.0, discount=0.0,
                       next_observation=zeros_obs,
                       extras={"state_extras": {"truncation": 0.0}, "policy_extras": {}})
    replay_buffer = replay_buffers.UniformSamplingQueue(
        max_replay_size=config.replay_capacity, dummy_data_sample=dummy,
        sample_batch_size=batch_size * grad_updates_per_step,
    )
    sgd_step = make_sgd_step(
        sac_network, (alpha_optimizer, policy_optimizer, q_optimizer), reward_scaling=algorithm.reward_scaling,
        discounting=algorithm.discounting, action_size=action_size, tau=algorithm.tau,
        bootstrap_on_timeout=algorithm.bootstrap_on_timeout,
    )

    def get_experience(state: TrainingState, env_state: State, buffer_state: Any, key: jax.Array):
        policy = make_policy((state.normalizer_params, state.policy_params))
        env_state, transitions = acting.actor_step(env, env_state, policy, key, extra_fields=("truncation",))
        normalizer_params = running_statistics.update(state.normalizer_params, transitions.observation)
        state = state.replace(normalizer_params=normalizer_params,
                              env_steps=state.env_steps + env_steps_per_actor_step)
        return state, env_state, replay_buffer.insert_internal(buffer_state, transitions)

    def training_step(carry: tuple[TrainingState, State, Any, jax.Array], _: None):
        state, env_state, buffer_state, key = carry
        key, experience_key, sgd_key = jax.random.split(key, 3)
        state, env_state, buffer_state = get_experience(state, env_state, buffer_state, experience_key)
        buffer_state, transitions = replay_buffer.sample_internal(buffer_state)
        # One batch per SGD step: [grad_updates_per_step, batch_size, ...].
        transitions = jax.tree.map(lambda x: x.reshape((grad_updates_per_step, -1, *x.shape[1:])), transitions)
        (state, _), metrics = jax.lax.scan(sgd_step, (state, sgd_key), transitions)
        metrics["buffer_current_size"] = replay_buffer.size(buffer_state)
        return (state, env_state, buffer_state, key), metrics

    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def prefill(state: TrainingState, env_state: State, buffer_state: Any, key: jax.Array):
        def step(carry, _):
            state, env_state, buffer_state, key = carry
            key, experience_key = jax.random.split(key)
            return (*get_experience(state, env_state, buffer_state, experience_key), key), ()

        carry = (state, env_state, buffer_state, key)
        return jax.lax.scan(step, carry, (), length=config.prefill_actor_steps)[0][:3]

    def training_epoch(state: TrainingState, env_state: State, buffer_state: Any, key: jax.Array, *, length: int):
        carry = (state, env_state, buffer_state, key)
        (state, env_state, buffer_state, _), metrics = jax.lax.scan(training_step, carry, (), length=length)
        return state, env_state, buffer_state, jax.tree.map(jnp.mean, metrics)

    key_policy, key_q = jax.random.split(global_key)
    log_alpha = jnp.zeros((), jnp.float32)
    policy_params, q_params = sac_network.policy_network.init(key_policy), sac_network.q_network.init(key_q)
    normalizer_params = running_statistics.init_state(jax.ShapeDtypeStruct((obs_size,), jnp.float32))
    resumed = checkpoint.resumable(restore_checkpoint_path, config)
    if restore_checkpoint_path is not None and resumed is None:
        # A checkpoint of the policy alone (Brax's): the run starts from it, into this run's own shapes (a policy
        # of other sizes is refused naming the parameter).
        normalizer_params, policy_params = checkpoint.restore_params(
            restore_checkpoint_path, jax.eval_shape(lambda: (normalizer_params, policy_params))
        )
    state = TrainingState(
        policy_optimizer_state=policy_optimizer.init(policy_params), policy_params=policy_params,
        q_optimizer_state=q_optimizer.init(q_params), q_params=q_params, target_q_params=q_params,
        gradient_steps=types.UInt64(hi=0, lo=0), env_steps=types.UInt64(hi=0, lo=0),
        alpha_optimizer_state=alpha_optimizer.init(log_alpha), alpha_params=log_alpha,
        normalizer_params=normalizer_params,
    )
    env_state = jax.jit(env.reset)(jax.random.split(env_key, num_envs))
    if algorithm.bootstrap_on_timeout and "final_obs" not in env_state.info:
        raise ValueError(
            "bootstrap_on_timeout=True bootstraps a transition cut by the time limit from the observation it reached, "
            "which brax_core's auto-reset wrapper keeps in info['final_obs']; the training env's wrappers keep none "
            "(wrap_env=False or a wrap_env_fn): wrap it with brax_core.envs.training.wrap, or pass "
            "bootstrap_on_timeout=False"
        )
    buffer_state = jax.jit(replay_buffer.init)(buffer_key)

    saved_config = None
    if checkpoint_logdir or save_checkpoint_path:  # a factory that cannot be named fails here, before compiling
        saved_config = checkpoint.run_config(obs_size, action_size, network_factory, config)
    make_evaluator = None if evaluation_env is None else functools.partial(
        acting.Evaluator, evaluation_env, functools.partial(make_policy, deterministic=run.deterministic_eval),
        num_eval_envs, episode_length, action_repeat,
    )

    # The programs donate their carry, and the start shares buffers (the target critics are the critics, the envs'
    # first state is their state): every leaf of those gets a buffer of its own once (the replay buffer's have).
    state, env_state = jax.tree.map(jnp.copy, (state, env_state))
    prefill_key, local_key = jax.random.split(local_key)
    if resumed is not None:
        params, saved, env_state = checkpoint.restore(
            resumed, (state.normalizer_params, state.policy_params),
            {"training_state": state, "buffer_state": buffer_state, "key": local_key}, env_state,
        )
        state, buffer_state, local_key = saved["training_state"], saved["buffer_state"], saved["key"]
    else:
        state, env_state, buffer_state = prefill(state, env_state, buffer_state, prefill_key)
        logging.info("replay buffer after the prefill: %s transitions", int(replay_buffer.size(buffer_state)))
    prefill_env_steps = config.prefill_actor_steps * env_steps_per_actor_step
    steps_done = (int(state.env_steps) - prefill_env_steps) // env_steps_per_actor_step
    schedule = plan_updates(config.num_epochs * config.steps_per_epoch, num_evals, steps_done,
                            env_steps_per_actor_step)
    epoch_fn = jax.jit(functools.partial(training_epoch, length=schedule.steps_per_call), donate_argnums=(0, 1, 2))
    backend = _Backend(epoch_fn, state, env_state, buffer_state, local_key, make_evaluator, eval_key,
                       saved_config, checkpoint_logdir, save_checkpoint_path, config.run.max_to_keep)
    driver = RunDriver(
        backend, num_evals=num_evals, progress_fn=progress_fn, make_policy=make_policy,
        env_steps=int(state.env_steps), policy_params_fn=options.get("policy_params_fn") or (lambda *args: None),
        save_checkpoint_path=save_checkpoint_path or checkpoint_logdir, restore_checkpoint_path=resumed,
    )
    metrics = driver.run(schedule, evaluate=make_evaluator is not None)
    return make_policy, backend.params(), metrics


class _Backend:
    """The JAX SAC's side of the run driver (``brax_core.training.run.driver.Backend``): a call is one compiled
    epoch of training steps; evaluations on their own key stream; saves of the policy (``checkpoint_logdir``,
    Brax's) and of the whole run (``save_checkpoint_path``)."""

    def __init__(self, epoch_fn, state, env_state, buffer_state, key, make_evaluator, eval_key, saved_config,
                 checkpoint_logdir, save_checkpoint_path, max_to_keep):
        self._epoch_fn, self._make_evaluator, self._eval_key = epoch_fn, make_evaluator, eval_key
        self.state, self.env_state, self.buffer_state, self.key = state, env_state, buffer_state, key
        self._saved_config, self._logdir, self._path = saved_config, checkpoint_logdir, save_checkpoint_path
        self._max_to_keep = max_to_keep
        self._evaluator = None  # built once, where the run's first evaluation is (skip_evaluations)
        self._metrics: dict[str, float] = {}

    def skip_evaluations(self, count: int) -> None:
        key = self._eval_key
        for _ in range(count):  # the evaluator splits its key once per evaluation
            key, _ = jax.random.split(key)
        if self._make_evaluator is not None:
            self._evaluator = self._make_evaluator(key)

    def train(self, num_steps: int) -> None:
        del num_steps  # the compiled epoch's own length
        epoch_key, self.key = jax.random.split(self.key)
        self.state, self.env_state, self.buffer_state, metrics = self._epoch_fn(
            self.state, self.env_state, self.buffer_state, epoch_key
        )
        self._metrics = {name: float(value) for name, value in jax.device_get(metrics).items()}

    def training_metrics(self) -> dict[str, float]:
        return self._metrics

    def evaluate(self, training_metrics: Mapping[str, float]) -> Metrics:
        return self._evaluator.run_evaluation(self.params(), dict(training_metrics))

    def save(self, env_steps: int) -> None:
        if self._logdir:
            checkpoint.save(self._logdir, env_steps, self.params(), self._saved_config)
        if self._path:
            saver = checkpoint.Saver(self._path, self._max_to_keep)
            try:
                run_state = {"training_state": self.state, "buffer_state": self.buffer_state, "key": self.key}
                saver.save(env_steps, self.params(), run_state, self._saved_config, self.env_state)
            finally:
                saver.close()

    def params(self) -> tuple[Any, Any]:
        return self.state.normalizer_params, self.state.policy_params
