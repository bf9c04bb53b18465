"""brax_bridge: drive brax_core's JAX (MuJoCo MJX) environments from PyTorch without copying.

Importing this package first configures JAX and torch to share one GPU (see ``brax_bridge.device_rule``): JAX's
75% preallocation is turned off unless ``XLA_PYTHON_CLIENT_PREALLOCATE``, ``XLA_PYTHON_CLIENT_MEM_FRACTION`` or
``XLA_PYTHON_CLIENT_ALLOCATOR`` is already set.

The adapters are imported explicitly, each needing its extra: ``brax_bridge.torchrl`` (TorchRL),
``brax_bridge.gymnasium`` (Gymnasium), ``brax_bridge.sb3`` (Stable-Baselines3), ``brax_bridge.rsl_rl`` (RSL-RL).
Policy transfer between the two trainers is ``torch_ppo.policy_transfer``; the command line is ``brax_bridge_app.cli``.
"""

from brax_bridge import device_rule
from brax_bridge.device_rule import default_device

MEMORY_SHARING = device_rule.configure_memory_sharing()

__version__ = "0.1.0"

# name -> submodule; loaded on first access so `import brax_bridge` (and the CLI's --help) stays light.
_EXPORTS = {
    "CopyStats": "convert",
    "jax_to_torch": "convert",
    "reset_stats": "convert",
    "stats": "convert",
    "torch_to_jax": "convert",
    "EnvSpecs": "env",
    "TensorSpec": "env",
    "TorchEnv": "env",
    "compile_envs": "env",
}
_LAZY_MODULES = ("convert", "env", "differentiable")


def __getattr__(name: str):
    import importlib

    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"brax_bridge.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    if name in _LAZY_MODULES:
        return importlib.import_module(f"brax_bridge.{name}")
    raise AttributeError(f"module 'brax_bridge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "MEMORY_SHARING",
    "default_device",
    "CopyStats",
    "EnvSpecs",
    "TensorSpec",
    "TorchEnv",
    "compile_envs",
    "jax_to_torch",
    "reset_stats",
    "stats",
    "torch_to_jax",
]
