"""Actor and critic for torch_ppo: MLPs laid out like the JAX PPO's, a tanh-squashed normal, TensorDict modules.

The MLPs name their layers ``hidden_0``, ``hidden_1``, ... like the flax networks of ``brax_core``'s PPO, and apply
the activation after every layer but the last, so JAX weights copy straight in (``weight = kernel.T``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torch import nn

from torch_ppo.normalizer import RunningNormalizer

Activation = str | Callable[[torch.Tensor], torch.Tensor]

# Same functions as jax.nn/flax under the same names (jax's gelu is the tanh approximation by default).
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "swish": F.silu,
    "silu": F.silu,
    "elu": F.elu,
    "gelu": lambda x: F.gelu(x, approximate="tanh"),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.01),
    "softplus": F.softplus,
    "selu": F.selu,
    "celu": F.celu,
    "log_sigmoid": F.logsigmoid,
    "identity": lambda x: x,
}

MIN_STD = 0.001
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def resolve_activation(activation: Activation) -> tuple[str | None, Callable[[torch.Tensor], torch.Tensor]]:
    """Returns ``(name or None, function)``; unknown names raise a ValueError listing the accepted ones."""
    if isinstance(activation, str):
        key = activation.lower()
        if key not in ACTIVATIONS:
            raise ValueError(
                f"activation must be a callable or one of {', '.join(sorted(ACTIVATIONS))}; got {activation!r}"
            )
        return key, ACTIVATIONS[key]
    if callable(activation):
        name = getattr(activation, "__name__", None)
        return (name if name in ACTIVATIONS else None), activation
    raise TypeError(f"activation must be a name or a callable, got {type(activation).__name__}")


def _lecun_uniform_(layer: nn.Linear) -> None:
    # Same initialiser as the JAX networks (variance 1/fan_in, uniform), biases zero.
    fan_in = layer.weight.shape[1]
    bound = math.sqrt(3.0 / fan_in)
    with torch.no_grad():
        layer.weight.uniform_(-bound, bound)
        layer.bias.zero_()


class MLP(nn.Module):
    """Dense layers ``hidden_0..hidden_k`` with ``activation`` between them (none after the last)."""

    def __init__(self, in_size: int, layer_sizes: Sequence[int], activation: Activation = "swish"):
        super().__init__()
        self.activation_name, self.activation = resolve_activation(activation)
        sizes = [int(in_size), *[int(s) for s in layer_sizes]]
        self.layer_names = [f"hidden_{i}" for i in range(len(sizes) - 1)]
        for name, (fan_in, fan_out) in zip(self.layer_names, zip(sizes[:-1], sizes[1:], strict=True), strict=True):
            layer = nn.Linear(fan_in, fan_out)
            _lecun_uniform_(layer)
            self.add_module(name, layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = len(self.layer_names) - 1
        for i, name in enumerate(self.layer_names):
            x = getattr(self, name)(x)
            if i != last:
                x = self.activation(x)
        return x


class PolicyNetwork(nn.Module):
    """observation -> (loc, scale) of a tanh-squashed normal; ``scale = softplus(raw) + 0.001``."""

    def __init__(
        self,
        observation_size: int,
        action_size: int,
        normalizer: RunningNormalizer,
        hidden_layer_sizes: Sequence[int],
        activation: Activation,
    ):
        super().__init__()
        self.action_size = int(action_size)
        self.normalizer = normalizer
        self.mlp = MLP(observation_size, [*hidden_layer_sizes, 2 * self.action_size], activation)

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.mlp(self.normalizer(observation))
        loc, raw_scale = out.split(self.action_size, dim=-1)
        return loc, F.softplus(raw_scale) + MIN_STD


class ValueNetwork(nn.Module):
    """observation -> state value (last dim 1, as TorchRL's ``state_value``).

    With ``num_quantiles`` (the distributional critic) the MLP outputs that many quantiles of the return;
    ``quantiles`` gives them and the state value is their mean.
    """

    def __init__(
        self,
        observation_size: int,
        normalizer: RunningNormalizer,
        hidden_layer_sizes: Sequence[int],
        activation: Activation,
        num_quantiles: int | None = None,
    ):
        super().__init__()
        self.normalizer = normalizer
        self.num_quantiles = num_quantiles
        self.mlp = MLP(observation_size, [*hidden_layer_sizes, num_quantiles or 1], activation)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        out = self.mlp(self.normalizer(observation))
        return out.mean(-1, keepdim=True) if self.num_quantiles else out

    def quantiles(self, observation: torch.Tensor) -> torch.Tensor:
        """``[..., num_quantiles]`` quantiles at the levels ``(i + 0.5) / num_quantiles``."""
        if not self.num_quantiles:
            raise ValueError("quantiles needs a distributional critic (built with use_distributional_critic=True)")
        return self.mlp(self.normalizer(observation))


# --- tanh-squashed normal --------------------------------------------------------------------------------------


def tanh_log_det_jacobian(raw: torch.Tensor) -> torch.Tensor:
    """log |d tanh(x)/dx| in the overflow-free form 2(log 2 - x - softplus(-2x)), per dimension."""
    return 2.0 * (_LOG_2 - raw - F.softplus(-2.0 * raw))


def tanh_normal_log_prob(loc: torch.Tensor, scale: torch.Tensor, raw_action: torch.Tensor) -> torch.Tensor:
    """log-density of ``tanh(raw_action)`` under the squashed normal, summed over the action dims."""
    z = (raw_action - loc) / scale
    normal = -0.5 * z * z - torch.log(scale) - _HALF_LOG_2PI
    return (normal - tanh_log_det_jacobian(raw_action)).sum(-1)


def tanh_normal_entropy(loc: torch.Tensor, scale: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The JAX side's entropy estimate: normal entropy + log-det-jacobian at the sample ``loc + scale * noise``."""
    normal_entropy = 0.5 + _HALF_LOG_2PI + torch.log(scale)
    return (normal_entropy + tanh_log_det_jacobian(loc + scale * noise)).sum(-1)


class TanhNormalSampler(TensorDictModuleBase):
    """Reads ``loc``/``scale``; writes ``action`` (tanh of a normal sample, or ``tanh(loc)`` when deterministic),
    the pre-squash ``raw_action`` and ``action_log_prob`` (TorchRL's key for the behaviour log-probability)."""

    in_keys = ["loc", "scale"]
    out_keys = ["action", "raw_action", "action_log_prob"]

    def __init__(self, deterministic: bool = False, generator: torch.Generator | None = None):
        super().__init__()
        self.deterministic = deterministic
        self.generator = generator

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        loc, scale = td.get("loc"), td.get("scale")
        if self.deterministic:
            td.set("action", torch.tanh(loc))
            return td
        noise = torch.randn(loc.shape, generator=self.generator, device=loc.device, dtype=loc.dtype)
        raw = loc + scale * noise
        td.set("raw_action", raw)
        td.set("action_log_prob", tanh_normal_log_prob(loc, scale, raw))
        td.set("action", torch.tanh(raw))
        return td


class PPOModules(nn.Module):
    """Everything torch_ppo trains: the shared normaliser, the policy and the value network."""

    def __init__(
        self,
        observation_size: int,
        action_size: int,
        policy_hidden_layer_sizes: Sequence[int] = (32,) * 4,
        value_hidden_layer_sizes: Sequence[int] = (256,) * 5,
        activation: Activation = "swish",
        normalize_observations: bool = True,
        use_distributional_critic: bool = False,
        num_quantiles: int = 32,
    ):
        super().__init__()
        self.observation_size = int(observation_size)
        self.action_size = int(action_size)
        self.normalizer = RunningNormalizer(observation_size, enabled=normalize_observations)
        self.policy = PolicyNetwork(
            observation_size, action_size, self.normalizer, policy_hidden_layer_sizes, activation
        )
        self.num_quantiles = int(num_quantiles)
        self.value = ValueNetwork(
            observation_size, self.normalizer, value_hidden_layer_sizes, activation,
            int(num_quantiles) if use_distributional_critic else None,
        )

    def config(self) -> dict:
        """Constructor arguments, JSON-ready (activation by name when it has one)."""
        sizes = lambda mlp: [getattr(mlp, n).out_features for n in mlp.layer_names[:-1]]
        return {
            "observation_size": self.observation_size,
            "action_size": self.action_size,
            "policy_hidden_layer_sizes": sizes(self.policy.mlp),
            "value_hidden_layer_sizes": sizes(self.value.mlp),
            "activation": self.policy.mlp.activation_name,
            "normalize_observations": self.normalizer.enabled,
            "use_distributional_critic": bool(self.value.num_quantiles),
            "num_quantiles": self.num_quantiles,
        }


def make_actor(
    modules: PPOModules, deterministic: bool = False, generator: torch.Generator | None = None
) -> TensorDictSequential:
    """``observation -> loc, scale -> action`` (+ ``raw_action``, ``action_log_prob`` when sampling)."""
    head = TensorDictModule(modules.policy, in_keys=["observation"], out_keys=["loc", "scale"])
    return TensorDictSequential(head, TanhNormalSampler(deterministic, generator))


def make_critic(modules: PPOModules) -> TensorDictModule:
    """``observation -> state_value``."""
    return TensorDictModule(modules.value, in_keys=["observation"], out_keys=["state_value"])
