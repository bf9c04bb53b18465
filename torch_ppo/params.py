"""What ``torch_ppo.train`` returns: parameters as a named triple, and ``make_policy`` over them.

``TorchPPOParams(normalizer_params, policy_params, value_params)`` has the JAX side's field names and order. Each
field is a plain ``dict`` of tensors (normaliser statistics ``count/mean/summed_variance/std``, with a dict per key
for dict observations; MLP state dicts with keys ``hidden_i.weight`` / ``hidden_i.bias``, and for the ``'normal'``
policy ``mlp.hidden_i.*``, ``mean.*`` and ``std_param``, ``std_logparam`` or ``std_dense.*``; with a
``network_factory``, its modules' own state dicts), detached copies that later training never mutates.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch

from brax_core.training.agents.ppo.networks import policy_params_of as _policy_params_of
from torch_ppo.networks import PPOModules

TorchPolicy = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]


class TorchPPOParams(NamedTuple):
    normalizer_params: dict[str, torch.Tensor]
    policy_params: dict[str, torch.Tensor]
    value_params: dict[str, torch.Tensor]


def params_of(modules: PPOModules) -> TorchPPOParams:
    """A detached snapshot of the trainable state of ``modules``."""
    snap = lambda sd: {k: v.detach().clone() for k, v in sd.items()}
    return TorchPPOParams(
        modules.normalizer.stats(), snap(modules.policy.params_state_dict()), snap(modules.value.mlp.state_dict())
    )


def policy_params_of(params: Any) -> tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]]:
    """``(normalizer_params, policy_params)`` from any of the accepted structures (TypeError otherwise)."""
    return _policy_params_of(params, params_type_name="TorchPPOParams")


def load_params(modules: PPOModules, params: Any) -> PPOModules:
    """Copies ``params`` (full triple, or the policy pair) into ``modules`` in place and returns them."""
    normalizer_params, policy_params = policy_params_of(params)
    with torch.no_grad():
        modules.normalizer.load_stats(normalizer_params)
        modules.policy.load_params_state_dict(policy_params)
        value_params = getattr(params, "value_params", None)
        if value_params is None and isinstance(params, (tuple, list)) and len(params) == 3:
            value_params = params[2]
        if value_params is not None:
            modules.value.load_params_state_dict(value_params)
    return modules


def make_inference_fn(modules: PPOModules) -> Callable[..., TorchPolicy]:
    """``make_policy(params, deterministic=False) -> policy(observation, generator=None) -> (action, extras)``.

    The policy owns a private copy of the networks, so training on ``modules`` never changes it.
    """
    template = copy.deepcopy(modules)

    def make_policy(params: Any, deterministic: bool = False) -> TorchPolicy:
        own = load_params(copy.deepcopy(template), params)
        own.eval()

        @torch.no_grad()
        def policy(
            observation: torch.Tensor, generator: torch.Generator | None = None
        ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            net = own.policy
            loc, scale = net(observation)
            if deterministic:
                return net.postprocess(loc), {}
            noise = torch.randn(loc.shape, generator=generator, device=loc.device, dtype=loc.dtype)
            raw = loc + scale * noise
            return net.postprocess(raw), {"log_prob": net.log_prob(loc, scale, raw), "raw_action": raw}

        policy.modules = own  # for export / transfer to JAX
        return policy

    return make_policy
