"""torch_ppo's evaluation: Brax's ``eval/*`` metrics from ``num_eval_envs`` episodes of the current policy.

Two evaluators compute the same metrics (episode reward and the env's own metrics, summed until each env's first
``done``; their means and standard deviations; the episode length's mean and standard deviation; evaluation time
and steps/s):

* ``JaxEvaluator`` (the default): one compiled JAX rollout per evaluation, on the env the JAX trainer evaluates on
  (``brax_core.training.agents.ppo.train.make_eval_env``) with its rollout and summary
  (``brax_core.training.acting``). The actor's weights are copied into brax_core's networks of the same layout
  (``torch_ppo.policy_transfer.jax_policy_factory``), which compute what the torch actor computes, so an evaluation
  costs what the JAX trainer's costs: one call, instead of a bridge step and a torch forward per env step.
* ``BridgeEvaluator``: the torch actor drives a separate ``TorchEnv``, a step at a time; used for an ``eval_env``
  that is a ready ``TorchEnv``, for an actor brax_core's networks cannot express (an activation known to torch
  only, or the modules of a ``network_factory``), and with ``train(..., eval_backend="torch")``.
"""

from __future__ import annotations

import functools
import time
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
from brax_core.training.run.driver import Metrics
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
    def run(self, modules: PPOModules, deterministic: bool, generator: torch.Generator) -> Metrics:
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


class BridgeEvaluator:
    """Brax's ``eval/*`` metrics from ``num_eval_envs`` episodes on a separate bridge env.

    Episodes are counted from the reset until each env's first ``done``; stepping stops once every episode has
    ended (checked every 16 steps, the only host reads) or after ``episode_length / action_repeat`` steps.
    """

    def __init__(self, env: Any, num_steps: int, action_repeat: int, seed: int):
        self.env = env
        self.num_steps = num_steps
        self.action_repeat = action_repeat
        self.seed = seed
        self.walltime = 0.0
        self.runs = 0
        self.metric_names: list[str] | None = None

    @property
    def torch_envs(self) -> tuple[TorchEnv, ...]:
        """The bridge env to compile beside the training env."""
        return (self.env,)

    def lower(self) -> Iterator[jax.stages.Lowered]:
        """No program of its own: its env's reset and step compile with ``torch_envs``."""
        return iter(())

    def use(self, compiled: list[Any]) -> None:
        del compiled

    @torch.inference_mode()
    def run(self, modules: PPOModules, deterministic: bool, generator: torch.Generator) -> Metrics:
        start = time.perf_counter()
        self.runs += 1
        td = self.env.reset(seed=(self.seed * 7919 + self.runs) % (2**31 - 1))
        obs = td.get("observation")
        n, device = self.env.num_envs, self.env.device
        reward_sum = torch.zeros(n, device=device)
        length = torch.zeros(n, device=device)
        active = torch.ones(n, dtype=torch.bool, device=device)
        env_metrics: dict[str, torch.Tensor] | None = None
        steps = 0
        for t in range(self.num_steps):
            loc, scale = modules.policy(obs)
            if not deterministic:
                loc = loc + scale * torch.randn(loc.shape, generator=generator, device=device)
            nxt = self.env.step(modules.policy.postprocess(loc)).get("next")
            done = nxt.get("done").squeeze(-1)
            # where, not a product: a finished episode's env keeps stepping, and 0 * NaN is NaN
            reward_sum += torch.where(active, nxt.get("reward").squeeze(-1), 0.0)
            length += active * float(self.action_repeat)
            env_metrics = self._track_env_metrics(env_metrics, active, done)
            active &= ~done
            obs = nxt.get("observation")
            steps = t + 1
            if steps % 16 == 0 and not bool(active.any()):
                break
        if env_metrics is not None:  # episodes still running: their totals so far
            info = self.env.episode_info(copy=False).get("episode_metrics")
            for name in env_metrics:
                env_metrics[name] = torch.where(active, info.get(name), env_metrics[name])
        moments = lambda x: (float(x.mean()), float(x.std(correction=0)))
        metrics: Metrics = {}
        for name, value in {"reward": reward_sum, **(env_metrics or {})}.items():
            metrics[f"eval/episode_{name}"], metrics[f"eval/episode_{name}_std"] = moments(value)
        metrics["eval/avg_episode_length"], metrics["eval/std_episode_length"] = moments(length.float())
        elapsed = time.perf_counter() - start
        self.walltime += elapsed
        metrics["eval/walltime"] = self.walltime
        metrics["eval/epoch_eval_time"] = elapsed
        metrics["eval/sps"] = steps * n * self.action_repeat / max(elapsed, 1e-9)
        return metrics

    def _track_env_metrics(
        self, totals: dict[str, torch.Tensor] | None, active: torch.Tensor, done: torch.Tensor
    ) -> dict[str, torch.Tensor] | None:
        """Env metrics summed over each episode (the wrappers' running totals, frozen at the first done)."""
        if self.metric_names is not None and not self.metric_names:
            return None  # the env reports no metrics of its own: skip reading the episode bookkeeping
        info = self.env.episode_info(copy=False).get("episode_metrics")
        if self.metric_names is None:
            self.metric_names = [k for k in info.keys() if k not in ("sum_reward", "length")]
            if not self.metric_names:
                return None
        if totals is None:
            totals = {k: torch.zeros(self.env.num_envs, device=self.env.device) for k in self.metric_names}
        ended = active & done
        return {k: torch.where(ended, info.get(k), totals[k]) for k in self.metric_names}
