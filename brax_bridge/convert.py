"""Zero-copy conversions between JAX arrays and torch tensors (DLPack), with a copy counter.

Rules:

* Same device only: JAX ``cpu`` <-> torch ``cpu``, JAX ``gpu:i`` <-> torch ``cuda:i``. The result aliases the
  source memory: a torch in-place write changes the JAX array it came from. Treat converted JAX arrays as
  read-only on the torch side unless you own both ends.
* ``copy=None`` (default): zero-copy where the memory allows, otherwise copy and count it in ``stats()``.
  ``copy=False``: raise instead of copying. ``copy=True``: always copy (counted).
* Zero-copy is impossible for tensors with non-compact strides (``x[:, ::2]``), storage not aligned to 64 bytes
  (XLA's requirement on CPU), tensors that require grad, and tensors on a device JAX does not drive. A copy
  is detected by comparing data pointers after the import, so even a copy made inside JAX is counted.
* dtypes keep their identity both ways. torch's 64-bit types (int64, float64, complex128, uint64) need JAX's
  x64 mode (``jax.config.update('jax_enable_x64', True)``); without it they raise ``TypeError`` unless
  ``allow_cast=True``, which casts to the 32-bit type (counted as a copy) and refuses integers outside its
  range. Nothing is downcast silently. Sparse tensors and typed PRNG keys are refused (no DLPack form).
* Ordering. CPU: exporting a JAX array waits until the computation producing it has finished, so torch
  never reads a half-written buffer (this is the one host sync per step the bridge has, and torch needs the
  data anyway). GPU: no host sync; ``torch.from_dlpack`` passes torch's current stream and JAX makes that
  stream wait for the producer's ready event, and ``jax.dlpack.from_dlpack`` passes JAX's stream so torch's
  pending writes finish before JAX reads. Rule for callers: produce and consume on torch's *current* stream
  (or synchronise a side stream with it) before handing a tensor to the bridge; not exercised here (no GPU).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from brax_bridge import device_rule

_ALIGNMENT = 64
_WIDE_TORCH = {torch.int64: torch.int32, torch.float64: torch.float32, torch.complex128: torch.complex64}
if hasattr(torch, "uint64"):
    _WIDE_TORCH[torch.uint64] = torch.uint32


@dataclasses.dataclass
class CopyStats:
    """Conversion counters since the last ``reset_stats()``.

    ``copies``: conversions that had to copy memory; ``bytes_copied``: their total size;
    ``zero_copy``: conversions that shared memory.
    """

    copies: int = 0
    bytes_copied: int = 0
    zero_copy: int = 0


_STATS = CopyStats()


def stats() -> CopyStats:
    """A snapshot of the conversion counters (a copy; later conversions do not change it)."""
    return dataclasses.replace(_STATS)


def copies_made() -> int:
    """``stats().copies`` without the snapshot: a cheap read for a caller asking whether its conversion copied."""
    return _STATS.copies


def reset_stats() -> None:
    """Zeroes the conversion counters."""
    _STATS.copies = _STATS.bytes_copied = _STATS.zero_copy = 0


def _count(copied: bool, nbytes: int) -> None:
    if copied:
        _STATS.copies += 1
        _STATS.bytes_copied += nbytes
    else:
        _STATS.zero_copy += 1


def _check_copy_arg(copy: bool | None) -> None:
    if copy not in (None, True, False):
        raise ValueError(f"copy must be None (copy only when needed), True or False; got {copy!r}")


# --------------------------------------------------------------------------------------------- JAX -> torch


def array_to_tensor(x: jax.Array, copy: bool | None = None) -> torch.Tensor:
    """One JAX array -> torch tensor (a view when possible).

    A typed PRNG key array (``jax.random.key``) raises ``TypeError``: torch has no key dtype; convert
    ``jax.random.key_data(key)`` (its uint32 words) instead.
    """
    if not isinstance(x.dtype, np.dtype):  # an extended dtype (PRNG keys); a type check, no sync
        _refuse_extended(x)
    if len(x.sharding.device_set) != 1:
        if copy is False:
            raise ValueError(f"array is sharded over {len(x.sharding.device_set)} devices; a zero-copy view needs one")
        _count(True, x.nbytes)
        return torch.from_numpy(np.array(x))
    if copy:
        _count(True, x.nbytes)
        return torch.from_dlpack(x).clone()
    tensor = torch.from_dlpack(x)
    _count(False, 0)
    return tensor


def _refuse_extended(x: jax.Array) -> None:
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        raise TypeError(
            f"x is a typed PRNG key array (dtype {x.dtype}, shape {tuple(x.shape)}), which torch cannot hold; "
            "convert jax.random.key_data(x) (its uint32 words) instead, and jax.random.wrap_key_data to go back"
        )
    raise TypeError(f"x has JAX extended dtype {x.dtype}, which has no torch equivalent")


def jax_to_torch(tree: Any, copy: bool | None = None) -> Any:
    """Converts every JAX array in ``tree`` (arrays, dicts, tuples, lists, flax/dataclass pytrees) to torch.

    The structure is kept (a dict stays a dict; use ``tensordict.TensorDict(result, batch_size)`` to batch it).
    numpy arrays become tensors too (zero-copy where writable and aligned); other leaves pass through.
    """
    _check_copy_arg(copy)

    def leaf(x: Any) -> Any:
        if isinstance(x, jax.Array):
            return array_to_tensor(x, copy)
        if isinstance(x, np.ndarray):
            return _numpy_to_tensor(x, copy)
        return x

    return jax.tree.map(leaf, tree, is_leaf=lambda x: isinstance(x, (torch.Tensor, TensorDictBase)))


def _numpy_to_tensor(x: np.ndarray, copy: bool | None) -> torch.Tensor:
    shareable = x.flags.writeable and x.flags.c_contiguous and x.dtype != np.object_ and x.dtype.isnative
    if copy or not shareable:
        if copy is False:
            raise ValueError(
                "numpy array is read-only, not C-contiguous or not in this machine's byte order; a zero-copy tensor "
                "is impossible"
            )
        _count(True, x.nbytes)
        # torch holds native byte order only: a big-endian array is copied into it
        return torch.from_numpy(np.array(x, dtype=x.dtype.newbyteorder("="), copy=True, order="C"))
    _count(False, 0)
    return torch.from_numpy(x)


# --------------------------------------------------------------------------------------------- torch -> JAX


def _x64_enabled() -> bool:
    return bool(jax.config.jax_enable_x64)


try:  # private entry point behind jax.dlpack.from_dlpack, without its per-call Python overhead
    from jax._src.dlpack import DLDeviceType as _DLDeviceType
    from jax._src.lib import _jax as _jaxlib

    _KDLCPU = int(_DLDeviceType.kDLCPU)
    _to_buffer = _jaxlib.dlpack_managed_tensor_to_buffer
except (ImportError, AttributeError):
    _to_buffer = None


def _fast_import(tensor: torch.Tensor, jdev) -> jax.Array | None:
    """Zero-copy DLPack import of a CPU tensor (raises if JAX would copy); None if the fast path is unavailable."""
    if _to_buffer is None:
        return None
    try:
        return _to_buffer(tensor.__dlpack__(), jdev, None, False, _KDLCPU)
    except TypeError:  # a jaxlib with another signature
        return None


def _cpu_device():
    global _CPU
    if _CPU is None:
        _CPU = jax.devices("cpu")[0]
    return _CPU


_CPU = None


def tensor_to_array(tensor: torch.Tensor, copy: bool | None = None, allow_cast: bool = False) -> jax.Array:
    """One torch tensor -> JAX array (a view when possible); see the module rules.

    Only dense (strided) tensors convert: a sparse or otherwise non-strided tensor raises ``TypeError``.
    ``allow_cast=True`` narrows an integer tensor only when every value fits the 32-bit type; otherwise it raises
    ``ValueError`` (a wrapped value would be a silently different number).
    """
    if tensor.layout != torch.strided:
        raise TypeError(
            f"tensor has layout {tensor.layout}; the bridge converts dense (torch.strided) tensors only, since "
            "JAX arrays have no sparse layout: pass tensor.to_dense(), or its indices and values separately"
        )
    if tensor.device.type == "meta":
        raise ValueError("tensor is on the meta device: it has a shape and a dtype but no values to convert")
    if tensor.dtype in _WIDE_TORCH and not _x64_enabled():
        if not allow_cast:
            raise TypeError(
                f"tensor has dtype {tensor.dtype}, which JAX cannot hold with x64 off; enable "
                f"jax.config.update('jax_enable_x64', True), cast it yourself, or pass allow_cast=True "
                f"(casts to {_WIDE_TORCH[tensor.dtype]})"
            )
        if copy is False:
            raise ValueError(f"dtype {tensor.dtype} needs a cast (a copy) with x64 off, but copy=False")
        _check_narrowing(tensor, _WIDE_TORCH[tensor.dtype])
        tensor = tensor.detach().to(_WIDE_TORCH[tensor.dtype])
        _count(True, tensor.numel() * tensor.element_size())
        return _import_copy(tensor)
    reason = why_not_shareable(tensor)
    if copy or reason is not None:
        if copy is False:
            raise ValueError(f"cannot share this tensor's memory with JAX ({reason}) and copy=False")
        _count(True, tensor.numel() * tensor.element_size())
        return _import_copy(tensor.detach())
    if tensor.device.type == "cpu":
        array = _fast_import(tensor, _cpu_device())
        if array is None:
            array = jax.dlpack.from_dlpack(tensor)
    else:
        try:
            array = jax.dlpack.from_dlpack(tensor)
        except Exception as err:  # noqa: BLE001 - reported with the tensor's device
            if copy is False:
                raise ValueError(f"JAX cannot import a tensor on {tensor.device} without a copy: {err}") from err
            _count(True, tensor.numel() * tensor.element_size())
            return _import_copy(tensor)
    if tensor.numel() and array.unsafe_buffer_pointer() != tensor.data_ptr():
        if copy is False:
            raise ValueError("JAX copied the tensor on import (its storage is not aligned) and copy=False")
        _count(True, tensor.numel() * tensor.element_size())
    else:
        _count(False, 0)
    return array


def _check_narrowing(tensor: torch.Tensor, narrow: torch.dtype) -> None:
    """Refuses a cast that would change values beyond rounding: an integer that would wrap, a finite float that
    would become infinite. A host sync, but only on the casting path (a copy already)."""
    if tensor.numel() == 0:
        return
    if narrow.is_floating_point or narrow.is_complex:
        limit = torch.finfo(torch.float32).max  # float64 -> float32, complex128 -> complex64 (two float32 parts)
        for part in (tensor.real, tensor.imag) if tensor.is_complex() else (tensor,):
            finite = part[torch.isfinite(part)].abs()
            if finite.numel() and float(finite.max()) > limit:
                raise ValueError(
                    f"allow_cast=True cannot narrow tensor ({tensor.dtype}, magnitudes up to {float(finite.max()):.3g})"
                    f" to {narrow}: finite values beyond {limit:.3g} would become infinite; enable "
                    "jax.config.update('jax_enable_x64', True) or scale the values first"
                )
        return
    info = torch.iinfo(narrow)
    values = tensor
    if tensor.dtype == getattr(torch, "uint64", None):
        values = tensor.view(torch.int64)  # torch has no min/max of uint64; read as int64, 2**63 and up are negative
    low, high = int(values.min()), int(values.max())
    described = f"values in [{low}, {high}]"
    if values is not tensor and low < 0:
        low, high, described = 0, 2**64 - 1, "values of 2**63 or more"  # out of reach of any narrower type
    if low < info.min or high > info.max:
        raise ValueError(
            f"allow_cast=True cannot narrow tensor ({tensor.dtype}, {described}) to {narrow}: values "
            f"outside [{info.min}, {info.max}] would wrap around; enable jax.config.update('jax_enable_x64', True) "
            "or bring the values into range first"
        )


def why_not_shareable(tensor: torch.Tensor) -> str | None:
    """Why JAX cannot view ``tensor``'s memory (so converting it copies), or None when it can."""
    if tensor.requires_grad:
        return "it requires grad; detach() it"
    if not tensor.is_contiguous():
        return f"non-compact strides {tuple(tensor.stride())} for shape {tuple(tensor.shape)}"
    if tensor.numel() and tensor.data_ptr() % _ALIGNMENT:
        return f"storage not aligned to {_ALIGNMENT} bytes"
    if tensor.is_conj() or tensor.is_neg():
        return "it has a lazy conjugate/negation bit"
    if tensor.device.type not in ("cpu", "cuda"):
        return f"JAX has no view of {tensor.device.type} memory"
    return None


def _import_copy(tensor: torch.Tensor) -> jax.Array:
    """A JAX array holding a copy of ``tensor`` (whose memory JAX may not be able to share)."""
    tensor = tensor.detach().resolve_conj().resolve_neg()
    if tensor.device.type in ("cpu", "cuda"):
        try:
            jdev = device_rule.jax_device(tensor.device)
        except ValueError:
            jdev = None
        if jdev is not None:
            fresh = tensor.clone(memory_format=torch.contiguous_format)
            if tensor.device.type == "cpu" and fresh.data_ptr() % _ALIGNMENT:
                # torch's allocator aligns to 64 bytes in practice; if not, let JAX copy it (already counted)
                return jnp.asarray(fresh.numpy())
            return jax.dlpack.from_dlpack(fresh)
    return jnp.asarray(tensor.cpu().numpy())


def torch_to_jax(tree: Any, copy: bool | None = None, allow_cast: bool = False) -> Any:
    """Converts every torch tensor in ``tree`` (tensors, TensorDicts, dicts, tuples, lists, pytrees) to JAX.

    A TensorDict becomes a (nested) dict of arrays. Other leaves pass through.
    """
    _check_copy_arg(copy)
    if not isinstance(allow_cast, bool):
        raise ValueError(f"allow_cast must be a bool, got {allow_cast!r}")

    def leaf(x: Any) -> Any:
        if isinstance(x, TensorDictBase):
            return {k: leaf(v) for k, v in x.items()}
        if isinstance(x, torch.Tensor):
            return tensor_to_array(x, copy, allow_cast)
        if isinstance(x, Mapping) and not isinstance(x, dict):
            return {k: leaf(v) for k, v in x.items()}
        return x

    return jax.tree.map(leaf, tree, is_leaf=lambda x: isinstance(x, (torch.Tensor, TensorDictBase)))


def host_tensor(array: Any) -> torch.Tensor:
    """A CPU tensor holding its own copy of ``array`` (a host array; nothing shares its buffer)."""
    return torch.from_numpy(np.array(array, copy=True))


def unchecked_tensordict(source: dict, batch_size: torch.Size, device: torch.device) -> TensorDict:
    """A TensorDict of ``source`` built without validating its entries, for outputs whose shapes are known."""
    # _new_unsafe skips the per-entry validation, which costs more than the rest of building the TensorDict; the
    # jitted step guarantees the shapes it would check.
    make = getattr(TensorDict, "_new_unsafe", None)
    if make is None:
        return TensorDict(source, batch_size=batch_size, device=device)
    return make(source, batch_size=batch_size, device=device)
