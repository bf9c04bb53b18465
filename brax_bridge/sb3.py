"""Stable-Baselines3 adapter (optional extra ``sb3``): ``VecEnv``, SB3's ``VecEnv`` over ``TorchEnv``.

SB3's vector envs reset a finished episode in the same step: the returned observation is the new episode's
first, the one the episode reached is ``infos[i]["terminal_observation"]``, and ``infos[i]["TimeLimit.truncated"]``
says whether the time limit (not the task) ended it, so that SB3's algorithms bootstrap truncated episodes.
Finished envs also get ``infos[i]["episode"] = {"r": return, "l": length, "t": seconds}`` as SB3's ``Monitor``
writes it (``t``: seconds since the env was built), so ``rollout/ep_rew_mean`` is logged without another wrapper.

All envs are one batched JAX program, not ``num_envs`` Python objects; the per-env calls of SB3's ``VecEnv`` API
(``get_attr``, ``set_attr``, ``env_method``, ``env_is_wrapped``, ``seed``) still return one entry per selected
index. ``get_attr`` gives each index its own row of ``physics`` and ``state``, the ``TorchEnv``'s value of a setting
every env shares (``episode_length``, ``dt``, ...), or what ``set_attr`` stored for that index; the batch's own
attributes (``num_envs``, ``batch_size``, the specs with their batch dimension) belong to no single env and raise
``AttributeError``. ``set_attr`` only stores (it never changes the simulation, so it refuses the ``TorchEnv``'s
attribute names). ``env_method("reset", indices=...)`` resets those envs alone (``TorchEnv.reset(mask=...)``) and
gives each ``(observation, {})`` as a Gymnasium env's ``reset`` does; ``env_method("episode_info")`` gives each index
its row; any other ``TorchEnv`` method acts on the whole batch, so it runs only for every index (its result
repeated for each) and a subset of ``indices`` raises ``ValueError``. Arrays are NumPy views of the bridge's
per-step buffers (no copy; later steps leave them alone).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium
import jax
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common import vec_env
from stable_baselines3.common.monitor import Monitor
from tensordict import TensorDictBase

from brax_bridge.env import TorchEnv, as_torch_env
from brax_bridge.gymnasium import action_tensor, observation_space

# TorchEnv attributes that describe the batch as a whole: no single env has them.
_BATCH_ATTRIBUTES = ("num_envs", "batch_size", "specs", "observation_spec", "action_spec", "reward_spec", "done_spec")
# TorchEnv attributes and methods whose value is batched over the envs: each index gets its own row.
_PER_ENV_ATTRIBUTES = ("physics", "state")
_PER_ENV_METHODS = ("episode_info",)


def _row(value: Any, i: int) -> Any:
    if isinstance(value, torch.Tensor | TensorDictBase):
        return value[i]
    return jax.tree.map(lambda leaf: leaf[i], value)  # a JAX State: every leaf is batched over the envs


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
    ``reset``: the envs draw distinct starts from the one key ``s`` makes. It returns ``[s, s + 1, ...]``, the
    per-env seeds SB3's vector envs report, though no env is seeded alone.
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
        self._seeds = [self._pending_seed + i for i in range(self.num_envs)]
        return list(self._seeds)

    def _indices(self, indices: Any) -> list[int]:
        if isinstance(indices, np.integer):
            indices = int(indices)
        chosen = list(self._get_indices(indices))
        bad = [i for i in chosen if isinstance(i, bool) or not isinstance(i, int | np.integer)
               or not 0 <= i < self.num_envs]
        if bad:
            raise ValueError(f"indices must be None, an int or ints in [0, {self.num_envs}); got {bad}")
        return [int(i) for i in chosen]

    def _is_every_env(self, chosen: list[int]) -> bool:
        return set(chosen) == set(range(self.num_envs))

    def get_attr(self, attr_name: str, indices: None | int | Iterable[int] = None) -> list[Any]:
        chosen = self._indices(indices)
        if attr_name == "render_mode":
            return [self._stored[i].get(attr_name, None) for i in chosen]
        if all(attr_name in self._stored[i] for i in chosen):  # never a TorchEnv attribute: set_attr refuses those
            return [self._stored[i][attr_name] for i in chosen]
        if attr_name in _BATCH_ATTRIBUTES:
            raise AttributeError(
                f"{attr_name!r} describes the batch of {self.num_envs} envs, not one env, so get_attr has no value "
                f"of it per index; read it from the VecEnv or its TorchEnv (venv.bridge.{attr_name})"
            )
        missing = object()
        value = getattr(self._bridge, attr_name, missing)
        if value is missing:
            raise AttributeError(f"the environments have no attribute {attr_name!r} (neither TorchEnv nor set_attr)")
        if attr_name in _PER_ENV_ATTRIBUTES:
            return [_row(value, i) for i in chosen]
        return [value for _ in chosen]  # a setting every env shares

    def set_attr(self, attr_name: str, value: Any, indices: None | int | Iterable[int] = None) -> None:
        if hasattr(type(self._bridge), attr_name) or attr_name in vars(self._bridge):
            raise ValueError(
                f"set_attr cannot set {attr_name!r}: it is an attribute of the TorchEnv that steps every env as one "
                "compiled program, which set_attr never changes; give settings when building the VecEnv"
            )
        for i in self._indices(indices):
            self._stored[i][attr_name] = value

    def env_method(
        self, method_name: str, *method_args: Any, indices: None | int | Iterable[int] = None, **method_kwargs: Any
    ) -> list[Any]:
        chosen = self._indices(indices)
        method = getattr(self._bridge, method_name, None)
        if not callable(method):
            raise AttributeError(f"TorchEnv has no method {method_name!r}")
        if method_name == "reset":
            return self._reset_some(chosen, *method_args, **method_kwargs)
        if method_name in _PER_ENV_METHODS:
            result = method(*method_args, **method_kwargs)
            return [_row(result, i) for i in chosen]
        if not self._is_every_env(chosen):
            raise ValueError(
                f"env_method({method_name!r}) calls TorchEnv.{method_name}, which acts on the whole batch: it cannot "
                f"run for indices {chosen} alone; pass indices=None (every env)"
            )
        result = method(*method_args, **method_kwargs)
        return [result for _ in chosen]

    def _reset_some(self, chosen: list[int], *args: Any, **kwargs: Any) -> list[tuple[Any, dict[str, Any]]]:
        """Resets the chosen envs (all of them: a full reset); each gets ``(observation, {})``."""
        if "mask" in kwargs:
            raise ValueError("env_method('reset') takes the envs to reset from indices, not from mask=")
        mask = None
        if not self._is_every_env(chosen):
            mask = torch.zeros(self.num_envs, dtype=torch.bool)
            mask[chosen] = True
            mask = mask.to(self._bridge.device)
        obs = _numpy(self._bridge.reset(*args, mask=mask, **kwargs).get("observation"))
        return [({k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i], {}) for i in chosen]

    def env_is_wrapped(
        self, wrapper_class: type[gymnasium.Wrapper], indices: None | int | Iterable[int] = None
    ) -> list[bool]:
        # No gymnasium.Env stands behind any index (the batch is one JAX program), so no Gymnasium wrapper does
        # either; Monitor counts as present because step_wait reports finished episodes exactly as Monitor does.
        wrapped = isinstance(wrapper_class, type) and issubclass(Monitor, wrapper_class)
        return [wrapped for _ in self._indices(indices)]

    def __repr__(self) -> str:
        return f"brax_bridge.sb3.VecEnv({self._bridge!r})"
