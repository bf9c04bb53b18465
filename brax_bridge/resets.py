"""``TorchEnv``'s resets and the restoring of a saved state: full and masked resets, ``state_dict``,
``load_state_dict`` and ``set_episode_steps``.

``EnvResets`` is the half of ``TorchEnv`` that starts episodes; ``TorchEnv`` subclasses it and owns the state these
methods read and replace (``_state``, ``_key``, ``_obs``, the programs it runs through ``_run``, the system fields
in ``_system``, the autograd link and the lock behind ``_exclusive``), so the class is used only through
``TorchEnv``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax.sharding import SingleDeviceSharding
from tensordict import TensorDict, TensorDictBase

from brax_bridge import convert as _convert
from brax_bridge import differentiable as _diff
from brax_bridge.convert import host_tensor, unchecked_tensordict
from brax_bridge.programs import copy_tree


class EnvResets:
    """Resets and state restoring of ``TorchEnv`` (see the module docstring)."""

    @property
    def state_shapes(self) -> Any:
        """The carried state's shapes and dtypes as the reset makes it (``jax.ShapeDtypeStruct``s on the env's
        device), known before the first reset: from the reset's trace, which its compile has made already (cheap),
        so that a program of the state (``advance``'s) can compile beside the env's own."""
        on_device = SingleDeviceSharding(self._jax_device)
        key = jax.ShapeDtypeStruct(self._key.shape, self._key.dtype, sharding=on_device)
        state = self._compiled.reset.trace(key).out_info[1]
        shape = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device, weak_type=x.weak_type)  # noqa: E731
        return jax.tree.map(shape, state)

    def reset(self, seed: int | None = None, mask: torch.Tensor | None = None) -> TensorDict:
        """Resets every env, or those ``mask`` selects; returns ``observation`` and all-False ``done``/
        ``terminated``/``truncated``.

        ``seed``: reseeds the key that this and later resets draw initial states from.

        ``mask``: optional bool tensor ``[num_envs]`` (or ``[num_envs, 1]``, TorchRL's ``_reset``) on the env's
        device. Envs where it is True start a new episode, as in a full reset: a fresh initial state drawn from the
        env's key, the step count and episode totals back to zero. The others go on untouched. An env whose
        episode ended on the last step is left alone too: its auto-reset already started the new episode, whose
        first observation it holds. The returned ``observation`` is every env's current one. It runs as one jitted
        program (compiled at its first use, without a host sync); before the first full reset it resets every env
        (there is no episode to go on with). In differentiable mode it cuts the autograd chain of every env, as
        ``set_physics`` does.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
        if mask is not None:
            mask = self._check_mask(mask)  # before the key changes: a refused call changes nothing
        self._action_check.check()
        if seed is not None:
            self._key = jax.device_put(jax.random.PRNGKey(seed), self._jax_device)
        if mask is not None and self._state is not None:
            return self._reset_masked(mask)
        if not self._compiled.lowered and self._system.args is None:
            # Reset and step compile together (side by side), through the program cache when it applies.
            self.compile()
        with self._exclusive("reset"):
            self._key, self._state, obs = self._run("reset", self._key)
            self._state_read = False
            self._obs = self._obs_to_torch(obs)
            self._link = _diff.Link()
            self._token = torch.zeros((), device=self._device)
        return self._reset_outputs()

    def _check_mask(self, mask: Any) -> torch.Tensor:
        n = self._num_envs
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) not in ((n,), (n, 1)):
            got = f"{mask.dtype} {tuple(mask.shape)}" if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ValueError(f"mask must be a torch.bool tensor of shape ({n},) or ({n}, 1), or None; got {got}")
        if mask.device != self._device:
            raise ValueError(f"mask is on {mask.device}; expected {self._device} (the env's device)")
        return mask.reshape(n).contiguous()

    def _reset_masked(self, mask: torch.Tensor) -> TensorDict:
        with self._exclusive("reset"):
            carried = self._state
            if self._state_read:
                # A State handed out by `state` keeps its buffers; the reset donates a copy of them instead.
                carried, self._state_read = copy_tree(carried), False
            self._key, self._state, obs = self._run("partial_reset", self._key, carried, _convert.tensor_to_array(mask))
            self._obs = self._obs_to_torch(obs)
            self._link = _diff.Link()
            self._token = torch.zeros((), device=self._device)
        return self._reset_outputs()

    def _reset_outputs(self) -> TensorDict:
        false = torch.zeros((self._num_envs, 1), dtype=torch.bool, device=self._device)
        return unchecked_tensordict(
            {"observation": self._obs, "done": false, "terminated": false.clone(), "truncated": false.clone()},
            self.batch_size,
            self._device,
        )

    def state_dict(self) -> dict[str, Any]:
        """A host copy of everything a later run needs to continue stepping from here.

        ``{"leaves": [...], "key": key}``: the carried JAX state as its flattened leaves (torch CPU tensors,
        so the dict saves with ``torch.save(..., weights_only=True)``-loadable content) and the PRNG key the
        next ``reset`` draws from; and ``"system.<name>"`` for each field ``set_system`` set (none when no field is
        set). The current observation is part of the state (``state.obs``).
        """
        self._require_reset()
        return {
            "leaves": [host_tensor(x) for x in jax.tree.leaves(jax.device_get(self._state))],
            "key": host_tensor(jax.device_get(self._key)),
            **self._system.state_items(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> torch.Tensor | TensorDictBase:
        """Continues from a ``state_dict`` of an env with the same configuration; returns the current observation.

        Call ``reset`` first: the reset state gives the structure the saved leaves are put back into. A saved
        state of a different structure (other env, other ``num_envs``) raises ``ValueError`` and changes nothing.
        The system becomes the one saved: the fields it records take their saved values (without gradients) and
        every other field its model's value, as after ``set_system(name=None)``. Gradients never flow across a
        restore (as across ``reset``).
        """
        self._require_reset()
        system = self._system.check_state(state)  # checked before anything changes
        leaves, treedef = jax.tree.flatten(self._state)
        stored = list(state["leaves"])
        if len(stored) != len(leaves) or any(
            tuple(a.shape) != tuple(b.shape) for a, b in zip(stored, leaves, strict=True)
        ):
            raise ValueError(
                f"the saved env state ({len(stored)} arrays) does not fit this env's state ({len(leaves)} arrays "
                "of other shapes): it was saved from another environment or num_envs"
            )
        put = lambda t: jax.device_put(jnp.array(t.cpu().numpy(), copy=True), self._jax_device)
        with self._exclusive("load_state_dict"):
            self._state = jax.tree.unflatten(treedef, [put(t) for t in stored])
            self._system.set(system, replace_all=True)
            self._state_read = False
            self._key = put(state["key"])
            # A copy, not a view: the carried state is donated to the next step and must not be shared with torch.
            self._obs = self._obs_copy(self._state.obs)
            self._link = _diff.Link()
            self._token = torch.zeros((), device=self._device)
        return self._obs

    def set_episode_steps(self, steps: torch.Tensor) -> None:
        """Sets how many env steps each env's current episode has run (what the time limit counts).

        ``steps``: integer or float tensor ``[num_envs]`` in ``[0, episode_length)``. Trainers that start episodes at
        random points of the time limit (RSL-RL's ``init_at_random_ep_len``) use it so that truncations do not
        arrive for every env at once. The physics state is untouched. For an env whose episode ended on the last
        step, the count applies to the new episode already running there.
        """
        self._require_reset()
        if not isinstance(steps, torch.Tensor) or tuple(steps.shape) != (self._num_envs,) or steps.dtype == torch.bool:
            got = f"{steps.dtype} {tuple(steps.shape)}" if isinstance(steps, torch.Tensor) else type(steps).__name__
            raise ValueError(f"steps must be a numeric tensor of shape ({self._num_envs},); got {got}")
        host = steps.detach().cpu().numpy().astype(np.float32)  # a rare call: a host round trip is fine here
        if (host < 0).any() or (host >= self._episode_length).any():
            raise ValueError(f"steps must lie in [0, {self._episode_length}) (the episode length); got {host.tolist()}")
        with self._exclusive("set_episode_steps"):
            info = dict(self._state.info)
            info["steps"] = jax.device_put(jnp.asarray(host, dtype=info["steps"].dtype), self._jax_device)
            # The auto-reset zeroes the count of envs still flagged done when the next step starts; the flag has no
            # other use by then (the outputs were delivered and the episode totals restart on episode_done).
            self._state = self._state.replace(info=info, done=jnp.zeros_like(self._state.done))
            self._state_read = False
