"""What is installed of JAX, read from the package metadata without importing JAX.

Both answers are needed before JAX starts: which XLA flags this jaxlib knows (an unknown one in ``XLA_FLAGS``
aborts the process), and whether MJX's Warp implementation could ever run here (it needs a JAX CUDA plugin).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import pkgutil


@functools.cache
def jaxlib_version() -> tuple[int, int]:
    """The installed jaxlib's ``(major, minor)``."""
    major, minor = importlib.metadata.version("jaxlib").split(".")[:2]
    return int(major), int(minor)


def cuda_plugin_installed() -> bool:
    """Whether a JAX CUDA plugin is installed, found as JAX finds plugins: a ``jax_plugins.<name>`` module or a
    ``jax_plugins`` entry point."""
    spec = importlib.util.find_spec("jax_plugins")
    if spec is not None and spec.submodule_search_locations:
        if any("cuda" in module.name for module in pkgutil.iter_modules(spec.submodule_search_locations)):
            return True
    return any("cuda" in entry.name for entry in importlib.metadata.entry_points(group="jax_plugins"))
