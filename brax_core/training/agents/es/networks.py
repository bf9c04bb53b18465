"""ES's policy: an MLP giving a tanh-squashed normal's parameters (``brax.training.agents.es.networks``
counterpart)."""

from __future__ import annotations

from collections.abc import Sequence

import flax
import jax
from flax import linen

from brax_core.training import distribution, networks, types


@flax.struct.dataclass
class ESNetworks:
    policy_network: networks.FeedForwardNetwork
    parametric_action_distribution: distribution.ParametricDistribution


def make_inference_fn(es_networks: ESNetworks):
    """``make_policy(params, deterministic=False) -> policy(obs, key) -> (action, {})``: a sample of the policy's
    distribution, or its mode."""

    def make_policy(params: types.PolicyParams, deterministic: bool = False) -> types.Policy:
        def policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, types.Extra]:
            logits = es_networks.policy_network.apply(*params, observations)
            distribution_ = es_networks.parametric_action_distribution
            if deterministic:
                return distribution_.mode(logits), {}
            return distribution_.sample(logits, key_sample), {}

        return policy

    return make_policy


def make_es_networks(
    observation_size: int,
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (32,) * 4,
    activation: networks.ActivationFn = linen.relu,
) -> ESNetworks:
    """The policy MLP (Brax's ES default: four hidden layers of 32, ReLU) and its tanh-squashed normal."""
    action_distribution = distribution.NormalTanhDistribution(event_size=action_size)
    policy_network = networks.make_policy_network(
        action_distribution.param_size, observation_size, preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=hidden_layer_sizes, activation=activation,
    )
    return ESNetworks(policy_network=policy_network, parametric_action_distribution=action_distribution)
