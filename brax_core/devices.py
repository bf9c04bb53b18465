"""Where JAX work runs: a device named as torch names it, and JAX's default device set to it for a block.

Every entry point places a run through these two functions (the application's ``--device``, the trainers'
``config.run.device``), so each sets JAX's default device by the same rule.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax


def named_device(device: str, what: str = "device") -> jax.Device:
    """The JAX device ``device`` names (``cpu``, ``cuda`` or ``cuda:<index>``); ``ValueError`` naming ``what`` and
    how many devices of that platform JAX sees where there is no such device."""
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()) or (kind == "cpu" and index not in ("", "0")):
        raise ValueError(f"{what} must be one of cpu, cuda, cuda:<index>; got {device!r}")
    platform = "cpu" if kind == "cpu" else "gpu"
    try:
        found = jax.devices(platform)
    except RuntimeError:  # no backend of that platform (a CPU-only jaxlib for 'gpu')
        found = []
    position = int(index or 0)
    if position >= len(found):
        raise ValueError(
            f"{what} is {device!r} but JAX sees {len(found)} {platform} device(s) here; use 'cpu', or None for "
            "JAX's default device"
        )
    return found[position]


@contextlib.contextmanager
def on_device(device: jax.Device) -> Iterator[jax.Device]:
    """JAX's default device set to ``device`` for the block: new arrays and jitted programs run there.

    Where ``device`` is JAX's default already, nothing is set: a default device is part of every jitted function's
    cache key, so setting it would compile a second copy of programs compiled in the same process without it.
    """
    current = jax.config.jax_default_device
    if device == (current if isinstance(current, jax.Device) else jax.devices()[0]):
        yield device
        return
    with jax.default_device(device):
        yield device
