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
