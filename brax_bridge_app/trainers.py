"""The two trainers behind one interface: what a run folder, the command line and evaluation ask of a trainer.

A trainer trains a resolved configuration on a placement, finds the newest checkpoint of a run, and loads the
run's policy for evaluation. ``TRAINERS`` maps the names the command line takes (``--trainer jax|torch``) to them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import torch

import torch_ppo
from brax_bridge_app import envinfo, hparams, runtime
from brax_bridge_app.configuration import RunSpec
from brax_core.training.agents.ppo import checkpoint as jax_checkpoint
from brax_core.training.agents.ppo import train as ppo_train
from torch_ppo import checkpoint as torch_checkpoint


@dataclasses.dataclass(frozen=True)
class Policy:
    """``act(obs [N, obs], key) -> action [N, act]`` on JAX arrays; ``traceable`` when it can run inside ``jit``."""

    act: Callable[[jax.Array, jax.Array], jax.Array]
    traceable: bool


class Trainer(Protocol):
    """What the application needs of a trainer."""

    name: str

    def train(self, spec: RunSpec, placement: runtime.Placement, **run_kwargs: Any) -> Any:
        """Trains ``spec.config`` on ``placement``; ``run_kwargs`` are the callbacks and checkpoint paths both
        trainers take by the same names."""
        ...

    def latest_step(self, path: str) -> int | None:
        """Env steps of the newest complete checkpoint under ``path`` (from its name; nothing is loaded)."""
        ...

    def load_policy(self, path: str, deterministic: bool, placement: runtime.Placement) -> Policy:
        """The policy of the checkpoint at ``path``, acting on JAX arrays on ``placement``."""
        ...


class JaxTrainer(Trainer):
    name = "jax"

    def train(self, spec: RunSpec, placement: runtime.Placement, **run_kwargs: Any) -> Any:
        # The JAX trainer trains on JAX's default device when one is set; the placement's device is the config's.
        config = spec.config.replace(device=placement.torch_device)
        with runtime.placed(placement):
            return ppo_train.train_from_config(config, envinfo.of_run(spec), **run_kwargs)

    def latest_step(self, path: str) -> int | None:
        return jax_checkpoint.latest_step(path)

    def load_policy(self, path: str, deterministic: bool, placement: runtime.Placement) -> Policy:
        with runtime.placed(placement):
            policy = jax_checkpoint.load_policy(path, deterministic=deterministic)
        return Policy(lambda obs, key: policy(obs, key)[0], traceable=True)


class TorchTrainer(Trainer):
    name = "torch"

    def train(self, spec: RunSpec, placement: runtime.Placement, **run_kwargs: Any) -> Any:
        config = spec.config.replace(device=placement.torch_device)
        # A registered name stays a name: the bridge shares one compiled step among TorchEnvs of one configuration
        # (training, evaluation). A user's env is handed over built.
        environment = envinfo.of_run(spec) if envinfo.is_user_env(spec.env_name) else spec.env_name
        with runtime.placed(placement):
            return torch_ppo.train_from_config(config, environment, **run_kwargs)

    def latest_step(self, path: str) -> int | None:
        return torch_checkpoint.latest_step(path)

    def load_policy(self, path: str, deterministic: bool, placement: runtime.Placement) -> Policy:
        # The policy runs where JAX keeps the observations, so DLPack hands them over without a copy.
        policy = torch_checkpoint.load_policy(path, deterministic=deterministic, device=placement.torch_device)

        def act(obs: jax.Array, key: jax.Array) -> jax.Array:
            del key  # torch samples from its own generator
            with torch.inference_mode():
                action = policy(torch.from_dlpack(obs))
            action = action[0] if isinstance(action, tuple) else action
            return jnp.from_dlpack(action.contiguous())

        return Policy(act, traceable=False)


TRAINERS: dict[str, Trainer] = {trainer.name: trainer for trainer in (JaxTrainer(), TorchTrainer())}


def get(name: str) -> Trainer:
    """The trainer called ``name``; ``HParamError`` naming the trainers otherwise."""
    try:
        return TRAINERS[name]
    except KeyError:
        raise hparams.HParamError(f"--trainer must be one of: {', '.join(TRAINERS)}; got {name!r}") from None
