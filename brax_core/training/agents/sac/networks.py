"""SAC's networks (``brax.training.agents.sac.networks`` counterpart): a policy and twin Q networks, both reading
the (optionally normalised) observation.

Where this differs from Brax: the kernel initialisers' keyword arguments reach both factories as keywords (Brax
passes ``policy_network_kernel_init_kwargs`` to the policy's factory as one positional argument, so the policy
ignores them or fails), and a bad ``distribution_type`` or ``noise_std_type`` is refused naming the choices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import flax
import jax
from flax import linen

from brax_core.training import distribution, networks, types


@flax.struct.dataclass
class SACNetworks:
    """The SAC agent's networks (Brax's fields): functions and settings, not arrays (a pytree without leaves)."""

    policy_network: networks.FeedForwardNetwork = flax.struct.field(pytree_node=False)
    q_network: networks.FeedForwardNetwork = flax.struct.field(pytree_node=False)
    parametric_action_distribution: distribution.ParametricDistribution = flax.struct.field(pytree_node=False)


def make_inference_fn(sac_networks: SACNetworks) -> Callable[..., types.Policy]:
    """``make_policy((normalizer_params, policy_params), deterministic=False)`` gives ``policy(obs, key) -> (action,
    {})``: a sample of the action distribution, or with ``deterministic`` its mode (Brax 0.14.2's signature)."""
    if not isinstance(sac_networks, SACNetworks):
        raise TypeError(f"sac_networks must be SACNetworks (from make_sac_networks), got {type(sac_networks).__name__}")

    def make_policy(params: types.PolicyParams, deterministic: bool = False) -> types.Policy:
        action_distribution = sac_networks.parametric_action_distribution

        def policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, types.Extra]:
            logits = sac_networks.policy_network.apply(*params, observations)
            if deterministic:
                return action_distribution.mode(logits), {}
            return action_distribution.sample(logits, key_sample), {}

        return policy

    return make_policy


def make_sac_networks(
    observation_size: int,
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: networks.ActivationFn = linen.relu,
    policy_network_layer_norm: bool = False,
    q_network_layer_norm: bool = False,
    distribution_type: Literal["normal", "tanh_normal"] = "tanh_normal",
    noise_std_type: Literal["scalar", "log"] = "scalar",
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    policy_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    policy_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    q_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    q_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    q_hidden_layer_sizes: Sequence[int] | None = None,
) -> SACNetworks:
    """Make SAC networks (Brax 0.14.2's signature and defaults): a policy of ``hidden_layer_sizes`` whose outputs
    parametrise ``distribution_type`` over ``action_size`` actions, and two Q networks over the observation and the
    action, of ``q_hidden_layer_sizes`` (an addition to Brax's signature; ``None``: ``hidden_layer_sizes``)."""
    if distribution_type == "tanh_normal":
        action_distribution: distribution.ParametricDistribution = distribution.NormalTanhDistribution(action_size)
    elif distribution_type == "normal":
        action_distribution = distribution.NormalDistribution(action_size)
    else:
        raise ValueError(f"distribution_type must be one of {networks.DISTRIBUTION_TYPES}, got {distribution_type!r}")
    activation = networks.validate_activation(activation)
    policy_network = networks.make_policy_network(
        action_distribution.param_size,
        observation_size,
        preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=hidden_layer_sizes,
        activation=activation,
        layer_norm=policy_network_layer_norm,
        distribution_type=distribution_type,
        noise_std_type=noise_std_type,
        init_noise_std=init_noise_std,
        state_dependent_std=state_dependent_std,
        kernel_init=policy_network_kernel_init_fn(**(policy_network_kernel_init_kwargs or {})),
    )
    q_network = networks.make_q_network(
        observation_size,
        action_size,
        preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=hidden_layer_sizes if q_hidden_layer_sizes is None else q_hidden_layer_sizes,
        activation=activation,
        layer_norm=q_network_layer_norm,
        kernel_init=q_network_kernel_init_fn(**(q_network_kernel_init_kwargs or {})),
    )
    return SACNetworks(policy_network, q_network, action_distribution)
