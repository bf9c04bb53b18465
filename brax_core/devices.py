"""Where JAX work runs: a device named as torch names it, JAX's default device set to it for a block, and the
devices a JAX trainer trains on.

Every entry point places a run through these two functions (the application's ``--device``, the trainers'
``config.run.device``), so each sets JAX's default device by the same rule.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

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


def placed(device: str | None, what: str = "config.run.device") -> contextlib.AbstractContextManager[Any]:
    """Work in the block on ``device`` ('cpu', 'cuda' or 'cuda:<index>'; ``None``: where JAX places arrays now):
    how a trainer runs a configuration's ``run.device``."""
    if device is None:
        return contextlib.nullcontext()
    return on_device(named_device(device, what))


def training_devices(max_devices_per_host: int | None) -> list[jax.Device]:
    """The devices to train on: up to ``max_devices_per_host`` of each process's local devices.

    A default device set with ``jax.default_device`` places the run, as it places any other JAX computation: a
    device means that device alone, a platform name (``"cpu"``) that platform's devices. Brax ignores it and trains
    on the default backend's devices, so ``--device cpu`` on a GPU machine would still train on the GPU.
    """
    default = jax.config.jax_default_device
    if isinstance(default, jax.Device):
        return [default]
    per_process: dict[int, list[jax.Device]] = {}
    for d in jax.devices(default) if default else jax.devices():
        per_process.setdefault(d.process_index, []).append(d)
    chosen = []
    for index in sorted(per_process):
        local = per_process[index]
        chosen.extend(local if max_devices_per_host is None else local[:max_devices_per_host])
    return chosen
