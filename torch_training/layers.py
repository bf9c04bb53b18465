"""The torch trainers' layers: activations and kernel initialisers by the JAX side's names, and the MLP laid out like
``brax_core``'s flax networks.

The MLP names its layers ``hidden_0``, ``hidden_1``, ... and applies the activation after every layer but the last
(and after that one too with ``activate_final``), so JAX weights copy straight in (``weight = kernel.T``); its
initial weights follow the kernel initialiser of the same name in ``jax.nn.initializers`` (``lecun_uniform`` by
default, as both frameworks) and its biases start at zero, as flax's ``Dense``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

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


# --- kernel initialisers: Brax's jax.nn.initializers names, as torch initialisations of a [out, in] weight ------

# The standard deviation of a unit normal truncated to [-2, 2]: jax's variance_scaling divides by it so the
# truncated distribution keeps the asked-for variance.
_TRUNCATED_STD = 0.87962566103423978
_FAN_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")

KernelInit = Callable[[torch.Tensor], None]


def _variance_scaling_(
    weight: torch.Tensor, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal"
) -> None:
    fan_out, fan_in = weight.shape
    fan = {
        "fan_in": fan_in,
        "fan_out": fan_out,
        "fan_avg": (fan_in + fan_out) / 2.0,
        "fan_geo_avg": math.sqrt(fan_in * fan_out),
    }[mode]
    variance = scale / max(1.0, fan)
    if distribution == "truncated_normal":
        std = math.sqrt(variance) / _TRUNCATED_STD
        nn.init.trunc_normal_(weight, 0.0, std, -2.0 * std, 2.0 * std)
    elif distribution == "normal":
        nn.init.normal_(weight, 0.0, math.sqrt(variance))
    else:
        bound = math.sqrt(3.0 * variance)
        nn.init.uniform_(weight, -bound, bound)


def _scaling(scale: float, mode: str, distribution: str) -> Callable[..., KernelInit]:
    return lambda: lambda w: _variance_scaling_(w, scale, mode, distribution)


# name -> (factory taking the jax factory's keyword arguments, the keywords it takes). jax's dtype/axis
# keywords have no meaning for a torch Linear weight and are refused by name.
_KERNEL_INITS: dict[str, tuple[Callable[..., KernelInit], tuple[str, ...]]] = {
    "lecun_uniform": (_scaling(1.0, "fan_in", "uniform"), ()),
    "lecun_normal": (_scaling(1.0, "fan_in", "truncated_normal"), ()),
    "glorot_uniform": (_scaling(1.0, "fan_avg", "uniform"), ()),
    "xavier_uniform": (_scaling(1.0, "fan_avg", "uniform"), ()),
    "glorot_normal": (_scaling(1.0, "fan_avg", "truncated_normal"), ()),
    "xavier_normal": (_scaling(1.0, "fan_avg", "truncated_normal"), ()),
    "he_uniform": (_scaling(2.0, "fan_in", "uniform"), ()),
    "kaiming_uniform": (_scaling(2.0, "fan_in", "uniform"), ()),
    "he_normal": (_scaling(2.0, "fan_in", "truncated_normal"), ()),
    "kaiming_normal": (_scaling(2.0, "fan_in", "truncated_normal"), ()),
    "variance_scaling": (
        lambda scale, mode, distribution: lambda w: _variance_scaling_(w, scale, mode, distribution),
        ("scale", "mode", "distribution"),
    ),
    "orthogonal": (lambda scale=1.0: lambda w: nn.init.orthogonal_(w, gain=scale), ("scale",)),
    "normal": (lambda stddev=1e-2: lambda w: nn.init.normal_(w, 0.0, stddev), ("stddev",)),
    # jax's uniform draws from [0, scale).
    "uniform": (lambda scale=1e-2: lambda w: nn.init.uniform_(w, 0.0, scale), ("scale",)),
    "truncated_normal": (
        lambda stddev=1e-2, lower=-2.0, upper=2.0: (
            lambda w: nn.init.trunc_normal_(w, 0.0, stddev, lower * stddev, upper * stddev)
        ),
        ("stddev", "lower", "upper"),
    ),
    "constant": (lambda value: lambda w: nn.init.constant_(w, value), ("value",)),
    "zeros": (lambda: nn.init.zeros_, ()),
    "ones": (lambda: nn.init.ones_, ()),
}
KERNEL_INITIALIZERS = tuple(sorted(_KERNEL_INITS))
# In Brax's table but without a meaning for a dense layer's weight (it initialises convolution kernels).
_UNSUPPORTED_INITS = ("delta_orthogonal",)


def resolve_kernel_init(name: str, fn: Any, kwargs_name: str, kwargs: Mapping[str, Any] | None) -> KernelInit:
    """The torch initialisation of a jax initialiser factory given by name or as the jax function itself.

    ``name``/``kwargs_name`` are the argument names used in errors; ``kwargs`` are the jax factory's.
    """
    key = fn if isinstance(fn, str) else getattr(fn, "__name__", None)
    if key in _UNSUPPORTED_INITS:
        raise ValueError(
            f"{name}={key!r} initialises convolution kernels and has no torch counterpart for a dense "
            f"layer; use one of {', '.join(KERNEL_INITIALIZERS)}"
        )
    if key not in _KERNEL_INITS:
        raise ValueError(
            f"{name} must be one of {', '.join(KERNEL_INITIALIZERS)} (a name, or the jax.nn.initializers function of "
            f"that name), got {fn!r}"
        )
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ValueError(f"{kwargs_name} must be a mapping of keyword arguments or None, got {kwargs!r}")
    factory, accepted = _KERNEL_INITS[key]
    unknown = sorted(set(kwargs or {}) - set(accepted))
    if unknown:
        raise ValueError(
            f"{kwargs_name} has {unknown}, which {key!r} does not take in torch_ppo; it takes "
            f"{', '.join(accepted) if accepted else 'no keyword arguments'}"
        )
    values = dict(kwargs or {})
    if key == "variance_scaling":
        missing = sorted({"scale", "mode", "distribution"} - set(values))
        if missing:
            raise ValueError(f"{kwargs_name} must give {missing} for 'variance_scaling'")
        if values["mode"] not in _FAN_MODES:
            raise ValueError(f"{kwargs_name}['mode'] must be one of {_FAN_MODES}, got {values['mode']!r}")
        if values["distribution"] not in _DISTRIBUTIONS:
            raise ValueError(
                f"{kwargs_name}['distribution'] must be one of {_DISTRIBUTIONS}, got {values['distribution']!r}"
            )
    if key == "constant" and "value" not in values:
        raise ValueError(f"{kwargs_name} must give 'value' for 'constant'")
    for k, v in values.items():
        if k not in ("mode", "distribution") and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise ValueError(f"{kwargs_name}[{k!r}] must be a number, got {v!r}")
    return factory(**values)


def _lecun_uniform_(weight: torch.Tensor) -> None:
    # The default of both frameworks: variance 1/fan_in, uniform.
    _variance_scaling_(weight, 1.0, "fan_in", "uniform")


def linear(fan_in: int, fan_out: int, kernel_init: KernelInit | None) -> nn.Linear:
    """A dense layer initialised as flax's: ``kernel_init`` (default ``lecun_uniform``) on the weight, zero biases."""
    layer = nn.Linear(fan_in, fan_out)
    with torch.no_grad():
        (kernel_init or _lecun_uniform_)(layer.weight)
        layer.bias.zero_()  # flax's Dense starts its biases at zero
    return layer


class MLP(nn.Module):
    """Dense layers ``hidden_0..hidden_k`` with ``activation`` between them (and after the last with
    ``activate_final``)."""

    def __init__(
        self,
        in_size: int,
        layer_sizes: Sequence[int],
        activation: Activation = "swish",
        kernel_init: KernelInit | None = None,
        activate_final: bool = False,
    ):
        super().__init__()
        self.activation_name, self.activation = resolve_activation(activation)
        self.activate_final = bool(activate_final)
        sizes = [int(in_size), *[int(s) for s in layer_sizes]]
        self.out_size = sizes[-1]
        self.layer_names = [f"hidden_{i}" for i in range(len(sizes) - 1)]
        for name, (fan_in, fan_out) in zip(self.layer_names, zip(sizes[:-1], sizes[1:], strict=True), strict=True):
            self.add_module(name, linear(fan_in, fan_out, kernel_init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = len(self.layer_names) - 1
        for i, name in enumerate(self.layer_names):
            x = getattr(self, name)(x)
            if i != last or self.activate_final:
                x = self.activation(x)
        return x
