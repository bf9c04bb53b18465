"""The device a torch trainer trains on: one rule for every torch trainer, the bridge's (``brax_bridge.device_rule``)
unless a ready ``TorchEnv`` or the caller names one."""

from __future__ import annotations

from typing import Any

import torch

import brax_bridge
from brax_bridge import TorchEnv


def resolve_device(device: Any, environment: Any) -> torch.device:
    """The device to train on: ``device`` checked; when ``None``, a ready ``TorchEnv``'s own, else the bridge's one
    device rule (``brax_bridge.default_device``: JAX's default device where torch can reach it, else the CPU)."""
    if device is not None:
        try:
            device = torch.device(device)
        except (TypeError, RuntimeError) as err:
            raise ValueError(
                f"device must be None, 'cpu', 'cuda' or 'cuda:<index>' (or a torch.device); got {device!r}"
            ) from err
    if isinstance(environment, TorchEnv):
        if device is not None and device != environment.device:
            raise ValueError(f"device={device!r} differs from the TorchEnv's device {environment.device}")
        return environment.device
    return brax_bridge.default_device() if device is None else device
