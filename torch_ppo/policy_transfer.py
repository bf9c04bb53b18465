"""Policy transfer between the two trainers.

* ``jax_policy_to_torch(params, ...)``: a ``brax_core`` PPO policy (the ``params`` ``train`` returns, the
  ``(normalizer_params, policy_params)`` pair, or a checkpoint path) becomes a self-contained ``torch.nn.Module``
  ``observation -> action`` with the same deterministic actions, normaliser included. It is plain tensor code, so
  ``torch.export`` and ONNX export work (robot deployments).
* ``torch_policy_to_jax(params, ...)``: a ``torch_ppo`` actor (its ``TorchPPOParams``, ``PPOModules`` or a
  ``make_policy`` result) becomes a jitted JAX policy ``(observation, key) -> (action, extras)`` built from
  ``brax_core``'s own networks and distribution.
* ``jax_policy_factory(params)`` / ``jax_policy_params(params)``: brax_core's ``make_policy`` for a torch actor's
  layout, and the actor's weights in brax_core's layout, separately: torch_ppo evaluates its actor with them in one
  compiled JAX rollout, with new weights at each evaluation and one compile.
* ``jax_policy_networks(params)`` / ``jax_policy_views(modules)`` / ``jax_params_of_views(views)``: the same networks,
  and the actor's live weights as JAX views of its tensors (no copies), converted to brax_core's layout inside the
  program that reads them: torch_ppo collects its training batches with them in one compiled JAX program.
* ``jax_params_to_torch`` / ``torch_params_to_jax`` convert the full parameter triple both ways; both sides name
  their layers ``hidden_i`` (torch ``weight`` is the transposed flax ``kernel``).

Weights are copied (these are one-off conversions, not a hot path), so the results never alias training state; only
``jax_policy_views`` shares the actor's memory, on purpose.
Plain parameters (either trainer's ``params``, or the pair) do not record the networks' activation, so with them
``activation`` must be given; a checkpoint path, ``PPOModules`` or a torch policy record it.

Only torch_ppo's own networks cross: the modules of a ``network_factory`` are the user's own code, which brax_core's
networks cannot rebuild, so every torch-to-JAX function refuses them (``CUSTOM_NETWORK``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch
from torch import nn

from brax_bridge.convert import tensor_to_array
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import checkpoint as jax_checkpoint
from brax_core.training.agents.ppo import networks as ppo_networks
from torch_ppo.networks import PolicyNetwork, PPOModules
from torch_ppo.params import TorchPPOParams, params_of, policy_params_of
from torch_training.layers import ACTIVATIONS, Activation
from torch_training.normalizer import RunningNormalizer

_NORMALIZER_FIELDS = ("count", "mean", "summed_variance", "std")
# The parameter names of torch_ppo's own networks (either distribution's policy, and the value MLP).
_OWN_LAYOUT = re.compile(r"(mlp\.)?hidden_\d+\.(weight|bias)|(mean|std_dense)\.(weight|bias)|std_param|std_logparam")
CUSTOM_NETWORK = (
    "{what} cannot be transferred to JAX: brax_core's networks rebuild torch_ppo's own networks only, and these "
    "come from a network_factory (modules of your own code); evaluate it in torch (eval_backend='torch') and deploy "
    "it with torch.export or ONNX, or train with torch_ppo's own networks (policy_hidden_layer_sizes, activation, ...) "
    "to use it from JAX"
)


# --- activations by name ----------------------------------------------------------------------------------------


# Plain parameters are weights only: a wrong activation would give other actions without any error.
_ACTIVATION_NEEDED = (
    "activation is required: these {side} parameters do not record the networks' activation (pass activation='swish' "
    "for the default networks, or the one they were trained with); a checkpoint, or torch_ppo's modules, record it"
)


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


def _state_dict_to_flax_mlp(state: Mapping[str, Any], to_jax: Callable[[Any], jax.Array] = _to_jax) -> dict[str, Any]:
    names = sorted({k.split(".")[0] for k in state}, key=lambda n: int(n.rsplit("_", 1)[1]))
    return {
        "params": {n: {"kernel": to_jax(state[f"{n}.weight"].T), "bias": to_jax(state[f"{n}.bias"])} for n in names}
    }


def _layer_sizes(state: Mapping[str, torch.Tensor]) -> tuple[int, list[int]]:
    """(input size, output sizes of every layer) read from an MLP state dict."""
    names = sorted({k.split(".")[0] for k in state}, key=lambda n: int(n.rsplit("_", 1)[1]))
    weights = [state[f"{n}.weight"] for n in names]
    return int(weights[0].shape[1]), [int(w.shape[0]) for w in weights]


def _jax_normalizer_to_torch(normalizer_params: Any) -> dict[str, Any]:
    """The JAX statistics as torch_ppo's: tensors, or for dict observations a dict of tensors per statistic."""
    out: dict[str, Any] = {}
    for name in _NORMALIZER_FIELDS:
        value = _field(normalizer_params, name)
        dtype = torch.float64 if name == "count" else torch.float32
        if isinstance(value, Mapping):
            out[name] = {k: _to_torch(v, dtype) for k, v in value.items()}
        else:
            out[name] = _to_torch(value, dtype)
    return out


def _torch_normalizer_to_jax(
    stats: Mapping[str, Any], to_jax: Callable[[Any], jax.Array] = _to_jax
) -> running_statistics.RunningStatisticsState:
    def convert(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: to_jax(v).astype(jnp.float32) for k, v in value.items()}
        return to_jax(value).astype(jnp.float32)

    return running_statistics.RunningStatisticsState(**{name: convert(stats[name]) for name in _NORMALIZER_FIELDS})


def _flax_policy_to_state_dict(variables: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """A policy's flax variables as torch_ppo's policy state dict (either distribution's layout)."""
    layers = variables["params"] if "params" in variables else variables
    if "MLP_0" not in layers:
        return _flax_mlp_to_state_dict(variables)
    state = {f"mlp.{k}": v for k, v in _flax_mlp_to_state_dict(layers["MLP_0"]).items()}
    for flax_name, torch_name in (("Dense_0", "mean"), ("Dense_1", "std_dense")):
        if flax_name in layers:
            state[f"{torch_name}.weight"] = _to_torch(layers[flax_name]["kernel"]).T.contiguous()
            state[f"{torch_name}.bias"] = _to_torch(layers[flax_name]["bias"])
    if "std_param" in layers:
        state["std_param"] = _to_torch(layers["std_param"]["value"])
    if "std_logparam" in layers:
        state["std_logparam"] = _to_torch(layers["std_logparam"]["log_value"])
    return state


def _state_dict_to_flax_policy(
    state: Mapping[str, Any], to_jax: Callable[[Any], jax.Array] = _to_jax
) -> dict[str, Any]:
    """A policy state dict in flax's layout; ``to_jax`` converts each (transposed) tensor: a copy by default, or
    inside a traced program an identity on JAX views of the tensors (``jax_policy_views``)."""
    if "mean.weight" not in state:
        return _state_dict_to_flax_mlp(state, to_jax)
    mlp = {k[len("mlp.") :]: v for k, v in state.items() if k.startswith("mlp.")}
    params: dict[str, Any] = {"MLP_0": _state_dict_to_flax_mlp(mlp, to_jax)["params"] if mlp else {}}
    for torch_name, flax_name in (("mean", "Dense_0"), ("std_dense", "Dense_1")):
        if f"{torch_name}.weight" in state:
            params[flax_name] = {
                "kernel": to_jax(state[f"{torch_name}.weight"].T),
                "bias": to_jax(state[f"{torch_name}.bias"]),
            }
    if "std_param" in state:
        params["std_param"] = {"value": to_jax(state["std_param"])}
    if "std_logparam" in state:
        params["std_logparam"] = {"log_value": to_jax(state["std_logparam"])}
    return {"params": params}


def _policy_options(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """The distribution options a policy state dict's layout shows. Mean clipping cannot be seen in weights, nor
    the noise std type of a state-dependent std (``None`` here)."""
    if "mean.weight" not in state:
        return {"distribution_type": "tanh_normal"}
    noise = "log" if "std_logparam" in state else "scalar" if "std_param" in state else None
    return {"distribution_type": "normal", "noise_std_type": noise, "state_dependent_std": "std_dense.weight" in state}


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
        _flax_policy_to_state_dict(policy_params),
        _flax_mlp_to_state_dict(value_params) if value_params is not None else {},
    )


def torch_params_to_jax(params: Any) -> Any:
    """``TorchPPOParams`` (or ``PPOModules``) as ``brax_core``'s ``PPOTrainingParams``."""
    if isinstance(params, PPOModules):
        _refuse_custom(params)
        params = params_of(params)
    normalizer_params, policy_params = policy_params_of(params)
    value_params = getattr(params, "value_params", None)
    if value_params is None and isinstance(params, (tuple, list)) and len(params) == 3:
        value_params = params[2]
    _check_own_layout(policy_params, "policy")
    _check_own_layout(value_params or {}, "value")
    return ppo_networks.PPOTrainingParams(
        normalizer_params=_torch_normalizer_to_jax(normalizer_params),
        policy_params=_state_dict_to_flax_policy(policy_params),
        value_params=_state_dict_to_flax_mlp(value_params) if value_params else None,
    )


# --- JAX policy -> torch module ---------------------------------------------------------------------------------


class TorchDeterministicPolicy(nn.Module):
    """``observation -> action``: the deterministic action of a PPO policy (``tanh(loc)`` for ``'tanh_normal'``,
    ``loc`` for ``'normal'``), normaliser included. With dict observations it takes the policy's key's tensor.

    ``distribution(observation)`` gives ``(loc, scale)`` for callers that want to sample.
    """

    def __init__(
        self,
        observation_size: int,
        action_size: int,
        hidden_layer_sizes: Sequence[int],
        activation: Activation = "swish",
        **policy_options: Any,
    ):
        super().__init__()
        self.normalizer = RunningNormalizer(observation_size, enabled=True)
        self.network = PolicyNetwork(
            observation_size, action_size, self.normalizer, hidden_layer_sizes, activation, **policy_options
        )

    def distribution(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.network(observation)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        loc, _ = self.network(observation)
        return self.network.postprocess(loc)


# make_ppo_networks kwargs that do not change a policy's deterministic actions, or are read from its weights.
_IRRELEVANT_FOR_ACTIONS = (
    "value_hidden_layer_sizes",
    "value_obs_key",
    "preprocess_observations_fn",
    "kernel_init",
    "policy_network_kernel_init_fn",
    "policy_network_kernel_init_kwargs",
    "value_network_kernel_init_fn",
    "value_network_kernel_init_kwargs",
    "mean_kernel_init_fn",
    "mean_kernel_init_kwargs",
    "init_noise_std",
    "distribution_type",
    "state_dependent_std",
    "use_distributional_critic",
    "num_quantiles",  # the critic's; the policy is the same either way
)


def jax_policy_to_torch(
    params: Any,
    observation_size: int | None = None,
    action_size: int | None = None,
    activation: Any = None,
    policy_hidden_layer_sizes: Sequence[int] | None = None,
    **network_kwargs: Any,
) -> TorchDeterministicPolicy:
    """A ``brax_core`` PPO policy as a torch module with the same deterministic actions.

    Args:
      params: what ``brax_core``'s ``train`` returns as ``params``, the ``(normalizer_params, policy_params)``
        pair, or a ``brax_core`` PPO checkpoint path (its saved config then supplies the network kwargs).
      observation_size: checked against the weights' shapes when given (the weights determine it).
      action_size: checked against the weights' shapes when given.
      policy_hidden_layer_sizes: checked against the weights' shapes when given.
      activation: the activation the JAX networks used, by name or as the jax/flax function; required with params
        (they do not record it: ``'swish'`` for the default networks), read from a checkpoint's config.
      **network_kwargs: other ``make_ppo_networks`` kwargs. The distribution type and std layout are read from
        the weights; ``mean_clip_scale``, ``noise_std_type`` (it matters only with ``state_dependent_std``),
        ``min_std`` and ``policy_obs_key`` (for dict observations: the module then takes that key's tensor) carry
        over; ``layer_norm=True`` has no torch counterpart and raises.
    """
    if isinstance(params, (str, os.PathLike)):
        params, saved_kwargs = _load_jax_checkpoint(params)
        activation = saved_kwargs.pop("activation", activation)
        saved_kwargs.pop("policy_hidden_layer_sizes", None)
        network_kwargs = {**saved_kwargs, **network_kwargs}
    if activation is None:
        raise ValueError(_ACTIVATION_NEEDED.format(side="JAX"))
    options = {k: v for k, v in network_kwargs.items() if k not in _IRRELEVANT_FOR_ACTIONS}
    if options.pop("layer_norm", False):
        raise ValueError("network kwargs without a torch counterpart: {'layer_norm': True}")
    policy_obs_key = options.pop("policy_obs_key", "state")
    unknown = sorted(set(options) - {"mean_clip_scale", "noise_std_type", "min_std"})
    if unknown:
        raise ValueError(f"network kwargs without a torch counterpart: {unknown}")
    converted = jax_params_to_torch(params)
    normalizer = converted.normalizer_params
    if isinstance(normalizer["mean"], Mapping):  # dict observations: the policy's key's statistics
        if policy_obs_key not in normalizer["mean"]:
            raise ValueError(
                f"policy_obs_key={policy_obs_key!r} is not among the observation keys {sorted(normalizer['mean'])}"
            )
        normalizer = {k: v if k == "count" else v[policy_obs_key] for k, v in normalizer.items()}
    policy_state = converted.policy_params
    layout = _policy_options(policy_state)
    if layout["distribution_type"] == "tanh_normal":
        in_size, out_sizes = _layer_sizes(policy_state)
        act_size, hidden = out_sizes[-1] // 2, out_sizes[:-1]
        options.pop("mean_clip_scale", None)  # 'normal' only, as in make_ppo_networks
        options.pop("noise_std_type", None)
    else:
        mlp = {k[len("mlp.") :]: v for k, v in policy_state.items() if k.startswith("mlp.")}
        in_size, hidden = _layer_sizes(mlp) if mlp else (int(policy_state["mean.weight"].shape[1]), [])
        act_size = int(policy_state["mean.weight"].shape[0])
        options.pop("min_std", None)  # 'tanh_normal' only
        if layout["noise_std_type"] is not None:
            options["noise_std_type"] = layout["noise_std_type"]
        options["state_dependent_std"] = layout["state_dependent_std"]
    _check("observation_size", observation_size, in_size)
    _check("action_size", action_size, act_size)
    if policy_hidden_layer_sizes is not None:
        _check("policy_hidden_layer_sizes", list(policy_hidden_layer_sizes), hidden)
    module = TorchDeterministicPolicy(
        in_size,
        act_size,
        hidden,
        _activation_name(activation),
        distribution_type=layout["distribution_type"],
        **options,
    )
    with torch.no_grad():
        module.network.load_params_state_dict(policy_state)
        module.normalizer.load_stats(normalizer)
    return module.eval()


def _check(name: str, given: Any, actual: Any) -> None:
    if given is not None and given != actual:
        raise ValueError(f"{name}={given!r} does not match the policy weights, which have {name}={actual!r}")


def _load_jax_checkpoint(path: str | os.PathLike) -> tuple[Any, dict]:
    """``(params, network kwargs)`` of a brax_core PPO checkpoint (missing/corrupt: the loader's clear errors)."""
    kwargs = jax_checkpoint.load_config(path).to_dict()["network_factory_kwargs"]
    params = jax_checkpoint.load_params(path)
    return params, kwargs


# --- torch_ppo actor -> JAX policy ------------------------------------------------------------------------------


def torch_policy_to_jax(
    params: Any, activation: Any = None, deterministic: bool = True, mean_clip_scale: float | None = None
) -> Callable[[Any, jax.Array], tuple[jax.Array, dict]]:
    """A ``torch_ppo`` actor as a jitted JAX policy ``(observation, key) -> (action, extras)``.

    Args:
      params: ``TorchPPOParams`` (or the pair) from ``torch_ppo.train``, its ``PPOModules``, a ``make_policy``
        result, or a ``TorchDeterministicPolicy``.
      activation: the actor's activation; read from the modules (or the policy) when they are given, required
        with ``TorchPPOParams`` or the pair, which do not record it.
      deterministic: the mode when True, else a sample (``extras`` then hold ``log_prob``, ``raw_action`` and
        ``distribution_params``), exactly as ``brax_core``'s ``make_policy``.
      mean_clip_scale: the ``'normal'`` policy's mean clipping, for plain params (modules carry their own).
    """
    make_policy, _ = jax_policy_factory(params, activation, mean_clip_scale)
    return jax.jit(make_policy(jax_policy_params(params), deterministic))


def jax_policy_factory(
    params: Any, activation: Any = None, mean_clip_scale: float | None = None
) -> tuple[Callable[..., Any], dict[str, Any]]:
    """brax_core's ``make_policy`` for the networks of a ``torch_ppo`` actor, and their layout as plain data.

    ``make_policy((normalizer_params, policy_params), deterministic)`` takes the actor's weights in brax_core's
    layout (``jax_policy_params``) and computes what the torch actor computes; the layout (sizes, activation,
    distribution options, observation key) names the networks. ``params`` as for ``torch_policy_to_jax``.
    """
    networks, described = jax_policy_networks(params, activation, mean_clip_scale)
    return ppo_networks.make_inference_fn(networks), described


def jax_policy_networks(
    params: Any, activation: Any = None, mean_clip_scale: float | None = None
) -> tuple[ppo_networks.PPONetworks, dict[str, Any]]:
    """brax_core's networks of a ``torch_ppo`` actor's layout (their policy network and action distribution compute
    what the torch actor computes), and that layout as plain data; see ``jax_policy_factory``."""
    params = _unwrapped(params)
    options: dict[str, Any] = {}
    observation_size: Any = None
    policy_obs_key = "state"
    if isinstance(params, TorchDeterministicPolicy):
        activation = _known_activation(params.network, activation)
        options = _network_options(params.network)
        params = (params.normalizer.stats(), params.network.params_state_dict())
    if isinstance(params, PPOModules):
        _refuse_custom(params)
        activation = _known_activation(params.policy, activation)
        options = _network_options(params.policy)
        config = params.config()
        if isinstance(config["observation_size"], Mapping):
            observation_size = config["observation_size"]
            policy_obs_key = config["policy_obs_key"]
    if activation is None:
        raise ValueError(_ACTIVATION_NEEDED.format(side="torch"))
    name = _activation_name(activation)
    normalizer_params, policy_state = _policy_pair(params)
    layout = _policy_options(policy_state)
    shapes = {k: tuple(v.shape) for k, v in policy_state.items()}
    if layout["distribution_type"] == "normal":
        options = {**layout, **{k: v for k, v in options.items() if v is not None}}
        if options["noise_std_type"] is None:
            options["noise_std_type"] = "scalar"
        if mean_clip_scale is not None:
            options["mean_clip_scale"] = mean_clip_scale
        hidden_names = sorted({k.split(".")[1] for k in shapes if k.startswith("mlp.")}, key=_name_index)
        hidden = [shapes[f"mlp.{n}.weight"][0] for n in hidden_names]
        first = shapes[f"mlp.{hidden_names[0]}.weight"] if hidden_names else shapes["mean.weight"]
        in_size, act_size = first[1], shapes["mean.weight"][0]
    else:
        options = {"distribution_type": "tanh_normal"}
        layer_names = sorted({k.split(".")[0] for k in shapes}, key=_name_index)
        in_size = shapes[f"{layer_names[0]}.weight"][1]
        hidden = [shapes[f"{n}.weight"][0] for n in layer_names[:-1]]
        act_size = shapes[f"{layer_names[-1]}.weight"][0] // 2
    if observation_size is None:
        if isinstance(normalizer_params["mean"], Mapping):
            raise ValueError(
                "params of a policy on dict observations: pass the PPOModules (or a make_policy result), which "
                "know the observation keys and sizes"
            )
        observation_size = in_size
    networks = ppo_networks.make_ppo_networks(
        observation_size,
        act_size,
        preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=hidden,
        activation=_jax_activation(name),
        policy_obs_key=policy_obs_key,
        value_obs_key=policy_obs_key,
        **options,
    )
    described = {
        "observation_size": observation_size,
        "action_size": int(act_size),
        "policy_hidden_layer_sizes": [int(h) for h in hidden],
        "activation": name,
        "policy_obs_key": policy_obs_key,
        "options": dict(sorted(options.items())),
    }
    return networks, described


def jax_policy_params(params: Any) -> tuple[running_statistics.RunningStatisticsState, dict[str, Any]]:
    """``(normalizer_params, policy_params)`` of a ``torch_ppo`` actor in brax_core's layout (copies), as
    ``jax_policy_factory``'s ``make_policy`` takes them. ``params`` as for ``torch_policy_to_jax``."""
    normalizer_params, policy_state = _policy_pair(params)
    return _torch_normalizer_to_jax(normalizer_params), _state_dict_to_flax_policy(policy_state)


def jax_policy_views(modules: PPOModules) -> tuple[dict[str, Any], dict[str, jax.Array]]:
    """The actor's current weights as JAX views of its live tensors, in torch's layout (normaliser statistics, policy
    state dict): nothing is copied but the normaliser's float64 count, so they read what the last update wrote.
    ``jax_params_of_views`` gives brax_core's layout of them inside a traced program."""
    _refuse_custom(modules)
    view = lambda t: tensor_to_array(t.detach())  # noqa: E731
    stats = modules.normalizer.stats(copy=False)
    normalizer = {
        name: {k: view(v) for k, v in value.items()} if isinstance(value, Mapping) else view(value)
        for name, value in stats.items() if name != "count"
    }
    normalizer["count"] = view(stats["count"].to(torch.float32))
    return normalizer, {k: view(v) for k, v in modules.policy.params_state_dict().items()}


def jax_params_of_views(
    views: tuple[Mapping[str, Any], Mapping[str, jax.Array]],
) -> tuple[running_statistics.RunningStatisticsState, dict[str, Any]]:
    """``jax_policy_views``' arrays as ``make_policy`` takes them (``jax_policy_params``' layout); traced inside the
    program that reads them, so the transposes fuse into it instead of copying."""
    normalizer, policy_state = views
    return _torch_normalizer_to_jax(normalizer, jnp.asarray), _state_dict_to_flax_policy(policy_state, jnp.asarray)


def _policy_pair(params: Any) -> tuple[Mapping[str, Any], Mapping[str, torch.Tensor]]:
    """(normaliser statistics, policy state dict) of any accepted form of a torch actor."""
    params = _unwrapped(params)
    if isinstance(params, TorchDeterministicPolicy):
        return params.normalizer.stats(), params.network.params_state_dict()
    if isinstance(params, PPOModules):
        _refuse_custom(params)
        return params.normalizer.stats(), params.policy.params_state_dict()
    normalizer_params, policy_state = policy_params_of(params)
    _check_own_layout(policy_state, "policy")
    return normalizer_params, policy_state


def _refuse_custom(modules: PPOModules) -> None:
    if modules.network_factory is not None:
        raise ValueError(CUSTOM_NETWORK.format(what=f"an actor of network_factory={modules.network_factory}"))


def _check_own_layout(state: Mapping[str, Any], role: str) -> None:
    """Refuses parameters that are not torch_ppo's own networks' (those of a network_factory's module)."""
    foreign = sorted(k for k in state if not _OWN_LAYOUT.fullmatch(k))
    if foreign:
        shown = ", ".join(foreign[:4]) + (" ..." if len(foreign) > 4 else "")
        raise ValueError(CUSTOM_NETWORK.format(what=f"{role} parameters named {shown}"))


def _unwrapped(params: Any) -> Any:
    """The ``PPOModules`` of a torch_ppo ``make_policy`` result; any other form of an actor as it is."""
    if not isinstance(params, nn.Module) and isinstance(getattr(params, "modules", None), PPOModules):
        return params.modules
    return params


def _known_activation(policy: PolicyNetwork, activation: Any) -> Any:
    """The activation a torch actor was built with (``activation`` when given): its name, which must be one both
    frameworks know; a function torch alone knows (a lambda, say) cannot be rebuilt in JAX, so it is refused."""
    if activation is not None:
        return activation
    if policy.mlp.activation_name is None:
        raise ValueError(
            f"activation must be one of {', '.join(sorted(ACTIVATIONS))} (or a function with one of those names) "
            f"to be transferred between frameworks; this actor's is {policy.mlp.activation!r}"
        )
    return policy.mlp.activation_name


def _name_index(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


def _network_options(policy: PolicyNetwork) -> dict[str, Any]:
    if policy.squash:
        return {"distribution_type": "tanh_normal"}
    return {
        "distribution_type": "normal",
        "noise_std_type": policy.noise_std_type,
        "state_dependent_std": policy.state_dependent_std,
        "mean_clip_scale": policy.mean_clip_scale,
    }
