"""Running mean and standard deviation of observations (``brax.training.acme.running_statistics``).

Statistics are merged batch by batch with Welford's parallel update, so a stream of batches gives the same
mean and variance as one pass over all the data, in float32 without catastrophic cancellation. Under ``pmap``
or ``shard_map`` the per-device counts and sums are added across devices, so every device holds the same state.

Definitions (mirrored by the torch trainer), for a batch of ``n`` observations ``x``:

``mode='welford'`` (the default) keeps the summed squared deviations in ``summed_variance``:
  count'  = count + n
  mean'   = mean + sum(x - mean) / count'
  summed_variance' = summed_variance + sum((x - mean) * (x - mean'))
  std'    = clip(sqrt(summed_variance' / count' + std_eps), std_min_value, std_max_value)

``mode='ema'`` keeps the variance itself in ``summed_variance`` and merges the batch's mean ``m`` and variance ``v``
at the rate ``r = n / count'`` (RSL-RL's empirical normalisation; the same statistics in exact arithmetic, without a
sum that grows with the run):
  mean'   = mean + r * (m - mean)
  variance' = variance + r * (v - variance + (m - mean) * (m - mean'))
  std'    = clip(sqrt(variance' + std_eps), std_min_value, std_max_value)

With ``until_count`` a batch that would take ``count'`` past ``until_count`` leaves the whole state unchanged, so the
statistics freeze at the last batch that fitted (in both modes; ``count`` stays the number of observations they
hold).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

Nest = Any
MODES = ("welford", "ema")


@struct.dataclass
class NestedMeanStd:
    """A container for running statistics (mean, std) of possibly nested data."""

    mean: Nest
    std: Nest


@struct.dataclass
class RunningStatisticsState(NestedMeanStd):
    """Full state of running statistics computation."""

    count: jax.Array
    summed_variance: Nest
    # A setting, not a statistic: static, so the arrays (and checkpoints of them) are those without it.
    std_eps: float = struct.field(pytree_node=False, default=0.0)


def _zeros_like_spec(x: Any) -> jax.Array:
    return jnp.zeros(getattr(x, "shape", ()), jnp.float32)


def init_state(nest: Nest, std_eps: float = 0.0) -> RunningStatisticsState:
    """Initial statistics for data shaped like ``nest`` (arrays or ``jax.ShapeDtypeStruct``s, no batch dims).

    ``std_eps`` (as Brax's) is kept in the state: ``update`` adds it to the variance unless given another.
    """
    if isinstance(std_eps, bool) or not isinstance(std_eps, int | float) or not math.isfinite(std_eps) or std_eps < 0:
        raise ValueError(f"std_eps must be a finite number >= 0, got {std_eps!r}")
    zeros = jax.tree.map(_zeros_like_spec, nest)
    ones = jax.tree.map(lambda z: jnp.ones_like(z), zeros)
    return RunningStatisticsState(
        count=jnp.zeros((), jnp.float32), mean=zeros, summed_variance=zeros, std=ones, std_eps=float(std_eps)
    )


def _batch_axes(batch_leaf: jax.Array, stat_leaf: jax.Array, validate_shapes: bool) -> tuple[int, ...]:
    n_batch = batch_leaf.ndim - stat_leaf.ndim
    if validate_shapes and (n_batch < 0 or tuple(batch_leaf.shape[n_batch:]) != tuple(stat_leaf.shape)):
        raise ValueError(
            f"batch leaf of shape {tuple(batch_leaf.shape)} does not end with the statistics shape "
            f"{tuple(stat_leaf.shape)}"
        )
    return tuple(range(n_batch))


def update(
    state: RunningStatisticsState,
    batch: Nest,
    *,
    weights: jax.Array | None = None,
    std_min_value: float = 1e-6,
    std_max_value: float = 1e6,
    pmap_axis_name: str | tuple[str, ...] | None = None,
    validate_shapes: bool = True,
    until_count: int | None = None,
    std_eps: float | None = None,
    mode: str = "welford",
) -> RunningStatisticsState:
    """Merges a batch (leading dims are batch dims) into the running statistics.

    Args:
      state: the current statistics.
      batch: data with the structure of the statistics and extra leading batch dimensions.
      weights: optional per-sample weights with the batch dims' shape (0 drops a sample, e.g. padding).
      std_min_value: lower clip of the reported std.
      std_max_value: upper clip of the reported std.
      pmap_axis_name: axis name(s) to sum counts and moments over when running under ``pmap``/``shard_map``.
      validate_shapes: check that every batch leaf ends with its statistic's shape.
      until_count: freeze the statistics once a batch would take their count past this (``None``: never).
      std_eps: added to the variance under the square root of the reported std (``None``: the state's).
      mode: ``'welford'`` or ``'ema'`` (see the module docstring); one run must keep one mode, since
        ``summed_variance`` holds a sum in the first and the variance in the second.
    """
    if std_min_value > std_max_value:
        raise ValueError(f"std_min_value ({std_min_value}) must not exceed std_max_value ({std_max_value})")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not jax.tree.leaves(batch):
        # Nothing to normalise (e.g. observations that are all pixel views): the statistics stay as they are.
        return state
    first_batch = jax.tree.leaves(batch)[0]
    first_stat = jax.tree.leaves(state.mean)[0]
    batch_axes = _batch_axes(first_batch, first_stat, validate_shapes)
    batch_shape = first_batch.shape[: len(batch_axes)]
    if weights is None:
        step_count = jnp.asarray(float(math.prod(batch_shape)), jnp.float32)
    else:
        if tuple(weights.shape) != tuple(batch_shape):
            raise ValueError(
                f"weights have shape {tuple(weights.shape)}; expected the batch shape {tuple(batch_shape)}"
            )
        step_count = jnp.sum(weights.astype(jnp.float32))
    if pmap_axis_name is not None:
        step_count = jax.lax.psum(step_count, axis_name=pmap_axis_name)
    count = state.count + step_count

    def weighted(x: jax.Array) -> jax.Array:
        if weights is None:
            return x
        return x * jnp.reshape(weights, weights.shape + (1,) * (x.ndim - weights.ndim)).astype(x.dtype)

    def total(x: jax.Array, axes: tuple[int, ...]) -> jax.Array:
        s = jnp.sum(x, axis=axes)
        return jax.lax.psum(s, axis_name=pmap_axis_name) if pmap_axis_name is not None else s

    def welford(mean: jax.Array, summed_variance: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        axes = _batch_axes(x, mean, validate_shapes)
        x = x.astype(jnp.float32)
        diff_to_old_mean = x - mean
        new_mean = mean + total(weighted(diff_to_old_mean), axes) / count
        diff_to_new_mean = x - new_mean
        new_summed_variance = summed_variance + total(weighted(diff_to_old_mean * diff_to_new_mean), axes)
        # Rounding can leave a tiny negative total where a feature is constant.
        return new_mean, jnp.maximum(new_summed_variance, 0.0)

    def ema(mean: jax.Array, variance: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        axes = _batch_axes(x, mean, validate_shapes)
        x = x.astype(jnp.float32)
        # The batch's moments pooled over every device (exact for unequal device batches and weights too).
        batch_mean = total(weighted(x), axes) / step_count
        batch_variance = total(weighted(jnp.square(x - batch_mean)), axes) / step_count
        rate = step_count / count
        delta = batch_mean - mean
        new_mean = mean + rate * delta
        new_variance = variance + rate * (batch_variance - variance + delta * (batch_mean - new_mean))
        return new_mean, jnp.maximum(new_variance, 0.0)

    merge = welford if mode == "welford" else ema
    treedef = jax.tree.structure(state.mean)
    leaves = zip(
        jax.tree.leaves(state.mean), jax.tree.leaves(state.summed_variance), treedef.flatten_up_to(batch), strict=True
    )
    pairs = [merge(m, sv, x) for m, sv, x in leaves]
    mean = jax.tree.unflatten(treedef, [p[0] for p in pairs])
    summed_variance = jax.tree.unflatten(treedef, [p[1] for p in pairs])
    if std_eps is None:
        std_eps = state.std_eps
    per_sample = (lambda sv: sv / count) if mode == "welford" else (lambda v: v)
    std = jax.tree.map(
        lambda sv: jnp.clip(jnp.sqrt(per_sample(sv) + std_eps), std_min_value, std_max_value), summed_variance
    )
    new_state = RunningStatisticsState(
        count=count, mean=mean, summed_variance=summed_variance, std=std, std_eps=state.std_eps
    )
    if until_count is None:
        return new_state
    frozen = count > until_count
    return jax.tree.map(lambda old, new: jnp.where(frozen, old, new), state, new_state)


def normalize(batch: Nest, mean_std: NestedMeanStd, max_abs_value: float | None = None) -> Nest:
    """``(x - mean) / std``, optionally clipped to ``[-max_abs_value, max_abs_value]``."""

    def one(x: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return x
        y = (x - mean) / std
        if max_abs_value is not None:
            y = jnp.clip(y, -max_abs_value, max_abs_value)
        return y

    return jax.tree.map(one, batch, mean_std.mean, mean_std.std)


def denormalize(batch: Nest, mean_std: NestedMeanStd) -> Nest:
    """The inverse of ``normalize`` (without clipping): ``x * std + mean``."""

    def one(x: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return x
        return x * std + mean

    return jax.tree.map(one, batch, mean_std.mean, mean_std.std)
