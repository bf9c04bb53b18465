"""The JAX PPO's training step: collect unrolls with the current policy, then ``make_ppo_update`` on them.

``TrainingState`` is what one step changes. The env-step count is a ``uint32`` pair ``(high, low)`` so that it stays
exact past 2**32 without 64-bit JAX (``steps_to_pair``, ``pair_to_steps``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax

from brax_core.envs.base import Env
from brax_core.training import acting, gradients, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import losses as ppo_losses
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import networks_vision
from brax_core.training.agents.ppo import optimizer as ppo_optimizer
from brax_core.training.agents.ppo.config import PPOConfig

AXIS = "i"  # the device mesh's one axis: the training envs are split over it
_TWO_32 = 1 << 32


@flax.struct.dataclass
class TrainingState:
    """Contains training state for the learner.

    ``env_steps`` is the env-step count as a ``uint32`` pair ``(high, low)`` so it is exact past 2**32 without
    64-bit JAX; ``training_step`` counts training steps and, folded into the run key, gives every step its own
    random key whatever the epoch boundaries (which is what makes a resumed run identical to an unbroken one).
    """

    optimizer_state: optax.OptState
    params: ppo_losses.PPONetworkParams
    normalizer_params: running_statistics.RunningStatisticsState
    env_steps: jax.Array
    training_step: jax.Array


def steps_to_pair(n: int) -> np.ndarray:
    """An exact non-negative step count as a ``uint32`` pair ``(high, low)``."""
    if n < 0 or n >= _TWO_32 * _TWO_32:
        raise ValueError(f"step count {n} is outside [0, 2**64)")
    return np.array([n >> 32, n & (_TWO_32 - 1)], np.uint32)


def pair_to_steps(pair: Any) -> int:
    high, low = (int(v) for v in np.asarray(pair, np.uint64))
    return (high << 32) + low


def add_steps(pair: jax.Array, n: int) -> jax.Array:
    """``pair + n`` with the carry from the low word into the high word (``n < 2**32``)."""
    low = pair[1] + jnp.uint32(n)
    carry = (low < pair[1]).astype(jnp.uint32)
    return jnp.stack([pair[0] + carry, low])


def make_ppo_update(
    ppo_network: ppo_networks.PPONetworks,
    optimizer: optax.GradientTransformation,
    loss_fn: Callable[..., Any],
    *,
    num_minibatches: int,
    num_updates_per_batch: int,
    normalizer_update: Callable[..., running_statistics.RunningStatisticsState] | None = None,
    learning_rate_schedule: ppo_optimizer.LRSchedule | None = None,
    desired_kl: float = 0.01,
    learning_rate_schedule_min_lr: float = 1e-5,
    learning_rate_schedule_max_lr: float = 1e-2,
    clipping_epsilon_value: float | None = None,
    use_distributional_critic: bool = False,
    augment_pixels: bool = False,
    axis_name: str = AXIS,
) -> Callable[[TrainingState, types.Transition, jax.Array], tuple[TrainingState, dict[str, jax.Array]]]:
    """The PPO update of one collected batch: ``update(ts, data, key) -> (ts, metrics)``.

    ``data`` is one device's share of the batch, batch-major (``[unrolls, T, ...]``). The update runs inside a
    ``shard_map`` over ``axis_name``: gradients and observation statistics are averaged over that axis, so one
    device holding the whole batch and several devices holding equal shares of it compute the same update (up to
    the per-device parts PPO keeps local, as in Brax: minibatch shuffling, advantage normalisation and the
    sampled entropy estimate). ``normalizer_update`` is ``running_statistics.update`` with its options bound
    (``None``: the observation statistics are left as they are). The step counters of ``ts`` are not changed.
    """
    adaptive_kl = learning_rate_schedule == ppo_optimizer.LRSchedule.ADAPTIVE_KL
    old_values = clipping_epsilon_value is not None and not use_distributional_critic
    loss_and_pgrad_fn = gradients.loss_and_pgrad(loss_fn, pmap_axis_name=axis_name, has_aux=True)

    def minibatch_step(carry, data: types.Transition, normalizer_params):
        optimizer_state, params, key = carry
        key, key_loss = jax.random.split(key)
        (_, metrics), grads = loss_and_pgrad_fn(params, normalizer_params, data, key_loss)
        metrics["grad_norm"] = optax.tree.norm(grads)  # of the gradients averaged over devices, before clipping
        if adaptive_kl:
            # The rate for this minibatch's step already follows its KL (measured before the step), as in Brax.
            optimizer_state, metrics["learning_rate"] = ppo_optimizer.adaptive_kl_learning_rate(
                optimizer_state,
                jax.lax.pmean(metrics["kl_mean"], axis_name),
                desired_kl,
                learning_rate_schedule_min_lr,
                learning_rate_schedule_max_lr,
            )
        updates, optimizer_state = optimizer.update(grads, optimizer_state, params)
        params = optax.apply_updates(params, updates)
        return (optimizer_state, params, key), metrics

    def sgd_step(carry, _, data: types.Transition, normalizer_params):
        optimizer_state, params, key = carry
        if augment_pixels:
            key, key_shift = jax.random.split(key)
            data = _shift_pixels(data, key_shift)
        key, key_perm, key_grad = jax.random.split(key, 3)
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(minibatch_step, normalizer_params=normalizer_params),
            (optimizer_state, params, key_grad),
            _shuffled_minibatches(data, key_perm, num_minibatches),
        )
        return (optimizer_state, params, key), metrics

    def update(ts: TrainingState, data: types.Transition, key: jax.Array) -> tuple[TrainingState, dict[str, jax.Array]]:
        data = _with_behaviour_outputs(ppo_network, ts, data, values=old_values, distribution=adaptive_kl)
        normalizer_params = ts.normalizer_params
        # ADAPTIVE_KL measures the KL against the behaviour policy, so the statistics it was collected with stay
        # in place until after SGD.
        if normalizer_update is not None and not adaptive_kl:
            normalizer_params = normalizer_update(normalizer_params, networks_vision.remove_pixels(data.observation))
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),
            (ts.optimizer_state, ts.params, key),
            (),
            length=num_updates_per_batch,
        )
        if normalizer_update is not None and adaptive_kl:
            normalizer_params = normalizer_update(normalizer_params, networks_vision.remove_pixels(data.observation))
        ts = ts.replace(optimizer_state=optimizer_state, params=params, normalizer_params=normalizer_params)
        return ts, jax.tree.map(jnp.mean, metrics)

    return update


def _with_behaviour_outputs(
    ppo_network: ppo_networks.PPONetworks,
    ts: TrainingState,
    data: types.Transition,
    *,
    values: bool,
    distribution: bool,
) -> types.Transition:
    """``data`` with what the loss compares against the behaviour policy: its values (clipped value loss) and its
    distribution parameters (ADAPTIVE_KL). The parameters did not change during collection, so one pass over the
    batch gives what the actor would have recorded step by step."""
    extras = dict(data.extras["policy_extras"])
    if values:
        extras["value"] = ppo_network.value_network.apply(ts.normalizer_params, ts.params.value, data.observation)
    if distribution:
        extras["distribution_params"] = ppo_network.policy_network.apply(
            ts.normalizer_params, ts.params.policy, data.observation
        )
    return data._replace(extras={**data.extras, "policy_extras": extras})


def _shift_pixels(data: types.Transition, key: jax.Array) -> types.Transition:
    """``data`` with its observations and next observations shifted alike (``random_shift_pixels``)."""
    return data._replace(
        observation=random_shift_pixels(data.observation, key),
        next_observation=random_shift_pixels(data.next_observation, key),
    )


def _shuffled_minibatches(data: types.Transition, key: jax.Array, num_minibatches: int) -> types.Transition:
    """``data``'s unrolls in a random order, split into ``num_minibatches`` minibatches (a leading axis)."""
    local_batch = jax.tree.leaves(data.reward)[0].shape[0]
    permutation = jax.random.permutation(key, local_batch)
    return jax.tree.map(lambda x: jnp.reshape(x[permutation], (num_minibatches, -1) + x.shape[1:]), data)


def random_shift_pixels(observation: Any, key: jax.Array, max_shift: int = 4) -> Any:
    """Image views of a ``[batch, time, H, W, C]`` dict observation, each moved by a random offset.

    Every view of every batch entry gets its own offset of up to ``max_shift`` pixels along both image axes, the same
    at every time step of the unroll, and the pixels moved in from outside repeat the edge (random-shift
    augmentation as in DrQ). Non-image entries are returned unchanged; the same ``key`` gives the same offsets, so
    an observation and the next one move together.
    """
    if not isinstance(observation, Mapping):
        return observation
    views = sorted(k for k in observation if str(k).startswith(networks_vision.PIXEL_PREFIX))
    out = dict(observation)
    for index, name in enumerate(views):
        images = observation[name]
        batch = images.shape[0]
        offsets = jax.random.randint(jax.random.fold_in(key, index), (batch, 2), 0, 2 * max_shift + 1)
        pad = ((0, 0), (max_shift, max_shift), (max_shift, max_shift), (0, 0))

        def shift(unroll: jax.Array, offset: jax.Array, pad=pad) -> jax.Array:
            padded = jnp.pad(unroll, pad, mode="edge")
            start = (0, offset[0], offset[1], 0)
            return jax.lax.dynamic_slice(padded, start, unroll.shape)

        out[name] = jax.vmap(shift)(images, offsets)
    return out


# The hyperparameters the loss and the update take, under the same names.
_LOSS_FIELDS = (
    "entropy_cost", "discounting", "reward_scaling", "gae_lambda", "clipping_epsilon", "normalize_advantage",
    "vf_loss_coefficient", "bootstrap_on_timeout", "clipping_epsilon_value", "use_distributional_critic",
)  # fmt: skip
_UPDATE_FIELDS = (
    "num_minibatches", "num_updates_per_batch", "learning_rate_schedule", "desired_kl", "learning_rate_schedule_min_lr",
    "learning_rate_schedule_max_lr", "clipping_epsilon_value", "use_distributional_critic",
)  # fmt: skip


def make_update(
    config: PPOConfig,
    ppo_network: ppo_networks.PPONetworks,
    optimizer: optax.GradientTransformation,
    augment_pixels: bool = False,
) -> Callable[[TrainingState, types.Transition, jax.Array], tuple[TrainingState, dict[str, jax.Array]]]:
    """The PPO update (``make_ppo_update``) with the loss and the observation statistics ``config`` ask for."""
    fields = config.flat()
    loss_fn = functools.partial(
        ppo_losses.compute_ppo_loss, ppo_network=ppo_network, **{name: fields[name] for name in _LOSS_FIELDS}
    )
    normalizer_update = functools.partial(
        running_statistics.update,
        pmap_axis_name=AXIS,
        until_count=config.algorithm.normalize_until_count,
        std_eps=config.algorithm.normalize_observations_std_eps,
        mode=config.algorithm.normalize_observations_mode,
    )
    return make_ppo_update(
        ppo_network,
        optimizer,
        loss_fn,
        normalizer_update=normalizer_update if config.algorithm.normalize_observations else None,
        augment_pixels=augment_pixels,
        **{name: fields[name] for name in _UPDATE_FIELDS},
    )


def make_training_step(
    env: Env,
    make_policy: Callable[..., types.Policy],
    update: Callable[..., tuple[TrainingState, dict[str, jax.Array]]],
    *,
    unroll_length: int,
    num_unrolls: int,
    extra_fields: tuple[str, ...],
    log_training_metrics: bool,
    env_steps_per_training_step: int,
) -> Callable[..., tuple[TrainingState, Any, dict[str, jax.Array]]]:
    """One device's training step: collect ``num_unrolls`` unrolls from every env with the current policy, then
    update on them (``make_ppo_update``). ``training_step(ts, env_state, key) -> (ts, env_state, metrics)``."""

    def training_step(ts: TrainingState, env_state: Any, key: jax.Array):
        key_sgd, key_generate = jax.random.split(key)
        policy = make_policy((ts.normalizer_params, ts.params.policy))

        def unroll(carry, _):
            state, k = carry
            k, k_unroll = jax.random.split(k)
            state, data = acting.generate_unroll(env, state, policy, k_unroll, unroll_length, extra_fields)
            return (state, k), data

        (env_state, _), data = jax.lax.scan(unroll, (env_state, key_generate), (), length=num_unrolls)
        # [unrolls, T, envs, ...] -> [unrolls * envs, T, ...]: the batch-major layout the loss expects.
        data = jax.tree.map(lambda x: jnp.reshape(jnp.swapaxes(x, 1, 2), (-1,) + x.shape[1:2] + x.shape[3:]), data)
        ts, metrics = update(ts, data, key_sgd)
        if log_training_metrics:
            done = data.extras["state_extras"]["episode_done"]
            episodes = data.extras["state_extras"]["episode_metrics"]
            metrics["episode_count"] = jnp.sum(done)
            for name, value in episodes.items():
                metrics[f"episode_sum/{name}"] = jnp.sum(value * done)
        ts = ts.replace(
            env_steps=add_steps(ts.env_steps, env_steps_per_training_step), training_step=ts.training_step + 1
        )
        return ts, env_state, metrics

    return training_step
