"""Policy transfer between the two trainers.

* ``jax_policy_to_torch(params, ...)``: a ``brax_core`` PPO policy (the ``params`` ``train`` returns, the
  ``(normalizer_params, policy_params)`` pair, or a checkpoint path) becomes a self-contained ``torch.nn.Module``
  ``observation -> action`` with the same deterministic actions, normaliser included. It is plain tensor code, so
  ``torch.export`` and ONNX export work (robot deployments).
* ``torch_policy_to_jax(params, ...)``: a ``torch_ppo`` actor (its ``TorchPPOParams``, ``PPOModules`` or a
  ``make_policy`` result) becomes a jitted JAX policy ``(observation, key) -> (action, extras)`` built from
  ``brax_core``'s own networks and distribution.
* ``jax_params_to_torch`` / ``torch_params_to_jax`` convert the full parameter triple both ways; both sides name
  their layers ``hidden_i`` (torch ``weight`` is the transposed flax ``kernel``).

Weights are copied (these are one-off conversions, not a hot path), so the results never alias training state.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch
from torch import nn

from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import checkpoint as jax_checkpoint
from brax_core.training.agents.ppo import networks as ppo_networks
from torch_ppo.networks import ACTIVATIONS, Activation, PolicyNetwork, PPOModules
from torch_ppo.normalizer import RunningNormalizer
from torch_ppo.params import TorchPPOParams, params_of, policy_params_of

_NORMALIZER_FIELDS = ("count", "mean", "summed_variance", "std")


# --- activations by name ----------------------------------------------------------------------------------------


def _activation_name(activation: Any) -> str:
    """A name both frameworks know, from a name, a jax/flax function or a torch function."""
    if isinstance(activation, str):
        name = activation.lower()
    else:
        name = getattr(activation, "__name__", None)
        if name is None and hasattr(activation, "__wrapped__"):
            name = getattr(activation.__wrapped__, "__name__", None)
    if name not in ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {', '.join(sorted(ACTIVATIONS))} (or a function with one of those names) "
            f"to be transferred between frameworks; got {activation!r}"
        )
    return "silu" if name == "swish" else name


def _jax_activation(name: str) -> Callable[[jax.Array], jax.Array]:
    if name == "identity":
        return lambda x: x
    if name == "gelu":
        return lambda x: jax.nn.gelu(x, approximate=True)
    return getattr(jax.nn, name)


# --- array conversion (copies) ----------------------------------------------------------------------------------


def _to_torch(x: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
    t = torch.from_numpy(np.array(x, copy=True))
    return t.to(dtype) if dtype is not None else t


def _to_jax(t: Any) -> jax.Array:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().numpy()
    return jnp.asarray(np.array(t, copy=True))


def _field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)


def _flax_mlp_to_state_dict(variables: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    layers = variables["params"] if "params" in variables else variables
    names = sorted(layers, key=lambda n: int(n.rsplit("_", 1)[1]))
    if not names or any(not n.startswith("hidden_") for n in names):
        raise ValueError(f"expected flax MLP layers named hidden_0, hidden_1, ...; got {sorted(layers)}")
    state = {}
    for name in names:
        state[f"{name}.weight"] = _to_torch(layers[name]["kernel"]).T.contiguous()
        state[f"{name}.bias"] = _to_torch(layers[name]["bias"])
    return state


def _state_dict_to_flax_mlp(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    names = sorted({k.split(".")[0] for k in state}, key=lambda n: int(n.rsplit("_", 1)[1]))
    return {
        "params": {n: {"kernel": _to_jax(state[f"{n}.weight"].T), "bias": _to_jax(state[f"{n}.bias"])} for n in names}
    }


def _layer_sizes(state: Mapping[str, torch.Tensor]) -> tuple[int, list[int]]:
    """(input size, output sizes of every layer) read from an MLP state dict."""
    names = sorted({k.split(".")[0] for k in state}, key=lambda n: int(n.rsplit("_", 1)[1]))
    weights = [state[f"{n}.weight"] for n in names]
    return int(weights[0].shape[1]), [int(w.shape[0]) for w in weights]


def _jax_normalizer_to_torch(normalizer_params: Any) -> dict[str, torch.Tensor]:
    out = {}
    for name in _NORMALIZER_FIELDS:
        value = _field(normalizer_params, name)
        if isinstance(value, Mapping):
            raise ValueError("dict observations are not supported by policy transfer (expected a flat mean/std)")
        out[name] = _to_torch(value, torch.float64 if name == "count" else torch.float32)
    return out


# --- params both ways -------------------------------------------------------------------------------------------


def jax_params_to_torch(params: Any) -> TorchPPOParams:
    """``brax_core`` PPO params (the triple or the ``(normalizer, policy)`` pair) as ``TorchPPOParams``.

    With only the pair, ``value_params`` is an empty dict.
    """
    normalizer_params, policy_params = ppo_networks.policy_params_of(params)
    value_params = getattr(params, "value_params", None)
    if value_params is None and isinstance(params, (tuple, list)) and len(params) == 3:
        value_params = params[2]
    return TorchPPOParams(
        _jax_normalizer_to_torch(normalizer_params),
        _flax_mlp_to_state_dict(policy_params),
        _flax_mlp_to_state_dict(value_params) if value_params is not None else {},
    )


def torch_params_to_jax(params: Any) -> Any:
    """``TorchPPOParams`` (or ``PPOModules``) as ``brax_core``'s ``PPOTrainingParams``."""
    if isinstance(params, PPOModules):
        params = params_of(params)
    normalizer_params, policy_params = policy_params_of(params)
    value_params = getattr(params, "value_params", None)
    if value_params is None and isinstance(params, (tuple, list)) and len(params) == 3:
        value_params = params[2]
    stats = running_statistics.RunningStatisticsState(
        mean=_to_jax(normalizer_params["mean"]).astype(jnp.float32),
        std=_to_jax(normalizer_params["std"]).astype(jnp.float32),
        count=_to_jax(normalizer_params["count"]).astype(jnp.float32),
        summed_variance=_to_jax(normalizer_params["summed_variance"]).astype(jnp.float32),
    )
    return ppo_networks.PPOTrainingParams(
        normalizer_params=stats,
        policy_params=_state_dict_to_flax_mlp(policy_params),
        value_params=_state_dict_to_flax_mlp(value_params) if value_params else None,
    )


# --- JAX policy -> torch module ---------------------------------------------------------------------------------


class TorchDeterministicPolicy(nn.Module):
    """``observation -> tanh(loc)``: the deterministic action of a tanh-normal PPO policy, normaliser included.

    ``distribution(observation)`` gives ``(loc, scale)`` for callers that want to sample.
    """

    def __init__(
        self,
        observation_size: int,
        action_size: int,
        hidden_layer_sizes: Sequence[int],
        activation: Activation = "swish",
    ):
        super().__init__()
        self.normalizer = RunningNormalizer(observation_size, enabled=True)
        self.network = PolicyNetwork(observation_size, action_size, self.normalizer, hidden_layer_sizes, activation)

    def distribution(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.network(observation)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        loc, _ = self.network(observation)
        return torch.tanh(loc)


def jax_policy_to_torch(
    params: Any,
    observation_size: int | None = None,
    action_size: int | None = None,
    activation: Any = "swish",
    policy_hidden_layer_sizes: Sequence[int] | None = None,
    **network_kwargs: Any,
) -> TorchDeterministicPolicy:
    """A ``brax_core`` PPO policy as a torch module with the same deterministic actions.

    Args:
      params: what ``brax_core``'s ``train`` returns as ``params``, the ``(normalizer_params, policy_params)``
        pair, or a ``brax_core`` PPO checkpoint path (its saved config then supplies the network kwargs).
      observation_size, action_size, policy_hidden_layer_sizes: checked against the weights' shapes when given
        (the weights determine them).
      activation: the activation the JAX networks used, by name or as the jax/flax function.
      **network_kwargs: other ``make_ppo_networks`` kwargs; only the defaults (no layer norm, ``min_std=0.001``)
        have a torch counterpart, anything else raises.
    """
    if isinstance(params, (str, os.PathLike)):
        params, saved_kwargs = _load_jax_checkpoint(params)
        activation = saved_kwargs.pop("activation", activation)
        for name in ("policy_hidden_layer_sizes", "value_hidden_layer_sizes", "kernel_init"):
            saved_kwargs.pop(name, None)
        network_kwargs = {**saved_kwargs, **network_kwargs}
    unsupported = {k: v for k, v in network_kwargs.items() if not _is_default_network_kwarg(k, v)}
    if unsupported:
        raise ValueError(f"network kwargs without a torch counterpart: {unsupported}")
    converted = jax_params_to_torch(params)
    in_size, out_sizes = _layer_sizes(converted.policy_params)
    act_size = out_sizes[-1] // 2
    hidden = out_sizes[:-1]
    _check("observation_size", observation_size, in_size)
    _check("action_size", action_size, act_size)
    if policy_hidden_layer_sizes is not None:
        _check("policy_hidden_layer_sizes", list(policy_hidden_layer_sizes), hidden)
    module = TorchDeterministicPolicy(in_size, act_size, hidden, _activation_name(activation))
    with torch.no_grad():
        module.network.mlp.load_state_dict(converted.policy_params)
        for name, value in converted.normalizer_params.items():
            getattr(module.normalizer, name).copy_(value)
    return module.eval()


def _is_default_network_kwarg(name: str, value: Any) -> bool:
    return (name, value) in {("layer_norm", False), ("min_std", 0.001), ("policy_obs_key", "state")} or (
        name in (
            "value_hidden_layer_sizes", "value_obs_key", "preprocess_observations_fn", "kernel_init",
            "use_distributional_critic", "num_quantiles",  # the critic's; the policy is the same either way
        )
    )


def _check(name: str, given: Any, actual: Any) -> None:
    if given is not None and given != actual:
        raise ValueError(f"{name}={given!r} does not match the policy weights, which have {name}={actual!r}")


def _load_jax_checkpoint(path: str | os.PathLike) -> tuple[Any, dict]:
    """``(params, network kwargs)`` of a brax_core PPO checkpoint (missing/corrupt: the loader's clear errors)."""
    config = jax_checkpoint.load_config(path)
    params = jax_checkpoint.load_params(path)
    kwargs = {k: jax_checkpoint.value_from_config(v) for k, v in config["network_factory_kwargs"].items()}
    return params, kwargs


# --- torch_ppo actor -> JAX policy ------------------------------------------------------------------------------


def torch_policy_to_jax(
    params: Any, activation: Any = None, deterministic: bool = True
) -> Callable[[jax.Array, jax.Array], tuple[jax.Array, dict]]:
    """A ``torch_ppo`` actor as a jitted JAX policy ``(observation, key) -> (action, extras)``.

    Args:
      params: ``TorchPPOParams`` (or the pair) from ``torch_ppo.train``, its ``PPOModules``, a ``make_policy``
        result, or a ``TorchDeterministicPolicy``.
      activation: the actor's activation; read from the modules when they are given.
      deterministic: ``tanh(loc)`` when True, else a sample (``extras`` then hold ``log_prob`` and ``raw_action``),
        exactly as ``brax_core``'s ``make_policy``.
    """
    if not isinstance(params, nn.Module) and isinstance(getattr(params, "modules", None), PPOModules):
        # a torch_ppo make_policy result
        params = params.modules
    if isinstance(params, TorchDeterministicPolicy):
        activation = params.network.mlp.activation_name if activation is None else activation
        normalizer = {n: getattr(params.normalizer, n) for n in _NORMALIZER_FIELDS}
        params = (normalizer, params.network.mlp.state_dict())
    if isinstance(params, PPOModules):
        activation = params.policy.mlp.activation_name if activation is None else activation
    name = _activation_name("swish" if activation is None else activation)
    jax_params = torch_params_to_jax(params)
    kernels = [layer["kernel"] for _, layer in sorted(jax_params.policy_params["params"].items(), key=_layer_index)]
    networks = ppo_networks.make_ppo_networks(
        int(kernels[0].shape[0]),
        int(kernels[-1].shape[1]) // 2,
        preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=[int(k.shape[1]) for k in kernels[:-1]],
        activation=_jax_activation(name),
    )
    make_policy = ppo_networks.make_inference_fn(networks)
    return jax.jit(make_policy((jax_params.normalizer_params, jax_params.policy_params), deterministic))


def _layer_index(item: tuple[str, Any]) -> int:
    return int(item[0].rsplit("_", 1)[1])
