"""``TorchEnv``'s physics fields: the batched fields of the physics (pipeline) state read as torch snapshots
(``physics``) and replaced from torch tensors (``set_physics``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import torch
from tensordict import TensorDict

from brax_bridge import convert as _convert


def _field_items(data: Any) -> list[tuple[str, Any]]:
    if dataclasses.is_dataclass(data):
        return [(f.name, getattr(data, f.name)) for f in dataclasses.fields(data)]
    return list(vars(data).items())


def replace_field(data: Any, path: tuple[str, ...], value: Any, num_envs: int, jax_device: Any) -> Any:
    """``data`` with the batched field at ``path`` (names as ``physics`` shows them) replaced by a copy of ``value``."""
    by_name = {name.lstrip("_"): (name, current) for name, current in _field_items(data)}
    shown = "/".join(path)
    if path[0] not in by_name:
        raise KeyError(f"set_physics: no physics field {shown!r}; fields are {sorted(by_name)}")
    name, current = by_name[path[0]]
    if len(path) > 1:
        if not (dataclasses.is_dataclass(current) and not isinstance(current, type)):
            raise KeyError(f"set_physics: physics field {path[0]!r} has no nested field {shown!r}")
        new = replace_field(current, path[1:], value, num_envs, jax_device)
    else:
        if not isinstance(current, jax.Array) or current.ndim < 1 or current.shape[0] != num_envs:
            raise KeyError(f"set_physics: {shown!r} is not a per-env tensor field of physics (see env.physics)")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"set_physics: {shown} must be a torch.Tensor, got {type(value).__name__}")
        expected_dtype = _convert.jax_to_torch(jnp.zeros((), current.dtype)).dtype
        if tuple(value.shape) != tuple(current.shape) or value.dtype != expected_dtype:
            raise ValueError(
                f"set_physics: {shown} must have shape {tuple(current.shape)} and dtype {expected_dtype}; "
                f"got shape {tuple(value.shape)} and dtype {value.dtype}"
            )
        # A copy: the carried state is donated to the next step and must never share memory with torch.
        new = jax.device_put(jnp.array(value.detach().cpu().numpy(), copy=True), jax_device)
    return data.replace(**{name: new}) if hasattr(data, "replace") else dataclasses.replace(data, **{name: new})


def fields_to_tensordict(data: Any, num_envs: int, device: torch.device) -> TensorDict:
    source = {}
    for name, value in _field_items(data):
        if isinstance(value, jax.Array):
            if value.ndim >= 1 and value.shape[0] == num_envs:
                # A copy: a snapshot that torch may write into without touching the simulation.
                source[name.lstrip("_")] = _convert.array_to_tensor(value, copy=True)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            nested = fields_to_tensordict(value, num_envs, device)
            if len(nested.keys()):
                source[name.lstrip("_")] = nested
    return TensorDict(source, batch_size=[num_envs], device=device)
