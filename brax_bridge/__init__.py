"""brax_bridge: drive brax_core's JAX (MuJoCo MJX) environments from PyTorch without copying.

Importing this package first configures JAX and torch to share one GPU (see ``brax_bridge._device``): JAX's
75% preallocation is turned off unless ``XLA_PYTHON_CLIENT_PREALLOCATE``, ``XLA_PYTHON_CLIENT_MEM_FRACTION`` or
``XLA_PYTHON_CLIENT_ALLOCATOR`` is already set.

Optional parts load on demand: ``brax_bridge.torchrl`` (needs torchrl) and ``brax_bridge.policy``.
"""

from brax_bridge import _device

MEMORY_SHARING = _device.configure_memory_sharing()

from brax_bridge.convert import CopyStats, jax_to_torch, reset_stats, stats, torch_to_jax  # noqa: E402
from brax_bridge.env import EnvSpecs, TensorSpec, TorchEnv  # noqa: E402

__version__ = "0.1.0"

_LAZY = ("policy",)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"brax_bridge.{name}")
    raise AttributeError(f"module 'brax_bridge' has no attribute {name!r}")


__all__ = [
    "MEMORY_SHARING",
    "CopyStats",
    "EnvSpecs",
    "TensorSpec",
    "TorchEnv",
    "jax_to_torch",
    "reset_stats",
    "stats",
    "torch_to_jax",
]
