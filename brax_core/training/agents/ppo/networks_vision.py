"""PPO networks over image observations (``brax.training.agents.ppo.networks_vision`` counterpart).

Observations are dicts. Every key starting with ``pixels/`` holds one camera view, ``(H, W, C)`` per sample; each view
goes through its own convolutional encoder (``CNN_0``, ``CNN_1``, ... in key order), is pooled over the image to a
feature vector, and the vectors are concatenated, followed by the observation under ``policy_obs_key`` /
``value_obs_key`` when one is given (a state vector, normalised with that key's running statistics when the trainer
normalises). An MLP (``MLP_0``, layers ``hidden_0, hidden_1, ...``) maps the result to the distribution parameters or
the value. Parameter names and shapes are Brax's, so ``policy_params['params']['MLP_0']['hidden_0']['kernel']`` is
``(num_views * cnn_output_channels[-1] + state_size, hidden)`` with the default average pooling.

The running statistics never cover pixel keys (``remove_pixels``): images are left as they are, or normalised per
image and channel inside the network with ``normalise_channels``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
from flax import linen

from brax_core.training import distribution, networks, types
from brax_core.training.agents.ppo.networks import PPONetworks, kernel_initializer

PIXEL_PREFIX = "pixels/"
GLOBAL_POOLS = ("avg", "max", "spatial_softmax", "none")
_PADDINGS = {"zeros": "SAME", "same": "SAME", "valid": "VALID"}

__all__ = [
    "CNN",
    "GLOBAL_POOLS",
    "PIXEL_PREFIX",
    "VisionMLP",
    "has_pixels",
    "make_ppo_networks_vision",
    "remove_pixels",
]


def has_pixels(observation: Any) -> bool:
    """Whether a dict observation (or observation size) has image views (keys starting with ``pixels/``)."""
    return isinstance(observation, Mapping) and any(str(k).startswith(PIXEL_PREFIX) for k in observation)


def remove_pixels(observation: Any) -> Any:
    """``observation`` without its image views: what the running statistics are kept over."""
    if not isinstance(observation, Mapping):
        return observation
    return {k: v for k, v in observation.items() if not str(k).startswith(PIXEL_PREFIX)}


class CNN(linen.Module):
    """Convolutions over ``(..., H, W, C)`` images, each followed by the activation (and optionally a 2x2 max-pool)."""

    num_filters: Sequence[int]
    kernel_sizes: Sequence[tuple[int, int]]
    strides: Sequence[tuple[int, int]]
    activation: networks.ActivationFn = linen.relu
    use_bias: bool = True
    padding: str = "SAME"
    max_pool: bool = False
    kernel_init: networks.Initializer = jax.nn.initializers.lecun_normal()

    @linen.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        hidden = images
        for filters, kernel, stride in zip(self.num_filters, self.kernel_sizes, self.strides, strict=True):
            hidden = linen.Conv(
                filters,
                kernel_size=kernel,
                strides=stride,
                padding=self.padding,
                use_bias=self.use_bias,
                kernel_init=self.kernel_init,
            )(hidden)
            hidden = self.activation(hidden)
            if self.max_pool:
                hidden = linen.max_pool(hidden, window_shape=(2, 2), strides=(2, 2), padding="SAME")
        return hidden


def _spatial_softmax(features: jax.Array) -> jax.Array:
    """Per channel, the expected image coordinates in ``[-1, 1]`` under a softmax over its pixels."""
    h, w, c = features.shape[-3:]
    rows, cols = jnp.meshgrid(jnp.linspace(-1.0, 1.0, h), jnp.linspace(-1.0, 1.0, w), indexing="ij")
    attention = jax.nn.softmax(features.reshape(features.shape[:-3] + (h * w, c)), axis=-2)
    expected_row = jnp.sum(attention * rows.reshape(-1, 1), axis=-2)
    expected_col = jnp.sum(attention * cols.reshape(-1, 1), axis=-2)
    return jnp.concatenate([expected_row, expected_col], axis=-1)


def _normalise_per_channel(images: jax.Array) -> jax.Array:
    """Each image's channels to zero mean and unit variance over the image (no learned scale or offset)."""
    mean = jnp.mean(images, axis=(-3, -2), keepdims=True)
    var = jnp.var(images, axis=(-3, -2), keepdims=True)
    return (images - mean) * jax.lax.rsqrt(var + 1e-6)


class _Head(linen.Module):
    """Dense layers ``hidden_0, hidden_1, ...``; the last may have its own initialiser."""

    layer_sizes: Sequence[int]
    activation: networks.ActivationFn
    kernel_init: networks.Initializer
    output_kernel_init: networks.Initializer | None = None
    activate_final: bool = False
    layer_norm: bool = False

    @linen.compact
    def __call__(self, hidden: jax.Array) -> jax.Array:
        hidden, leading = networks.fold_batch_axes(hidden)
        last = len(self.layer_sizes) - 1
        for i, size in enumerate(self.layer_sizes):
            init = self.output_kernel_init if i == last and self.output_kernel_init is not None else self.kernel_init
            hidden = linen.Dense(size, name=f"hidden_{i}", kernel_init=init)(hidden)
            if i != last or self.activate_final:
                hidden = self.activation(hidden)
                if self.layer_norm:
                    hidden = linen.LayerNorm()(hidden)
        return networks.unfold_batch_axes(hidden, leading)


class VisionMLP(linen.Module):
    """One CNN per image view, pooled and concatenated (with the state under ``state_obs_key``), then an MLP."""

    layer_sizes: Sequence[int]
    activation: networks.ActivationFn = linen.relu
    kernel_init: networks.Initializer = networks.LECUN_UNIFORM
    output_kernel_init: networks.Initializer | None = None
    activate_final: bool = False
    layer_norm: bool = False
    normalise_channels: bool = False
    state_obs_key: str = ""
    cnn_output_channels: Sequence[int] = (32, 64, 64)
    cnn_kernel_size: Sequence[int] = (8, 4, 3)
    cnn_stride: Sequence[int] = (4, 2, 1)
    cnn_padding: str = "SAME"
    cnn_activation: networks.ActivationFn = linen.relu
    cnn_use_bias: bool = True
    cnn_max_pool: bool = False
    cnn_global_pool: str = "avg"
    cnn_kernel_init: networks.Initializer = jax.nn.initializers.lecun_normal()

    @linen.compact
    def __call__(self, observation: Mapping[str, jax.Array]) -> jax.Array:
        features = []
        for key in sorted(k for k in observation if k.startswith(PIXEL_PREFIX)):
            images = observation[key]
            if self.normalise_channels:
                images = _normalise_per_channel(images)
            out = CNN(
                num_filters=tuple(self.cnn_output_channels),
                kernel_sizes=tuple((k, k) for k in self.cnn_kernel_size),
                strides=tuple((s, s) for s in self.cnn_stride),
                activation=self.cnn_activation,
                use_bias=self.cnn_use_bias,
                padding=self.cnn_padding,
                max_pool=self.cnn_max_pool,
                kernel_init=self.cnn_kernel_init,
            )(images)
            if self.cnn_global_pool == "avg":
                out = jnp.mean(out, axis=(-3, -2))
            elif self.cnn_global_pool == "max":
                out = jnp.max(out, axis=(-3, -2))
            elif self.cnn_global_pool == "spatial_softmax":
                out = _spatial_softmax(out)
            else:
                out = out.reshape(out.shape[:-3] + (-1,))
            features.append(out)
        if self.state_obs_key:
            features.append(observation[self.state_obs_key])
        return _Head(
            layer_sizes=tuple(self.layer_sizes),
            activation=self.activation,
            kernel_init=self.kernel_init,
            output_kernel_init=self.output_kernel_init,
            activate_final=self.activate_final,
            layer_norm=self.layer_norm,
            name="MLP_0",
        )(jnp.concatenate(features, axis=-1))


def _key_statistics(processor_params: Any, key: str) -> Any:
    """The running statistics of one observation key (the parameters unchanged when they are not per key)."""
    mean = getattr(processor_params, "mean", None)
    if not isinstance(mean, Mapping):
        return processor_params
    return processor_params.replace(
        mean=mean[key], std=processor_params.std[key], summed_variance=processor_params.summed_variance[key]
    )


def _network(
    module: linen.Module,
    observation_size: Mapping[str, Any],
    preprocess_observations_fn: types.PreprocessObservationFn,
    state_obs_key: str,
    squeeze: bool,
) -> networks.FeedForwardNetwork:
    def apply(processor_params: Any, params: Any, obs: Mapping[str, jax.Array]) -> jax.Array:
        if state_obs_key:
            state = preprocess_observations_fn(obs[state_obs_key], _key_statistics(processor_params, state_obs_key))
            obs = {**obs, state_obs_key: state}
        out = module.apply(params, obs)
        return jnp.squeeze(out, axis=-1) if squeeze else out

    dummy = {k: jnp.zeros((1, *_shape(v)), jnp.float32) for k, v in observation_size.items()}
    return networks.FeedForwardNetwork(init=lambda key: module.init(key, dummy), apply=apply)


def _shape(size: Any) -> tuple[int, ...]:
    return (int(size),) if isinstance(size, int) else tuple(int(d) for d in size)


def _positive_ints(name: str, values: Any, length: int | None = None) -> tuple[int, ...]:
    out = networks.validate_layer_sizes(name, values)
    if length is not None and len(out) != length:
        raise ValueError(f"{name} must have one entry per convolution ({length}), got {values!r}")
    return out


def _choice(name: str, value: Any, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def make_ppo_networks_vision(
    observation_size: Mapping[str, tuple[int, ...] | int],
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    policy_hidden_layer_sizes: Sequence[int] = (256, 256),
    value_hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: networks.ActivationFn = linen.swish,
    normalise_channels: bool = False,
    policy_obs_key: str = "",
    value_obs_key: str = "",
    distribution_type: Literal["normal", "tanh_normal"] = "tanh_normal",
    noise_std_type: Literal["scalar", "log"] = "scalar",
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    policy_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    policy_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    value_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    value_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    mean_clip_scale: float | None = None,
    mean_kernel_init_fn: Callable[..., networks.Initializer] | None = None,
    mean_kernel_init_kwargs: Mapping[str, Any] | None = None,
    cnn_output_channels: Sequence[int] = (32, 64, 64),
    cnn_kernel_size: Sequence[int] = (8, 4, 3),
    cnn_stride: Sequence[int] = (4, 2, 1),
    cnn_padding: str = "zeros",
    cnn_activation: networks.ActivationFn | str = linen.relu,
    cnn_max_pool: bool = False,
    cnn_global_pool: str = "avg",
    cnn_kernel_init_fn: Callable[..., networks.Initializer] | str = jax.nn.initializers.lecun_normal,
    cnn_kernel_init_kwargs: Mapping[str, Any] | None = None,
    output_kernel_init_fn: Callable[..., networks.Initializer] | str | None = None,
    output_kernel_init_kwargs: Mapping[str, Any] | None = None,
) -> PPONetworks:
    """PPO policy and value networks over image views (and optionally a state vector), with Brax's arguments.

    Args:
      observation_size: each observation key's shape (a 1-D shape may be given as its length); at least one key
        must start with ``pixels/``.
      action_size: the number of action dimensions.
      preprocess_observations_fn: applied to the ``policy_obs_key``/``value_obs_key`` entry only (the normaliser).
      policy_hidden_layer_sizes: the policy MLP's hidden sizes after the encoders.
      value_hidden_layer_sizes: the value MLP's hidden sizes after the encoders.
      activation: the MLPs' activation.
      normalise_channels: normalise every image channel over the image before its encoder.
      policy_obs_key: the state entry the policy reads beside the images (``''``: images only).
      value_obs_key: the state entry the value function reads beside the images (``''``: images only).
      distribution_type: only ``'tanh_normal'`` (a tanh-squashed normal whose scale the network outputs).
      noise_std_type: ``'scalar'`` or ``'log'``; like ``init_noise_std`` and ``state_dependent_std``, used by Brax's
        ``'normal'`` policies only, so accepted and checked but without effect here.
      init_noise_std: see ``noise_std_type``.
      state_dependent_std: see ``noise_std_type``.
      policy_network_kernel_init_fn: initialiser factory of the policy MLP's kernels.
      policy_network_kernel_init_kwargs: its keyword arguments.
      value_network_kernel_init_fn: initialiser factory of the value MLP's kernels.
      value_network_kernel_init_kwargs: its keyword arguments.
      mean_clip_scale: Brax's mean clipping of ``'normal'`` policies; must be ``None`` here.
      mean_kernel_init_fn: Brax's mean-head initialiser of ``'normal'`` policies; must be ``None`` here.
      mean_kernel_init_kwargs: its keyword arguments.
      cnn_output_channels: filters of each convolution.
      cnn_kernel_size: square kernel size of each convolution.
      cnn_stride: square stride of each convolution.
      cnn_padding: ``'zeros'`` (same-size output) or ``'valid'``.
      cnn_activation: the activation after each convolution (a callable or a name).
      cnn_max_pool: a 2x2 max-pool after each convolution.
      cnn_global_pool: how a view's feature map becomes a vector: ``'avg'``, ``'max'``, ``'spatial_softmax'``
        (expected coordinates per channel) or ``'none'`` (flattened).
      cnn_kernel_init_fn: initialiser factory (or its name in ``jax.nn.initializers``) of the convolutions.
      cnn_kernel_init_kwargs: its keyword arguments.
      output_kernel_init_fn: initialiser factory of the policy's last layer (default: the policy's).
      output_kernel_init_kwargs: its keyword arguments.

    Raises:
      ValueError: a bad argument, named with what it accepts (checked before anything is built).
    """
    if not isinstance(observation_size, Mapping) or not has_pixels(observation_size):
        keys = sorted(observation_size) if isinstance(observation_size, Mapping) else observation_size
        raise ValueError(
            f"make_ppo_networks_vision needs dict observations with image views (keys starting with {PIXEL_PREFIX!r}); "
            f"got observation_size {keys!r}"
        )
    if isinstance(action_size, bool) or not isinstance(action_size, int) or action_size <= 0:
        raise ValueError(f"action_size must be a positive integer, got {action_size!r}")
    for name, key in (("policy_obs_key", policy_obs_key), ("value_obs_key", value_obs_key)):
        if not isinstance(key, str):
            raise ValueError(f"{name} must be a string ('' for images only), got {key!r}")
        if key and key not in observation_size:
            raise ValueError(f"{name} {key!r} is not among the observation keys {sorted(observation_size)}")
        if key.startswith(PIXEL_PREFIX):
            raise ValueError(f"{name} must name a state vector, not an image view; got {key!r}")
        if key and len(_shape(observation_size[key])) != 1:
            raise ValueError(f"{name} {key!r} must be a vector; its shape is {_shape(observation_size[key])}")
    for key, size in observation_size.items():
        if str(key).startswith(PIXEL_PREFIX) and len(_shape(size)) != 3:
            raise ValueError(f"image view {key!r} must have shape (height, width, channels), got {size!r}")
    _choice("distribution_type", distribution_type, ("normal", "tanh_normal"))
    if distribution_type == "normal":
        raise ValueError(
            "distribution_type='normal' is not available for vision networks in brax_core; use 'tanh_normal' "
            "(the default)"
        )
    _choice("noise_std_type", noise_std_type, ("scalar", "log"))
    if isinstance(init_noise_std, bool) or not isinstance(init_noise_std, int | float) or not init_noise_std > 0:
        raise ValueError(f"init_noise_std must be a number > 0, got {init_noise_std!r}")
    if not isinstance(state_dependent_std, bool):
        raise ValueError(f"state_dependent_std must be True or False, got {state_dependent_std!r}")
    if mean_clip_scale is not None or mean_kernel_init_fn is not None:
        raise ValueError("mean_clip_scale and mean_kernel_init_fn apply to 'normal' policies only; leave them None")
    if not isinstance(normalise_channels, bool) or not isinstance(cnn_max_pool, bool):
        raise ValueError("normalise_channels and cnn_max_pool must be True or False")
    policy_sizes = networks.validate_layer_sizes("policy_hidden_layer_sizes", policy_hidden_layer_sizes)
    value_sizes = networks.validate_layer_sizes("value_hidden_layer_sizes", value_hidden_layer_sizes)
    channels = _positive_ints("cnn_output_channels", cnn_output_channels)
    kernels = _positive_ints("cnn_kernel_size", cnn_kernel_size, len(channels))
    strides = _positive_ints("cnn_stride", cnn_stride, len(channels))
    padding = _PADDINGS.get(str(cnn_padding).lower())
    if padding is None:
        raise ValueError(f"cnn_padding must be 'zeros' or 'valid'; got {cnn_padding!r}")
    _choice("cnn_global_pool", cnn_global_pool, GLOBAL_POOLS)
    activation = networks.validate_activation(activation)
    cnn_act = networks.validate_activation(cnn_activation)

    def initializer(name: str, factory: Any, kwargs: Mapping[str, Any] | None) -> networks.Initializer:
        return kernel_initializer(f"{name}_fn", factory, f"{name}_kwargs", kwargs)

    policy_init = initializer(
        "policy_network_kernel_init", policy_network_kernel_init_fn, policy_network_kernel_init_kwargs
    )
    value_init = initializer(
        "value_network_kernel_init", value_network_kernel_init_fn, value_network_kernel_init_kwargs
    )
    cnn_init = initializer("cnn_kernel_init", cnn_kernel_init_fn, cnn_kernel_init_kwargs)
    output_init = None
    if output_kernel_init_fn is not None:
        output_init = initializer("output_kernel_init", output_kernel_init_fn, output_kernel_init_kwargs)

    parametric_action_distribution = distribution.NormalTanhDistribution(event_size=action_size)
    cnn = dict(
        normalise_channels=normalise_channels,
        cnn_output_channels=channels,
        cnn_kernel_size=kernels,
        cnn_stride=strides,
        cnn_padding=padding,
        cnn_activation=cnn_act,
        cnn_max_pool=cnn_max_pool,
        cnn_global_pool=cnn_global_pool,
        cnn_kernel_init=cnn_init,
    )
    policy_module = VisionMLP(
        layer_sizes=(*policy_sizes, parametric_action_distribution.param_size),
        activation=activation,
        kernel_init=policy_init,
        output_kernel_init=output_init,
        state_obs_key=policy_obs_key,
        **cnn,
    )
    value_module = VisionMLP(
        layer_sizes=(*value_sizes, 1),
        activation=activation,
        kernel_init=value_init,
        state_obs_key=value_obs_key,
        **cnn,
    )
    return PPONetworks(
        policy_network=_network(policy_module, observation_size, preprocess_observations_fn, policy_obs_key, False),
        value_network=_network(value_module, observation_size, preprocess_observations_fn, value_obs_key, True),
        parametric_action_distribution=parametric_action_distribution,
    )
