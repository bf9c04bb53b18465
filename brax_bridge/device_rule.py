"""Device plumbing: GPU memory sharing between JAX and torch, and the JAX <-> torch device correspondence.

JAX preallocates 75% of a GPU's memory when its backend starts, which leaves torch (policy, optimiser,
rollout buffers) almost nothing on the same GPU. ``configure_memory_sharing`` runs when ``brax_bridge`` is
imported and, unless the user already chose an allocation policy, turns preallocation off so JAX and torch
allocate from the same GPU on demand. It only sets environment variables, so it must run before JAX starts its
backend (the first ``jax.devices()`` or computation); importing ``brax_bridge`` first guarantees that.

Override: set ``XLA_PYTHON_CLIENT_PREALLOCATE`` (``true`` restores JAX's default), ``XLA_PYTHON_CLIENT_MEM_FRACTION``
(e.g. ``0.5`` preallocates half the GPU for JAX) or ``XLA_PYTHON_CLIENT_ALLOCATOR`` before importing; the bridge
then leaves the allocator alone.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from typing import Any

from brax_core.extras import install_line

_USER_KNOBS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")


@dataclasses.dataclass(frozen=True)
class MemorySharing:
    """What ``configure_memory_sharing`` did."""

    preallocate_disabled: bool  # the bridge set XLA_PYTHON_CLIENT_PREALLOCATE=false
    user_setting: str | None  # the variable the user set, which the bridge respected
    too_late: bool  # JAX's backend was already running, so nothing could change


def _jax_backend_started() -> bool:
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", {}))
    except Exception:  # private API moved: assume the safe answer
        return False


def configure_memory_sharing() -> MemorySharing:
    """Disables JAX's GPU preallocation unless the user chose an allocator policy (idempotent)."""
    user = next((k for k in _USER_KNOBS if k in os.environ), None)
    if user is not None:
        return MemorySharing(preallocate_disabled=False, user_setting=user, too_late=False)
    if _jax_backend_started():
        warnings.warn(
            "brax_bridge was imported after JAX started its backend, so JAX's GPU preallocation is already in "
            "effect; import brax_bridge before the first JAX computation, or set XLA_PYTHON_CLIENT_PREALLOCATE=false.",
            RuntimeWarning,
            stacklevel=3,
        )
        return MemorySharing(preallocate_disabled=False, user_setting=None, too_late=True)
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return MemorySharing(preallocate_disabled=True, user_setting=None, too_late=False)


def jax_device(device: Any = None):
    """The JAX device for ``device``: None, a torch device or string (``'cpu'``, ``'cuda:1'``) or a JAX device."""
    import jax
    import torch

    if device is None:
        return default_jax_device()
    if isinstance(device, jax.Device):
        return device
    try:
        tdev = torch.device(device)
    except (TypeError, RuntimeError) as err:
        raise ValueError(
            f"device must be None, a torch device/string ('cpu', 'cuda:0') or a jax.Device; got {device!r}"
        ) from err
    if tdev.type == "cpu":
        return jax.devices("cpu")[0]
    if tdev.type == "cuda":
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        index = tdev.index or 0
        if index >= len(gpus):
            raise ValueError(
                f"device {device!r}: JAX sees {len(gpus)} GPU(s) ({[str(d) for d in gpus]}); for JAX's CUDA build "
                f"install the GPU extra: {install_line('cuda')}"
            )
        return gpus[index]
    raise ValueError(f"device {device!r}: only 'cpu' and 'cuda:i' have a JAX counterpart")


def default_jax_device():
    """The one device rule of every entry point (``TorchEnv``, ``torch_ppo.train``, the adapters, the command line's
    ``--device auto``): JAX's default device (``jax.default_device`` where one is set), unless torch cannot reach it
    (a GPU with a CPU-only torch build), in which case the CPU, so that the physics and the networks share a device."""
    import jax
    import torch

    default = jax.config.jax_default_device
    if isinstance(default, jax.Device):
        chosen = default
    else:
        chosen = jax.devices(default)[0] if default else jax.devices()[0]
    if chosen.platform != "cpu" and not torch.cuda.is_available():
        return jax.devices("cpu")[0]
    return chosen


def default_device() -> Any:
    """The torch device every entry point uses when none is given (``default_jax_device``'s counterpart)."""
    return torch_device(default_jax_device())


def torch_device(jdev) -> Any:
    """The torch device that DLPack views of arrays on JAX device ``jdev`` live on."""
    import torch

    if jdev.platform == "cpu":
        return torch.device("cpu")
    if jdev.platform in ("gpu", "cuda", "rocm"):
        return torch.device("cuda", jdev.local_hardware_id)
    raise ValueError(f"JAX device {jdev} ({jdev.platform}) has no torch counterpart; use a CPU or GPU device")
