"""TorchRL adapter (optional extra ``torchrl``): ``BraxBridgeEnv``, an ``EnvBase`` over ``TorchEnv``.

The bridge resets finished episodes inside its jitted step, which TorchRL calls an auto-resetting env. TorchRL
expects such envs to be built with ``auto_reset=True``, which wraps them in an ``AutoResetEnv``.
``BraxBridgeEnv(...)`` passes ``auto_reset=True`` by default, so what it returns is an ``AutoResetEnv`` (with
the ``BraxBridgeEnv`` as its ``base_env``). ``auto_reset_replace`` defaults to ``False``: the
``("next", "observation")`` of a finished episode keeps the new episode's first observation instead of NaN,
and ``("next", "final_observation")`` always holds the observation the transition actually reached (use it to
bootstrap values of truncated episodes). Pass ``auto_reset_replace=True`` for TorchRL's NaN filling.

Partial resets (a ``"_reset"`` mask: the collector after every episode end, ``StepCounter``'s time limit,
``max_frames_per_traj``, an explicit ``env.reset(td)``) reach the bridge, with or without ``auto_reset``: every
env the mask names starts a new episode, in the physics too. Envs whose episode the bridge ended on its last step
already run their new one and keep it; the others are reset (``TorchEnv.reset(mask=...)``).
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import AutoResetEnv, AutoResetTransform, EnvBase

from brax_bridge.env import TensorSpec, TorchEnv, as_torch_env


class _PartialResetEnv(AutoResetEnv):
    """TorchRL's ``AutoResetEnv`` whose resets always reach the bridge.

    TorchRL's own answers a ``"_reset"`` mask from the observations it cached at the last episode end, without
    calling the env: right for the envs the bridge ended itself, wrong for any other (a ``StepCounter`` time limit,
    an explicit reset), whose physics would go on with the old episode. The bridge knows which envs it ended and
    returns every env's current observation, so its reset result stands as it is.
    """

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        if tensordict is not None:
            # Only the reset signals: the caller's tensordict must not be modified (as TorchRL's own _reset does).
            tensordict = tensordict.select(*self.reset_keys, *self.state_spec.keys(True, True), strict=False)
        tensordict_reset = self.base_env._reset(tensordict, **kwargs)
        self.base_env._complete_done(self.base_env.full_done_spec, tensordict_reset)
        return tensordict_reset


class _AutoResetByDefault(type(EnvBase)):
    """Declares native auto-reset as TorchRL's metaclass does (``auto_reset=True`` by default), with
    ``_PartialResetEnv`` in place of TorchRL's ``AutoResetEnv``."""

    def __call__(cls, *args: Any, **kwargs: Any):
        auto_reset = kwargs.pop("auto_reset", True)
        replace = kwargs.pop("auto_reset_replace", False)
        if not auto_reset:
            return super().__call__(*args, **kwargs)
        # TorchRL applies these to the outermost env, after the auto-reset layer: so do we.
        policy = kwargs.pop("policy", None)
        compile_kwargs = kwargs.pop("compile", None)
        if compile_kwargs is True:
            compile_kwargs = {}
        if not (compile_kwargs is None or compile_kwargs is False or isinstance(compile_kwargs, dict)):
            raise ValueError(
                f"compile must be True, False, None or a dict of torch.compile arguments, got {compile_kwargs!r}"
            )
        env = _PartialResetEnv(super().__call__(*args, **kwargs), AutoResetTransform(replace=replace))
        if policy is not None:
            # TorchRL's own helper for its policy= argument (recurrent policies' InitTracker and primers).
            from torchrl.modules.utils.utils import _maybe_append_env_transforms_from_module

            env = _maybe_append_env_transforms_from_module(env, policy)
        if isinstance(compile_kwargs, dict):
            env = env.compile(**compile_kwargs)
        return env


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
        # With a "_reset" mask only the masked envs that the bridge did not just end start over; the observation
        # returned is every env's current one, and TorchRL keeps it for the masked envs.
        seed, self._pending_seed = self._pending_seed, None
        mask = None if tensordict is None else tensordict.get("_reset", None)
        td = self._bridge.reset(seed=seed, mask=mask)
        td.set("final_observation", td.get("observation").clone())
        return td

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._bridge.step(tensordict.get("action"))["next"]

    def _set_seed(self, seed: int | None) -> None:
        self._pending_seed = None if seed is None else int(seed)
