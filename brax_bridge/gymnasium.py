"""Gymnasium adapter (optional extra ``gymnasium``): ``VectorEnv``, a ``gymnasium.vector.VectorEnv`` over ``TorchEnv``.

One ``step`` call steps every env in one jitted JAX function; nothing is looped in Python. Both of Gymnasium's
auto-reset modes are served (``metadata["autoreset_mode"]``):

* ``"next_step"`` (Gymnasium's default): a finished episode returns its terminal observation; the following
  ``step`` ignores that env's action and returns the new episode's first observation with reward 0 and both flags
  False. Gymnasium's observation wrappers (``NormalizeObservation``, ...) require this mode.
* ``"same_step"``: a finished episode returns the new episode's first observation at once, and the observation it
  reached is in ``infos["final_obs"]`` (object array, ``None`` for envs still running) with the mask
  ``infos["_final_obs"]``; ``infos["final_info"]``/``infos["_final_info"]`` follow Gymnasium's ``SyncVectorEnv``.

Arrays are NumPy by default: zero-copy views of the bridge's CPU output tensors. Every ``step`` writes its outputs
into buffers allocated for that step alone (the bridge never reuses them), so an array returned earlier keeps its
values after later steps. Writing into a returned array changes only that array. With ``array="torch"`` the same
outputs come as torch tensors on the env's device, with no copy at all.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from tensordict import TensorDictBase

from brax_bridge import convert as _convert
from brax_bridge.env import TorchEnv, as_torch_env

_MODES = {"same_step": AutoresetMode.SAME_STEP, "next_step": AutoresetMode.NEXT_STEP}
_ARRAYS = ("numpy", "torch")



def action_tensor(actions: Any, num_envs: int, action_size: int, device: torch.device) -> torch.Tensor:
    """``actions`` (NumPy array or torch tensor, floating point, ``(num_envs, action_size)``) as float32 on ``device``.

    NumPy float32 arrays whose memory is 64-byte aligned (as XLA requires on CPU) are shared with torch and JAX, not
    copied; others are copied once into torch's memory here, and other float dtypes are cast. Anything else is refused
    with the expected shape in the message.
    """
    expected = (num_envs, action_size)
    if isinstance(actions, np.ndarray):
        if not np.issubdtype(actions.dtype, np.floating):
            raise TypeError(f"actions must be a floating-point array of shape {expected}; got dtype {actions.dtype}")
        if actions.shape != expected:
            raise ValueError(f"actions must have shape {expected} (num_envs, action_size); got {actions.shape}")
        tensor = torch.from_numpy(np.ascontiguousarray(actions, dtype=np.float32))
        if device.type == "cpu" and _convert.why_not_shareable(tensor) is not None:
            # memory JAX cannot view (not 64-byte aligned): one copy here, into torch's own (aligned) memory
            tensor = tensor.clone()
        return tensor.to(device)
    if isinstance(actions, torch.Tensor):
        if not actions.dtype.is_floating_point:
            raise TypeError(f"actions must be a floating-point tensor of shape {expected}; got {actions.dtype}")
        if tuple(actions.shape) != expected:
            raise ValueError(f"actions must have shape {expected} (num_envs, action_size); got {tuple(actions.shape)}")
        return actions.detach().to(device=device, dtype=torch.float32)
    got = type(actions).__name__
    raise TypeError(f"actions must be a numpy.ndarray or torch.Tensor of shape {expected}; got {got}")


def observation_space(size: int | dict[str, tuple[int, ...]]) -> spaces.Space:
    """Gymnasium's space for an env's ``observation_size`` (unbounded float32 Boxes; a Dict for dict observations)."""
    if isinstance(size, dict):
        return spaces.Dict({k: observation_space(tuple(v)) for k, v in size.items()})
    shape = size if isinstance(size, tuple) else (int(size),)
    return spaces.Box(-np.inf, np.inf, shape, np.float32)


class VectorEnv(gymnasium.vector.VectorEnv):
    """A Gymnasium vector env of ``num_envs`` brax_core environments stepped together in JAX.

    Args:
      env: an environment name, a brax_core ``Env``, or an existing ``TorchEnv`` (then ``num_envs`` must match
        it and no ``TorchEnv`` arguments may be given).
      num_envs: number of parallel environments.
      episode_length: as for ``TorchEnv``.
      action_repeat: as for ``TorchEnv``.
      seed: as for ``TorchEnv``.
      device: as for ``TorchEnv``.
      array: ``"numpy"`` (Gymnasium's usual arrays) or ``"torch"`` (torch tensors on ``device``).
      autoreset_mode: ``"next_step"`` (default, as Gymnasium's own vector envs) or ``"same_step"``; also accepts
        ``gymnasium.vector.AutoresetMode.NEXT_STEP``/``SAME_STEP``.
      **kwargs: further ``TorchEnv`` arguments (``randomization_fn``, ``reward_fn``, env constructor kwargs, ...).

    Actions: shape ``(num_envs, action_size)``, floating point, in ``[-1, 1]`` (NumPy array or torch tensor;
    other float dtypes are cast to float32). Rewards are float32 ``(num_envs,)``; terminations and truncations are
    bool ``(num_envs,)`` and never both True for one env.
    """

    def __init__(
        self,
        env: str | Any,
        num_envs: int | None = None,
        *,
        episode_length: int | None = None,
        action_repeat: int = 1,
        seed: int = 0,
        device: Any = None,
        array: str = "numpy",
        autoreset_mode: str | AutoresetMode = "next_step",
        **kwargs: Any,
    ):
        if array not in _ARRAYS:
            raise ValueError(f"array must be one of {_ARRAYS}, got {array!r}")
        mode = _MODES.get(autoreset_mode) if isinstance(autoreset_mode, str) else autoreset_mode
        if mode not in _MODES.values():
            raise ValueError(
                f"autoreset_mode must be one of {sorted(_MODES)} (or the matching gymnasium.vector.AutoresetMode), "
                f"got {autoreset_mode!r}"
            )
        if isinstance(env, TorchEnv) and (episode_length is not None or action_repeat != 1 or seed != 0 or device):
            raise ValueError("pass either a TorchEnv alone or an env name/Env with num_envs and TorchEnv kwargs")
        if not isinstance(env, TorchEnv):
            kwargs.update(episode_length=episode_length, action_repeat=action_repeat, seed=seed, device=device)
        bridge = as_torch_env(env, num_envs, **kwargs)
        if bridge.differentiable:
            raise ValueError("differentiable must be False: Gymnasium's API returns arrays, not a torch graph")
        self._bridge = bridge
        self._array = array
        self._mode = mode
        self.num_envs = bridge.num_envs
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.render_mode = None
        self.single_observation_space = observation_space(bridge.observation_size)
        self.single_action_space = spaces.Box(-1.0, 1.0, (bridge.action_size,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._hold: torch.Tensor | None = None  # next-step mode: envs whose episode ended on the last step

    @property
    def bridge(self) -> TorchEnv:
        """The ``TorchEnv`` underneath (its JAX state, physics views and episode bookkeeping)."""
        return self._bridge

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets every env (``seed``: one integer for the whole batch, or None to continue the env's key)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
            raise ValueError(f"seed must be one integer (it seeds the whole batch) or None, got {seed!r}")
        if options:
            raise ValueError(f"options are not supported (every env is reset); got {sorted(options)}")
        super().reset(seed=None if seed is None else int(seed))
        td = self._bridge.reset(seed=None if seed is None else int(seed))
        self._hold = torch.zeros(self.num_envs, dtype=torch.bool, device=self._bridge.device)
        return self._out(td.get("observation")), {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Steps every env once; returns ``(observations, rewards, terminations, truncations, infos)``."""
        action = self._action(actions)
        if self._mode == AutoresetMode.NEXT_STEP:
            td = self._bridge.step(action, hold=self._hold)["next"]
            # The bridge already reset finished envs; their terminal observation is the final one, and the next
            # call holds them so that it delivers the reset observation without stepping them. Passing the done
            # flags on as they are keeps the host out of the loop (no sync to ask whether any env finished).
            obs = td.get("final_observation")
            self._hold = td.get("done").squeeze(-1)
            infos: dict[str, Any] = {}
        else:
            td = self._bridge.step(action)["next"]
            obs = td.get("observation")
            infos = self._final_infos(td)
        return (
            self._out(obs),
            self._out(td.get("reward").squeeze(-1)),
            self._out(td.get("terminated").squeeze(-1)),
            self._out(td.get("truncated").squeeze(-1)),
            infos,
        )

    def _final_infos(self, td: TensorDictBase) -> dict[str, Any]:
        done = td.get("done").squeeze(-1)
        if not bool(done.any()):
            return {}
        ended = done.cpu().numpy()
        final = self._out(td.get("final_observation"))
        final_obs = np.full(self.num_envs, None, dtype=object)
        for i in np.flatnonzero(ended):
            final_obs[i] = {k: v[i] for k, v in final.items()} if isinstance(final, dict) else final[i]
        return {"final_obs": final_obs, "_final_obs": ended, "final_info": {}, "_final_info": ended.copy()}

    def _action(self, actions: Any) -> torch.Tensor:
        return action_tensor(actions, self.num_envs, self._bridge.action_size, self._bridge.device)

    def _out(self, value: Any) -> Any:
        if isinstance(value, TensorDictBase):
            return {k: self._out(value.get(k)) for k in value.keys()}
        if self._array == "torch":
            return value
        return value.numpy() if value.device.type == "cpu" else value.cpu().numpy()

    def __repr__(self) -> str:
        return f"brax_bridge.gymnasium.VectorEnv({self._bridge!r}, autoreset_mode={self._mode.value})"
