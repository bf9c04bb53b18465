"""Networks of the user's own in torch_ppo: ``train(..., network_factory=fn)``.

``fn(observation_size, action_size)`` returns ``(policy_module, value_module)``, two ``torch.nn.Module``s over
normalised observations ``[batch, observation_size]``: the policy module gives the action distribution's parameters
``[batch, 2 * action_size]`` in the JAX trainer's layout (the mean of every action dimension, then its scale before
the softplus that makes it positive), the value module ``[batch]`` or ``[batch, 1]``. torch_ppo keeps everything
around them: the observation normaliser in front, the tanh-squashed normal distribution, the losses, DDP,
checkpoints and resume. ``build`` calls the factory and checks both modules' output sizes on a batch of zeros, so a
module of the wrong size is refused before training, naming both sizes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

NetworkFactory = Callable[[int, int], tuple[nn.Module, nn.Module]]

# torch_ppo's own networks' options, which a network_factory replaces: each must keep its default beside one.
BUILT_IN_OPTIONS = (
    "policy_hidden_layer_sizes",
    "value_hidden_layer_sizes",
    "activation",
    "num_quantiles",
    "noise_std_type",
    "init_noise_std",
    "state_dependent_std",
    "mean_clip_scale",
    "policy_network_kernel_init_fn",
    "policy_network_kernel_init_kwargs",
    "value_network_kernel_init_fn",
    "value_network_kernel_init_kwargs",
    "mean_kernel_init_fn",
    "mean_kernel_init_kwargs",
)

_LAYOUT = "the mean of each action dimension, then its scale before the softplus"


def name_of(network_factory: Callable[..., Any]) -> str:
    """``module.qualname`` of the factory (of the function inside a ``functools.partial``), as checkpoints
    record it."""
    fn = getattr(network_factory, "func", network_factory)
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"


def _is_jax_factory(network_factory: Any) -> bool:
    fn = getattr(network_factory, "func", network_factory)
    return getattr(fn, "__module__", "").startswith("brax_core.training.agents.ppo.networks")


def options_of_jax_factory(arguments: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``train``'s bound ``arguments`` with the JAX trainer's ``network_factory`` (brax_core's
    ``make_ppo_networks``, bare or a ``functools.partial`` of it, as every preset carries) taken as torch_ppo's own
    networks' options: each keyword of the partial becomes the ``train`` argument of its name, and
    ``network_factory`` is dropped. So ``torch_ppo.train(env, **presets.TRAIN_KWARGS[name])`` builds the preset's
    networks.

    ``defaults``: ``train``'s defaults by name. A keyword that ``train`` also received with another value, or that
    torch_ppo's networks do not have, is a ``ValueError`` naming it. Arguments without such a factory are returned
    unchanged."""
    factory = arguments.get("network_factory")
    if factory is None or not _is_jax_factory(factory):
        return arguments
    out = {**arguments, "network_factory": None}
    for name, value in (getattr(factory, "keywords", None) or {}).items():
        if name not in defaults or name in ("network_factory", "environment"):
            raise ValueError(
                f"network_factory={name_of(factory)} sets {name}={value!r}, which torch_ppo's networks do not have; "
                "drop it from the partial, or pass a network_factory of torch modules"
            )
        given = arguments[name]
        if given != defaults[name] and given != value:
            raise ValueError(
                f"{name}={given!r} differs from network_factory's {name}={value!r}: pass one of them (torch_ppo takes "
                "the JAX factory's keywords as its own arguments)"
            )
        out[name] = value
    return out


def check_factory(network_factory: Any) -> NetworkFactory:
    """``network_factory`` itself, refused when it is not a callable or is the JAX trainer's own (brax_core's
    ``make_ppo_networks`` builds flax networks; its options are ``train``'s own arguments here)."""
    if not callable(network_factory):
        raise TypeError(
            "network_factory must be a callable fn(observation_size, action_size) -> (policy_module, value_module), "
            f"got {network_factory!r}"
        )
    if _is_jax_factory(network_factory):  # train() takes these as options; other entry points refuse them
        keywords = dict(getattr(network_factory, "keywords", None) or {})
        given = ", ".join(f"{k}={v!r}" for k, v in keywords.items()) or "its options"
        raise ValueError(
            f"network_factory={name_of(network_factory)} builds the JAX trainer's flax networks; torch_ppo.train "
            f"takes their options as its own arguments: pass {given} to torch_ppo.train instead of network_factory"
        )
    return network_factory


def build(network_factory: NetworkFactory, observation_size: int, action_size: int) -> tuple[nn.Module, nn.Module]:
    """The factory's two modules, their outputs checked on a batch of two zero observations (in eval mode, so that
    no running statistics of theirs change)."""
    made = network_factory(observation_size, action_size)
    if not (isinstance(made, tuple | list) and len(made) == 2 and all(isinstance(m, nn.Module) for m in made)):
        raise TypeError(
            f"network_factory={name_of(network_factory)} must return (policy_module, value_module), two "
            f"torch.nn.Modules; got {made!r}"
        )
    policy, value = made
    policy_out = _output_of("policy", policy, observation_size)
    if tuple(policy_out.shape) != (2, 2 * action_size):
        raise ValueError(
            f"network_factory's policy module gives outputs of size {_size(policy_out)} but the policy needs "
            f"2 * action_size = {2 * action_size} ({_LAYOUT}, for {action_size} action dimensions): its output "
            f"is [batch, {2 * action_size}]"
        )
    value_out = _output_of("value", value, observation_size)
    if tuple(value_out.shape) not in ((2,), (2, 1)):
        raise ValueError(
            f"network_factory's value module gives outputs of size {_size(value_out)} but the value needs 1 "
            "per observation: its output is [batch] or [batch, 1]"
        )
    return policy, value


def call_batched(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``module`` over the observations ``x [..., observation_size]`` given to it as one ``[batch,
    observation_size]``, its output ``[batch, ...]`` given back with ``x``'s leading dimensions (the loss's
    minibatches are ``[time, batch]``)."""
    if x.dim() == 2:
        return module(x)
    out = module(x.reshape(-1, x.shape[-1]))
    return out.reshape(*x.shape[:-1], *out.shape[1:])


def _output_of(role: str, module: nn.Module, observation_size: int) -> torch.Tensor:
    parameter = next(module.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    observations = torch.zeros(2, observation_size, device=device)
    try:
        with torch.no_grad(), _eval_mode(module):
            out = module(observations)
    except Exception as err:
        raise ValueError(
            f"network_factory's {role} module fails on observations [batch, {observation_size}] (observation_size "
            f"= {observation_size}): {type(err).__name__}: {err}"
        ) from err
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"network_factory's {role} module must return a tensor, got {type(out).__name__}")
    return out


@contextlib.contextmanager
def _eval_mode(module: nn.Module) -> Iterator[None]:
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.train(training)


def _size(out: torch.Tensor) -> str:
    """An output's size per observation, as the error messages name it."""
    per_observation = list(out.shape[1:])
    return str(per_observation[0]) if len(per_observation) == 1 else str(per_observation)
