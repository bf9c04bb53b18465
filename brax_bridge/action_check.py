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
"""

from __future__ import annotations

import torch


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


def _listed(values: list[int]) -> str:
    return f"{values[:10]}{'...' if len(values) > 10 else ''}"
