"""The CPU stand-in for the GPU's sync check: a training call of each torch trainer (torch_ppo, the torch APG, SHAC,
the torch SAC) reads nothing back to the host (no ``.item()``, ``bool(tensor)``, ``.tolist()``, ``.cpu()``,
``.numpy()``: each would wait for the device on a GPU) and makes no implicit transfer between host and device on
JAX's side (``jax.transfer_guard("disallow")``). The metrics are read once per call, after it
(``training_metrics``). On a GPU, tests/test_gpu.py checks the same with ``torch.cuda.set_sync_debug_mode("error")``.
"""

import contextlib
import os
import traceback
from collections.abc import Iterator

import jax
import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_ppo
import torch_sac
from torch_analytic import apg, common, shac
from torch_ppo.trainer import TorchPPOBackend
from torch_sac.train import SACBackend

aten = torch.ops.aten
# What a host read of a tensor's value dispatches to.
HOST_READS = {aten._local_scalar_dense.default, aten.is_nonzero.default, aten.equal.default}


class HostRead(AssertionError):
    pass


# Reads that wait for no device in a GPU run: the bridge's check of a step's action, which reads the action on a CPU
# only (on a GPU it is deferred and never waits: brax_bridge/action_check.py), and torch.optim's Adam reading its
# step counter, which stays a CPU tensor in a GPU run (state["step"] without capturable=True).
NO_DEVICE_WAIT = (os.path.join("brax_bridge", "action_check.py"), os.path.join("torch", "optim", ""))


class _NoHostReads(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in HOST_READS and not any(part in frame.filename for frame in traceback.extract_stack()
                                          for part in NO_DEVICE_WAIT):
            raise HostRead(f"a host read inside a training call: {func}")
        return func(*args, **(kwargs or {}))


def _refuse(name: str):
    def refused(self, *args, **kwargs):
        raise HostRead(f"a host read inside a training call: Tensor.{name}")

    return refused


@contextlib.contextmanager
def no_host_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as patch:
        for name in ("cpu", "tolist", "numpy"):
            patch.setattr(torch.Tensor, name, _refuse(name))
        with _NoHostReads(), jax.transfer_guard("disallow"):
            yield


def test_the_guard_catches_each_kind_of_host_read(monkeypatch):
    for read in (lambda t: t.item(), lambda t: bool(t), lambda t: float(t), lambda t: t.tolist(), lambda t: t.cpu(),
                 lambda t: t.numpy(), lambda t: t.sum() > 0 and None):
        with no_host_reads(monkeypatch), pytest.raises(HostRead):
            read(torch.ones(1))
    with no_host_reads(monkeypatch), pytest.raises(Exception, match="[Dd]isallowed host-to-device transfer"):
        jax.jit(lambda x: x + 1)(np.ones(3, np.float32))


def _guard_training_calls(monkeypatch: pytest.MonkeyPatch, backend: type) -> list[int]:
    """Every ``train`` call of ``backend`` runs under the guard; returns the steps of each call made."""
    original = backend.train
    calls: list[int] = []

    def guarded(self, num_steps):
        with no_host_reads(monkeypatch):
            original(self, num_steps)
        calls.append(num_steps)

    monkeypatch.setattr(backend, "train", guarded)
    return calls


def test_a_torch_ppo_training_call_reads_nothing_back(monkeypatch):
    calls = _guard_training_calls(monkeypatch, TorchPPOBackend)
    torch_ppo.train("fast", num_timesteps=2 * 160, num_envs=8, batch_size=8, num_minibatches=2, unroll_length=10,
                    num_updates_per_batch=2, num_evals=2, num_eval_envs=4, episode_length=20,
                    normalize_observations=True, policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,))
    assert calls and sum(calls) >= 2


@pytest.mark.parametrize("module", [apg, shac])
def test_a_gradient_trainers_epoch_reads_nothing_back(monkeypatch, module):
    calls = _guard_training_calls(monkeypatch, common.AnalyticBackend)
    module.train("fast", episode_length=20, policy_updates=4, horizon_length=4, num_envs=4, num_evals=2,
                 num_eval_envs=4)
    assert calls == [4]


def test_a_torch_sac_epoch_reads_nothing_back(monkeypatch):
    calls = _guard_training_calls(monkeypatch, SACBackend)
    torch_sac.train("fast", num_timesteps=512, episode_length=20, num_envs=8, batch_size=16, grad_updates_per_step=2,
                    min_replay_size=64, num_evals=3, num_eval_envs=4, normalize_observations=True,
                    hidden_layer_sizes=(8,))
    assert len(calls) == 2 and sum(calls) == (512 - 64) // 8
