"""Stable-Baselines3 adapter (optional extra ``sb3``): ``VecEnv``, SB3's ``VecEnv`` over ``TorchEnv``.

SB3's vector envs reset a finished episode in the same step: the returned observation is the new episode's
first, the one the episode reached is ``infos[i]["terminal_observation"]``, and ``infos[i]["TimeLimit.truncated"]``
says whether the time limit (not the task) ended it, so that SB3's algorithms bootstrap truncated episodes.
Finished envs also get ``infos[i]["episode"] = {"r": return, "l": length, "t": seconds}`` as SB3's ``Monitor``
writes it (``t``: seconds since the env was built), so ``rollout/ep_rew_mean`` is logged without another wrapper.

All envs are one batched JAX program, not ``num_envs`` Python objects: ``get_attr`` reads the ``TorchEnv``'s
attribute (the same for every index) unless ``set_attr`` stored a value for that index, ``set_attr`` only stores
(it never changes the simulation), and ``env_method`` calls the ``TorchEnv``'s method once and reports its result
for each index. Arrays are NumPy views of the bridge's per-step buffers (no copy; later steps leave them alone).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common import vec_env
from stable_baselines3.common.monitor import Monitor

from brax_bridge.env import TorchEnv, as_torch_env
from brax_bridge.gymnasium import action_tensor, observation_space


def _numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.numpy() if value.device.type == "cpu" else value.cpu().numpy()
    return {k: _numpy(value.get(k)) for k in value.keys()}  # dict observations: a TensorDict


class VecEnv(vec_env.VecEnv):
    """``num_envs`` brax_core environments as one Stable-Baselines3 ``VecEnv``.

    Args:
      env: an environment name, a brax_core ``Env``, or an existing ``TorchEnv`` (then ``num_envs`` must match
        it and no ``TorchEnv`` arguments may be given).
      num_envs: number of parallel environments.
      **kwargs: ``TorchEnv`` arguments (``episode_length``, ``action_repeat``, ``seed``, ``device``, ...).

    Actions: ``(num_envs, action_size)`` floats in ``[-1, 1]``. ``seed(s)`` seeds the whole batch at the next
    ``reset`` (the envs draw distinct starts from that one seed).
    """

    render_mode: str | None = None

    def __init__(self, env: str | Any, num_envs: int | None = None, **kwargs: Any):
        bridge = as_torch_env(env, num_envs, **kwargs)
        if bridge.differentiable:
            raise ValueError("differentiable must be False: SB3's API returns arrays, not a torch graph")
        self._bridge = bridge
        self._stored: list[dict[str, Any]] = [{} for _ in range(bridge.num_envs)]
        self._actions: torch.Tensor | None = None
        self._pending_seed: int | None = None
        self._t_start = time.time()
        self.closed = False
        action_space = spaces.Box(-1.0, 1.0, (bridge.action_size,), np.float32)
        super().__init__(bridge.num_envs, observation_space(bridge.observation_size), action_space)

    @property
    def bridge(self) -> TorchEnv:
        """The ``TorchEnv`` underneath."""
        return self._bridge

    def reset(self) -> Any:
        """Resets every env (with the seed given to ``seed`` since the last reset, if any); returns observations."""
        seed, self._pending_seed = self._pending_seed, None
        td = self._bridge.reset(seed=seed)
        self._actions = None
        self._reset_seeds()
        self._reset_options()
        return _numpy(td.get("observation"))

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = action_tensor(actions, self.num_envs, self._bridge.action_size, self._bridge.device)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._actions is None:
            raise RuntimeError("step_wait() needs actions: call step_async(actions) first (or step(actions))")
        actions, self._actions = self._actions, None
        td = self._bridge.step(actions)["next"]
        obs = _numpy(td.get("observation"))
        rewards = _numpy(td.get("reward").squeeze(-1))
        dones = _numpy(td.get("done").squeeze(-1))
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        ended = np.flatnonzero(dones)
        if ended.size:
            # SB3 wants per-env Python dicts, so this part is host-side by its API; it runs only when an episode ends
            final = _numpy(td.get("final_observation"))
            truncated = _numpy(td.get("truncated").squeeze(-1))
            totals = self._bridge.episode_info(copy=False)["episode_metrics"]
            returns, lengths = _numpy(totals.get("sum_reward")), _numpy(totals.get("length"))
            seconds = round(time.time() - self._t_start, 6)
            repeat = self._bridge.action_repeat  # Monitor counts step calls; the bridge's totals count env steps
            for i in ended:
                reached = {k: v[i] for k, v in final.items()} if isinstance(final, dict) else final[i]
                infos[i] = {
                    "terminal_observation": reached,
                    "TimeLimit.truncated": bool(truncated[i]),
                    "episode": {"r": float(returns[i]), "l": -(-int(lengths[i]) // repeat), "t": seconds},
                }
        return obs, rewards, dones, infos

    def close(self) -> None:
        self.closed = True

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.int32).max))
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        self._pending_seed = int(seed)
        return [self._pending_seed] * self.num_envs

    def _indices(self, indices: Any) -> list[int]:
        chosen = list(self._get_indices(indices))
        bad = [i for i in chosen if isinstance(i, bool) or not isinstance(i, int | np.integer)
               or not 0 <= i < self.num_envs]
        if bad:
            raise ValueError(f"indices must be None, an int or ints in [0, {self.num_envs}); got {bad}")
        return [int(i) for i in chosen]

    def get_attr(self, attr_name: str, indices: None | int | Iterable[int] = None) -> list[Any]:
        chosen = self._indices(indices)
        if attr_name == "render_mode":
            return [self._stored[i].get(attr_name, None) for i in chosen]
        missing = object()
        shared = getattr(self._bridge, attr_name, missing)
        if shared is missing and any(attr_name not in self._stored[i] for i in chosen):
            raise AttributeError(f"the environments have no attribute {attr_name!r} (neither TorchEnv nor set_attr)")
        return [self._stored[i].get(attr_name, shared) for i in chosen]

    def set_attr(self, attr_name: str, value: Any, indices: None | int | Iterable[int] = None) -> None:
        for i in self._indices(indices):
            self._stored[i][attr_name] = value

    def env_method(
        self, method_name: str, *method_args: Any, indices: None | int | Iterable[int] = None, **method_kwargs: Any
    ) -> list[Any]:
        chosen = self._indices(indices)
        method = getattr(self._bridge, method_name, None)
        if not callable(method):
            raise AttributeError(f"TorchEnv has no method {method_name!r}")
        result = method(*method_args, **method_kwargs)
        return [result for _ in chosen]

    def env_is_wrapped(
        self, wrapper_class: type[gymnasium.Wrapper], indices: None | int | Iterable[int] = None
    ) -> list[bool]:
        # No gymnasium.Env stands behind any index (the batch is one JAX program), so no Gymnasium wrapper does
        # either; Monitor counts as present because step_wait reports finished episodes exactly as Monitor does.
        wrapped = isinstance(wrapper_class, type) and issubclass(Monitor, wrapper_class)
        return [wrapped for _ in self._indices(indices)]

    def __repr__(self) -> str:
        return f"brax_bridge.sb3.VecEnv({self._bridge!r})"
