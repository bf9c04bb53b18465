"""torch_ppo's evaluation: Brax's ``eval/*`` metrics from ``num_eval_envs`` episodes of the current policy.

Two evaluators compute the same metrics (episode reward and the env's own metrics, summed until each env's first
``done``; their means and standard deviations; the episode length's mean and standard deviation; evaluation time
and steps/s):

* ``JaxEvaluator`` (the default): one compiled JAX rollout per evaluation, on the env the JAX trainer evaluates on
  (``brax_core.training.agents.ppo.train.make_eval_env``) with its rollout and summary
  (``brax_core.training.acting``). The actor's weights are copied into brax_core's networks of the same layout
  (``torch_ppo.policy_transfer.jax_policy_factory``), which compute what the torch actor computes, so an evaluation
  costs what the JAX trainer's costs: one call, instead of a bridge step and a torch forward per env step.
* ``BridgeEvaluator`` (``torch_training.evaluation``, every torch trainer's): the torch actor drives a separate
  ``TorchEnv``, a step at a time; used for an ``eval_env`` that is a ready ``TorchEnv``, for an actor brax_core's
  networks cannot express (an activation known to torch only, or the modules of a ``network_factory``), and with
  ``train(..., eval_backend="torch")``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import torch
from jax.sharding import SingleDeviceSharding

from brax_bridge import TorchEnv
from brax_core import compile as compile_options
from brax_core import program_cache
from brax_core.envs.base import Env
from brax_core.training import acting
from brax_core.training.agents.ppo import train as jax_ppo
from brax_core.training.run.driver import ReportedMetrics
from torch_ppo.networks import PPOModules
from torch_ppo.policy_transfer import jax_policy_factory, jax_policy_params

EVAL_BACKENDS = ("jax", "torch")
_PACKAGES = ("brax_core", "torch_ppo")  # the code the evaluation program runs, for the program cache's key


class UnsupportedActor(ValueError):
    """The actor cannot be rebuilt from brax_core's networks (an activation function torch alone knows)."""


class JaxEvaluator:
    """Evaluates the torch actor's weights in one compiled JAX rollout of ``num_eval_envs`` episodes.

    Args:
      source: the unbatched brax_core env to evaluate on.
      modules: the trainer's ``PPOModules`` (read for the actor's layout; weights are read at each ``run``).
      num_eval_envs, episode_length, action_repeat: the evaluation's size, as the trainer's arguments.
      deterministic: evaluate the mode of the policy (else samples, from JAX keys).
      wrap_env_fn: the trainer's ``wrap_env_fn`` (None: brax_core's wrappers).
      randomization_fn: randomises the evaluation envs' models (None: not randomised).
      seed: the evaluation's seed (its resets, its samples and its randomisation).
      jax_device: where the rollout runs (the training TorchEnv's JAX device).
      cpu_opt_level: the LLVM level of the compile on a CPU (the training env's).

    Raises ``UnsupportedActor`` (a ``ValueError``) when brax_core's networks cannot express the actor (see
    ``jax_policy_factory``).
    """

    torch_envs: tuple[TorchEnv, ...] = ()

    def __init__(
        self,
        source: Env,
        modules: PPOModules,
        *,
        num_eval_envs: int,
        episode_length: int,
        action_repeat: int,
        deterministic: bool,
        wrap_env_fn: Callable[..., Env] | None,
        randomization_fn: Callable[..., Any] | None,
        seed: int,
        jax_device: jax.Device,
        cpu_opt_level: int,
    ):
        try:
            make_policy, layout = jax_policy_factory(modules)
        except ValueError as reason:
            raise UnsupportedActor(str(reason)) from reason
        self.runs = 0
        self._device = jax_device
        key_randomize, key_eval = jax.random.split(jax.random.PRNGKey(seed))
        self.env = jax_ppo.make_eval_env(
            source,
            num_eval_envs,
            None if randomization_fn is None else key_randomize,
            wrap_env=True if wrap_env_fn is None else wrap_env_fn,
            episode_length=episode_length,
            action_repeat=action_repeat,
            randomization_fn=randomization_fn,
        )
        num_steps = -(-episode_length // action_repeat)
        env = self.env

        self._policy_fn = functools.partial(make_policy, deterministic=deterministic)

        def evaluate(policy_params: Any, key: jax.Array) -> dict[str, jax.Array]:
            state = acting.evaluation_rollout(env, self._policy_fn(policy_params), key, num_eval_envs, num_steps)
            return acting.summarize_eval(state.info["eval_metrics"])

        self._evaluate = evaluate
        self._key = key_eval
        self._sizes = dict(num_eval_envs=num_eval_envs, episode_length=episode_length, action_repeat=action_repeat)
        self._jit = functools.partial(
            jax.jit, compiler_options=compile_options.compiler_options(jax_device.platform, cpu_opt_level)
        )
        on_device = SingleDeviceSharding(jax_device)
        abstract = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device)  # noqa: E731
        self._abstract_args = (jax.tree.map(abstract, jax_policy_params(modules)), abstract(key_eval))
        self._description = self._describe(layout, num_eval_envs, num_steps, deterministic)
        self._program: Any = None
        self._evaluator: acting.Evaluator | None = None

    def _describe(self, layout: dict, num_eval_envs: int, num_steps: int, deterministic: bool) -> dict | None:
        """What the rollout computes beyond its arguments, for ``brax_core.program_cache`` (None: traced each run,
        as when a user's wrapper or randomisation function is involved)."""
        if program_cache.folder() is None:
            return None
        try:
            env = program_cache.describe(self.env)
        except TypeError:
            return None
        return dict(
            owner="torch_ppo.evaluation.JaxEvaluator",
            env=env,
            policy=layout,
            num_eval_envs=num_eval_envs,
            num_steps=num_steps,
            deterministic=deterministic,
        )

    def lower(self) -> Iterator[jax.stages.Lowered]:
        """Traces (or loads from the program cache) and lowers the rollout, for ``brax_bridge.compile_envs``."""
        jitted, _ = program_cache.cached(
            self._evaluate, self._jit, self._abstract_args, self._description, self._device.platform, _PACKAGES
        )
        yield jitted.trace(*self._abstract_args).lower()

    def use(self, compiled: list[Any]) -> None:
        """Takes the compiled rollout that ``compile_envs`` returned for ``lower``'s program."""
        (self._program,) = compiled

    @torch.inference_mode()
    def run(self, modules: PPOModules, deterministic: bool, generator: torch.Generator) -> ReportedMetrics:
        """One evaluation of the actor's current weights (``deterministic`` was fixed at construction; the
        ``generator`` is the bridge evaluator's, unused here: samples come from the evaluation's JAX key).

        Brax's ``Evaluator`` runs it, with its key schedule and timing metrics, built at the first run so that a
        resumed run (``runs`` set to the evaluations an unbroken run made before) continues its keys, as the JAX
        trainer's does."""
        del deterministic, generator
        if self._program is None:
            self.use([program.compile() for program in self.lower()])
        if self._evaluator is None:
            key = acting.key_after_evaluations(self._key, self.runs)
            self._evaluator = acting.Evaluator(
                self.env, self._policy_fn, **self._sizes, key=jax.device_put(key, self._device), run_fn=self._program
            )
        self.runs += 1
        params = jax.device_put(jax_policy_params(modules), self._device)
        return self._evaluator.run_evaluation(params, training_metrics={})
