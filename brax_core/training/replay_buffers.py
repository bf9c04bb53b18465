"""Replay buffers (``brax.training.replay_buffers`` counterpart): fixed-size FIFO queues of samples kept on the
accelerator as one ``[max_replay_size, flat]`` array, for the off-policy trainers.

The classes, their arguments, state fields and semantics are Brax 0.14.2's, so its tests and code run by the import
prefix: ``UniformSamplingQueue`` (uniform sampling with replacement, what SAC uses), ``Queue`` (first in, first out,
optionally cyclic), ``PmapWrapper`` and ``PjitWrapper`` (one queue per device). A queue's ``data`` keeps the oldest
sample first: an insert that does not fit after the newest drops the oldest by shifting the array, as Brax's does,
so ``data``'s layout is Brax's.

Where this differs from Brax: a sample's leaves are stored in one array of one dtype, and Brax promotes mixed leaves
silently (an ``int32`` counter kept as ``float32`` loses its low bits above 2**24); here a sample whose leaves cannot
all be held exactly in their common dtype is refused at construction, and an insert whose structure or dtypes do not
fit the buffer is refused before anything is traced, naming what was expected.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import flax
import jax
import jax.numpy as jnp
import numpy as np
from jax import flatten_util

from brax_core.training.types import PRNGKey

State = TypeVar("State")
Sample = TypeVar("Sample")

__all__ = [
    "PjitWrapper", "PmapWrapper", "PrimitiveReplayBufferState", "Queue", "QueueBase", "ReplayBuffer",
    "ReplayBufferState", "UniformSamplingQueue",
]


class ReplayBuffer(abc.ABC, Generic[State, Sample]):
    """A replay buffer's interface: a pure state (``init``) that ``insert`` and ``sample`` return anew.

    ``insert``/``sample`` run the host-side checks (``check_can_insert``/``check_can_sample``, never inside ``jit``)
    and then the traceable ``insert_internal``/``sample_internal``."""

    @abc.abstractmethod
    def init(self, key: PRNGKey) -> State:
        """The empty buffer's state; ``key`` seeds its sampling."""

    def insert(self, buffer_state: State, samples: Sample) -> State:
        """``buffer_state`` with ``samples`` (leaves with a leading batch axis) appended."""
        self.check_can_insert(buffer_state, samples, 1)
        return self.insert_internal(buffer_state, samples)

    def sample(self, buffer_state: State) -> tuple[State, Sample]:
        """A batch of samples and the state after drawing it."""
        self.check_can_sample(buffer_state, 1)
        return self.sample_internal(buffer_state)

    def check_can_insert(self, buffer_state: State, samples: Sample, shards: int) -> None:
        """Raises when ``samples`` cannot be inserted (host side: not under ``jit``)."""

    def check_can_sample(self, buffer_state: State, shards: int) -> None:
        """Raises when no batch can be drawn (host side: not under ``jit``)."""

    @abc.abstractmethod
    def size(self, buffer_state: State) -> int:
        """How many samples can be drawn."""

    @abc.abstractmethod
    def insert_internal(self, buffer_state: State, samples: Sample) -> State:
        """``insert`` without its checks: traceable."""

    @abc.abstractmethod
    def sample_internal(self, buffer_state: State) -> tuple[State, Sample]:
        """``sample`` without its checks: traceable."""


@flax.struct.dataclass
class ReplayBufferState:
    """A queue's state: ``data`` (``[max_replay_size, flat]``, oldest first), where the next insert goes
    (``insert_position``), where the next draw of a ``Queue`` starts (``sample_position``), and the sampling key."""

    data: jnp.ndarray
    insert_position: jnp.ndarray
    sample_position: jnp.ndarray
    key: PRNGKey


def _common_dtype(sample: Any) -> np.dtype:
    """The one dtype a sample's leaves are stored in; ``ValueError`` when a leaf would not survive it exactly."""
    leaves = jax.tree_util.tree_flatten_with_path(sample)[0]
    dtypes = [(jax.tree_util.keystr(path), np.dtype(jnp.result_type(leaf))) for path, leaf in leaves]
    if not dtypes:
        raise ValueError("dummy_data_sample must hold at least one array; got an empty pytree")
    common = np.dtype(jnp.result_type(*[dtype for _, dtype in dtypes]))
    lossy = [f"{name or 'the sample'} ({dtype})" for name, dtype in dtypes if not np.can_cast(dtype, common, "safe")]
    if lossy:
        raise ValueError(
            f"dummy_data_sample: a replay buffer stores a sample's leaves as one array of one dtype, here {common}, "
            f"which cannot hold {', '.join(lossy)} exactly; cast the leaves to one dtype, or to dtypes that "
            f"{common} holds exactly"
        )
    return common


class QueueBase(ReplayBuffer[ReplayBufferState, Sample], Generic[Sample]):
    """A FIFO queue of at most ``max_replay_size`` samples shaped as ``dummy_data_sample`` (one sample, no batch
    axis); an insert beyond the capacity drops the oldest samples. Subclasses say how a batch of
    ``sample_batch_size`` is drawn."""

    def __init__(self, max_replay_size: int, dummy_data_sample: Sample, sample_batch_size: int):
        for name, value in (("max_replay_size", max_replay_size), ("sample_batch_size", sample_batch_size)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        dtype = _common_dtype(dummy_data_sample)
        self._dummy = jax.tree.map(jnp.asarray, dummy_data_sample)
        # Unflattened from the sample as given, so a draw returns every leaf in its own dtype.
        flat, unflatten = flatten_util.ravel_pytree(self._dummy)
        self._flatten_fn = jax.vmap(lambda x: flatten_util.ravel_pytree(x)[0])
        self._unflatten_fn = jax.vmap(unflatten)
        self._data_shape = (int(max_replay_size), int(flat.size))
        self._data_dtype = dtype
        self._sample_batch_size = int(sample_batch_size)
        # The sampleable count as the host sees it (Brax's bookkeeping, which ``Queue``'s checks read).
        self._size = 0

    def init(self, key: PRNGKey) -> ReplayBufferState:
        return ReplayBufferState(
            data=jnp.zeros(self._data_shape, self._data_dtype), insert_position=jnp.zeros((), jnp.int32),
            sample_position=jnp.zeros((), jnp.int32), key=key,
        )

    def _check_samples(self, samples: Any) -> int:
        """The batch size of ``samples``; ``ValueError`` naming the mismatch when they are not a batch of the
        buffer's samples."""
        want = jax.tree.structure(self._dummy)
        if jax.tree.structure(samples) != want:
            raise ValueError(f"samples must be a batch of the buffer's samples, structured as {want}; got "
                             f"{jax.tree.structure(samples)}")
        sizes = set()
        for (path, leaf), dummy in zip(jax.tree_util.tree_flatten_with_path(samples)[0], jax.tree.leaves(self._dummy),
                                       strict=True):
            shape, dtype = tuple(np.shape(leaf)), np.dtype(jnp.result_type(leaf))
            if shape[1:] != tuple(dummy.shape) or not shape:
                raise ValueError(f"samples{jax.tree_util.keystr(path)} has shape {shape}; expected (batch, "
                                 f"{', '.join(map(str, dummy.shape))}) as the buffer's samples")
            if not np.can_cast(dtype, self._data_dtype, "safe"):
                raise ValueError(f"samples{jax.tree_util.keystr(path)} has dtype {dtype}; the buffer holds "
                                 f"{self._data_dtype}, which would not keep its values")
            sizes.add(shape[0])
        if len(sizes) != 1:
            raise ValueError(f"samples' leaves must share their batch size; got {sorted(sizes)}")
        return sizes.pop()

    def check_can_insert(self, buffer_state: ReplayBufferState, samples: Sample, shards: int) -> None:
        if not isinstance(shards, int):
            raise TypeError("check_can_insert runs on the host, not under jit: shards must be an int")
        insert_size = self._check_samples(samples) // shards
        if insert_size > self._data_shape[0]:
            raise ValueError(
                "Trying to insert a batch of samples larger than the maximum replay size. "
                f"num_samples: {insert_size}, max replay size {self._data_shape[0]}"
            )
        self._size = min(self._data_shape[0], self._size + insert_size)

    def _check_state(self, buffer_state: ReplayBufferState) -> None:
        if buffer_state.data.shape != self._data_shape:
            raise ValueError(
                f"buffer_state.data has shape {buffer_state.data.shape}; this buffer's data shape is "
                f"{self._data_shape} (max_replay_size, flattened sample size)"
            )

    def insert_internal(self, buffer_state: ReplayBufferState, samples: Sample) -> ReplayBufferState:
        self._check_state(buffer_state)
        rows = self._flatten_fn(samples).astype(self._data_dtype)
        data, position = buffer_state.data, buffer_state.insert_position
        # Where the new rows do not fit after the newest, shift everything left by the shortfall (dropping the
        # oldest rows), so the queue stays oldest-first; the draw position moves with it.
        shift = jnp.minimum(0, len(data) - position - len(rows))
        data = jax.lax.cond(shift, lambda: jnp.roll(data, shift, axis=0), lambda: data)
        position = position + shift
        data = jax.lax.dynamic_update_slice_in_dim(data, rows, position, axis=0)
        return buffer_state.replace(
            data=data,
            insert_position=(position + len(rows)) % (len(data) + 1),
            sample_position=jnp.maximum(0, buffer_state.sample_position + shift),
        )

    def sample_internal(self, buffer_state: ReplayBufferState) -> tuple[ReplayBufferState, Sample]:
        raise NotImplementedError(f"{type(self).__name__} does not say how a batch is drawn: use Queue or "
                                  "UniformSamplingQueue")

    def size(self, buffer_state: ReplayBufferState) -> int:
        return buffer_state.insert_position - buffer_state.sample_position  # type: ignore[return-value]


class Queue(QueueBase[Sample], Generic[Sample]):
    """A FIFO queue whose draws take the oldest ``sample_batch_size`` samples not drawn yet and remove them; with
    ``cyclic=True`` draws go round the queue instead (``[0, 1, 2]`` in batches of 2: ``[0, 1]``, ``[2, 0]``,
    ``[1, 2]``) and remove nothing."""

    def __init__(self, max_replay_size: int, dummy_data_sample: Sample, sample_batch_size: int,
                 cyclic: bool = False):
        super().__init__(max_replay_size, dummy_data_sample, sample_batch_size)
        self._cyclic = bool(cyclic)

    def check_can_sample(self, buffer_state: ReplayBufferState, shards: int) -> None:
        if not isinstance(shards, int):
            raise TypeError("check_can_sample runs on the host, not under jit: shards must be an int")
        if self._size < self._sample_batch_size:
            raise ValueError(
                f"Trying to sample {self._sample_batch_size * shards} elements, but only {self._size * shards} "
                "available."
            )
        if not self._cyclic:
            self._size -= self._sample_batch_size

    def sample_internal(self, buffer_state: ReplayBufferState) -> tuple[ReplayBufferState, Sample]:
        self._check_state(buffer_state)
        index = (jnp.arange(self._sample_batch_size) + buffer_state.sample_position) % buffer_state.insert_position
        batch = jnp.take(buffer_state.data, index, axis=0, mode="wrap")
        position = buffer_state.sample_position + self._sample_batch_size
        if self._cyclic:
            position = position % buffer_state.insert_position
        return buffer_state.replace(sample_position=position), self._unflatten_fn(batch)

    def size(self, buffer_state: ReplayBufferState) -> int:
        if self._cyclic:
            return buffer_state.insert_position  # type: ignore[return-value]
        return super().size(buffer_state)


class UniformSamplingQueue(QueueBase[Sample], Generic[Sample]):
    """A FIFO queue whose draws are ``sample_batch_size`` samples drawn uniformly with replacement from all it
    holds; drawing removes nothing."""

    def sample_internal(self, buffer_state: ReplayBufferState) -> tuple[ReplayBufferState, Sample]:
        self._check_state(buffer_state)
        key, draw_key = jax.random.split(buffer_state.key)
        index = jax.random.randint(draw_key, (self._sample_batch_size,), buffer_state.sample_position,
                                   buffer_state.insert_position)
        batch = jnp.take(buffer_state.data, index, axis=0, mode="wrap")
        return buffer_state.replace(key=key), self._unflatten_fn(batch)


def _deal(samples: Any, shards: int) -> Any:
    """A batch dealt round-robin into ``[shards, batch / shards, ...]``: each shard gets every ``shards``-th
    sample, in order, so every shard inserts the start of the batch before its end."""
    return jax.tree.map(lambda x: jnp.swapaxes(jnp.reshape(x, (-1, shards, *x.shape[1:])), 0, 1), samples)


def _gather(samples: Any) -> Any:
    """``_deal``'s inverse: ``[shards, n, ...]`` interleaved back into ``[shards * n, ...]``."""
    return jax.tree.map(lambda x: jnp.reshape(jnp.swapaxes(x, 0, 1), (-1, *x.shape[2:])), samples)


class _Sharded(ReplayBuffer[State, Sample]):
    """A buffer of one queue per device: capacity and batch are the wrapped queue's times the devices."""

    _buffer: ReplayBuffer[State, Sample]

    def insert_internal(self, buffer_state: State, samples: Sample) -> State:
        raise ValueError(f"{type(self).__name__}.insert_internal is not called: use insert")

    def sample_internal(self, buffer_state: State) -> tuple[State, Sample]:
        raise ValueError(f"{type(self).__name__}.sample_internal is not called: use sample")


class PmapWrapper(_Sharded[State, Sample]):
    """``buffer`` on each of ``local_device_count`` devices under ``pmap`` (no sample moves between devices).
    For use outside ``pmap``; inside it, use the plain buffer."""

    def __init__(self, buffer: ReplayBuffer[State, Sample], local_device_count: int | None = None):
        self._buffer = buffer
        self._num_devices = local_device_count or jax.local_device_count()

    def init(self, key: PRNGKey) -> State:
        keys = jax.random.split(jax.random.fold_in(key, jax.process_index()), self._num_devices)
        return jax.pmap(self._buffer.init)(keys)

    def insert(self, buffer_state: State, samples: Sample) -> State:
        self._buffer.check_can_insert(buffer_state, samples, self._num_devices)
        return jax.pmap(self._buffer.insert_internal)(buffer_state, _deal(samples, self._num_devices))

    def sample(self, buffer_state: State) -> tuple[State, Sample]:
        self._buffer.check_can_sample(buffer_state, self._num_devices)
        buffer_state, samples = jax.pmap(self._buffer.sample_internal)(buffer_state)
        return buffer_state, _gather(samples)

    def size(self, buffer_state: State) -> int:
        return jax.pmap(lambda s: jax.lax.psum(self._buffer.size(s), "x"), axis_name="x")(buffer_state)[0]


class PjitWrapper(_Sharded[State, Sample]):
    """``buffer`` once per device of ``mesh``'s ``axis_names``, its state partitioned over them; a draw
    concatenates each shard's batch (each shard samples what it holds). ``size`` is the total over shards."""

    def __init__(self, buffer: ReplayBuffer[State, Sample], mesh: jax.sharding.Mesh, axis_names: Sequence[str]):
        self._buffer = buffer
        self._num_devices = math.prod(mesh.shape[name] for name in axis_names)
        shards = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(tuple(axis_names)))
        count = self._num_devices

        def init(key: PRNGKey) -> State:
            return jax.vmap(buffer.init)(jax.random.split(key, count))

        def insert(state: State, samples: Sample) -> State:
            return jax.vmap(buffer.insert_internal)(state, _deal(samples, count))

        def sample(state: State) -> tuple[State, Sample]:
            state, samples = jax.vmap(buffer.sample_internal)(state)
            return state, _gather(samples)

        self._init = jax.jit(init, out_shardings=shards)
        self._insert = jax.jit(insert, out_shardings=shards)
        self._sample = jax.jit(sample, out_shardings=shards)
        self._total_size = jax.jit(lambda state: jnp.sum(jax.vmap(buffer.size)(state)))

    def init(self, key: PRNGKey) -> State:
        return self._init(key)

    def insert(self, buffer_state: State, samples: Sample) -> State:
        self._buffer.check_can_insert(buffer_state, samples, self._num_devices)
        return self._insert(buffer_state, samples)

    def sample(self, buffer_state: State) -> tuple[State, Sample]:
        self._buffer.check_can_sample(buffer_state, self._num_devices)
        return self._sample(buffer_state)

    def size(self, buffer_state: State) -> int:
        return self._total_size(buffer_state)


@flax.struct.dataclass
class PrimitiveReplayBufferState(Generic[Sample]):
    """The state of a buffer that keeps its samples as they are (Brax's type, kept for its importers)."""

    samples: Sample | None = None
