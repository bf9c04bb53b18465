"""The JAX PPO's side of a run (``brax_core.training.run.driver.Backend``): its training state on the device mesh,
created, restored, stepped by the compiled training call, evaluated and saved."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding

from brax_core.envs.base import Env
from brax_core.training import acting, resume, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import checkpoint, networks_vision
from brax_core.training.agents.ppo import losses as ppo_losses
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo.arguments import Arguments
from brax_core.training.agents.ppo.networks import PPOTrainingParams
from brax_core.training.agents.ppo.training_step import TrainingState, pair_to_steps
from brax_core.training.run.checkpoints import resolve_for

_TWO_32 = 1 << 32


def init_training_state(
    ppo_network: ppo_networks.PPONetworks,
    optimizer: optax.GradientTransformation,
    obs_size: Any,
    key: jax.Array,
    jit: Callable[..., Any],
    replicated: NamedSharding,
) -> TrainingState:
    """Fresh parameters, optimiser state and observation statistics, replicated over the devices."""
    if isinstance(obs_size, Mapping):
        # Image views get no running statistics (Brax's layout: networks normalise state keys only).
        obs_template: Any = {
            k: jax.ShapeDtypeStruct(tuple(v) if not isinstance(v, int) else (v,), jnp.float32)
            for k, v in networks_vision.remove_pixels(obs_size).items()
        }
    else:
        obs_template = jax.ShapeDtypeStruct((int(obs_size),), jnp.float32)

    def init(key: jax.Array) -> TrainingState:
        key_policy, key_value = jax.random.split(key)
        params = ppo_losses.PPONetworkParams(
            policy=ppo_network.policy_network.init(key_policy), value=ppo_network.value_network.init(key_value)
        )
        return TrainingState(
            optimizer_state=optimizer.init(params),
            params=params,
            normalizer_params=running_statistics.init_state(obs_template),
            env_steps=jnp.zeros((2,), jnp.uint32),
            training_step=jnp.zeros((), jnp.int32),
        )

    return jit(init, out_shardings=replicated)(key)


def check_params_fit(what: str, params: Any, target: Any, with_value: bool = True) -> None:
    """Raises ``ValueError`` when ``params`` (``PPOTrainingParams``) do not have the shapes of ``target`` (the
    abstract params of the networks being trained), naming the observation sizes where those differ."""
    shapes = lambda tree: jax.tree.map(lambda x: tuple(getattr(x, "shape", ())), tree)
    got_obs, want_obs = shapes(params.normalizer_params.mean), shapes(target.normalizer_params.mean)
    if got_obs != want_obs:
        raise ValueError(
            f"{what} were trained on observations of shape {got_obs} but this environment's are {want_obs}: "
            "they belong to another environment"
        )
    parts = [("policy_params", params.policy_params, target.policy_params)]
    if with_value:
        parts.append(("value_params", params.value_params, target.value_params))
    for name, have, want in parts:
        have_leaves = jax.tree_util.tree_flatten_with_path(have)[0]
        want_leaves = jax.tree_util.tree_flatten_with_path(want)[0]
        have_map = {jax.tree_util.keystr(p): tuple(x.shape) for p, x in have_leaves}
        want_map = {jax.tree_util.keystr(p): tuple(x.shape) for p, x in want_leaves}
        if have_map != want_map:
            wrong = sorted(k for k in have_map.keys() | want_map.keys() if have_map.get(k) != want_map.get(k))
            listed = "; ".join(f"{k}: {have_map.get(k)} given, {want_map.get(k)} expected" for k in wrong[:4])
            raise ValueError(f"{what}.{name} do not fit these networks ({listed})")


def start_from_params(
    args: Arguments,
    training_state: TrainingState,
    ppo_network: ppo_networks.PPONetworks,
    obs_size: Any,
    optimizer: optax.GradientTransformation,
    jit: Callable[..., Any],
    replicated: NamedSharding,
) -> TrainingState:
    """``training_state`` starting from ``restore_params`` (its value parameters only with ``restore_value_fn``),
    once they are checked to fit the networks."""
    restore_params = args.restore_params
    target = checkpoint.abstract_params(ppo_network, obs_size)
    check_params_fit("restore_params", restore_params, target, args.restore_value_fn)
    value = restore_params.value_params if args.restore_value_fn else training_state.params.value
    params = ppo_losses.PPONetworkParams(policy=restore_params.policy_params, value=value)
    normalizer = restore_params.normalizer_params
    if isinstance(normalizer, running_statistics.RunningStatisticsState):
        # The run's normalize_observations_std_eps applies; a loaded state's setting would only retrace.
        normalizer = normalizer.replace(std_eps=training_state.normalizer_params.std_eps)
    return training_state.replace(
        params=jax.device_put(params, replicated),
        normalizer_params=jax.device_put(normalizer, replicated),
        optimizer_state=jit(optimizer.init, out_shardings=replicated)(params),
    )


def check_resume_config(path: str | os.PathLike, requested: Mapping[str, Any], allow: Any) -> None:
    """Refuses to resume from the checkpoint at ``path`` with a configuration other than its saved one (see
    ``resume.check_config``); allowed changes are logged."""
    step_dir = resolve_for(path, "jax")
    changed = resume.check_config(step_dir, checkpoint.load_config_json(step_dir), requested, allow)
    for name, (saved, now) in changed.items():
        logging.warning("resuming from %s with %s changed from %r to %r", step_dir, name, saved, now)


def restore_training(
    path: str, training_state: TrainingState, key_run: jax.Array
) -> tuple[TrainingState, jax.Array, int]:
    """Loads the complete training state saved at ``path`` into the shardings of ``training_state``."""
    config = checkpoint.load_config_json(path)
    params_target = PPOTrainingParams(
        training_state.normalizer_params, training_state.params.policy, training_state.params.value
    )
    params = checkpoint.restore_item(path, "params", params_target)
    state_target = {
        "optimizer_state": training_state.optimizer_state,
        "env_steps": training_state.env_steps,
        "training_step": training_state.training_step,
        "key": key_run,
    }
    state = checkpoint.restore_item(path, "state", state_target)
    env_steps = int(config["env_steps"])
    if pair_to_steps(jax.device_get(state["env_steps"])) != env_steps:
        raise ValueError(f"checkpoint at {path!r} is inconsistent: its step counters disagree")
    restored = training_state.replace(
        optimizer_state=state["optimizer_state"],
        params=ppo_losses.PPONetworkParams(policy=params.policy_params, value=params.value_params),
        normalizer_params=params.normalizer_params,
        env_steps=state["env_steps"],
        training_step=state["training_step"],
    )
    return restored, state["key"], env_steps


def copied(tree: Any) -> Any:
    """Fresh device buffers holding ``tree``'s values: the training call donates the state's own buffers, which
    then read as deleted wherever a callback kept them."""
    return jax.tree.map(jnp.copy, tree)


def current_params(ts: TrainingState) -> PPOTrainingParams:
    """The parameters of ``ts`` in the form ``make_policy``, callbacks and checkpoints take."""
    return PPOTrainingParams(ts.normalizer_params, ts.params.policy, ts.params.value)


class PPOBackend:
    """The run's training state and what the run driver does with it: the compiled training call steps it, the
    evaluation reads its parameters, and checkpoints are written from it into ``args.save_checkpoint_path``.

    ``start`` gives it the compiled programs; before that (a run with nothing to train) it can only be saved.
    """

    def __init__(self, args: Arguments, config: dict[str, Any] | None, training_state: TrainingState, key_run: Any):
        path = args.save_checkpoint_path
        self._saver = checkpoint.Saver(path, max_to_keep=args.config.run.max_to_keep) if path else None
        self._args, self._config = args, config
        self.training_state, self.env_state, self.key_run = training_state, None, key_run
        self._reset_fn = self._training_fn = self._make_evaluator = self._evaluator = None
        self._key_env: jax.Array | None = None
        self._step_metrics: dict[str, Any] = {}

    def start(
        self,
        reset_fn: Any,
        training_fn: Any,
        env_state: Any,
        key_env: jax.Array,
        make_evaluator: Callable[[int], acting.Evaluator] | None,
    ) -> None:
        """The compiled reset and training call, the envs' state to start from, and ``make_evaluator(skipped)``, the
        evaluator past ``skipped`` evaluations (``None``: nothing is evaluated)."""
        self._reset_fn, self._training_fn, self.env_state, self._key_env = reset_fn, training_fn, env_state, key_env
        self._make_evaluator = make_evaluator

    def skip_evaluations(self, count: int) -> None:
        self._evaluator = self._make_evaluator(count)

    def reset_envs(self, env_steps: int) -> None:
        del env_steps  # the reset's key follows the training step count, which the state holds
        step = int(jax.device_get(self.training_state.training_step))
        self.env_state = self._reset_fn(jax.random.fold_in(self._key_env, step))

    def train(self, num_steps: int) -> None:
        del num_steps  # compiled into the training call
        self.training_state, self.env_state, metrics = self._training_fn(
            self.training_state, self.env_state, self.key_run
        )
        self._step_metrics = jax.device_get(metrics)  # waits for the call: the driver's timing is honest

    def training_metrics(self) -> Mapping[str, Any]:
        return self._step_metrics

    def evaluate(self, training_metrics: Mapping[str, float]) -> dict[str, float]:
        return self._evaluator.run_evaluation(current_params(self.training_state), training_metrics=training_metrics)

    def params(self) -> PPOTrainingParams:
        return copied(current_params(self.training_state))

    def save(self, env_steps: int) -> None:
        """Saves the training state (and the envs' state once there is one) as the checkpoint at ``env_steps``."""
        if self._saver is None:
            return
        ts = self.training_state
        if pair_to_steps(jax.device_get(ts.env_steps)) % _TWO_32 != env_steps % _TWO_32:
            raise RuntimeError("internal error: device and host env-step counts disagree")
        state = {
            "optimizer_state": ts.optimizer_state,
            "env_steps": ts.env_steps,
            "training_step": ts.training_step,
            "key": self.key_run,
        }
        config = {**self._config, "env_steps": env_steps}
        self._saver.save(env_steps, current_params(ts), state, config, self.env_state)

    def close(self) -> None:
        """Closes the checkpoint writer."""
        if self._saver is not None:
            self._saver.close()


def make_evaluator(
    args: Arguments,
    eval_env: Env,
    make_policy: Callable[..., types.Policy],
    key: jax.Array,
    run_fn: Any,
    skipped_evaluations: int,
) -> acting.Evaluator:
    """Brax's ``Evaluator`` over the compiled evaluation run ``run_fn``, its key past the ``skipped_evaluations``
    an unbroken run made before a resumed one starts."""
    config = args.config
    return acting.Evaluator(
        eval_env,
        functools.partial(make_policy, deterministic=config.run.deterministic_eval),
        num_eval_envs=config.env.num_eval_envs,
        episode_length=config.env.episode_length,
        action_repeat=config.env.action_repeat,
        key=acting.key_after_evaluations(key, skipped_evaluations),
        run_fn=run_fn,
    )
