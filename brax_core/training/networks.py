"""Feed-forward networks for training agents (``brax.training.networks`` counterpart).

Layer layout (read by the policy-transfer code and mirrored by the torch trainer): an ``MLP`` is a stack of
``flax.linen.Dense`` layers named ``hidden_0, hidden_1, ...``, the activation after every layer but the last.
Variables are ``{'params': {'hidden_i': {'kernel': [in, out], 'bias': [out]}}}``.

The policy of ``distribution_type='normal'`` is a ``PolicyModuleWithStd`` (Brax's layout and names): an ``MLP_0``
of the hidden layers with the activation after each, a ``Dense_0`` head for the mean, and the standard deviation
from ``std_param/value`` (``noise_std_type='scalar'``), ``std_logparam/log_value`` (``'log'``), or, with
``state_dependent_std``, a ``Dense_1`` head.
"""

from __future__ import annotations

import dataclasses
import functools
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

# Kernel initialiser factories by name (Brax's table): ``make_ppo_networks`` calls them with their kwargs, and
# checkpoint configurations store them by these names.
_INIT = jax.nn.initializers
KERNEL_INITIALIZER: dict[str, Callable[..., Initializer]] = {
    "constant": _INIT.constant,
    "delta_orthogonal": _INIT.delta_orthogonal,
    "glorot_normal": _INIT.glorot_normal,
    "glorot_uniform": _INIT.glorot_uniform,
    "he_normal": _INIT.he_normal,
    "he_uniform": _INIT.he_uniform,
    "kaiming_normal": _INIT.kaiming_normal,
    "kaiming_uniform": _INIT.kaiming_uniform,
    "lecun_normal": _INIT.lecun_normal,
    "lecun_uniform": _INIT.lecun_uniform,
    "normal": _INIT.normal,
    "ones": _INIT.ones,
    "orthogonal": _INIT.orthogonal,
    "truncated_normal": _INIT.truncated_normal,
    "uniform": _INIT.uniform,
    "variance_scaling": _INIT.variance_scaling,
    "xavier_normal": _INIT.xavier_normal,
    "xavier_uniform": _INIT.xavier_uniform,
    "zeros": _INIT.zeros,
}
DISTRIBUTION_TYPES = ("normal", "tanh_normal")
NOISE_STD_TYPES = ("scalar", "log")


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
        hidden, leading = fold_batch_axes(data)
        last = len(self.layer_sizes) - 1
        for i, size in enumerate(self.layer_sizes):
            hidden = linen.Dense(size, name=f"hidden_{i}", kernel_init=self.kernel_init, use_bias=self.bias)(hidden)
            if i != last or self.activate_final:
                hidden = self.activation(hidden)
                if self.layer_norm:
                    hidden = linen.LayerNorm()(hidden)
        return unfold_batch_axes(hidden, leading)


def fold_batch_axes(x: jax.Array) -> tuple[jax.Array, tuple[int, ...]]:
    """``x`` with every leading axis folded into one (``[..., features] -> [n, features]``), and those axes.

    Dense layers then are plain matrix products: XLA's CPU backend multiplies a ``[batch, time, features]`` input
    (the PPO loss's) far more slowly (benchmarks/results/training-speed.md, "Where PPO's training step spends its
    time").
    """
    return x.reshape((-1, x.shape[-1])), x.shape[:-1]


def unfold_batch_axes(x: jax.Array, leading: tuple[int, ...]) -> jax.Array:
    """``x`` (``[n, features]``) with the leading axes ``fold_batch_axes`` took away restored."""
    return x.reshape(leading + x.shape[-1:])


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


def factory_keywords(network_factory: Any) -> tuple[Any, dict[str, Any]]:
    """A network factory unwrapped from its (nested) ``functools.partial``s: the base function and the keywords the
    partials bind, the outermost winning (how a trainer reads a Brax-style factory's settings into its config)."""
    keywords: dict[str, Any] = {}
    while isinstance(network_factory, functools.partial):
        keywords = {**network_factory.keywords, **keywords}
        network_factory = network_factory.func
    return network_factory, keywords


def activation_name(activation: Any) -> str | None:
    """The name an activation has in ``ACTIVATIONS`` (a name is returned as it is), or ``None``."""
    if isinstance(activation, str):
        return activation
    return next((name for name, fn in ACTIVATIONS.items() if fn is activation), None)


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


class Param(linen.Module):
    """A learned vector of ``size`` values starting at ``init_value`` (variable ``value``)."""

    init_value: float = 0.0
    size: int = 1

    @linen.compact
    def __call__(self) -> jax.Array:
        return self.param("value", lambda _: jnp.full((self.size,), self.init_value, jnp.float32))


class LogParam(linen.Module):
    """A learned positive vector stored as its log (variable ``log_value``, starting at ``log(init_value)``)."""

    init_value: float = 1.0
    size: int = 1

    @linen.compact
    def __call__(self) -> jax.Array:
        log_value = self.param("log_value", lambda _: jnp.full((self.size,), math.log(self.init_value), jnp.float32))
        return jnp.exp(log_value)


class PolicyModuleWithStd(linen.Module):
    """Policy of a (not squashed) normal: ``obs -> (mean, std)``, both ``[..., param_size]``.

    The hidden layers all end with the activation (and layer norm when asked); the mean is a linear head,
    squashed into ``(-mean_clip_scale, mean_clip_scale)`` by ``c * x / (1 + |x|)`` when ``mean_clip_scale`` is
    set. The std is a learned vector (``noise_std_type='scalar'``: the value itself, ``'log'``: stored as its log),
    or with ``state_dependent_std`` a linear head (``'log'``: its exponential, ``'scalar'``: its raw output).
    """

    param_size: int
    hidden_layer_sizes: Sequence[int]
    activation: ActivationFn
    kernel_init: Initializer
    layer_norm: bool = False
    noise_std_type: str = "scalar"
    init_noise_std: float = 1.0
    state_dependent_std: bool = False
    mean_clip_scale: float | None = None
    mean_kernel_init: Initializer | None = None

    @linen.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        obs, leading = fold_batch_axes(obs)
        hidden = MLP(
            layer_sizes=list(self.hidden_layer_sizes),
            activation=self.activation,
            kernel_init=self.kernel_init,
            activate_final=True,
            layer_norm=self.layer_norm,
            name="MLP_0",
        )(obs)
        mean_init = self.kernel_init if self.mean_kernel_init is None else self.mean_kernel_init
        mean = linen.Dense(self.param_size, kernel_init=mean_init, name="Dense_0")(hidden)
        if self.mean_clip_scale is not None:
            mean = self.mean_clip_scale * mean / (1.0 + jnp.abs(mean))
        if self.state_dependent_std:
            raw = linen.Dense(self.param_size, kernel_init=self.kernel_init, name="Dense_1")(hidden)
            std = jnp.exp(raw) if self.noise_std_type == "log" else raw
        elif self.noise_std_type == "log":
            std = LogParam(self.init_noise_std, self.param_size, name="std_logparam")()
        else:
            std = Param(self.init_noise_std, self.param_size, name="std_param")()
        return unfold_batch_axes(mean, leading), unfold_batch_axes(jnp.broadcast_to(std, mean.shape), leading)


def normalizer_select(processor_params: Any, obs_key: str) -> Any:
    """The statistics of one key of dict observations (``processor_params`` unchanged when they are not per key)."""
    mean = getattr(processor_params, "mean", None)
    if not isinstance(mean, Mapping):
        return processor_params
    return processor_params.replace(
        mean=mean[obs_key],
        std=processor_params.std[obs_key],
        summed_variance=processor_params.summed_variance[obs_key],
    )


def _preprocess(
    preprocess_observations_fn: types.PreprocessObservationFn,
    processor_params: Any,
    obs: types.Observation,
    obs_key: str,
) -> jax.Array:
    """The network input: the selected key of dict observations, normalised with that key's statistics."""
    if isinstance(obs, Mapping):
        if obs_key not in obs:
            raise ValueError(f"observation key {obs_key!r} is not among the observation keys {sorted(obs)}")
        return preprocess_observations_fn(obs[obs_key], normalizer_select(processor_params, obs_key))
    return preprocess_observations_fn(obs, processor_params)


def _input_size(observation_size: types.ObservationSize, obs_key: str) -> int:
    if isinstance(observation_size, Mapping):
        if obs_key not in observation_size:
            raise ValueError(
                f"observation key {obs_key!r} is not among the observation keys {sorted(observation_size)}"
            )
        shape = observation_size[obs_key]
        return int(shape) if isinstance(shape, int) else int(math.prod(shape))
    return int(observation_size)


def make_policy_network(
    param_size: int,
    obs_size: types.ObservationSize,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: ActivationFn = linen.relu,
    kernel_init: Initializer = LECUN_UNIFORM,
    layer_norm: bool = False,
    obs_key: str = "state",
    distribution_type: str = "tanh_normal",
    noise_std_type: str = "scalar",
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    mean_clip_scale: float | None = None,
    mean_kernel_init: Initializer | None = None,
) -> FeedForwardNetwork:
    """Creates a policy network: ``apply(processor_params, policy_params, obs) -> distribution parameters``.

    ``'tanh_normal'``: one MLP whose last layer has ``param_size`` outputs. ``'normal'``: a ``PolicyModuleWithStd``
    returning ``(mean, std)``, each of ``param_size``.
    """
    if distribution_type == "tanh_normal":
        module: linen.Module = MLP(
            layer_sizes=list(hidden_layer_sizes) + [param_size],
            activation=activation,
            kernel_init=kernel_init,
            layer_norm=layer_norm,
        )
    elif distribution_type == "normal":
        if noise_std_type not in NOISE_STD_TYPES:
            raise ValueError(f"noise_std_type must be one of {NOISE_STD_TYPES}, got {noise_std_type!r}")
        module = PolicyModuleWithStd(
            param_size=param_size,
            hidden_layer_sizes=tuple(hidden_layer_sizes),
            activation=activation,
            kernel_init=kernel_init,
            layer_norm=layer_norm,
            noise_std_type=noise_std_type,
            init_noise_std=init_noise_std,
            state_dependent_std=state_dependent_std,
            mean_clip_scale=mean_clip_scale,
            mean_kernel_init=mean_kernel_init,
        )
    else:
        raise ValueError(f"distribution_type must be one of {DISTRIBUTION_TYPES}, got {distribution_type!r}")
    in_size = _input_size(obs_size, obs_key)

    def apply(processor_params: Any, policy_params: Any, obs: types.Observation) -> Any:
        return module.apply(policy_params, _preprocess(preprocess_observations_fn, processor_params, obs, obs_key))

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
        out = module.apply(value_params, _preprocess(preprocess_observations_fn, processor_params, obs, obs_key))
        if use_distributional_critic:
            return jnp.mean(out, axis=-1), out
        return jnp.squeeze(out, axis=-1)

    return FeedForwardNetwork(init=lambda key: module.init(key, jnp.zeros((1, in_size), jnp.float32)), apply=apply)


class QModule(linen.Module):
    """``n_critics`` MLPs of ``[observation, action]``, their outputs side by side (``[..., n_critics]``); the
    critics are ``MLP_0``, ``MLP_1``, ... (Brax's layout and names)."""

    hidden_layer_sizes: Sequence[int]
    activation: ActivationFn = linen.relu
    kernel_init: Initializer = LECUN_UNIFORM
    layer_norm: bool = False
    n_critics: int = 2

    @linen.compact
    def __call__(self, obs: jax.Array, actions: jax.Array) -> jax.Array:
        inputs = jnp.concatenate([obs, actions], axis=-1)
        critic = functools.partial(MLP, layer_sizes=[*self.hidden_layer_sizes, 1], activation=self.activation,
                                   kernel_init=self.kernel_init, layer_norm=self.layer_norm)
        return jnp.concatenate([critic()(inputs) for _ in range(self.n_critics)], axis=-1)


def make_q_network(
    obs_size: types.ObservationSize,
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: ActivationFn = linen.relu,
    n_critics: int = 2,
    layer_norm: bool = False,
    kernel_init: Initializer = LECUN_UNIFORM,
) -> FeedForwardNetwork:
    """Creates Q networks: ``apply(processor_params, q_params, obs, actions) -> [..., n_critics]`` values."""
    if isinstance(n_critics, bool) or not isinstance(n_critics, int) or n_critics < 1:
        raise ValueError(f"n_critics must be a positive integer, got {n_critics!r}")
    module = QModule(hidden_layer_sizes=tuple(hidden_layer_sizes), activation=activation, kernel_init=kernel_init,
                     layer_norm=layer_norm, n_critics=n_critics)
    in_size = _input_size(obs_size, "state")

    def apply(processor_params: Any, q_params: Any, obs: types.Observation, actions: jax.Array) -> jax.Array:
        return module.apply(q_params, _preprocess(preprocess_observations_fn, processor_params, obs, "state"), actions)

    def init(key: jax.Array) -> Any:
        return module.init(key, jnp.zeros((1, in_size), jnp.float32), jnp.zeros((1, action_size), jnp.float32))

    return FeedForwardNetwork(init=init, apply=apply)
