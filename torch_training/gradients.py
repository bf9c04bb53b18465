"""Gradient norms for every torch trainer, as optax computes them, without a host read."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def global_norm(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """The gradients' global L2 norm (optax.global_norm), a tensor: no host read."""
    # One call for every per-tensor norm (the same vector_norm per tensor, without a Python call each).
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(list(grads))))


def global_norm_scale(norm: torch.Tensor, max_norm: float) -> torch.Tensor:
    """optax.clip_by_global_norm's factor for gradients of global norm ``norm``: ``max_norm / norm`` when
    ``norm >= max_norm``, else 1."""
    return torch.where(norm < max_norm, torch.ones_like(norm), max_norm / norm)
