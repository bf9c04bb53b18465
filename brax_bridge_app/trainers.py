"""Every (algorithm, trainer) behind one interface: what a run folder, the command line and evaluation ask of a
trainer.

A trainer trains a resolved configuration on a placement, finds the newest checkpoint of a run, and loads the
run's policy for evaluation. ``get(algo, trainer)`` gives the one the command line names (``--algo``, ``--trainer``).
Every trainer reports ``progress_fn(env_steps, metrics)`` here: the gradient trainers report epochs (Brax's APG's
unit), which are put in env steps from the run driver's ``policy_params_fn``, called with the env steps at every
epoch's end before the epoch's report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import torch

import torch_ppo
import torch_sac
from brax_bridge_app import envinfo, hparams, runtime
from brax_bridge_app.configuration import RunSpec
from brax_core.training.agents.apg import checkpoint as apg_checkpoint
from brax_core.training.agents.apg import train as jax_apg
from brax_core.training.agents.ppo import checkpoint as jax_checkpoint
from brax_core.training.agents.ppo import train as ppo_train
from brax_core.training.agents.sac import checkpoint as sac_checkpoint
from brax_core.training.agents.sac import train as jax_sac
from brax_core.training.run.checkpoints import latest_step
from torch_analytic import apg as torch_apg
from torch_analytic import checkpoint as analytic_checkpoint
from torch_analytic import shac
from torch_ppo import checkpoint as torch_checkpoint


@dataclasses.dataclass(frozen=True)
class Policy:
    """``act(obs [N, obs], key) -> action [N, act]`` on JAX arrays; ``traceable`` when it can run inside ``jit``."""

    act: Callable[[jax.Array, jax.Array], jax.Array]
    traceable: bool


@dataclasses.dataclass(frozen=True)
class Trainer:
    """One algorithm's trainer as the application runs it.

    ``module.train_from_config(config, environment, **options)`` trains; ``load_policy(path, deterministic,
    placement)`` gives a checkpoint's policy on JAX arrays; ``keeps_env_name``: the trainer takes a registered env by
    its name (the bridge's trainers share one compiled step among the envs of one configuration), else it is handed
    the env built; ``reports_epochs``: its ``progress_fn`` is told epochs (Brax's APG's unit), not env steps.
    """

    algo: str
    name: str
    module: Any
    load_policy: Callable[[str, bool, runtime.Placement], Policy]
    keeps_env_name: bool
    reports_epochs: bool

    def train(self, spec: RunSpec, placement: runtime.Placement, **run_kwargs: Any) -> Any:
        """Trains ``spec.config`` on ``placement``; ``run_kwargs`` are the callbacks and checkpoint paths every
        trainer takes by the same names (``allow_config_changes`` too: PPO's alone takes a true one)."""
        config = spec.config.replace(device=placement.torch_device)
        run_kwargs = dict(run_kwargs)
        if self.algo != "ppo" and run_kwargs.pop("allow_config_changes", False):
            raise hparams.HParamError(
                f"--allow-changes: a resumed {self.algo.upper()} run continues the saved one exactly"
            )
        keep_name = self.keeps_env_name and not envinfo.is_user_env(spec.env_name)
        environment = spec.env_name if keep_name else envinfo.of_run(spec)
        if self.reports_epochs:
            run_kwargs = _in_env_steps(run_kwargs)
        with runtime.placed(placement):
            return self.module.train_from_config(config, environment, **run_kwargs)

    def latest_step(self, path: str) -> int | None:
        """Env steps of the newest complete checkpoint under ``path`` (from its name; nothing is loaded)."""
        return latest_step(path)


def _in_env_steps(run_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The run's callbacks for a trainer that reports epochs: ``progress_fn`` told the env steps instead (those of
    the last ``policy_params_fn`` call, at the epoch's end; at the start, the restored checkpoint's)."""
    run_kwargs = dict(run_kwargs)
    restore = run_kwargs.get("restore_checkpoint_path")
    at = {"env_steps": (latest_step(restore) or 0) if restore else 0}
    progress_fn, policy_params_fn = run_kwargs["progress_fn"], run_kwargs["policy_params_fn"]

    def params_fn(env_steps: int, make_policy: Any, params: Any) -> None:
        at["env_steps"] = int(env_steps)
        policy_params_fn(env_steps, make_policy, params)

    run_kwargs["policy_params_fn"] = params_fn
    run_kwargs["progress_fn"] = lambda epoch, metrics: progress_fn(at["env_steps"], metrics)
    return run_kwargs


def _jax_policy(load: Callable[..., Any]) -> Callable[[str, bool, runtime.Placement], Policy]:
    def load_policy(path: str, deterministic: bool, placement: runtime.Placement) -> Policy:
        with runtime.placed(placement):
            policy = load(path, deterministic=deterministic)
        return Policy(lambda obs, key: policy(obs, key)[0], traceable=True)

    return load_policy


def _torch_policy(load: Callable[..., Any]) -> Callable[[str, bool, runtime.Placement], Policy]:
    def load_policy(path: str, deterministic: bool, placement: runtime.Placement) -> Policy:
        # The policy runs where JAX keeps the observations, so DLPack hands them over without a copy.
        policy = load(path, deterministic=deterministic, device=placement.torch_device)

        def act(obs: jax.Array, key: jax.Array) -> jax.Array:
            del key  # torch samples from its own generator
            with torch.inference_mode():
                action = policy(torch.from_dlpack(obs))
            action = action[0] if isinstance(action, tuple) else action
            return jnp.from_dlpack(action.contiguous())

        return Policy(act, traceable=False)

    return load_policy


TRAINERS: dict[tuple[str, str], Trainer] = {
    (t.algo, t.name): t for t in (
        Trainer("ppo", "jax", ppo_train, _jax_policy(jax_checkpoint.load_policy), False, False),
        Trainer("ppo", "torch", torch_ppo, _torch_policy(torch_checkpoint.load_policy), True, False),
        Trainer("apg", "jax", jax_apg, _jax_policy(apg_checkpoint.load_policy), False, True),
        Trainer("apg", "torch", torch_apg, _torch_policy(analytic_checkpoint.load_policy), True, True),
        Trainer("shac", "torch", shac, _torch_policy(analytic_checkpoint.load_policy), True, True),
        Trainer("sac", "jax", jax_sac, _jax_policy(sac_checkpoint.load_policy), False, False),
        Trainer("sac", "torch", torch_sac, _torch_policy(torch_sac.load_policy), True, False),
    )
}


def get(algo: str, name: str) -> Trainer:
    """The trainer called ``name`` of ``algo``; ``HParamError`` naming the trainers of ``algo`` otherwise."""
    try:
        return TRAINERS[(algo, name)]
    except KeyError:
        names = [t for a, t in TRAINERS if a == algo]
        raise hparams.HParamError(f"--trainer must be one of {', '.join(names)} with --algo {algo}; "
                                  f"got {name!r}") from None
