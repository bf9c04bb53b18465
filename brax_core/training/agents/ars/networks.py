"""ARS's policy: a linear map from the (optionally normalised) observation to the action
(``brax.training.agents.ars.networks`` counterpart)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from brax_core.training import networks, types

ARSNetwork = networks.FeedForwardNetwork


def make_policy_network(
    observation_size: int,
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
) -> ARSNetwork:
    """``action = preprocess(obs) @ W`` with ``W`` of shape ``[observation_size, action_size]``, zero at the start
    (as in the ARS paper: the first policy does nothing, the random directions explore around it)."""

    def apply(processor_params: Any, policy_params: jax.Array, obs: jax.Array) -> jax.Array:
        return jnp.matmul(preprocess_observations_fn(obs, processor_params), policy_params)

    return ARSNetwork(init=lambda key: jnp.zeros((observation_size, action_size), jnp.float32), apply=apply)


def make_inference_fn(policy_network: ARSNetwork):
    """``make_policy(params) -> policy(obs, key) -> (action, {})``: ARS's policy is deterministic."""

    def make_policy(params: types.PolicyParams, deterministic: bool = True) -> types.Policy:
        del deterministic  # a linear map has no distribution to sample

        def policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, types.Extra]:
            del key_sample
            return policy_network.apply(*params, observations), {}

        return policy

    return make_policy
