"""TorchRL adapter (optional extra ``torchrl``): ``BraxBridgeEnv``, an ``EnvBase`` over ``TorchEnv``.

The bridge resets finished episodes inside its jitted step, which TorchRL calls an auto-resetting env. TorchRL
expects such envs to be built with ``auto_reset=True``: it then wraps them in ``AutoResetEnv`` with an
``AutoResetTransform`` that caches the new episode's first observation for the collector's partial reset.
``BraxBridgeEnv(...)`` passes ``auto_reset=True`` by default, so what it returns is that ``AutoResetEnv`` (with
the ``BraxBridgeEnv`` as its ``base_env``). ``auto_reset_replace`` defaults to ``False``: the
``("next", "observation")`` of a finished episode keeps the new episode's first observation instead of NaN,
and ``("next", "final_observation")`` always holds the observation the transition actually reached (use it to
bootstrap values of truncated episodes). Pass ``auto_reset_replace=True`` for TorchRL's NaN filling.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from brax_bridge.env import TensorSpec, TorchEnv, as_torch_env


class _AutoResetByDefault(type(EnvBase)):
    """Declares native auto-reset the way TorchRL's metaclass reads it, unless the caller says otherwise."""

    def __call__(cls, *args: Any, **kwargs: Any):
        kwargs.setdefault("auto_reset", True)
        kwargs.setdefault("auto_reset_replace", False)
        return super().__call__(*args, **kwargs)


def _unbounded(spec: TensorSpec, device: torch.device) -> Unbounded:
    return Unbounded(shape=torch.Size(spec.shape), dtype=spec.dtype, device=device)


def _observation_spec(obs: TensorSpec | dict[str, TensorSpec], batch: torch.Size, device: torch.device):
    if isinstance(obs, dict):
        return Composite({k: _unbounded(v, device) for k, v in obs.items()}, shape=batch, device=device)
    return _unbounded(obs, device)


class BraxBridgeEnv(EnvBase, metaclass=_AutoResetByDefault):
    """A TorchRL environment stepping brax_core physics through ``TorchEnv`` (batch size ``[num_envs]``).

    Args:
      env: an environment name, a brax_core ``Env``, or an existing ``TorchEnv`` (then ``num_envs`` and the
        keyword arguments must be left out).
      num_envs: number of parallel environments.
      **kwargs: ``TorchEnv`` arguments (``episode_length``, ``device``, ``seed``, ...), plus TorchRL's
        ``auto_reset``/``auto_reset_replace``/``spec_locked`` handled by its metaclass.

    Keys: ``observation`` (nested for dict observations), ``action``, and under ``next``: ``observation``,
    ``final_observation``, ``reward``, ``done``, ``terminated``, ``truncated``.
    """

    def __init__(self, env: str | Any, num_envs: int | None = None, **kwargs: Any):
        bridge = as_torch_env(env, num_envs, **kwargs)
        super().__init__(device=bridge.device, batch_size=bridge.batch_size)
        self._bridge = bridge
        self._pending_seed: int | None = None
        specs, batch, device = bridge.specs, bridge.batch_size, bridge.device
        obs = _observation_spec(specs.observation, batch, device)
        self.observation_spec = Composite(observation=obs, final_observation=obs.clone(), shape=batch, device=device)
        self.action_spec = Bounded(
            low=specs.action.low.expand(specs.action.shape).clone(),
            high=specs.action.high.expand(specs.action.shape).clone(),
            shape=torch.Size(specs.action.shape),
            dtype=torch.float32,
            device=device,
        )
        self.reward_spec = _unbounded(specs.reward, device)
        flag = lambda: Categorical(n=2, shape=torch.Size((*batch, 1)), dtype=torch.bool, device=device)
        self.done_spec = Composite(done=flag(), terminated=flag(), truncated=flag(), shape=batch, device=device)

    @property
    def bridge(self) -> TorchEnv:
        """The ``TorchEnv`` underneath (its ``state``, ``physics`` and JAX env)."""
        return self._bridge

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        # Partial resets never reach here: AutoResetEnv serves them from the observation the bridge already
        # produced when the episode ended. This is a full reset of every env.
        seed, self._pending_seed = self._pending_seed, None
        td = self._bridge.reset(seed=seed)
        td.set("final_observation", td.get("observation").clone())
        return td

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._bridge.step(tensordict.get("action"))["next"]

    def _set_seed(self, seed: int | None) -> None:
        self._pending_seed = None if seed is None else int(seed)
