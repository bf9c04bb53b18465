"""SAC's networks in torch, layer for layer the JAX SAC's (``brax_core.training.agents.sac.networks``): a policy MLP
whose outputs parametrise a tanh-squashed normal (scale ``softplus(s) + 0.001``), and twin Q networks over the
observation and the action. Kernels ``lecun_uniform``, biases zero, layer normalisation (optional) after each hidden
activation, as flax's ``MLP``.

Both networks read observations the run's one ``RunningNormalizer`` normalised (the policy owns it: evaluation and
``load_policy`` give it raw observations); the critics hold no normaliser, so the target critics are a copy of their
weights alone, and read the same statistics as the JAX SAC's ``normalizer_params``.

``load_jax_params`` copies the JAX SAC's parameters in, so both trainers can start from the same weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from torch_training.layers import linear, resolve_activation
from torch_training.normalizer import RunningNormalizer

MIN_STD = 0.001  # the JAX SAC's NormalTanhDistribution
LAYER_NORM_EPS = 1e-6  # flax's LayerNorm epsilon


class _MLP(nn.Module):
    """flax's ``MLP`` (brax_core.training.networks.MLP): ``hidden_i`` dense layers, the activation and (with
    ``layer_norm``) ``LayerNorm_i`` after each but the last."""

    def __init__(self, in_size: int, layer_sizes: Sequence[int], activation: str | Callable[..., Any],
                 layer_norm: bool):
        super().__init__()
        _, self.activation = resolve_activation(activation)
        sizes = [int(in_size), *[int(s) for s in layer_sizes]]
        self.dense = nn.ModuleList(linear(a, b, None) for a, b in zip(sizes[:-1], sizes[1:], strict=True))
        self.norms = nn.ModuleList(
            nn.LayerNorm(size, eps=LAYER_NORM_EPS) for size in sizes[1:-1]
        ) if layer_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = len(self.dense) - 1
        for i, layer in enumerate(self.dense):
            x = layer(x)
            if i != last:
                x = self.activation(x)
                if self.norms is not None:
                    x = self.norms[i](x)
        return x

    def load_flax(self, params: Mapping[str, Any], what: str) -> None:
        """Copies flax ``MLP`` parameters (``hidden_i``'s kernel and bias, ``LayerNorm_i``'s scale and bias)."""
        with torch.no_grad():
            for i, layer in enumerate(self.dense):
                kernel = np.asarray(params[f"hidden_{i}"]["kernel"])
                if kernel.shape != (layer.in_features, layer.out_features):
                    raise ValueError(f"{what}: hidden_{i}'s kernel is {kernel.shape}; this network's layer is "
                                     f"{(layer.in_features, layer.out_features)}")
                layer.weight.copy_(torch.from_numpy(kernel.T.copy()))
                layer.bias.copy_(torch.from_numpy(np.array(params[f"hidden_{i}"]["bias"])))
            for i, norm in enumerate(self.norms or ()):
                norm.weight.copy_(torch.from_numpy(np.array(params[f"LayerNorm_{i}"]["scale"])))
                norm.bias.copy_(torch.from_numpy(np.array(params[f"LayerNorm_{i}"]["bias"])))


class SACActor(nn.Module):
    """``forward(observation) -> (loc, scale)`` of the pre-tanh normal, over the observation normalised by the run's
    statistics (``normalizer``); ``distribution(normalized)`` the same from observations already normalised."""

    def __init__(self, observation_size: int, action_size: int, hidden_layer_sizes: Sequence[int] = (256, 256),
                 activation: str | Callable[..., Any] = "relu", layer_norm: bool = False,
                 normalize_observations: bool = False):
        super().__init__()
        self.observation_size, self.action_size = int(observation_size), int(action_size)
        self.normalizer = RunningNormalizer(self.observation_size, enabled=normalize_observations)
        self.mlp = _MLP(self.observation_size, [*hidden_layer_sizes, 2 * self.action_size], activation, layer_norm)

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.distribution(self.normalizer(observation))

    def distribution(self, normalized: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc, raw_scale = self.mlp(normalized).chunk(2, dim=-1)
        return loc, nn.functional.softplus(raw_scale) + MIN_STD

    def postprocess(self, pre_tanh: torch.Tensor) -> torch.Tensor:
        """The env's action of a pre-tanh value (``loc``, or ``loc + scale * noise``)."""
        return torch.tanh(pre_tanh)

    def mode(self, observation: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self(observation)[0])

    def load_jax_params(self, policy_params: Mapping[str, Any]) -> None:
        """Copies the JAX SAC policy's parameters (flax's ``{"params": {"hidden_0": ...}}``) into this module."""
        self.mlp.load_flax(policy_params.get("params", policy_params), "policy_params")


class TwinQ(nn.Module):
    """``forward(normalized_observation, action) -> [..., 2]``: two critic MLPs of ``[observation, action]``, their
    outputs side by side (the JAX ``QModule``'s ``MLP_0``, ``MLP_1``)."""

    def __init__(self, observation_size: int, action_size: int, hidden_layer_sizes: Sequence[int] = (256, 256),
                 activation: str | Callable[..., Any] = "relu", layer_norm: bool = False, n_critics: int = 2):
        super().__init__()
        width = int(observation_size) + int(action_size)
        self.critics = nn.ModuleList(
            _MLP(width, [*hidden_layer_sizes, 1], activation, layer_norm) for _ in range(n_critics)
        )

    def forward(self, normalized: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        inputs = torch.cat([normalized, action], dim=-1)
        return torch.cat([critic(inputs) for critic in self.critics], dim=-1)

    def load_jax_params(self, q_params: Mapping[str, Any]) -> None:
        """Copies the JAX SAC's Q parameters (``{"params": {"MLP_0": ..., "MLP_1": ...}}``) into this module."""
        params = q_params.get("params", q_params)
        for i, critic in enumerate(self.critics):
            critic.load_flax(params[f"MLP_{i}"], f"q_params MLP_{i}")


def tanh_normal_log_prob(loc: torch.Tensor, scale: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """Log-probability of the squashed action ``tanh(raw)``, summed over action dimensions: the normal's at ``raw``
    minus ``log|d tanh/dx|`` in the JAX distribution's overflow-free form."""
    z = (raw - loc) / scale
    normal = -0.5 * z.square() - scale.log() - 0.5 * math.log(2.0 * math.pi)
    log_det = 2.0 * (math.log(2.0) - raw - nn.functional.softplus(-2.0 * raw))
    return (normal - log_det).sum(-1)


__all__ = ["SACActor", "TwinQ", "tanh_normal_log_prob"]
