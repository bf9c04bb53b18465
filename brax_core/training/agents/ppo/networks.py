"""PPO networks (``brax.training.agents.ppo.networks`` counterpart).

``make_ppo_networks`` builds a tanh-squashed normal policy and a value function from two MLPs;
``make_inference_fn`` turns trained parameters into a policy ``(observation, key) -> (action, extras)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import flax
import jax
from flax import linen

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


def make_ppo_networks(
    observation_size: types.ObservationSize,
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    policy_hidden_layer_sizes: Sequence[int] = (32,) * 4,
    value_hidden_layer_sizes: Sequence[int] = (256,) * 5,
    activation: networks.ActivationFn = linen.swish,
    policy_obs_key: str = "state",
    value_obs_key: str = "state",
    kernel_init: networks.Initializer = networks.LECUN_UNIFORM,
    layer_norm: bool = False,
    min_std: float = 0.001,
    use_distributional_critic: bool = False,
    num_quantiles: int = 32,
) -> PPONetworks:
    """Makes PPO networks with preprocessor.

    ``use_distributional_critic``: the value network outputs ``num_quantiles`` quantiles and its ``apply`` returns
    ``(value, quantiles)`` (see ``networks.make_value_network``); ``train`` sets it from its own argument.
    """
    if isinstance(action_size, bool) or not isinstance(action_size, int) or action_size <= 0:
        raise ValueError(f"action_size must be a positive integer, got {action_size!r}")
    policy_hidden_layer_sizes = networks.validate_layer_sizes("policy_hidden_layer_sizes", policy_hidden_layer_sizes)
    value_hidden_layer_sizes = networks.validate_layer_sizes("value_hidden_layer_sizes", value_hidden_layer_sizes)
    activation = networks.validate_activation(activation)
    parametric_action_distribution = distribution.NormalTanhDistribution(event_size=action_size, min_std=min_std)
    policy_network = networks.make_policy_network(
        parametric_action_distribution.param_size,
        observation_size,
        preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=policy_hidden_layer_sizes,
        activation=activation,
        kernel_init=kernel_init,
        layer_norm=layer_norm,
        obs_key=policy_obs_key,
    )
    value_network = networks.make_value_network(
        observation_size,
        preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=value_hidden_layer_sizes,
        activation=activation,
        kernel_init=kernel_init,
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


def make_inference_fn(ppo_networks: PPONetworks) -> Callable[..., types.Policy]:
    """Creates params and inference function for the PPO agent."""

    def make_policy(params: Any, deterministic: bool = False) -> types.Policy:
        normalizer_params, policy_params = policy_params_of(params)
        policy_network = ppo_networks.policy_network
        parametric_action_distribution = ppo_networks.parametric_action_distribution

        def policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, types.Extra]:
            logits = policy_network.apply(normalizer_params, policy_params, observations)
            if deterministic:
                return parametric_action_distribution.mode(logits), {}
            raw_actions = parametric_action_distribution.sample_no_postprocessing(logits, key_sample)
            log_prob = parametric_action_distribution.log_prob(logits, raw_actions)
            postprocessed_actions = parametric_action_distribution.postprocess(raw_actions)
            return postprocessed_actions, {"log_prob": log_prob, "raw_action": raw_actions}

        return policy

    return make_policy
