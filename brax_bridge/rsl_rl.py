"""RSL-RL adapter (optional extra ``rsl-rl``): ``RslRlVecEnv``, rsl-rl-lib 5.x's ``VecEnv`` over ``TorchEnv``.

RSL-RL trains on torch tensors on the env's device, so this adapter only renames: observations become a TensorDict
of observation groups, rewards and dones lose their trailing dimension, and the time limit is reported as
``extras["time_outs"]`` for RSL-RL's value bootstrap. Finished envs are reset in the same step (the returned
observation is the new episode's first), as RSL-RL expects.

Observation groups: an array observation is the group ``"policy"``. A dict observation keeps its keys as group
names, except Brax's asymmetric actor-critic names: ``"state"`` becomes ``"policy"`` and ``"privileged_state"``
becomes ``"critic"`` (RSL-RL's defaults for the actor and critic sets).
"""

from __future__ import annotations

from typing import Any

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict, TensorDictBase

from brax_bridge.env import TorchEnv, as_torch_env

_GROUP_NAMES = {"state": "policy", "privileged_state": "critic"}


class RslRlVecEnv(VecEnv):
    """``num_envs`` brax_core environments as an RSL-RL ``VecEnv`` (reset on construction).

    Args:
      env: an environment name, a brax_core ``Env``, or an existing ``TorchEnv`` (then ``num_envs`` must match
        it and no ``TorchEnv`` arguments may be given).
      num_envs: number of parallel environments.
      cfg: what RSL-RL's logger stores as the env configuration (default: a dict describing this env).
      **kwargs: ``TorchEnv`` arguments (``episode_length``, ``action_repeat``, ``seed``, ``device``, ...).

    ``max_episode_length``, ``episode_length_buf`` and the logged ``Episode/length`` count ``step`` calls.
    Assigning ``episode_length_buf`` (as ``OnPolicyRunner.learn(init_at_random_ep_len=True)`` does) moves each
    env's time limit accordingly; writing into the returned tensor in place does not.
    """

    def __init__(self, env: str | Any, num_envs: int | None = None, *, cfg: dict | object | None = None,
                 **kwargs: Any):
        bridge = as_torch_env(env, num_envs, **kwargs)
        if bridge.differentiable:
            raise ValueError("differentiable must be False: RSL-RL collects rollouts under torch.inference_mode")
        self._bridge = bridge
        self.num_envs = bridge.num_envs
        self.num_actions = bridge.action_size
        repeat = bridge.action_repeat
        self.max_episode_length = -(-bridge.episode_length // repeat)  # step calls until the time limit
        self.device = bridge.device
        self.cfg = cfg if cfg is not None else {
            "env": type(bridge.unwrapped_env).__name__,
            "num_envs": bridge.num_envs,
            "episode_length": bridge.episode_length,
            "action_repeat": repeat,
        }
        self._length = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self._obs = self._groups(bridge.reset().get("observation"))

    @property
    def bridge(self) -> TorchEnv:
        """The ``TorchEnv`` underneath."""
        return self._bridge

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Step calls each env's current episode has run."""
        return self._length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != (self.num_envs,):
            raise ValueError(f"episode_length_buf must be a tensor of shape ({self.num_envs},); got {value!r}")
        length = value.to(device=self.device, dtype=torch.long)
        # in [0, max_episode_length): a count at the limit would have ended the episode already
        length = length.clamp(0, self.max_episode_length - 1)
        steps = (length * self._bridge.action_repeat).clamp(max=self._bridge.episode_length - 1)
        self._bridge.set_episode_steps(steps)
        self._length = length.clone()

    def get_observations(self) -> TensorDict:
        return self._obs

    def reset(self) -> TensorDict:
        """Starts a new episode in every env; returns the observation groups."""
        self._obs = self._groups(self._bridge.reset().get("observation"))
        self._length = torch.zeros_like(self._length)
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        expected = (self.num_envs, self.num_actions)
        if not isinstance(actions, torch.Tensor) or tuple(actions.shape) != expected:
            got = tuple(actions.shape) if isinstance(actions, torch.Tensor) else type(actions).__name__
            raise ValueError(f"actions must be a torch.Tensor of shape {expected} (num_envs, num_actions); got {got}")
        td = self._bridge.step(actions.to(dtype=torch.float32))["next"]
        done = td.get("done").squeeze(-1)
        self._length = torch.where(done, 0, self._length + 1)
        self._obs = self._groups(td.get("observation"))
        extras: dict[str, Any] = {"time_outs": td.get("truncated").squeeze(-1)}
        # OnPolicyRunner's logger reads the done flags on the host every step anyway, so asking here costs nothing
        # extra; the episode totals are logged only from envs that finished.
        if bool(done.any()):
            totals = self._bridge.episode_info(copy=False).get("episode_metrics")
            extras["log"] = {f"Episode/{k}": totals.get(k)[done] for k in totals.keys()}
            # like max_episode_length and episode_length_buf, in step calls (the bridge counts env steps)
            extras["log"]["Episode/length"] = torch.ceil(extras["log"]["Episode/length"] / self._bridge.action_repeat)
        return self._obs, td.get("reward").squeeze(-1), done.long(), extras

    def _groups(self, obs: torch.Tensor | TensorDictBase) -> TensorDict:
        if isinstance(obs, TensorDictBase):
            groups = {_GROUP_NAMES.get(k, k): obs.get(k) for k in obs.keys()}
        else:
            groups = {"policy": obs}
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def __repr__(self) -> str:
        return f"brax_bridge.rsl_rl.RslRlVecEnv({self._bridge!r})"
