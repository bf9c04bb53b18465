"""Types shared by the training code (``brax.training.types`` counterpart)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

Params = Any
PRNGKey = jax.Array
Metrics = Mapping[str, jax.Array]
Observation = jax.Array | Mapping[str, jax.Array]
ObservationSize = int | Mapping[str, tuple[int, ...] | int]
Action = jax.Array
Extra = Mapping[str, Any]
PreprocessorParams = Any
PolicyParams = tuple[PreprocessorParams, Params]
NetworkType = Any


class Transition(NamedTuple):
    """A batch of environment transitions.

    ``extras`` carries ``{'policy_extras': {'raw_action', 'log_prob'}, 'state_extras': {'truncation', ...}}``
    for PPO.
    """

    observation: Observation
    action: Action
    reward: jax.Array
    discount: jax.Array
    next_observation: Observation
    extras: Extra = ()  # type: ignore[assignment]


class Policy(Protocol):
    def __call__(self, observation: Observation, key: PRNGKey) -> tuple[Action, Extra]: ...


class PreprocessObservationFn(Protocol):
    def __call__(self, observation: Observation, preprocessor_params: PreprocessorParams) -> jax.Array: ...


def identity_observation_preprocessor(observation: Observation, preprocessor_params: PreprocessorParams) -> Observation:
    """Leaves observations as they are (the default when no normaliser is used)."""
    del preprocessor_params
    return observation


@struct.dataclass
class UInt64:
    """An unsigned 64-bit counter as two uint32 halves (``brax.training.types.UInt64``): env-step counts pass 2**31
    in long runs, and JAX without x64 has no 64-bit integers. ``a + b`` adds with the carry (jittable; ``b`` a
    ``UInt64`` or an integer), ``int(a)`` reads it on the host, ``to_numpy()`` as ``numpy.uint64``."""

    hi: Any
    lo: Any

    def __post_init__(self) -> None:
        # Numbers become uint32 scalars; anything else (a tracer's stand-in in a pytree, ``None``) stays as given.
        for name in ("hi", "lo"):
            value = getattr(self, name)
            if isinstance(value, int | np.integer | np.ndarray | jax.Array):
                object.__setattr__(self, name, jnp.asarray(value, jnp.uint32))

    def __add__(self, other: Any) -> UInt64:
        if not isinstance(other, UInt64):
            if isinstance(other, bool) or not isinstance(other, int | np.integer | np.ndarray | jax.Array):
                raise TypeError(f"a UInt64 adds a UInt64 or an integer, got {type(other).__name__}")
            if isinstance(other, int | np.integer) and not 0 <= int(other) < 2**64:
                raise ValueError(f"a UInt64 adds integers in [0, 2**64), got {other}")
            other = _as_uint64(other)
        lo = self.lo + other.lo  # uint32 arithmetic wraps: a sum below either part carried
        return UInt64(hi=self.hi + other.hi + (lo < self.lo).astype(jnp.uint32), lo=lo)

    def to_numpy(self) -> np.ndarray:
        return (np.asarray(self.hi, np.uint64) << np.uint64(32)) | np.asarray(self.lo, np.uint64)

    def __int__(self) -> int:
        return int(self.to_numpy())

    def __repr__(self) -> str:
        return f"UInt64(hi={self.hi}, lo={self.lo})"


def _as_uint64(value: Any) -> UInt64:
    """A non-negative integer (a Python or NumPy int, or an integer array of up to 64 bits) as a ``UInt64``."""
    if isinstance(value, int | np.integer):
        value = int(value)
        return UInt64(hi=jnp.uint32(value >> 32), lo=jnp.uint32(value & 0xFFFFFFFF))
    if np.dtype(value.dtype).itemsize <= 4:  # the common case, a 32-bit count (also under jit): no high half
        return UInt64(hi=jnp.zeros(value.shape, jnp.uint32), lo=value.astype(jnp.uint32))
    wide = np.asarray(value, np.uint64)
    return UInt64(hi=(wide >> np.uint64(32)).astype(np.uint32), lo=(wide & np.uint64(0xFFFFFFFF)).astype(np.uint32))
