"""PPO networks (``brax.training.agents.ppo.networks`` counterpart).

``make_ppo_networks`` builds a policy (tanh-squashed normal, or normal with a learned std) and a value function;
``make_inference_fn`` turns trained parameters into a policy ``(observation, key) -> (action, extras)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import flax
import jax
from flax import linen
from ml_collections import config_dict

from brax_core.training import distribution, networks, types


@flax.struct.dataclass
class PPONetworks:
    policy_network: networks.FeedForwardNetwork
    value_network: networks.FeedForwardNetwork
    parametric_action_distribution: distribution.ParametricDistribution


class PPOTrainingParams(NamedTuple):
    """Everything a trained PPO agent needs: what ``train`` returns and ``make_policy`` accepts."""

    normalizer_params: Any
    policy_params: Any
    value_params: Any


_LECUN_UNIFORM_FACTORY = jax.nn.initializers.lecun_uniform
# In Brax's table of kernel initialisers these two are initialisers already, not factories: used as they are.
_PLAIN_INITIALIZERS = (jax.nn.initializers.zeros, jax.nn.initializers.ones)


def kernel_initializer(
    fn_name: str, fn: Any, kwargs_name: str, kwargs: Any, kernel_init: networks.Initializer | None = None
) -> networks.Initializer:
    """The initialiser ``fn(**kwargs)``, or ``kernel_init`` when that is given and ``fn`` is left at its default.

    ``fn`` is a factory such as ``jax.nn.initializers.lecun_uniform``, or its name in ``jax.nn.initializers``.
    """
    if isinstance(fn, str):
        found = getattr(jax.nn.initializers, fn, None)
        if not callable(found):
            raise ValueError(f"{fn_name} {fn!r} is not a jax.nn.initializers factory")
        fn = found
    if not callable(fn):
        raise ValueError(
            f"{fn_name} must be an initialiser factory such as jax.nn.initializers.lecun_uniform (one of "
            f"{sorted(networks.KERNEL_INITIALIZER)}), got {fn!r}"
        )
    if isinstance(kwargs, config_dict.ConfigDict):
        # A nested dict of a checkpoint configuration (``**config.network_factory_kwargs``) arrives as one.
        kwargs = kwargs.to_dict()
    if kwargs is not None and not (isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)):
        raise ValueError(f"{kwargs_name} must be a mapping of keyword arguments for {fn_name} or None, got {kwargs!r}")
    if kernel_init is not None:
        if fn is not _LECUN_UNIFORM_FACTORY or kwargs:
            raise ValueError(f"give kernel_init or {fn_name}/{kwargs_name}, not both")
        return kernel_init
    if fn in _PLAIN_INITIALIZERS and not kwargs:
        return fn
    try:
        init = fn(**dict(kwargs or {}))
    except TypeError as e:
        raise ValueError(
            f"{fn_name}(**{kwargs_name}) failed ({e}); {fn_name} must be a factory like "
            f"jax.nn.initializers.lecun_uniform called with {kwargs_name}, not an initialiser itself"
        ) from None
    if not callable(init):
        raise ValueError(f"{fn_name}(**{kwargs_name}) must return an initialiser, got {init!r}")
    return init


def _positive_number(name: str, value: Any, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        accepted = "a finite number > 0" + (" or None" if optional else "")
        raise ValueError(f"{name} must be {accepted}, got {value!r}")
    return float(value)


def make_ppo_networks(
    observation_size: types.ObservationSize,
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    policy_hidden_layer_sizes: Sequence[int] = (32,) * 4,
    value_hidden_layer_sizes: Sequence[int] = (256,) * 5,
    activation: networks.ActivationFn = linen.swish,
    policy_obs_key: str = "state",
    value_obs_key: str = "state",
    distribution_type: str = "tanh_normal",
    noise_std_type: str = "scalar",
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    policy_network_kernel_init_fn: Callable[..., networks.Initializer] = _LECUN_UNIFORM_FACTORY,
    policy_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    value_network_kernel_init_fn: Callable[..., networks.Initializer] = _LECUN_UNIFORM_FACTORY,
    value_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    mean_clip_scale: float | None = None,
    mean_kernel_init_fn: Callable[..., networks.Initializer] | None = None,
    mean_kernel_init_kwargs: Mapping[str, Any] | None = None,
    kernel_init: networks.Initializer | None = None,
    layer_norm: bool = False,
    min_std: float = 0.001,
    use_distributional_critic: bool = False,
    num_quantiles: int = 32,
) -> PPONetworks:
    """Makes PPO networks with preprocessor (Brax 0.14.2's arguments and meanings, plus our own).

    Args:
      observation_size: an int, or a mapping of dict-observation keys to shapes.
      action_size: the number of action dimensions.
      preprocess_observations_fn: applied to the selected observation with its statistics (the normaliser).
      policy_hidden_layer_sizes: the policy network's hidden layer widths.
      value_hidden_layer_sizes: the value network's hidden layer widths.
      activation: hidden-layer activation.
      policy_obs_key: with dict observations, the key the policy reads; ignored for array observations.
      value_obs_key: with dict observations, the key the value network reads (asymmetric actor-critic: e.g.
        ``'privileged_state'``); ignored for array observations.
      distribution_type: ``'tanh_normal'`` (an MLP outputs loc and a softplus scale; actions are tanh-squashed) or
        ``'normal'`` (mean head and learned std; actions are the normal samples, not squashed).
      noise_std_type: ``'normal'`` only: the std parameter is the std itself (``'scalar'``) or its log (``'log'``).
      init_noise_std: ``'normal'`` only: the std the parameter starts at.
      state_dependent_std: ``'normal'`` only: the std is a linear head on the hidden features instead.
      policy_network_kernel_init_fn: initialiser factory (e.g. ``jax.nn.initializers.orthogonal``) for the
        policy's kernels.
      policy_network_kernel_init_kwargs: keyword arguments of ``policy_network_kernel_init_fn``.
      value_network_kernel_init_fn: initialiser factory for the value network's kernels.
      value_network_kernel_init_kwargs: keyword arguments of ``value_network_kernel_init_fn``.
      mean_clip_scale: ``'normal'`` only: the mean is squashed into ``(-s, s)`` by ``s * x / (1 + |x|)``.
      mean_kernel_init_fn: ``'normal'`` only: initialiser factory of the mean head's kernel (default: the
        policy's).
      mean_kernel_init_kwargs: keyword arguments of ``mean_kernel_init_fn``.
      kernel_init: an initialiser (not a factory) for both networks' kernels, instead of the two ``*_fn``.
      layer_norm: layer norm after each hidden activation.
      min_std: ``'tanh_normal'`` only: added to the softplus scale.
      use_distributional_critic: the value network outputs ``num_quantiles`` quantiles and its ``apply`` returns
        ``(value, quantiles)`` (see ``networks.make_value_network``); ``train`` sets it from its own argument.
      num_quantiles: the distributional critic's number of quantiles.
    """
    if isinstance(action_size, bool) or not isinstance(action_size, int) or action_size <= 0:
        raise ValueError(f"action_size must be a positive integer, got {action_size!r}")
    policy_hidden_layer_sizes = networks.validate_layer_sizes("policy_hidden_layer_sizes", policy_hidden_layer_sizes)
    value_hidden_layer_sizes = networks.validate_layer_sizes("value_hidden_layer_sizes", value_hidden_layer_sizes)
    activation = networks.validate_activation(activation)
    if distribution_type not in networks.DISTRIBUTION_TYPES:
        raise ValueError(f"distribution_type must be one of {networks.DISTRIBUTION_TYPES}, got {distribution_type!r}")
    if noise_std_type not in networks.NOISE_STD_TYPES:
        raise ValueError(f"noise_std_type must be one of {networks.NOISE_STD_TYPES}, got {noise_std_type!r}")
    init_noise_std = _positive_number("init_noise_std", init_noise_std)
    mean_clip_scale = _positive_number("mean_clip_scale", mean_clip_scale, optional=True)
    if not isinstance(state_dependent_std, bool):
        raise ValueError(f"state_dependent_std must be True or False, got {state_dependent_std!r}")
    if not isinstance(layer_norm, bool):
        raise ValueError(f"layer_norm must be True or False, got {layer_norm!r}")
    if isinstance(min_std, bool) or not isinstance(min_std, int | float) or not min_std >= 0:
        raise ValueError(f"min_std must be a number >= 0, got {min_std!r}")
    for name, key in (("policy_obs_key", policy_obs_key), ("value_obs_key", value_obs_key)):
        if not isinstance(key, str) or not key:
            raise ValueError(f"{name} must be a non-empty string naming a dict-observation key, got {key!r}")
    if kernel_init is not None and not callable(kernel_init):
        raise ValueError(
            f"kernel_init must be an initialiser (e.g. jax.nn.initializers.lecun_uniform()) or None, "
            f"got {kernel_init!r}"
        )
    policy_init = kernel_initializer(
        "policy_network_kernel_init_fn",
        policy_network_kernel_init_fn,
        "policy_network_kernel_init_kwargs",
        policy_network_kernel_init_kwargs,
        kernel_init,
    )
    value_init = kernel_initializer(
        "value_network_kernel_init_fn",
        value_network_kernel_init_fn,
        "value_network_kernel_init_kwargs",
        value_network_kernel_init_kwargs,
        kernel_init,
    )
    mean_init = None
    if mean_kernel_init_fn is not None:
        mean_init = kernel_initializer(
            "mean_kernel_init_fn", mean_kernel_init_fn, "mean_kernel_init_kwargs", mean_kernel_init_kwargs, None
        )
    elif mean_kernel_init_kwargs:
        raise ValueError("mean_kernel_init_kwargs needs mean_kernel_init_fn")

    parametric_action_distribution: distribution.ParametricDistribution
    if distribution_type == "normal":
        parametric_action_distribution = distribution.NormalDistribution(event_size=action_size)
    else:
        parametric_action_distribution = distribution.NormalTanhDistribution(event_size=action_size, min_std=min_std)
    policy_network = networks.make_policy_network(
        parametric_action_distribution.param_size,
        observation_size,
        preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=policy_hidden_layer_sizes,
        activation=activation,
        kernel_init=policy_init,
        layer_norm=layer_norm,
        obs_key=policy_obs_key,
        distribution_type=distribution_type,
        noise_std_type=noise_std_type,
        init_noise_std=init_noise_std,
        state_dependent_std=state_dependent_std,
        mean_clip_scale=mean_clip_scale,
        mean_kernel_init=mean_init,
    )
    value_network = networks.make_value_network(
        observation_size,
        preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=value_hidden_layer_sizes,
        activation=activation,
        kernel_init=value_init,
        layer_norm=layer_norm,
        obs_key=value_obs_key,
        use_distributional_critic=use_distributional_critic,
        num_quantiles=num_quantiles,
    )
    return PPONetworks(
        policy_network=policy_network,
        value_network=value_network,
        parametric_action_distribution=parametric_action_distribution,
    )


_PARAMS_HELP = (
    "make_policy expects {name}(normalizer_params, policy_params, value_params) as returned by train, "
    "a (normalizer_params, policy_params) pair, or any object with .normalizer_params and .policy_params"
)


def policy_params_of(params: Any, params_type_name: str = "PPOTrainingParams") -> tuple[Any, Any]:
    """``(normalizer_params, policy_params)`` from any of the accepted parameter structures.

    Framework-agnostic (torch_ppo uses it too); ``params_type_name`` names the trainer's params type in errors.
    """
    help_text = _PARAMS_HELP.format(name=params_type_name)
    if hasattr(params, "normalizer_params") and hasattr(params, "policy_params"):
        return params.normalizer_params, params.policy_params
    if isinstance(params, Mapping):
        if "normalizer_params" in params and "policy_params" in params:
            return params["normalizer_params"], params["policy_params"]
        raise TypeError(f"{help_text}; got a mapping with keys {sorted(map(str, params))}")
    if isinstance(params, (tuple, list)) and len(params) in (2, 3):
        return params[0], params[1]
    described = type(params).__name__
    if isinstance(params, (tuple, list)):
        described += f" of length {len(params)}"
    raise TypeError(f"{help_text}; got {described}")


def make_inference_fn(
    ppo_networks: PPONetworks, compute_value: bool = False, use_distributional_critic: bool = False
) -> Callable[..., types.Policy]:
    """Creates params and inference function for the PPO agent (Brax 0.14.2's signature).

    ``make_policy(params, deterministic=False)`` gives ``policy(observations, key) -> (action, extras)``. A sampled
    action's extras hold ``log_prob``, ``raw_action`` (before the squashing) and ``distribution_params`` (the
    policy network's output); with ``compute_value`` also ``value``, and with ``use_distributional_critic`` the
    value network's ``quantiles`` as well (``params`` then need their value part). A deterministic policy returns
    the distribution's mode and no extras.
    """
    for name, flag in (("compute_value", compute_value), ("use_distributional_critic", use_distributional_critic)):
        if not isinstance(flag, bool):
            raise TypeError(f"make_inference_fn: {name} must be True or False, got {flag!r}")
    return _inference_fn(ppo_networks, compute_value, use_distributional_critic, with_distribution=True)


def _inference_fn(
    ppo_networks: PPONetworks, compute_value: bool, use_distributional_critic: bool, with_distribution: bool
) -> Callable[..., types.Policy]:
    """``make_inference_fn``; the trainer's own rollouts leave ``distribution_params`` out (``with_distribution``):
    carried through every unroll it would only cost memory, and the update recomputes it when a loss needs it."""

    def make_policy(params: Any, deterministic: bool = False) -> types.Policy:
        normalizer_params, policy_params = policy_params_of(params)
        value_params = _value_params_of(params) if compute_value and not deterministic else None
        policy_network = ppo_networks.policy_network
        parametric_action_distribution = ppo_networks.parametric_action_distribution

        def policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, types.Extra]:
            logits = policy_network.apply(normalizer_params, policy_params, observations)
            if deterministic:
                return parametric_action_distribution.mode(logits), {}
            raw_actions = parametric_action_distribution.sample_no_postprocessing(logits, key_sample)
            log_prob = parametric_action_distribution.log_prob(logits, raw_actions)
            postprocessed_actions = parametric_action_distribution.postprocess(raw_actions)
            extras = {"log_prob": log_prob, "raw_action": raw_actions}
            if with_distribution:
                extras["distribution_params"] = logits
            if value_params is not None:
                value = ppo_networks.value_network.apply(normalizer_params, value_params, observations)
                if use_distributional_critic:
                    extras["value"], extras["quantiles"] = value
                else:
                    extras["value"] = value
            return postprocessed_actions, extras

        return policy

    return make_policy


def _value_params_of(params: Any) -> Any:
    """The value network's parameters of ``params`` (``compute_value`` needs them), or a TypeError saying so."""
    if hasattr(params, "value_params"):
        return params.value_params
    if isinstance(params, Mapping) and "value_params" in params:
        return params["value_params"]
    if isinstance(params, (tuple, list)) and len(params) == 3:
        return params[2]
    raise TypeError(
        "make_inference_fn(..., compute_value=True): make_policy needs the value parameters too, "
        "(normalizer_params, policy_params, value_params) as returned by train"
    )
