"""The replay buffer of the torch SAC: transitions in tensors allocated once on the env's device, filled as a ring,
drawn uniformly with replacement from the run's generator. Nothing crosses to the host: positions and sizes are
Python integers that follow from the counts inserted, never read from a tensor.

It holds the transitions the JAX SAC's ``UniformSamplingQueue`` holds (the newest ``capacity`` inserted) and draws
as it does (each index uniform over what is held, independently); the order in memory differs (a ring, not a queue
shifted on overflow), which no draw can see.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

KEYS = ("observation", "action", "reward", "discount", "truncation", "next_observation")


class ReplayBuffer:
    """``capacity`` transitions of ``observation_size`` observations and ``action_size`` actions on ``device``.

    ``insert(batch)`` writes a TensorDict of ``KEYS`` with one leading axis (the envs), overwriting the oldest once
    full; ``sample(batch_size, generator)`` draws a TensorDict of ``batch_size`` held transitions.
    """

    def __init__(self, capacity: int, observation_size: int, action_size: int, device: torch.device):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.capacity, self.device = capacity, torch.device(device)
        shapes = {"observation": (observation_size,), "action": (action_size,), "reward": (), "discount": (),
                  "truncation": (), "next_observation": (observation_size,)}
        self.storage = TensorDict(
            {key: torch.zeros((capacity, *shape), device=self.device) for key, shape in shapes.items()},
            batch_size=[capacity], device=self.device,
        )
        self.position = 0  # where the next insert starts
        self.size = 0

    def insert(self, batch: TensorDictBase) -> None:
        count = batch.batch_size[0]
        if count > self.capacity:
            raise ValueError(f"an insert of {count} transitions does not fit a replay buffer of {self.capacity}")
        end = self.position + count
        if end <= self.capacity:
            self.storage[self.position:end] = batch
        else:
            first = self.capacity - self.position
            self.storage[self.position:] = batch[:first]
            self.storage[:count - first] = batch[first:]
        self.position = end % self.capacity
        self.size = min(self.size + count, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator) -> TensorDictBase:
        if self.size == 0:
            raise RuntimeError("the replay buffer is empty: insert transitions before sampling")
        index = torch.randint(0, self.size, (batch_size,), generator=generator, device=self.device)
        return self.storage[index]

    def ordered(self) -> TensorDictBase:
        """The held transitions oldest first (a copy)."""
        if self.size < self.capacity:
            return self.storage[:self.size].clone()
        return torch.cat([self.storage[self.position:], self.storage[:self.position]]).clone()

    def state_dict(self) -> dict[str, Any]:
        """The held transitions, oldest first, as host tensors (a checkpoint's content)."""
        return {"size": self.size, **{key: value.cpu() for key, value in self.ordered().items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Puts ``state_dict``'s transitions back; with a smaller capacity than they need, the newest are kept."""
        size = int(state["size"])
        keep = min(size, self.capacity)
        batch = TensorDict({key: state[key][size - keep:].to(self.device) for key in KEYS}, batch_size=[keep],
                           device=self.device)
        self.position = self.size = 0
        if keep:
            self.insert(batch)


__all__ = ["KEYS", "ReplayBuffer"]
