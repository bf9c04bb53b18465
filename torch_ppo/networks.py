"""Actor and critic for torch_ppo: MLPs laid out like the JAX PPO's, its two action distributions, TensorDict
modules.

The MLPs (``torch_training.layers``) are laid out like the flax networks of ``brax_core``'s PPO, so JAX weights copy
straight in. The options of ``make_ppo_networks`` (distribution type, noise std, mean clipping, kernel initialisers by
Brax's names, per-network observation keys) have the same names and meanings here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torch import nn

from torch_training import network_factory as custom
from torch_training.layers import MLP, Activation, KernelInit, linear, resolve_kernel_init
from torch_training.normalizer import DictNormalizer, RunningNormalizer

MIN_STD = 0.001
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def _select(observation: Any, obs_key: str | None) -> torch.Tensor:
    """The network's input: ``observation[obs_key]`` for dict observations (a TensorDict), else the tensor."""
    if obs_key is None or isinstance(observation, torch.Tensor):
        return observation
    return observation[obs_key]


DISTRIBUTION_TYPES = ("normal", "tanh_normal")
NOISE_STD_TYPES = ("scalar", "log")


class PolicyNetwork(nn.Module):
    """observation -> ``(loc, scale)`` of the action distribution, as ``brax_core``'s policy networks.

    ``'tanh_normal'``: one MLP with ``2 * action_size`` outputs, ``scale = softplus(raw) + min_std``; actions are
    ``tanh`` of the samples. ``'normal'``: hidden layers ``mlp`` (activation after each), a ``mean`` head (squashed
    by ``mean_clip_scale * x / (1 + |x|)`` when set) and the std from ``std_param`` (``noise_std_type='scalar'``),
    ``exp(std_logparam)`` (``'log'``) or a ``std_dense`` head (``state_dependent_std``: its exponential for
    ``'log'``, its raw output for ``'scalar'``); actions are the samples themselves.

    ``body``, a module of the user's own (``torch_training.network_factory``), takes the ``'tanh_normal'`` MLP's place:
    it gives the ``2 * action_size`` outputs.
    """

    def __init__(
        self,
        observation_size: int,
        action_size: int,
        normalizer: nn.Module,
        hidden_layer_sizes: Sequence[int],
        activation: Activation,
        distribution_type: str = "tanh_normal",
        noise_std_type: str = "scalar",
        init_noise_std: float = 1.0,
        state_dependent_std: bool = False,
        mean_clip_scale: float | None = None,
        kernel_init: KernelInit | None = None,
        mean_kernel_init: KernelInit | None = None,
        obs_key: str | None = None,
        min_std: float = MIN_STD,
        body: nn.Module | None = None,
    ):
        super().__init__()
        if distribution_type not in DISTRIBUTION_TYPES:
            raise ValueError(f"distribution_type must be one of {DISTRIBUTION_TYPES}, got {distribution_type!r}")
        if noise_std_type not in NOISE_STD_TYPES:
            raise ValueError(f"noise_std_type must be one of {NOISE_STD_TYPES}, got {noise_std_type!r}")
        self.action_size = int(action_size)
        self.normalizer = normalizer
        self.obs_key = obs_key
        self.distribution_type = distribution_type
        self.noise_std_type = noise_std_type
        self.state_dependent_std = bool(state_dependent_std)
        self.mean_clip_scale = None if mean_clip_scale is None else float(mean_clip_scale)
        self.min_std = float(min_std)
        self.squash = distribution_type == "tanh_normal"
        self.custom = body is not None
        if self.custom:
            if not self.squash:
                raise ValueError("a policy module of the user's own gives the 'tanh_normal' distribution's parameters")
            self.mlp = body  # the name of the MLP it replaces, so that every path reading the policy's layers holds
            return
        if self.squash:
            self.mlp = MLP(observation_size, [*hidden_layer_sizes, 2 * self.action_size], activation, kernel_init)
            return
        self.mlp = MLP(observation_size, hidden_layer_sizes, activation, kernel_init, activate_final=True)
        self.mean = linear(self.mlp.out_size, self.action_size, mean_kernel_init or kernel_init)
        if self.state_dependent_std:
            self.std_dense = linear(self.mlp.out_size, self.action_size, kernel_init)
        elif noise_std_type == "log":
            self.std_logparam = nn.Parameter(torch.full((self.action_size,), math.log(init_noise_std)))
        else:
            self.std_param = nn.Parameter(torch.full((self.action_size,), float(init_noise_std)))

    def forward(self, observation: Any) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.normalizer(_select(observation, self.obs_key))
        if self.squash:
            out = custom.call_batched(self.mlp, x) if self.custom else self.mlp(x)
            loc, raw_scale = out.split(self.action_size, dim=-1)
            return loc, F.softplus(raw_scale) + self.min_std
        hidden = self.mlp(x)
        loc = self.mean(hidden)
        if self.mean_clip_scale is not None:
            loc = self.mean_clip_scale * loc / (1.0 + loc.abs())
        if self.state_dependent_std:
            raw = self.std_dense(hidden)
            std = raw.exp() if self.noise_std_type == "log" else raw
        elif self.noise_std_type == "log":
            std = self.std_logparam.exp()
        else:
            std = self.std_param
        return loc, std.expand_as(loc)

    def postprocess(self, raw_action: torch.Tensor) -> torch.Tensor:
        """The action the env receives for a distribution sample (``tanh`` for ``'tanh_normal'``)."""
        return torch.tanh(raw_action) if self.squash else raw_action

    def log_prob(self, loc: torch.Tensor, scale: torch.Tensor, raw_action: torch.Tensor) -> torch.Tensor:
        """log-density of the action of the sample ``raw_action``, summed over action dims."""
        if self.squash:
            return tanh_normal_log_prob(loc, scale, raw_action)
        return normal_log_prob(loc, scale, raw_action)

    def entropy(self, loc: torch.Tensor, scale: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The JAX side's entropy (estimate, for tanh: at the sample ``loc + scale * noise``), summed over dims."""
        if self.squash:
            return tanh_normal_entropy(loc, scale, noise)
        return (0.5 + _HALF_LOG_2PI + torch.log(scale)).sum(-1)

    def params_state_dict(self) -> dict[str, torch.Tensor]:
        """The trained parameters without the shared normaliser (for tanh: the MLP's, ``hidden_i.*``)."""
        if self.squash:
            return self.mlp.state_dict()
        return {k: v for k, v in self.state_dict().items() if not k.startswith("normalizer.")}

    def load_params_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        if self.custom:
            _load_custom(self.mlp, state, "policy")
            return
        if self.squash:
            self.mlp.load_state_dict(state)
            return
        missing = {k for k in self.params_state_dict()} - set(state)
        unexpected = set(state) - {k for k in self.params_state_dict()}
        if missing or unexpected:
            raise ValueError(
                f"policy parameters do not fit this {self.distribution_type!r} policy: missing {sorted(missing)}, "
                f"unexpected {sorted(unexpected)}"
            )
        self.load_state_dict({**self.state_dict(), **state})


class ValueNetwork(nn.Module):
    """observation -> state value (last dim 1, as TorchRL's ``state_value``).

    With ``num_quantiles`` (the distributional critic) the MLP outputs that many quantiles of the return;
    ``quantiles`` gives them and the state value is their mean. ``body``, a module of the user's own
    (``torch_training.network_factory``) giving ``[batch]`` or ``[batch, 1]``, takes the MLP's place.
    """

    def __init__(
        self,
        observation_size: int,
        normalizer: nn.Module,
        hidden_layer_sizes: Sequence[int],
        activation: Activation,
        kernel_init: KernelInit | None = None,
        obs_key: str | None = None,
        num_quantiles: int | None = None,
        body: nn.Module | None = None,
    ):
        super().__init__()
        self.normalizer = normalizer
        self.obs_key = obs_key
        self.num_quantiles = num_quantiles
        self.custom = body is not None
        if self.custom:
            self.mlp = body
            return
        self.mlp = MLP(observation_size, [*hidden_layer_sizes, num_quantiles or 1], activation, kernel_init)

    def forward(self, observation: Any) -> torch.Tensor:
        x = self.normalizer(_select(observation, self.obs_key))
        if self.custom:
            out = custom.call_batched(self.mlp, x)
            return out.unsqueeze(-1) if out.dim() < x.dim() else out  # [batch] -> [batch, 1]
        out = self.mlp(x)
        return out.mean(-1, keepdim=True) if self.num_quantiles else out

    def load_params_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        if self.custom:
            _load_custom(self.mlp, state, "value")
        else:
            self.mlp.load_state_dict(state)

    def quantiles(self, observation: Any) -> torch.Tensor:
        """``[..., num_quantiles]`` quantiles at the levels ``(i + 0.5) / num_quantiles``."""
        if not self.num_quantiles:
            raise ValueError("quantiles needs a distributional critic (built with use_distributional_critic=True)")
        return self.mlp(self.normalizer(_select(observation, self.obs_key)))


def _load_custom(module: nn.Module, state: Mapping[str, torch.Tensor], role: str) -> None:
    """Parameters into a module of the user's own; parameters of another network are refused by name."""
    try:
        module.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"the {role} parameters do not fit network_factory's {role} module: {err}") from err


# --- normal and tanh-squashed normal ---------------------------------------------------------------------------


def normal_log_prob(loc: torch.Tensor, scale: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """log-density of ``action`` under the (unsquashed) normal, summed over the action dims."""
    z = (action - loc) / scale
    return (-0.5 * z * z - torch.log(scale) - _HALF_LOG_2PI).sum(-1)


def tanh_log_det_jacobian(raw: torch.Tensor) -> torch.Tensor:
    """log |d tanh(x)/dx| in the overflow-free form 2(log 2 - x - softplus(-2x)), per dimension."""
    return 2.0 * (_LOG_2 - raw - F.softplus(-2.0 * raw))


def tanh_normal_log_prob(loc: torch.Tensor, scale: torch.Tensor, raw_action: torch.Tensor) -> torch.Tensor:
    """log-density of ``tanh(raw_action)`` under the squashed normal, summed over the action dims."""
    z = (raw_action - loc) / scale
    normal = -0.5 * z * z - torch.log(scale) - _HALF_LOG_2PI
    return (normal - tanh_log_det_jacobian(raw_action)).sum(-1)


def tanh_normal_entropy(loc: torch.Tensor, scale: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The JAX side's entropy estimate: normal entropy + log-det-jacobian at the sample ``loc + scale * noise``."""
    normal_entropy = 0.5 + _HALF_LOG_2PI + torch.log(scale)
    return (normal_entropy + tanh_log_det_jacobian(loc + scale * noise)).sum(-1)


class TanhNormalSampler(TensorDictModuleBase):
    """Reads ``loc``/``scale``; writes ``action`` (the postprocessed normal sample, or the postprocessed ``loc``
    when deterministic), the sample ``raw_action`` and ``action_log_prob`` (TorchRL's key for the behaviour
    log-probability). Postprocessing is ``tanh`` unless ``squash=False`` (the ``'normal'`` policy)."""

    in_keys = ["loc", "scale"]
    out_keys = ["action", "raw_action", "action_log_prob"]

    def __init__(self, deterministic: bool = False, generator: torch.Generator | None = None, squash: bool = True):
        super().__init__()
        self.deterministic = deterministic
        self.generator = generator
        self.squash = squash

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        loc, scale = td.get("loc"), td.get("scale")
        if self.deterministic:
            td.set("action", torch.tanh(loc) if self.squash else loc)
            return td
        action, raw, log_prob = self.sample(loc, scale)
        td.set("raw_action", raw)
        td.set("action_log_prob", log_prob)
        td.set("action", action)
        return td

    def sample(self, loc: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, raw_action, action_log_prob)`` of one draw from the generator, on plain tensors (what
        ``forward`` writes; a trainer's collection loop calls it directly to skip the TensorDict plumbing)."""
        raw = loc + scale * self.noise(loc)
        if self.squash:
            return torch.tanh(raw), raw, tanh_normal_log_prob(loc, scale, raw)
        return raw, raw, normal_log_prob(loc, scale, raw)

    def noise(self, loc: torch.Tensor) -> torch.Tensor:
        """The sample's standard-normal draw, shaped like ``loc`` (a method, so that a check of collection can fix
        it: with the JAX trainer's draws, torch_ppo collects the JAX trainer's transitions)."""
        return torch.randn(loc.shape, generator=self.generator, device=loc.device, dtype=loc.dtype)


def _flat_size(shape: Any) -> int:
    return int(shape) if isinstance(shape, int) else int(math.prod(shape))


def _init_name(fn: Any) -> str:
    return fn if isinstance(fn, str) else fn.__name__


class PPOModules(nn.Module):
    """Everything torch_ppo trains: the shared normaliser, the policy and the value network.

    ``observation_size`` is an int, or for dict observations a mapping of keys to sizes (or shapes): then the
    normaliser keeps statistics per key and the policy and value networks read ``policy_obs_key`` and
    ``value_obs_key`` (asymmetric actor-critic). The other network options are ``make_ppo_networks``' and mean
    the same; kernel initialisers are given by Brax's names (or the ``jax.nn.initializers`` function).

    ``network_factory`` (``torch_training.network_factory``) builds the policy and value modules instead, from flat
    observations; the normaliser and the ``'tanh_normal'`` distribution stay torch_ppo's.
    """

    def __init__(
        self,
        observation_size: int | Mapping[str, Any],
        action_size: int,
        policy_hidden_layer_sizes: Sequence[int] = (32,) * 4,
        value_hidden_layer_sizes: Sequence[int] = (256,) * 5,
        activation: Activation = "swish",
        normalize_observations: bool = True,
        distribution_type: str = "tanh_normal",
        noise_std_type: str = "scalar",
        init_noise_std: float = 1.0,
        state_dependent_std: bool = False,
        mean_clip_scale: float | None = None,
        policy_obs_key: str = "state",
        value_obs_key: str = "state",
        policy_network_kernel_init_fn: Any = "lecun_uniform",
        policy_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
        value_network_kernel_init_fn: Any = "lecun_uniform",
        value_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
        mean_kernel_init_fn: Any = None,
        mean_kernel_init_kwargs: Mapping[str, Any] | None = None,
        use_distributional_critic: bool = False,
        num_quantiles: int = 32,
        network_factory: custom.NetworkFactory | None = None,
    ):
        super().__init__()
        bodies = (None, None)
        self.network_factory = None if network_factory is None else custom.name_of(network_factory)
        if network_factory is not None:
            custom.check_factory(network_factory)
            if isinstance(observation_size, Mapping):
                raise ValueError(
                    "network_factory builds networks over flat observations; this env's are a dict of "
                    f"{sorted(observation_size)}: train it with torch_ppo's own networks (policy_obs_key, "
                    "value_obs_key)"
                )
            if distribution_type != "tanh_normal" or use_distributional_critic:
                raise ValueError(
                    "network_factory's modules give the 'tanh_normal' distribution's parameters and one value: "
                    f"distribution_type={distribution_type!r} and use_distributional_critic="
                    f"{use_distributional_critic!r} apply to torch_ppo's own networks only"
                )
            bodies = custom.build(network_factory, int(observation_size), int(action_size))
        check_network_options(
            distribution_type=distribution_type,
            noise_std_type=noise_std_type,
            init_noise_std=init_noise_std,
            state_dependent_std=state_dependent_std,
            mean_clip_scale=mean_clip_scale,
        )
        policy_init = resolve_kernel_init(
            "policy_network_kernel_init_fn",
            policy_network_kernel_init_fn,
            "policy_network_kernel_init_kwargs",
            policy_network_kernel_init_kwargs,
        )
        value_init = resolve_kernel_init(
            "value_network_kernel_init_fn",
            value_network_kernel_init_fn,
            "value_network_kernel_init_kwargs",
            value_network_kernel_init_kwargs,
        )
        mean_init = None
        if mean_kernel_init_fn is not None:
            mean_init = resolve_kernel_init(
                "mean_kernel_init_fn", mean_kernel_init_fn, "mean_kernel_init_kwargs", mean_kernel_init_kwargs
            )
        for name, key in (("policy_obs_key", policy_obs_key), ("value_obs_key", value_obs_key)):
            if not isinstance(key, str) or not key:
                raise ValueError(f"{name} must be a non-empty string naming a dict-observation key, got {key!r}")
        self.action_size = int(action_size)
        policy_key: str | None = None
        value_key: str | None = None
        if isinstance(observation_size, Mapping):
            sizes = {str(k): _flat_size(v) for k, v in observation_size.items()}
            for name, key in (("policy_obs_key", policy_obs_key), ("value_obs_key", value_obs_key)):
                if key not in sizes:
                    raise ValueError(f"{name}={key!r} is not among the observation keys {sorted(sizes)}")
            self.observation_size: int | dict[str, int] = sizes
            self.normalizer: nn.Module = DictNormalizer(sizes, enabled=normalize_observations)
            policy_norm, value_norm = self.normalizer[policy_obs_key], self.normalizer[value_obs_key]
            policy_in, value_in = sizes[policy_obs_key], sizes[value_obs_key]
            policy_key, value_key = policy_obs_key, value_obs_key
        else:
            self.observation_size = int(observation_size)
            self.normalizer = RunningNormalizer(self.observation_size, enabled=normalize_observations)
            policy_norm = value_norm = self.normalizer
            policy_in = value_in = self.observation_size
        self.policy = PolicyNetwork(
            policy_in,
            action_size,
            policy_norm,
            policy_hidden_layer_sizes,
            activation,
            distribution_type=distribution_type,
            noise_std_type=noise_std_type,
            init_noise_std=init_noise_std,
            state_dependent_std=state_dependent_std,
            mean_clip_scale=mean_clip_scale,
            kernel_init=policy_init,
            mean_kernel_init=mean_init,
            obs_key=policy_key,
            body=bodies[0],
        )
        self.num_quantiles = int(num_quantiles)
        self.value = ValueNetwork(
            value_in,
            value_norm,
            value_hidden_layer_sizes,
            activation,
            value_init,
            value_key,
            int(num_quantiles) if use_distributional_critic else None,
            body=bodies[1],
        )
        self._options = {
            "distribution_type": distribution_type,
            "noise_std_type": noise_std_type,
            "init_noise_std": float(init_noise_std),
            "state_dependent_std": bool(state_dependent_std),
            "mean_clip_scale": None if mean_clip_scale is None else float(mean_clip_scale),
            "policy_obs_key": policy_obs_key,
            "value_obs_key": value_obs_key,
            "policy_network_kernel_init_fn": _init_name(policy_network_kernel_init_fn),
            "policy_network_kernel_init_kwargs": dict(policy_network_kernel_init_kwargs or {}),
            "value_network_kernel_init_fn": _init_name(value_network_kernel_init_fn),
            "value_network_kernel_init_kwargs": dict(value_network_kernel_init_kwargs or {}),
            "mean_kernel_init_fn": None if mean_kernel_init_fn is None else _init_name(mean_kernel_init_fn),
            "mean_kernel_init_kwargs": dict(mean_kernel_init_kwargs or {}),
        }

    def config(self) -> dict:
        """Constructor arguments, JSON-ready (activation and initialisers by name; a ``network_factory`` by its
        ``module.qualname``, beside the sizes and the normaliser: the options of torch_ppo's own networks do not
        apply to it)."""
        if self.network_factory is not None:
            return {
                "observation_size": self.observation_size,
                "action_size": self.action_size,
                "normalize_observations": self.normalizer.enabled,
                "network_factory": self.network_factory,
            }
        policy_mlp = self.policy.mlp
        policy_sizes = [getattr(policy_mlp, n).out_features for n in policy_mlp.layer_names]
        if self.policy.squash:
            policy_sizes = policy_sizes[:-1]  # the last layer is the (loc, scale) output
        value_sizes = [getattr(self.value.mlp, n).out_features for n in self.value.mlp.layer_names[:-1]]
        return {
            "observation_size": self.observation_size,
            "action_size": self.action_size,
            "policy_hidden_layer_sizes": policy_sizes,
            "value_hidden_layer_sizes": value_sizes,
            "activation": self.policy.mlp.activation_name,
            "normalize_observations": self.normalizer.enabled,
            "use_distributional_critic": bool(self.value.num_quantiles),
            "num_quantiles": self.num_quantiles,
            **self._options,
        }


def check_network_options(
    distribution_type: str = "tanh_normal",
    noise_std_type: str = "scalar",
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    mean_clip_scale: float | None = None,
) -> None:
    """ValueError naming the first network option outside what it accepts."""
    if distribution_type not in DISTRIBUTION_TYPES:
        raise ValueError(f"distribution_type must be one of {DISTRIBUTION_TYPES}, got {distribution_type!r}")
    if noise_std_type not in NOISE_STD_TYPES:
        raise ValueError(f"noise_std_type must be one of {NOISE_STD_TYPES}, got {noise_std_type!r}")
    numbers = (("init_noise_std", init_noise_std, False), ("mean_clip_scale", mean_clip_scale, True))
    for name, value, optional in numbers:
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a finite number > 0{' or None' if optional else ''}, got {value!r}")
    if not isinstance(state_dependent_std, bool):
        raise ValueError(f"state_dependent_std must be True or False, got {state_dependent_std!r}")


def make_actor(
    modules: PPOModules, deterministic: bool = False, generator: torch.Generator | None = None
) -> TensorDictSequential:
    """``observation -> loc, scale -> action`` (+ ``raw_action``, ``action_log_prob`` when sampling)."""
    head = TensorDictModule(modules.policy, in_keys=["observation"], out_keys=["loc", "scale"])
    return TensorDictSequential(head, TanhNormalSampler(deterministic, generator, squash=modules.policy.squash))
