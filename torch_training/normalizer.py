"""Running observation statistics, the torch twin of ``brax_core.training.acme.running_statistics``: Welford's
merge or the EMA form (``mode``), ``std_eps`` under the square root, and freezing at ``until_count``.

The state lives in buffers of one ``nn.Module`` so it moves with ``.to(device)``, is saved by ``state_dict`` and is
shared by the actor and the critic (both normalise with the same statistics, as in the JAX PPO). Dict observations
get a ``DictNormalizer``: statistics per key, like the JAX normaliser's tree of statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

STD_MIN = 1e-6
STD_MAX = 1e6
MODES = ("welford", "ema")
STAT_NAMES = ("count", "mean", "summed_variance", "std")


class RunningNormalizer(nn.Module):
    """Observation normaliser with the JAX side's update and clipping rules.

    ``count``, ``mean``, ``summed_variance`` and ``std`` mirror ``RunningStatisticsState``; ``std`` is clipped to
    ``[1e-6, 1e6]`` after every update and starts at one, so an unused normaliser is the identity. ``mode``,
    ``std_eps`` and ``until_count`` are the update rule's settings (``running_statistics.update``'s arguments of
    the same names); in ``'ema'`` mode ``summed_variance`` holds the variance itself.
    """

    def __init__(
        self,
        size: int,
        enabled: bool = True,
        max_abs_value: float | None = None,
        mode: str = "welford",
        std_eps: float = 0.0,
        until_count: int | None = None,
    ):
        super().__init__()
        self.size = int(size)
        self.enabled = bool(enabled)
        self.max_abs_value = max_abs_value
        self.set_update_rule(mode, std_eps, until_count)
        # float64 count: exact for any realistic number of samples (float32 stops counting at 2**24).
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(self.size))
        self.register_buffer("summed_variance", torch.zeros(self.size))
        self.register_buffer("std", torch.ones(self.size))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return observation
        normalized = (observation - self.mean) / self.std
        if self.max_abs_value is not None:
            normalized = normalized.clamp(-self.max_abs_value, self.max_abs_value)
        return normalized

    def set_update_rule(self, mode: str = "welford", std_eps: float = 0.0, until_count: int | None = None) -> None:
        """How ``update`` merges batches (see the module docstring); the statistics themselves are kept."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.std_eps = float(std_eps)
        self.until_count = until_count

    @torch.no_grad()
    def update(self, batch: torch.Tensor, process_group: dist.ProcessGroup | None = None) -> None:
        """Folds ``batch`` (any leading dims, last dim = size) into the statistics.

        With ``process_group`` the batch is the union over all ranks (two all-reduces), so every rank ends with the
        same statistics, like the JAX side's device-synchronised update.
        """
        if not self.enabled:
            return
        flat = batch.reshape(-1, self.size).to(self.mean.dtype)
        # A fill on the device, not a host-to-device copy of a Python number (which synchronises on CUDA).
        batch_count = torch.full((), float(flat.shape[0]), dtype=torch.float64, device=flat.device)
        centre = self.mean if self.mode == "welford" else torch.zeros_like(self.mean)
        batch_sum_diff = (flat - centre).sum(0)
        if process_group is not None:
            packed = torch.cat([batch_count.to(flat.dtype).reshape(1), batch_sum_diff])
            dist.all_reduce(packed, group=process_group)
            batch_count = packed[0].to(torch.float64).round()
            batch_sum_diff = packed[1:]
        count = self.count + batch_count
        if self.mode == "welford":
            mean = self.mean + batch_sum_diff / count.to(flat.dtype)
            variance_update = ((flat - self.mean) * (flat - mean)).sum(0)
            if process_group is not None:
                dist.all_reduce(variance_update, group=process_group)
            # Rounding can leave a tiny negative total where a feature is constant (clamped as on the JAX side).
            summed_variance = torch.clamp(self.summed_variance + variance_update, min=0.0)
            per_sample = summed_variance / count.to(flat.dtype)
        else:
            n = batch_count.to(flat.dtype)
            batch_mean = batch_sum_diff / n
            squared = (flat - batch_mean).square().sum(0)
            if process_group is not None:
                dist.all_reduce(squared, group=process_group)
            rate = n / count.to(flat.dtype)
            delta = batch_mean - self.mean
            mean = self.mean + rate * delta
            variance = self.summed_variance + rate * (squared / n - self.summed_variance + delta * (batch_mean - mean))
            summed_variance = torch.clamp(variance, min=0.0)
            per_sample = summed_variance
        std = torch.sqrt(per_sample + self.std_eps).clamp(STD_MIN, STD_MAX)
        if self.until_count is not None:
            # A batch that takes the count past until_count is not folded in; chosen on the device, no host read.
            keep = count > self.until_count
            count = torch.where(keep, self.count, count)
            mean = torch.where(keep, self.mean, mean)
            summed_variance = torch.where(keep, self.summed_variance, summed_variance)
            std = torch.where(keep, self.std, std)
        self.count.copy_(count)
        self.mean.copy_(mean)
        self.summed_variance.copy_(summed_variance)
        self.std.copy_(std)

    def stats(self, copy: bool = True) -> dict[str, torch.Tensor]:
        """Detached copies of ``count``, ``mean``, ``summed_variance`` and ``std`` (the JAX state's fields);
        ``copy=False``: the live buffers themselves, which later updates change in place."""
        return {name: getattr(self, name).detach().clone() if copy else getattr(self, name) for name in STAT_NAMES}

    @torch.no_grad()
    def load_stats(self, stats: Mapping[str, Any]) -> None:
        """Copies statistics in the layout ``stats`` returns."""
        for name in STAT_NAMES:
            getattr(self, name).copy_(torch.as_tensor(stats[name]))


class DictNormalizer(nn.Module):
    """Running statistics per key of dict observations (one ``RunningNormalizer`` each, updated together).

    ``stats()`` has the JAX state's dict layout: one ``count`` and a dict per key for ``mean``,
    ``summed_variance`` and ``std``. ``normalizer[key]`` is the normaliser a network reading ``key`` shares.
    """

    def __init__(self, sizes: Mapping[str, int], enabled: bool = True, max_abs_value: float | None = None):
        super().__init__()
        if not sizes:
            raise ValueError("sizes must name at least one observation key")
        self.sizes = {str(k): int(v) for k, v in sizes.items()}
        self.enabled = bool(enabled)
        self.per_key = nn.ModuleDict(
            {k: RunningNormalizer(v, enabled=enabled, max_abs_value=max_abs_value) for k, v in self.sizes.items()}
        )

    def set_update_rule(self, mode: str = "welford", std_eps: float = 0.0, until_count: int | None = None) -> None:
        """Every key's update rule (``RunningNormalizer.set_update_rule``)."""
        for norm in self.per_key.values():
            norm.set_update_rule(mode, std_eps, until_count)

    def __getitem__(self, key: str) -> RunningNormalizer:
        if key not in self.per_key:
            raise KeyError(f"observation key {key!r} is not among the observation keys {sorted(self.per_key)}")
        return self.per_key[key]

    def forward(self, observation: Any) -> dict[str, torch.Tensor]:
        return {k: norm(observation[k]) for k, norm in self.per_key.items()}

    @torch.no_grad()
    def update(self, batch: Any, process_group: dist.ProcessGroup | None = None) -> None:
        """Folds each key of ``batch`` (a TensorDict or mapping of ``[..., size]`` tensors) into its statistics."""
        for key, norm in self.per_key.items():
            norm.update(batch[key], process_group)

    def stats(self, copy: bool = True) -> dict[str, Any]:
        per_key = {k: norm.stats(copy) for k, norm in self.per_key.items()}
        out: dict[str, Any] = {"count": next(iter(per_key.values()))["count"]}
        for name in STAT_NAMES[1:]:
            out[name] = {k: stats[name] for k, stats in per_key.items()}
        return out

    @torch.no_grad()
    def load_stats(self, stats: Mapping[str, Any]) -> None:
        for key, norm in self.per_key.items():
            norm.load_stats({"count": stats["count"], **{n: stats[n][key] for n in STAT_NAMES[1:]}})
