"""The APG policy in torch, layer for layer Brax's (``brax_core.training.agents.apg.networks.make_apg_networks``): an
MLP with layer normalisation after each hidden activation and orthogonal(0.01) kernels, whose outputs parametrise a
tanh-squashed normal (scale ``(softplus(s) + 0.001) * 0.1``).

``APGPolicy.load_jax_params`` copies the JAX policy's parameters in, so both trainers can start from the same
weights and their gradients be compared.

``SHACCritic`` is SHAC's value network V(s) (the reference implementation's ``CriticMLP``): an MLP with ELU and
layer normalisation after each hidden layer, orthogonal(sqrt 2) kernels and one output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from torch_training.layers import resolve_activation
from torch_training.normalizer import RunningNormalizer

# Brax's APG choices (brax_core.training.agents.apg.networks): small outputs at initialisation and little noise.
KERNEL_INIT_SCALE = 0.01
VAR_SCALE = 0.1
MIN_STD = 0.001
# flax's LayerNorm epsilon (torch's default is 1e-5).
LAYER_NORM_EPS = 1e-6
# SHAC's critic initialisation (the reference implementation's CriticMLP): orthogonal kernels with gain sqrt(2).
CRITIC_KERNEL_GAIN = math.sqrt(2.0)


class APGPolicy(nn.Module):
    """``forward(observation) -> (loc, scale)`` of the pre-tanh normal, over normalised observations.

    ``module``: a network of the user's own in place of the MLP (``network_factory``'s policy module: outputs the
    mean of each action dimension, then its scale before the softplus). ``act(observation, noise)`` is the
    reparametrised action ``tanh(loc + scale * noise)`` (``noise``: standard
    normal, the action's shape), ``mode(observation)`` the deterministic one, ``tanh(loc)``.
    """

    def __init__(
        self,
        observation_size: int,
        action_size: int,
        hidden_layer_sizes: Sequence[int] = (32,) * 4,
        activation: str | Callable[..., Any] = "elu",
        layer_norm: bool = True,
        normalize_observations: bool = False,
        module: nn.Module | None = None,
    ):
        super().__init__()
        self.observation_size, self.action_size = int(observation_size), int(action_size)
        self.normalizer = RunningNormalizer(self.observation_size, enabled=normalize_observations)
        if module is not None:  # a network of the user's own (network_factory): [batch, 2 * action_size] outputs
            self.mlp = module
            return
        _, act = resolve_activation(activation)
        layers: list[nn.Module] = []
        width = self.observation_size
        for size in hidden_layer_sizes:
            layers += [_dense(width, size), _Activation(act)]
            if layer_norm:
                layers.append(nn.LayerNorm(size, eps=LAYER_NORM_EPS))
            width = size
        layers.append(_dense(width, 2 * self.action_size))
        self.mlp = nn.Sequential(*layers)

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.mlp(self.normalizer(observation))
        loc, raw_scale = logits.chunk(2, dim=-1)
        return loc, (nn.functional.softplus(raw_scale) + MIN_STD) * VAR_SCALE

    def act(self, observation: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        loc, scale = self(observation)
        return torch.tanh(loc + scale * noise)

    def mode(self, observation: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self(observation)[0])

    def postprocess(self, pre_tanh: torch.Tensor) -> torch.Tensor:
        """The action of a pre-tanh value (``loc``, or ``loc + scale * noise``)."""
        return torch.tanh(pre_tanh)

    def load_jax_params(self, policy_params: Mapping[str, Any]) -> None:
        """Copies the JAX APG policy's parameters (``policy_params`` of ``apg.train``'s ``(normalizer, policy)``
        pair, flax's ``{"params": {"hidden_0": ..., "LayerNorm_0": ...}}``) into this module; the layouts must
        match."""
        params = policy_params.get("params", policy_params)
        dense = [m for m in self.mlp if isinstance(m, nn.Linear)]
        norms = [m for m in self.mlp if isinstance(m, nn.LayerNorm)]
        with torch.no_grad():
            for i, layer in enumerate(dense):
                kernel = np.asarray(params[f"hidden_{i}"]["kernel"])
                if kernel.shape != (layer.in_features, layer.out_features):
                    raise ValueError(
                        f"hidden_{i}'s kernel is {kernel.shape}; this policy's layer is "
                        f"{(layer.in_features, layer.out_features)}"
                    )
                layer.weight.copy_(torch.from_numpy(kernel.T.copy()))
                layer.bias.copy_(torch.from_numpy(np.array(params[f"hidden_{i}"]["bias"])))
            for i, norm in enumerate(norms):
                norm.weight.copy_(torch.from_numpy(np.array(params[f"LayerNorm_{i}"]["scale"])))
                norm.bias.copy_(torch.from_numpy(np.array(params[f"LayerNorm_{i}"]["bias"])))


class SHACCritic(nn.Module):
    """``forward(normalised_observation) -> value [..., 1]``: an MLP with the activation, then (with ``layer_norm``)
    a layer normalisation, after every hidden layer; kernels orthogonal with gain sqrt(2), biases zero.

    It reads observations already normalised (SHAC normalises them with the policy's statistics, so the actor and the
    critic see the same inputs); it holds no normaliser of its own, which keeps a Polyak-averaged copy of it (the
    target critic) a copy of its weights alone.
    """

    def __init__(
        self,
        observation_size: int,
        hidden_layer_sizes: Sequence[int] = (64, 64),
        activation: str | Callable[..., Any] = "elu",
        layer_norm: bool = True,
        module: nn.Module | None = None,
    ):
        super().__init__()
        self.observation_size = int(observation_size)
        if module is not None:  # a network of the user's own (network_factory): [batch] or [batch, 1] outputs
            self.mlp = module
            return
        _, act = resolve_activation(activation)
        layers: list[nn.Module] = []
        width = self.observation_size
        for size in hidden_layer_sizes:
            layers += [_dense(width, size, CRITIC_KERNEL_GAIN), _Activation(act)]
            if layer_norm:
                layers.append(nn.LayerNorm(size))
            width = size
        layers.append(_dense(width, 1, CRITIC_KERNEL_GAIN))
        self.mlp = nn.Sequential(*layers)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        value = self.mlp(observation)
        return value.unsqueeze(-1) if value.dim() < observation.dim() else value


class _Activation(nn.Module):
    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def _dense(width: int, size: int, gain: float = KERNEL_INIT_SCALE) -> nn.Linear:
    layer = nn.Linear(width, size)
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer
