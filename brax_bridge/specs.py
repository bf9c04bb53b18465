"""What a policy needs to know about a ``TorchEnv``'s tensors: their shapes, dtypes and the action bounds."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Shape (batch dims included), dtype and, for actions, bounds of one tensor."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    low: torch.Tensor | None = None
    high: torch.Tensor | None = None


@dataclasses.dataclass(frozen=True)
class EnvSpecs:
    """Everything a policy needs to know about the env's tensors, readable without stepping."""

    observation: TensorSpec | dict[str, TensorSpec]
    action: TensorSpec
    reward: TensorSpec
    done: dict[str, TensorSpec]  # 'done', 'terminated', 'truncated'


def _action_bounds(action_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every env takes actions in ``[-1, 1]`` (Brax's convention: envs map them onto their motors' ranges)."""
    return -torch.ones(action_size), torch.ones(action_size)


def env_specs(num_envs: int, observation_size: Any, action_size: int, device: torch.device) -> EnvSpecs:
    """The specs of ``num_envs`` batched envs with these observation and action sizes, bounds on ``device``."""
    n = num_envs
    if isinstance(observation_size, Mapping):
        obs_spec = {k: TensorSpec((n, *tuple(v)), torch.float32) for k, v in observation_size.items()}
    else:
        obs_spec = TensorSpec((n, int(observation_size)), torch.float32)
    low, high = _action_bounds(action_size)
    action = TensorSpec((n, action_size), torch.float32, low.to(device), high.to(device))
    flag = TensorSpec((n, 1), torch.bool)
    return EnvSpecs(
        observation=obs_spec,
        action=action,
        reward=TensorSpec((n, 1), torch.float32),
        done={"done": flag, "terminated": flag, "truncated": flag},
    )


class SpecViews:
    """TorchRL's spec properties of an env, read from its ``specs`` (an ``EnvSpecs``)."""

    specs: EnvSpecs

    @property
    def observation_spec(self) -> TensorSpec | dict[str, TensorSpec]:
        return self.specs.observation

    @property
    def action_spec(self) -> TensorSpec:
        return self.specs.action

    @property
    def reward_spec(self) -> TensorSpec:
        return self.specs.reward

    @property
    def done_spec(self) -> dict[str, TensorSpec]:
        return self.specs.done

    @property
    def action_low(self) -> torch.Tensor:
        return self.specs.action.low

    @property
    def action_high(self) -> torch.Tensor:
        return self.specs.action.high
