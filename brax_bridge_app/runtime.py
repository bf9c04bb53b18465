"""Process-wide facts the commands share: devices, the machine. (The persistent compile cache is turned on when
``brax_core.envs`` is imported; see ``brax_core.compile``.)"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator

import jax
import torch

import brax_bridge
from brax_core import _quiet, devices  # noqa: F401  (hides MJX's import-time stdout line before anything else)
from brax_core.extras import install_line

DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N")
GPU_INSTALL = install_line("cuda")


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a run lives: torch's device for the networks and the JAX device of the physics (and of the JAX
    trainer), always the same place."""

    requested: str  # as the user asked: auto, cpu, cuda, cuda:N
    torch_device: str
    jax_device: jax.Device

    @property
    def platform(self) -> str:
        return self.jax_device.platform


def default_device() -> str:
    """The device ``auto`` picks: ``brax_bridge.default_device()`` (JAX's default device where torch can reach it,
    else the CPU for both), the rule of every entry point.

    CUDA torch beside a CPU-only JAX is the most common PyTorch install; there the run stays on the CPU and one
    line on stderr says so and how to put JAX on the GPU.
    """
    chosen = brax_bridge.default_device()  # the rule every entry point follows
    if chosen.type != "cpu":
        return str(chosen)
    jax_on_gpu = jax.default_backend() == "gpu"
    torch_on_gpu = torch.cuda.is_available()
    if torch_on_gpu:
        print(
            "--device auto: JAX runs on the CPU, so torch does too (the physics decides where a run lives); "
            f"for the GPU install JAX's CUDA build: {GPU_INSTALL}",
            file=sys.stderr,
        )
    elif jax_on_gpu:
        print(
            "--device auto: torch has no CUDA here, so the run stays on the CPU; install a CUDA build of torch "
            f"to train beside JAX on the GPU: {GPU_INSTALL}",
            file=sys.stderr,
        )
    return "cpu"


def _choices() -> str:
    return ", ".join(DEVICE_CHOICES)


def check_device(device: str) -> str:
    """The ``--device`` value, checked for its form only (nothing is started): raises ``ValueError`` naming the
    accepted values."""
    if device == "auto":
        return device
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"--device must be one of {_choices()}; got {device!r}") from None
    if parsed.type not in ("cpu", "cuda") or (parsed.type == "cpu" and parsed.index not in (None, 0)):
        raise ValueError(f"--device must be one of {_choices()}; got {device!r}")
    return device


def place(device: str | None = "auto") -> Placement:
    """Both trainers' physics and networks for ``--device`` (``None`` is ``auto``: a run folder's ``config.json``
    without a recorded device); raises ``ValueError`` when JAX or torch cannot run there, naming the install."""
    requested = check_device(device or "auto")
    chosen = torch.device(default_device() if requested == "auto" else requested)
    if chosen.type == "cpu":
        return Placement(requested, "cpu", jax.devices("cpu")[0])
    if not torch.cuda.is_available():
        raise ValueError(f"--device {requested}: this torch is a CPU build and sees no CUDA device; use --device cpu, "
                         f"or install the CUDA builds of torch and JAX: {GPU_INSTALL}")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no CUDA plugin (a CPU-only jaxlib): JAX cannot place anything on a GPU
        gpus = []
    if not gpus:
        raise ValueError(f"--device {requested}: JAX has no CUDA backend here (its CPU-only build), so the physics "
                         f"cannot run on the GPU; use --device cpu, or install JAX's CUDA build: {GPU_INSTALL}")
    index = chosen.index or 0
    count = min(len(gpus), torch.cuda.device_count())
    if index >= count:
        raise ValueError(f"--device {requested}: JAX sees {len(gpus)} and torch {torch.cuda.device_count()} CUDA "
                         f"device(s); use cuda:0 to cuda:{count - 1}")
    return Placement(requested, f"cuda:{index}", gpus[index])


@contextlib.contextmanager
def placed(placement: Placement) -> Iterator[Placement]:
    """JAX's default device set to the placement's (``brax_core.devices.on_device``): new arrays, jitted programs
    and the JAX trainer (which trains on the default device when one is set) run there."""
    with devices.on_device(placement.jax_device):
        yield placement


def machine(placement: Placement | None = None) -> str:
    """One line for reports: cores and where the runs lived (``placement``; JAX's default device without one)."""
    device = placement.jax_device if placement is not None else jax.devices()[0]
    cores = os.cpu_count()
    if device.platform == "cpu":
        gpu = "a GPU present, unused" if torch.cuda.is_available() else "no GPU"
        return f"{cores}-core CPU, JAX and torch on cpu, {gpu}"
    return f"{cores}-core host, JAX and torch on {device.platform} ({device.device_kind})"

