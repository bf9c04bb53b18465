"""Feed-forward networks for training agents (``brax.training.networks`` counterpart).

Layer layout (read by the policy-transfer code and mirrored by the torch trainer): an ``MLP`` is a stack of
``flax.linen.Dense`` layers named ``hidden_0, hidden_1, ...``, the activation after every layer but the last.
Variables are ``{'params': {'hidden_i': {'kernel': [in, out], 'bias': [out]}}}``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen

from brax_core.training import types

ActivationFn = Callable[[jax.Array], jax.Array]
Initializer = Callable[..., Any]
# A module-level default so every network shares one initialiser object (Brax's default).
LECUN_UNIFORM: Initializer = jax.nn.initializers.lecun_uniform()


@dataclasses.dataclass
class FeedForwardNetwork:
    init: Callable[..., Any]
    apply: Callable[..., Any]


class MLP(linen.Module):
    """MLP module."""

    layer_sizes: Sequence[int]
    activation: ActivationFn = linen.relu
    kernel_init: Initializer = LECUN_UNIFORM
    activate_final: bool = False
    bias: bool = True
    layer_norm: bool = False

    @linen.compact
    def __call__(self, data: jax.Array) -> jax.Array:
        hidden = data
        last = len(self.layer_sizes) - 1
        for i, size in enumerate(self.layer_sizes):
            hidden = linen.Dense(size, name=f"hidden_{i}", kernel_init=self.kernel_init, use_bias=self.bias)(hidden)
            if i != last or self.activate_final:
                hidden = self.activation(hidden)
                if self.layer_norm:
                    hidden = linen.LayerNorm()(hidden)
        return hidden


def validate_layer_sizes(name: str, sizes: Any) -> tuple[int, ...]:
    """Hidden layer sizes as a tuple of positive Python ints, or a ValueError naming the argument."""
    try:
        values = tuple(sizes)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of positive integers, got {sizes!r}") from None
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name} must be a sequence of positive integers, got {sizes!r}")
    return values


# Activations known by name (checkpoint configurations store these names).
ACTIVATIONS: dict[str, ActivationFn] = {
    "relu": linen.relu,
    "tanh": linen.tanh,
    "sigmoid": linen.sigmoid,
    "swish": linen.swish,
    "silu": linen.silu,
    "elu": linen.elu,
    "gelu": linen.gelu,
    "leaky_relu": linen.leaky_relu,
    "softplus": linen.softplus,
    "selu": linen.selu,
    "celu": linen.celu,
    "relu6": jax.nn.relu6,
    "hard_tanh": jax.nn.hard_tanh,
    "mish": jax.nn.mish,
    "log_sigmoid": linen.log_sigmoid,
    "identity": lambda x: x,
}


def validate_activation(activation: Any) -> ActivationFn:
    """A callable activation; a string is looked up in ``ACTIVATIONS``."""
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation {activation!r} is not a known name; use a callable or one of {sorted(ACTIVATIONS)}"
            )
        return ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(
            f"activation must be a callable (e.g. flax.linen.relu) or a name in {sorted(ACTIVATIONS)}, "
            f"got {activation!r}"
        )
    return activation


def _input_size(observation_size: types.ObservationSize, obs_key: str) -> int:
    if isinstance(observation_size, Mapping):
        if obs_key not in observation_size:
            raise ValueError(
                f"observation key {obs_key!r} is not among the observation keys {sorted(observation_size)}"
            )
        shape = observation_size[obs_key]
        return int(shape) if isinstance(shape, int) else int(math.prod(shape))
    return int(observation_size)


def _select(obs: types.Observation, obs_key: str) -> jax.Array:
    if isinstance(obs, Mapping):
        x = obs[obs_key]
        return jnp.reshape(x, x.shape[:-1] + (-1,)) if x.ndim > 2 else x
    return obs


def make_policy_network(
    param_size: int,
    obs_size: types.ObservationSize,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: ActivationFn = linen.relu,
    kernel_init: Initializer = LECUN_UNIFORM,
    layer_norm: bool = False,
    obs_key: str = "state",
) -> FeedForwardNetwork:
    """Creates a policy network: ``apply(processor_params, policy_params, obs) -> distribution parameters``."""
    module = MLP(
        layer_sizes=list(hidden_layer_sizes) + [param_size],
        activation=activation,
        kernel_init=kernel_init,
        layer_norm=layer_norm,
    )
    in_size = _input_size(obs_size, obs_key)

    def apply(processor_params: Any, policy_params: Any, obs: types.Observation) -> jax.Array:
        obs = preprocess_observations_fn(obs, processor_params)
        return module.apply(policy_params, _select(obs, obs_key))

    return FeedForwardNetwork(init=lambda key: module.init(key, jnp.zeros((1, in_size), jnp.float32)), apply=apply)


def make_value_network(
    obs_size: types.ObservationSize,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: ActivationFn = linen.relu,
    kernel_init: Initializer = LECUN_UNIFORM,
    layer_norm: bool = False,
    obs_key: str = "state",
    use_distributional_critic: bool = False,
    num_quantiles: int = 32,
) -> FeedForwardNetwork:
    """Creates a value network: ``apply(processor_params, value_params, obs) -> value`` (last axis squeezed).

    With ``use_distributional_critic`` the last layer has ``num_quantiles`` outputs, the quantiles of the return at
    the levels ``(i + 0.5) / num_quantiles``, and ``apply`` returns ``(value, quantiles)``: their mean (last axis
    squeezed) and the quantiles themselves (``[..., num_quantiles]``), as Brax's does.
    """
    if use_distributional_critic and (isinstance(num_quantiles, bool) or not isinstance(num_quantiles, int)
                                      or num_quantiles < 1):
        raise ValueError(f"num_quantiles must be a positive integer, got {num_quantiles!r}")
    module = MLP(
        layer_sizes=list(hidden_layer_sizes) + [num_quantiles if use_distributional_critic else 1],
        activation=activation,
        kernel_init=kernel_init,
        layer_norm=layer_norm,
    )
    in_size = _input_size(obs_size, obs_key)

    def apply(processor_params: Any, value_params: Any, obs: types.Observation) -> Any:
        obs = preprocess_observations_fn(obs, processor_params)
        out = module.apply(value_params, _select(obs, obs_key))
        if use_distributional_critic:
            return jnp.mean(out, axis=-1), out
        return jnp.squeeze(out, axis=-1)

    return FeedForwardNetwork(init=lambda key: module.init(key, jnp.zeros((1, in_size), jnp.float32)), apply=apply)
