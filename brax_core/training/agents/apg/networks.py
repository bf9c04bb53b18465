"""APG networks (``brax.training.agents.apg.networks`` counterpart): one policy network, no critic.

The analytic policy gradient differentiates the return through the environment's own dynamics, so the agent needs
no value estimate: a policy network and the distribution its outputs parametrise are all there is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax
import jax
from flax import linen

from brax_core.training import distribution, networks, types

# Brax's choices for APG: small outputs at initialisation (a policy that starts near the middle of the action range,
# where tanh passes gradients on) and little exploration noise, since the gradient, not the noise, finds the way.
_KERNEL_INIT_SCALE = 0.01
_VAR_SCALE = 0.1


@flax.struct.dataclass
class APGNetworks:
    """The APG agent's networks (Brax's fields).

    Both fields are functions and settings rather than arrays, so they are static: the dataclass is a pytree with
    no leaves and can be closed over or passed through ``jax.jit`` without tracing anything.
    """

    policy_network: networks.FeedForwardNetwork = flax.struct.field(pytree_node=False)
    parametric_action_distribution: distribution.ParametricDistribution = flax.struct.field(pytree_node=False)


def make_inference_fn(apg_networks: APGNetworks) -> Callable[..., types.Policy]:
    """Creates params and inference function for the APG agent (Brax 0.14.2's signature).

    ``make_policy((normalizer_params, policy_params), deterministic=False)`` gives
    ``policy(observations, key) -> (action, {})``: a tanh-squashed sample, or with ``deterministic`` the
    distribution's mode. The sample is reparametrised (``tanh(loc + scale * noise)``), which is what lets the
    training loss differentiate an action with respect to the policy parameters.
    """
    if not isinstance(apg_networks, APGNetworks):
        raise TypeError(f"apg_networks must be APGNetworks (from make_apg_networks), got {type(apg_networks).__name__}")

    def make_policy(params: types.PolicyParams, deterministic: bool = False) -> types.Policy:
        normalizer_params, policy_params = _two_params(params)
        policy_network = apg_networks.policy_network
        action_distribution = apg_networks.parametric_action_distribution

        def policy(observations: types.Observation, key_sample: jax.Array) -> tuple[jax.Array, types.Extra]:
            logits = policy_network.apply(normalizer_params, policy_params, observations)
            if deterministic:
                return action_distribution.mode(logits), {}
            return action_distribution.sample(logits, key_sample), {}

        return policy

    return make_policy


def _two_params(params: Any) -> tuple[Any, Any]:
    """``params`` as ``(normalizer_params, policy_params)``, what ``train`` returns; anything else is refused here
    rather than failing inside the network's ``apply``."""
    if isinstance(params, tuple | list) and len(params) == 2:
        return params[0], params[1]
    raise TypeError(
        "params must be the (normalizer_params, policy_params) pair that apg.train returns, got "
        f"{type(params).__name__}"
    )


def make_apg_networks(
    observation_size: int,
    action_size: int,
    preprocess_observations_fn: types.PreprocessObservationFn = types.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (32,) * 4,
    activation: networks.ActivationFn = linen.elu,
    layer_norm: bool = True,
) -> APGNetworks:
    """Make APG networks (Brax 0.14.2's signature and defaults).

    A tanh-normal policy (standard deviation scaled by 0.1) over an MLP of ``hidden_layer_sizes`` with layer
    normalisation after each hidden activation and orthogonal(0.01) kernels. ``activation`` is a callable or one of
    ``brax_core.training.networks.ACTIVATIONS``' names.
    """
    if isinstance(observation_size, bool) or not isinstance(observation_size, int) or observation_size < 1:
        raise ValueError(
            "observation_size must be a positive integer (APG takes flat array observations), "
            f"got {observation_size!r}"
        )
    if isinstance(action_size, bool) or not isinstance(action_size, int) or action_size < 1:
        raise ValueError(f"action_size must be a positive integer, got {action_size!r}")
    hidden_layer_sizes = networks.validate_layer_sizes("hidden_layer_sizes", hidden_layer_sizes)
    activation = networks.validate_activation(activation)
    if not isinstance(layer_norm, bool):
        raise ValueError(f"layer_norm must be True or False, got {layer_norm!r}")
    if not callable(preprocess_observations_fn):
        raise TypeError(f"preprocess_observations_fn must be callable, got {preprocess_observations_fn!r}")
    parametric_action_distribution = distribution.NormalTanhDistribution(event_size=action_size, var_scale=_VAR_SCALE)
    policy_network = networks.make_policy_network(
        parametric_action_distribution.param_size,
        observation_size,
        preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=hidden_layer_sizes,
        activation=activation,
        kernel_init=linen.initializers.orthogonal(_KERNEL_INIT_SCALE),
        layer_norm=layer_norm,
    )
    return APGNetworks(
        policy_network=policy_network, parametric_action_distribution=parametric_action_distribution
    )
