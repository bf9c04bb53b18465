"""torch_ppo's training step: ``collect`` a batch of unrolls, then ``PPOUpdate`` on it (normaliser, then SGD).

``collect`` steps every env ``num_unrolls * unroll_length`` times under ``torch.inference_mode`` into one TensorDict
``[rows, unroll_length]`` with TorchRL's keys. ``PPOUpdate`` reads it as a ``Batch`` of named tensors and takes
``num_updates_per_batch`` passes over it, each a shuffle and one Adam step per minibatch of ``batch_size`` rows. The
update is one function of fixed-shape tensors: the networks, Adam's state and the metric sums change in place, and
nothing is read back to the host or branched on (so the whole update can be captured in one CUDA graph).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from brax_core.training.agents.ppo import adaptive_kl
from brax_core.training.agents.ppo.config import PPOConfig
from torch_ppo.distributed import DistributedContext
from torch_ppo.losses import Batch, LossConfig, LossTerms, ppo_loss
from torch_ppo.networks import PPOModules
from torch_training.gradients import global_norm, global_norm_scale

# The JAX trainer's names for the same quantities (its loss and training step); ``grad_norm`` is the gradients' global
# norm before clipping.
METRIC_NAMES = (
    "total_loss",
    "policy_loss",
    "v_loss",
    "entropy_loss",
    "approx_kl",
    "old_approx_kl",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
)
# What collection keeps of every step (the loss's inputs, the action and done); the last five under "next".
_COLLECTED_NEXT = ("final_observation", "reward", "terminated", "truncated", "done")
_COLLECTED = ("observation", "action", "raw_action", "action_log_prob", *_COLLECTED_NEXT)

# The ADAPTIVE_KL rule on tensors (no host read): ``adapt_learning_rate(lr, kl_mean, desired_kl, min_lr, max_lr)``.
adapt_learning_rate = functools.partial(
    adaptive_kl.adapted_learning_rate,
    where=torch.where,
    at_least=lambda x, bound: torch.clamp(x, min=bound),
    at_most=lambda x, bound: torch.clamp(x, max=bound),
)


class EpisodeTracker:
    """Sums of the wrappers' episode metrics over episodes that ended (tensors, no host reads per step)."""

    def __init__(self, env: Any):
        self.env = env
        self.sums: dict[str, torch.Tensor] = {}
        self.count = torch.zeros((), device=env.device)

    def update(self) -> None:
        info = self.env.episode_info(copy=False)
        done = info.get("episode_done").reshape(-1).to(torch.float32)
        for name, value in info.get("episode_metrics").items():
            total = (value.reshape(-1) * done).sum()
            self.sums[name] = self.sums[name] + total if name in self.sums else total
        self.count = self.count + done.sum()

    def add(self, sums: dict[str, torch.Tensor]) -> None:
        """Adds sums collected elsewhere (``FusedCollection``: per metric, and the episode ``count``)."""
        self.count = self.count + sums["count"]
        for name, total in sums.items():
            if name != "count":
                self.sums[name] = self.sums[name] + total if name in self.sums else total

    def totals(self) -> dict[str, torch.Tensor]:
        """Sums per metric and the episode ``count`` since the last call (tensors); starts a new interval."""
        out = {**self.sums, "count": self.count}
        self.sums, self.count = {}, torch.zeros((), device=self.env.device)
        return out


@torch.inference_mode()
def collect(
    env: Any,
    modules: PPOModules,
    sampler: Any,
    observation: Any,
    *,
    num_unrolls: int,
    unroll_length: int,
    keep_distribution: bool,
    tracker: EpisodeTracker | None,
) -> tuple[TensorDictBase, Any]:
    """``num_unrolls`` unrolls of ``unroll_length`` steps of every env of ``env`` from ``observation``, with the
    policy's samples drawn by ``sampler``: ``(TensorDict [num_unrolls * envs, unroll_length], the last observation)``.
    ``keep_distribution`` also keeps the policy's ``loc`` and ``scale``; ``tracker`` sums the episodes that end.

    Plain tensors per step, stacked once per unroll: per-step TensorDict plumbing (the actor's modules, select,
    stacking TensorDicts) cost more than the policy itself at these sizes.
    """
    policy = modules.policy
    columns: dict[str, list[Any]] = {}
    for _ in range(num_unrolls):
        steps: dict[str, list[Any]] = {name: [] for name in _COLLECTED}
        if keep_distribution:
            steps["loc"], steps["scale"] = [], []
        for _ in range(unroll_length):
            loc, scale = policy(observation)
            action, raw_action, log_prob = sampler.sample(loc, scale)
            nxt = env.step(action).get("next")
            for name, value in (
                ("observation", observation),
                ("action", action),
                ("raw_action", raw_action),
                ("action_log_prob", log_prob),
                *((name, nxt.get(name)) for name in _COLLECTED_NEXT),
            ):
                steps[name].append(value)
            if keep_distribution:
                steps["loc"].append(loc)
                steps["scale"].append(scale)
            if tracker is not None:
                tracker.update()
            observation = nxt.get("observation")
        for name, values in steps.items():
            columns.setdefault(name, []).append(torch.stack(values, dim=1))
    data = {name: parts[0] if len(parts) == 1 else torch.cat(parts, dim=0) for name, parts in columns.items()}
    data["next"] = {name: data.pop(name) for name in _COLLECTED_NEXT}
    return TensorDict(data, batch_size=[num_unrolls * env.num_envs, unroll_length], device=env.device), observation


class LossModule(nn.Module):
    """The PPO loss as a module over plain tensors, so DDP can wrap it and ``torch.func`` can call it with other
    parameters."""

    def __init__(self, modules: PPOModules, config: LossConfig):
        super().__init__()
        self.modules_ = modules
        self.config = config

    def forward(self, minibatch: Batch, entropy_noise: torch.Tensor) -> LossTerms:
        return ppo_loss(self.modules_, self.config, minibatch, entropy_noise)


def loss_config(config: PPOConfig) -> LossConfig:
    """The loss settings of the hyperparameters ``config``."""
    fields = config.flat()
    return LossConfig(**{name: fields[name] for name in LossConfig._fields})


def step_metrics(
    names: Sequence[str], terms: LossTerms, grad_norm: torch.Tensor, learning_rate: torch.Tensor | None
) -> list[torch.Tensor]:
    """One minibatch step's values of the metrics ``names``, in order."""
    extra = {"grad_norm": grad_norm, "learning_rate": learning_rate}
    return [extra[name] if name in extra else getattr(terms, name) for name in names]


class PPOUpdate:
    """The PPO update of one collected batch (this process's rows): ``update(rollout)``.

    Before SGD the critic's values of the batch are taken for the clipped value loss, and the observation
    statistics fold in the batch (after SGD instead with ``ADAPTIVE_KL``, so the behaviour distribution stays
    comparable with the current policy's, as in the JAX trainer); then ``num_updates_per_batch`` passes of minibatch
    Adam steps. Each step adds its metrics (``metric_names``) to ``metric_sums``; ``read_metrics`` takes their means.
    Under DDP the loss module averages gradients and the normaliser and ``ADAPTIVE_KL`` combine every process's
    batch.
    """

    def __init__(
        self,
        modules: PPOModules,
        loss_module: nn.Module,
        optimizer: torch.optim.Optimizer,
        config: PPOConfig,
        *,
        local_batch: int,
        generator: torch.Generator,
        dist: DistributedContext,
    ):
        self.modules, self.loss_module, self.optimizer, self.config = modules, loss_module, optimizer, config
        self.local_batch, self.generator, self.dist = local_batch, generator, dist
        self.device = generator.device
        self.adaptive_kl = config.algorithm.learning_rate_schedule == adaptive_kl.NAME
        algorithm = config.algorithm
        self.old_values = algorithm.clipping_epsilon_value is not None and not algorithm.use_distributional_critic
        self.metric_names = METRIC_NAMES + (("kl_mean", "learning_rate") if self.adaptive_kl else ())
        self.metric_sums = torch.zeros(len(self.metric_names), device=self.device)
        self.metric_count = 0  # minibatch steps since the last read (a count of the static loop, not a tensor)
        self._params = list(modules.parameters())

    def __call__(self, rollout: TensorDictBase) -> None:
        group = self.dist.group if self.dist.enabled else None
        batch = Batch.of(rollout)
        if self.old_values:
            # The critic's values before this batch's SGD, with the normaliser the actor used (one batched pass).
            with torch.no_grad():
                batch = dataclasses.replace(batch, old_value=self.modules.value(batch.observation).squeeze(-1))
        if not self.adaptive_kl:
            self.modules.normalizer.update(batch.observation, group)
        algorithm, rows = self.config.algorithm, batch.reward.shape[0]
        minibatches = algorithm.num_minibatches
        minibatch_rows = rows // minibatches
        for _ in range(algorithm.num_updates_per_batch):
            # The inputs shuffled and made time-major once per pass ([minibatch, T, rows, ...]); a minibatch is then
            # one view of each input (indexing or transposing per minibatch cost more).
            order = self.minibatch_order(rows)
            shuffled = batch.map(
                lambda x, o=order: x[o].reshape(minibatches, minibatch_rows, *x.shape[1:]).transpose(1, 2)
            )
            self.sgd_pass(shuffled)
        if self.adaptive_kl:
            self.modules.normalizer.update(batch.observation, group)

    def sgd_pass(self, shuffled: Batch) -> None:
        """One pass over the batch: an Adam step on each minibatch of ``shuffled`` (``[minibatch, T, rows, ...]``) in
        turn, each with its entropy sample drawn just before it."""
        algorithm = self.config.algorithm
        for i in range(algorithm.num_minibatches):
            minibatch = shuffled.map(lambda x, i=i: x[i])
            noise = self.entropy_noise((algorithm.unroll_length, self.local_batch, self.modules.action_size))
            self.sgd_step(minibatch, noise)
            self.metric_count += 1

    def sgd_step(self, minibatch: Batch, noise: torch.Tensor) -> None:
        """One Adam step on a time-major minibatch; adds its metrics to ``metric_sums``."""
        config = self.config
        terms = self.loss_module(minibatch, noise)
        self.optimizer.zero_grad(set_to_none=True)
        terms.total_loss.backward()
        with torch.no_grad():
            grads = [p.grad for p in self._params if p.grad is not None]
            norm = global_norm(grads)
            if config.algorithm.max_grad_norm is not None:
                torch._foreach_mul_(grads, global_norm_scale(norm, config.algorithm.max_grad_norm))
        learning_rate = self.adapt_learning_rate(terms.kl_mean) if self.adaptive_kl else None
        self.optimizer.step()
        with torch.no_grad():  # one stacked sum for all names: two ops per minibatch, not two per name
            self.metric_sums += torch.stack(step_metrics(self.metric_names, terms, norm, learning_rate))

    def read_metrics(self) -> dict[str, torch.Tensor]:
        """The means of the metrics over the minibatch steps since the last read (tensors); starts a new interval."""
        means = self.metric_sums / max(self.metric_count, 1)
        self.metric_sums, self.metric_count = torch.zeros_like(self.metric_sums), 0
        return dict(zip(self.metric_names, means.unbind(0), strict=True))

    # The two random draws of SGD, as methods so that a check of the data-parallel update can fix them (the same
    # minibatches and entropy samples in one process as split over several).
    def minibatch_order(self, rows: int) -> torch.Tensor:
        """The row permutation of one pass over the batch."""
        return torch.randperm(rows, generator=self.generator, device=self.device)

    def entropy_noise(self, shape: tuple[int, ...]) -> torch.Tensor:
        """The standard-normal sample of one minibatch's entropy estimate, ``[unroll_length, rows, action_size]``."""
        return torch.randn(shape, generator=self.generator, device=self.device)

    def adapt_learning_rate(self, kl_mean: torch.Tensor) -> torch.Tensor:
        """Applies the ADAPTIVE_KL rule to Adam's tensor rate in place, from the minibatch's KL averaged over
        processes; returns the new rate."""
        kl = kl_mean.detach().clone()
        if self.dist.enabled:
            torch.distributed.all_reduce(kl, group=self.dist.group)
            kl = kl / self.dist.world_size
        lr = self.optimizer.param_groups[0]["lr"]
        config = self.config
        lr.copy_(
            adapt_learning_rate(
                lr,
                kl,
                config.algorithm.desired_kl,
                config.algorithm.learning_rate_schedule_min_lr,
                config.algorithm.learning_rate_schedule_max_lr,
            )
        )
        return lr.detach().clone()
