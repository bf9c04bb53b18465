"""``TorchEnv``'s refusal of NaN or infinite actions, on every device, as a ``ValueError`` a program can catch.

On a CPU the action's values are on the host, so the check is immediate: the step raises before the physics runs.

On a GPU an immediate answer would need a host synchronisation on every step, which stalls the loop that keeps the
GPU busy, and ``torch._assert_async`` (the usual way round) fails the whole CUDA context, so that every later CUDA
call of the process fails too. Here the check never waits: each step marks on the device the envs whose action is
not finite (accumulated until reported), and copies "any marked" to pinned host memory behind a CUDA event. A later
``step`` or ``reset`` whose event has completed reads that flag; if set, it raises ``ValueError`` naming the envs,
and the CUDA context stays usable. The error arrives a few calls after the bad step (as soon as the GPU has run it;
``check()`` after ``torch.cuda.synchronize()`` is exact), and the physics of those envs has taken the non-finite
action: reset them (``env.reset(mask=...)``).

``ActionInput`` is the whole way of an action into JAX: its type, dtype, shape and device checked, then this check,
then a view of it as a JAX array (a copy, with a warning the first time, where JAX cannot view it).
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import torch

from brax_bridge import convert as _convert


class NonFiniteActionCheck:
    """The check for one env of ``num_envs`` envs on ``device`` (see the module docstring); ``step`` calls are
    counted from 1, from the env's creation."""

    def __init__(self, num_envs: int, device: torch.device, deferred: bool | None = None):
        self.deferred = device.type == "cuda" if deferred is None else deferred
        self.calls = 0
        if self.deferred:
            # Per env, the first call whose action was not finite (0: none since the last report), and the count.
            self._first_bad = torch.zeros(num_envs, dtype=torch.int64, device=device)
            self._calls = torch.zeros((), dtype=torch.int64, device=device)
            host = torch.zeros((), dtype=torch.bool)
            # Pinned, so that the copy into it does not make the host wait.
            self._any_on_host = host.pin_memory() if device.type == "cuda" else host
            self._event = torch.cuda.Event()
            self._in_flight = False  # a copy of "any marked" is on its way to the host behind _event

    def step(self, action: torch.Tensor) -> None:
        """Checks ``action`` (``[num_envs, action_size]`` on the env's device) before it is stepped."""
        self.calls += 1
        if not self.deferred:
            if not torch.isfinite(action).all():
                rows = (~torch.isfinite(action)).any(-1).nonzero().flatten().tolist()
                raise ValueError(
                    f"action contains NaN or infinity in env(s) {_listed(rows)} (TorchEnv.step call {self.calls}); "
                    "not stepping the physics with it"
                )
            return
        self.check()
        self._calls.add_(1)
        bad = ~torch.isfinite(action).all(-1) & (self._first_bad == 0)
        torch.where(bad, self._calls, self._first_bad, out=self._first_bad)
        if not self._in_flight:
            self._any_on_host.copy_((self._first_bad > 0).any(), non_blocking=True)
            self._event.record()
            self._in_flight = True

    def check(self) -> None:
        """Raises ``ValueError`` if a step's action was found not finite; on a GPU, only once the GPU has run the
        step that queued the last flag (never waiting for it)."""
        if not self.deferred or not self._in_flight or not self._event.query():
            return
        self._in_flight = False
        if bool(self._any_on_host):
            first = self._first_bad.tolist()  # the error's path: waiting for the device is fine here
            self._first_bad.zero_()
            rows = [env for env, call in enumerate(first) if call]
            calls = sorted({first[env] for env in rows})
            raise ValueError(
                f"an action passed to TorchEnv.step held NaN or infinity for env(s) {_listed(rows)}, first at step "
                f"call(s) {_listed(calls)} (calls counted from the env's creation; on a GPU the check does not wait "
                "for the device, so it reports a few calls late); the physics of those envs took that action: reset "
                "them with env.reset(mask=...) or reset every env"
            )


class ActionInput:
    """A ``TorchEnv``'s actions into JAX (see the module docstring): ``expected`` is ``(num_envs, action_size)``."""

    def __init__(self, expected: tuple[int, int], device: torch.device, finite: NonFiniteActionCheck):
        self._expected, self._device, self._finite = expected, device, finite
        self._warned_copy = False

    def to_jax(self, action: Any, stacklevel: int = 2) -> jax.Array:
        """``action`` checked and viewed as a JAX array; ``stacklevel`` places the copy warning at the caller's
        call of the env."""
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"action must be a torch.Tensor or a TensorDict with 'action'; got {type(action).__name__}")
        if action.dtype != torch.float32:
            raise TypeError(f"action has dtype {action.dtype}; expected torch.float32 (the bridge never casts)")
        if tuple(action.shape) != self._expected:
            raise ValueError(
                f"action has shape {tuple(action.shape)}; expected {self._expected} (num_envs, action_size)"
            )
        if action.device != self._device:
            raise ValueError(f"action is on {action.device}; expected {self._device} (the env's device)")
        self._finite.step(action)
        copies = _convert.copies_made()
        array = _convert.tensor_to_array(action)
        if not self._warned_copy and _convert.copies_made() != copies:  # the reason only once it copied
            self._warned_copy = True
            warnings.warn(
                f"TorchEnv.step copies this action to hand it to JAX ({_convert.why_not_shareable(action)}); an "
                "action JAX can view (contiguous and 64-byte aligned: a tensor of its own rather than a slice) steps "
                "without a copy (warned once per env; brax_bridge.stats() counts the copies)",
                stacklevel=stacklevel,
            )
        return array


def _listed(values: list[int]) -> str:
    return f"{values[:10]}{'...' if len(values) > 10 else ''}"
