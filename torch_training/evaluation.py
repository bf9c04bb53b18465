"""Evaluation on the bridge, for every torch trainer: Brax's ``eval/*`` metrics from ``num_eval_envs`` episodes of a
torch actor driving a ``TorchEnv`` of its own, a step at a time (the episode reward and the env's own metrics, summed
until each env's first ``done``; their means and standard deviations; the episode length's; evaluation time and
steps/s)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jax
import torch

from brax_bridge import TorchEnv
from brax_core.training.run.driver import ReportedMetrics


class BridgeEvaluator:
    """Brax's ``eval/*`` metrics from ``num_eval_envs`` episodes on a separate bridge env.

    ``run(modules, deterministic, generator)`` reads ``modules.policy``: a module whose call gives the action
    distribution's ``(loc, scale)`` and whose ``postprocess`` turns a raw action into the env's (the actors of
    torch_ppo and torch_analytic). Episodes are counted from the reset until each env's first ``done``; stepping
    stops once every episode has ended (checked every 16 steps, the only host reads) or after
    ``episode_length / action_repeat`` steps.
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
    def run(self, modules: Any, deterministic: bool, generator: torch.Generator) -> ReportedMetrics:
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
        metrics: ReportedMetrics = {}
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
