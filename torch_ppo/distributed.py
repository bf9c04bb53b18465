"""Multi-process data parallelism for torch_ppo (``torch.distributed``; gloo on CPU, nccl on GPU).

Launch with ``torchrun --nproc_per_node=K script.py``: ``train`` sees ``WORLD_SIZE > 1``, joins the process group
(or uses one the caller already initialised), and each rank owns ``num_envs / world_size`` environments and
``batch_size / world_size`` rows of every minibatch. Gradients are averaged by ``DistributedDataParallel``; the
observation normaliser folds in every rank's batch; so all ranks hold identical parameters at every step.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

_groups_created = itertools.count()


@dataclasses.dataclass(frozen=True)
class DistributedContext:
    rank: int = 0
    world_size: int = 1
    group: dist.ProcessGroup | None = None
    owns_group: bool = False  # train() created the group and must destroy it

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup(device: torch.device) -> DistributedContext:
    """Joins the torchrun process group when launched with ``WORLD_SIZE > 1``; a no-op otherwise."""
    if dist.is_available() and dist.is_initialized():
        world = dist.get_world_size()
        return DistributedContext(dist.get_rank(), world, dist.group.WORLD if world > 1 else None)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistributedContext()
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    backend = "nccl" if device.type == "cuda" else "gloo"
    # torch names every new default group alike once the previous one is destroyed, so a second train() in the
    # same launch would read the first group's stale addresses from torchrun's store (a rank that arrives early
    # connects to a dead port). Each group train() creates gets its own key prefix; ranks call train() in the
    # same order, so their counters agree.
    store, rank, world = next(dist.rendezvous("env://"))
    prefix = dist.PrefixStore(f"torch_ppo/{next(_groups_created)}/", store)
    dist.init_process_group(backend=backend, store=prefix, rank=rank, world_size=world)
    return DistributedContext(dist.get_rank(), dist.get_world_size(), dist.group.WORLD, owns_group=True)


def teardown(ctx: DistributedContext) -> None:
    if ctx.owns_group and dist.is_initialized():
        dist.destroy_process_group()


def broadcast_object(ctx: DistributedContext, value: object) -> object:
    """Rank 0's ``value`` on every rank."""
    if not ctx.enabled:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, group=ctx.group)
    return box[0]


def gather_process_states(
    ctx: DistributedContext, rng_state: torch.Tensor, env_state: dict[str, Any] | None
) -> tuple[list[Any], list[Any] | None]:
    """Every rank's RNG state and (under DDP) env state, as rank 0 saves them: each rank steps its own envs and
    resumes its own. Every rank must call it under DDP."""
    if not ctx.enabled:
        return [rng_state], None
    rng_states: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(rng_states, rng_state, group=ctx.group)
    # The env states cross as NumPy arrays: their tensors share memory with JAX's host buffers, which
    # all_gather_object's pickling of torch storages does not carry.
    as_numpy = None if env_state is None else {k: _map_tensors(v, torch.Tensor.numpy) for k, v in env_state.items()}
    env_states: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(env_states, as_numpy, group=ctx.group)
    env_states = [
        None if e is None else {k: _map_tensors(v, torch.from_numpy) for k, v in e.items()} for e in env_states
    ]
    return rng_states, env_states


def _map_tensors(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to a tensor or array, or to each in a list."""
    return [fn(v) for v in value] if isinstance(value, list) else fn(value)
