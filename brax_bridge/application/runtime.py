"""Process-wide facts the commands share: devices, the machine. (The persistent compile cache is turned on when
``brax_core.envs`` is imported; see ``brax_core.compile``.)"""

from __future__ import annotations

import os
import sys

import jax
import torch

from brax_core import _quiet  # noqa: F401  (hides MJX's import-time stdout line before anything else)


def default_device() -> str:
    """The torch trainer's device when none is named: where JAX runs (the physics decides, torch follows).

    CUDA torch beside a CPU-only JAX is the most common PyTorch install; there the run stays on the CPU and one
    line on stderr says so and how to put JAX on the GPU.
    """
    jax_on_gpu = jax.default_backend() == "gpu"
    torch_on_gpu = torch.cuda.is_available()
    if jax_on_gpu and torch_on_gpu:
        return "cuda"
    if torch_on_gpu:
        print(
            "--device auto: JAX runs on the CPU, so torch does too (the physics decides where a run lives); "
            "for the GPU install JAX's CUDA build: pip install 'brax-bridge[cuda]'",
            file=sys.stderr,
        )
    elif jax_on_gpu:
        print(
            "--device auto: torch has no CUDA here, so the run stays on the CPU; install a CUDA build of torch "
            "to train beside JAX on the GPU",
            file=sys.stderr,
        )
    return "cpu"


def parse_device(device: str) -> str | None:
    """``auto`` -> None (the trainer's CUDA-if-available choice); otherwise a torch device string.

    Raises ``ValueError`` naming what is accepted, or that CUDA is not available here.
    """
    if device == "auto":
        return None
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"--device must be auto, cpu, cuda or cuda:N; got {device!r}") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: torch sees no CUDA device here; use --device cpu or auto")
    if parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu, cuda or cuda:N; got {device!r}")
    return str(parsed)


def machine() -> str:
    """One line for reports: cores and the backend JAX runs on."""
    platform = jax.default_backend()
    cores = os.cpu_count()
    if platform == "cpu":
        return f"{cores}-core CPU, JAX on cpu, no GPU"
    return f"{cores}-core host, JAX on {platform} ({jax.devices()[0].device_kind})"
