"""PPO hyperparameters as the command line sees them: one spec per name, with validation.

Plain Python on purpose: the command line builds its flags from ``SPECS`` before any command runs, so
``brax-bridge --help`` answers without importing JAX or torch. Presets and the trainers' keyword arguments are
in ``configuration``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

ACTIVATIONS = ("relu", "tanh", "sigmoid", "swish", "silu", "elu", "gelu", "leaky_relu", "softplus")
TRAINERS = ("jax", "torch")
NETWORK_KEYS = ("policy_hidden_layer_sizes", "value_hidden_layer_sizes", "activation")


@dataclasses.dataclass(frozen=True)
class HParam:
    """One hyperparameter: its kind ('int', 'float', 'bool', 'sizes', 'choice'), range and help line."""

    name: str
    kind: str
    help: str
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False  # True: the minimum itself is not allowed
    optional: bool = False  # None is a valid value (e.g. max_grad_norm: no clipping)
    choices: tuple[str, ...] = ()
    trainers: tuple[str, ...] = TRAINERS

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


# Defaults follow Brax's PPO; a preset replaces them, a flag replaces both.
SPECS: tuple[HParam, ...] = (
    HParam("num_timesteps", "int", "total environment steps to train", 1_000_000, minimum=0),
    HParam("episode_length", "int", "steps per episode before the time limit (default: the env's own)", None, 1),
    HParam("action_repeat", "int", "env steps per policy action", 1, 1),
    HParam("num_envs", "int", "parallel training environments", 2048, 1),
    HParam("num_eval_envs", "int", "parallel evaluation environments", 128, 1),
    HParam("num_evals", "int", "evaluations (and checkpoints) over the run; 0: none", 10, 0),
    HParam("num_resets_per_eval", "int", "environment resets between evaluations (JAX trainer)", 0, 0,
           trainers=("jax",)),
    HParam("learning_rate", "float", "Adam learning rate", 3e-4, 0, min_open=True),
    HParam("entropy_cost", "float", "weight of the entropy bonus", 1e-2, 0),
    HParam("discounting", "float", "discount factor gamma", 0.97, 0, 1, min_open=True),
    HParam("gae_lambda", "float", "GAE lambda", 0.95, 0, 1),
    HParam("unroll_length", "int", "steps per rollout segment", 5, 1),
    HParam("batch_size", "int", "segments per minibatch", 1024, 1),
    HParam("num_minibatches", "int", "minibatches per update epoch", 32, 1),
    HParam("num_updates_per_batch", "int", "update epochs over each batch", 4, 1),
    HParam("reward_scaling", "float", "multiplier applied to rewards in the loss", 10.0, 0, min_open=True),
    HParam("clipping_epsilon", "float", "PPO ratio clipping", 0.3, 0, min_open=True),
    HParam("max_grad_norm", "float", "global gradient-norm clip (0: none)", None, 0, optional=True),
    HParam("vf_loss_coefficient", "float", "value-loss weight", 0.5, 0),
    HParam("normalize_observations", "bool", "running mean/std observation normaliser", True),
    HParam("normalize_advantage", "bool", "normalise advantages per minibatch", True),
    HParam("deterministic_eval", "bool", "evaluate the policy's mode instead of sampling", True),
    HParam("bootstrap_on_timeout", "bool", "bootstrap time-limit steps from the true final observation", False),
    HParam("log_training_metrics", "bool", "stream training metrics between evaluations", False),
    HParam("training_metrics_steps", "int", "env steps between training-metric reports", None, 1, optional=True),
    HParam("policy_hidden_layer_sizes", "sizes", "policy MLP hidden sizes, e.g. 32,32,32,32", (32, 32, 32, 32)),
    HParam("value_hidden_layer_sizes", "sizes", "value MLP hidden sizes, e.g. 256,256,256,256,256",
           (256, 256, 256, 256, 256)),
    HParam("activation", "choice", "hidden-layer activation", "swish", choices=ACTIVATIONS),
    HParam("torch_compile", "bool", "compile the torch loss with torch.compile (torch trainer)", False,
           trainers=("torch",)),
)
BY_NAME: dict[str, HParam] = {s.name: s for s in SPECS}


class HParamError(ValueError):
    """A bad hyperparameter; the message names the flag and what it accepts."""


def parse_sizes(text: str | Any, name: str = "sizes") -> tuple[int, ...]:
    """``"64,64"`` (or a sequence of ints) -> ``(64, 64)``, refusing empty, non-integer and non-positive sizes."""
    flag = BY_NAME[name].flag if name in BY_NAME else name
    if isinstance(text, str):
        parts = [p.strip() for p in text.replace(" ", ",").split(",") if p.strip()]
        try:
            sizes = tuple(int(p) for p in parts)
        except ValueError:
            raise HParamError(f"{flag} must be comma-separated positive integers like 64,64; got {text!r}") from None
    else:
        try:
            sizes = tuple(text)
        except TypeError:
            raise HParamError(f"{flag} must be a sequence of positive integers; got {text!r}") from None
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise HParamError(f"{flag} must be one or more positive integers like 64,64; got {text!r}")
    return sizes


def check(name: str, value: Any) -> Any:
    """Validates (and normalises) one value, raising ``HParamError`` naming the flag and the accepted range."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise HParamError(f"unknown hyperparameter {name!r}; known: {', '.join(BY_NAME)}")
    if value is None:
        if spec.optional or (name == "episode_length"):
            return None
        raise HParamError(f"{spec.flag} needs a value")
    if spec.kind == "sizes":
        return parse_sizes(value, name)
    if spec.kind == "choice":
        if value not in spec.choices:
            raise HParamError(f"{spec.flag} must be one of: {', '.join(spec.choices)}; got {value!r}")
        return value
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise HParamError(f"{spec.flag} must be true or false; got {value!r}")
        return value
    if spec.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise HParamError(f"{spec.flag} must be an integer; got {value!r}")
    else:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise HParamError(f"{spec.flag} must be a number; got {value!r}")
        value = float(value)
        if spec.optional and value == 0:
            return None
    low, high = spec.minimum, spec.maximum
    if low is not None and (value < low or (spec.min_open and value == low)):
        relation = ">" if spec.min_open else ">="
        raise HParamError(f"{spec.flag} must be {relation} {low:g}; got {value!r}")
    if high is not None and value > high:
        raise HParamError(f"{spec.flag} must be <= {high:g}; got {value!r}")
    return value


def check_consistency(hp: Mapping[str, Any]) -> None:
    """The cross-field rules both trainers enforce, checked here so the CLI fails before building anything."""
    if (hp["batch_size"] * hp["num_minibatches"]) % hp["num_envs"] != 0:
        raise HParamError(
            f"--batch-size x --num-minibatches ({hp['batch_size']} x {hp['num_minibatches']} = "
            f"{hp['batch_size'] * hp['num_minibatches']}) must be divisible by --num-envs ({hp['num_envs']})"
        )


def to_json(hp: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in hp.items()}
