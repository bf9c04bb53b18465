"""``TorchEnv``: a batched brax_core environment stepped from PyTorch, with the physics state kept in JAX.

Per step, exactly one jitted JAX function runs (``state, action -> state, outputs``). The action crosses
torch -> JAX as a DLPack view, and the outputs (observation, terminal observation, reward, flags) cross back as
views of buffers that the step allocated for torch alone: the state the env carries never shares a buffer with
anything torch holds, so torch may write into returned tensors without touching the simulation, and the state
can be donated to the next step without invalidating earlier outputs.

The JAX functions that step runs, their compiled forms and the cache that shares them between envs of one
configuration are in ``brax_bridge.programs``; the constructor's checks in ``brax_bridge.arguments``; the specs in
``brax_bridge.specs``; the checks of the training wrappers in ``brax_bridge.wrapper_checks``; reading and replacing
physics fields in ``brax_bridge.physics_fields``; the model's fields (``system``, ``set_system``) and how they enter
the step in ``brax_bridge.system``; resets and restoring a saved state in ``brax_bridge.resets`` (``EnvResets``,
which ``TorchEnv`` subclasses).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import torch
from tensordict import TensorDict, TensorDictBase

from brax_bridge import convert as _convert
from brax_bridge import device_rule
from brax_bridge import differentiable as _diff
from brax_bridge import programs as _programs
from brax_bridge.action_check import ActionInput, NonFiniteActionCheck
from brax_bridge.arguments import check_arguments, resolve_env
from brax_bridge.convert import host_tensor, unchecked_tensordict
from brax_bridge.physics_fields import fields_to_tensordict, replace_field
from brax_bridge.programs import RewardFn, check_reverse_mode, copy_tree, programs_for, zeros_like_tree

# Public names of brax_bridge.env, defined with the programs.
from brax_bridge.programs import StepOutputs as StepOutputs
from brax_bridge.programs import compiler_options as compiler_options
from brax_bridge.programs import reset_compiler_options as reset_compiler_options
from brax_bridge.resets import EnvResets
from brax_bridge.specs import EnvSpecs, SpecViews, env_specs
from brax_bridge.specs import TensorSpec as TensorSpec
from brax_bridge.system import SystemValues
from brax_core import compile as compile_options
from brax_core.envs.base import Env, State


class TorchEnv(EnvResets, SpecViews):
    """A batched, auto-resetting brax_core environment with a torch (TensorDict) interface.

    Args:
      env: a registered environment name (MuJoCo Playground's tasks as ``"playground:CheetahRun"``), a brax_core
        ``Env`` or a MuJoCo Playground ``MjxEnv`` (unbatched; the bridge wraps it).
      num_envs: number of environments stepped in parallel (the TensorDict batch size).
      episode_length: time limit (truncation); None takes the env class's ``default_episode_length`` (else 1000).
        For a Playground task by name, ``config_overrides={"episode_length": n}`` sets it as well (as in
        Playground's own training); giving both with different values raises ``ValueError``.
      action_repeat: environment steps per ``step`` call.
      device: None (``brax_bridge.default_device()``: JAX's default device where torch can reach it, else the
        CPU), a torch device/string or a ``jax.Device``; torch tensors live on
        the matching device ('cpu' <-> cpu, 'cuda:i' <-> gpu:i).
      seed: seeds resets and domain randomisation.
      randomization_fn: Brax-style ``fn(sys, rng) -> (batched_sys, in_axes)``; ``rng`` is ``num_envs`` keys.
      differentiable: ``step`` becomes a ``torch.autograd.Function`` whose backward is ``jax.vjp`` of the step,
        so gradients flow from observations and rewards back to earlier actions through the physics, of every
        brax_core env (``brax_core.envs.reversible``); a step running a loop JAX cannot reverse is refused here.
      full_reset: auto-resets draw fresh random initial states (False: back to each slot's first state).
      reward_fn: optional JAX ``fn(state, action) -> reward [num_envs]`` computed inside the jitted step from
        the wrapped env's post-step ``State`` (``state.info['final_obs']`` is the observation reached). Useful
        with ``differentiable=True`` for a smooth objective when the env's reward is constant.
      wrap_env_fn: Brax's wrapper hook (the JAX trainer's argument of that name): called as
        ``wrap_env_fn(env, episode_length=, action_repeat=, randomization_fn=)`` in place of
        ``brax_core.envs.training.wrap``. What it returns must be batched and auto-resetting with brax_core's
        ``info["truncation"]`` and ``info["final_obs"]`` (checked here), as ``training.wrap`` builds, so a custom
        wrapper typically adds a layer to that. MuJoCo Playground's ``wrapper.wrap_for_brax_training`` means
        brax_core's own wrappers (they do its job on ``PlaygroundEnv``'s State), as in the JAX trainer.
      cpu_opt_level: LLVM optimisation level (0-3) of the jitted step when it runs on a CPU; None means 1. Level 0
        compiles sooner and steps slower (see ``brax_core.compile``), so it suits short runs: torch_ppo chooses it
        by the run's length (``brax_core.compile.auto_level_for_run`` with ``step_only=True``).
        ``BRAX_CORE_CPU_OPT_LEVEL``, when set, overrides it; accelerators ignore it. The reset always compiles at
        level 0 on a CPU unless that variable says otherwise.
      **env_kwargs: passed to the environment's constructor when ``env`` is a name.

    NaN or infinite actions raise ``ValueError``: on a CPU before the physics runs; on a GPU from a later ``step`` or
    ``reset`` call, once the device has run the step (the check never waits for the GPU; ``brax_bridge.action_check``
    says how), and the CUDA context stays usable. An
    action whose memory JAX cannot share (non-contiguous, or not 64-byte aligned, as a slice of a larger tensor can
    be) is copied, with a warning the first time.
    Actions must be float32 tensors of shape ``[num_envs, action_size]`` on ``device``; nothing is cast.

    ``state`` is the live JAX state. Outside differentiable mode a step donates the carried state's buffers to
    XLA; a ``State`` read through ``state`` stays readable anyway, because the first step after a read donates a
    private device copy instead (one copy of the state for that step; steps with no read in between copy nothing).

    ``physics`` returns read-only snapshots: torch copies of the physics fields, so writing into them never
    touches the simulation. To change the simulation on purpose, ``set_physics(qpos=..., qvel=...)`` replaces
    fields of the carried state, and the next ``step`` starts from them. ``system`` and ``set_system`` do the same
    for the model's fields (masses, damping, friction, ...), shared or per env, with gradients in differentiable mode.

    Not thread-safe, and checked: a call of ``step``/``reset``/``set_physics``/``set_system``/``load_state_dict``/
    ``set_episode_steps`` while another thread is inside one of them on the same env raises ``RuntimeError``
    (their donated buffers would otherwise corrupt each other). Use one ``TorchEnv`` per thread, or a lock.
    """

    def __init__(
        self,
        env: str | Env | Any,
        num_envs: int,
        episode_length: int | None = None,
        action_repeat: int = 1,
        device: Any = None,
        seed: int = 0,
        randomization_fn: Callable[..., Any] | None = None,
        differentiable: bool = False,
        full_reset: bool = True,
        reward_fn: RewardFn | None = None,
        wrap_env_fn: Callable[..., Env] | None = None,
        cpu_opt_level: int | None = None,
        **env_kwargs: Any,
    ):
        wrap_env_fn = check_arguments(
            num_envs, seed, differentiable, full_reset, randomization_fn, cpu_opt_level, reward_fn, wrap_env_fn
        )
        base, episode_length = resolve_env(env, env_kwargs, episode_length)
        self._jax_device = device_rule.jax_device(device)
        self._device = device_rule.torch_device(self._jax_device)
        self._num_envs = num_envs
        self._episode_length = episode_length
        self._action_repeat = action_repeat
        self._differentiable = differentiable
        self._cpu_opt_level = 1 if cpu_opt_level is None else cpu_opt_level
        self._compiled = programs_for(
            env, base, env_kwargs, num_envs=num_envs, episode_length=episode_length, action_repeat=action_repeat,
            device=self._jax_device, cpu_opt_level=self._cpu_opt_level, differentiable=differentiable, seed=seed,
            randomization_fn=randomization_fn, full_reset=full_reset, reward_fn=reward_fn, wrap_env_fn=wrap_env_fn,
        )
        self._action_size = int(self._compiled.env.action_size)
        self._key = jax.device_put(jax.random.PRNGKey(seed), self._jax_device)
        self._state: State | None = None
        self._state_read = False  # a State handed out by `state` must survive the next (donating) step
        self._busy = threading.Lock()
        self._obs: torch.Tensor | TensorDictBase | None = None
        self._link = _diff.Link()
        self._token = torch.zeros((), device=self._device)
        self._zero_ct = None
        self._cuts = _diff.CutCount(jax.device_put(jnp.zeros((), jnp.float32), self._jax_device))
        self._specs_made: EnvSpecs | None = None  # at first use: after a reset, without a trace of its own
        self._action_check = NonFiniteActionCheck(num_envs, self._device)
        self._actions = ActionInput((num_envs, self._action_size), self._device, self._action_check)
        self._system = SystemValues(self._compiled, num_envs, self._device, differentiable)
        if differentiable:
            check_reverse_mode(self._compiled, self._key, num_envs, self._action_size, env, self._jax_device)

    # ------------------------------------------------------------------ properties

    @property
    def num_envs(self) -> int:
        return self._num_envs

    @property
    def batch_size(self) -> torch.Size:
        return torch.Size([self._num_envs])

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def jax_device(self):
        return self._jax_device

    @property
    def observation_size(self) -> int | dict[str, tuple[int, ...]]:
        return self._compiled.env.observation_size

    @property
    def action_size(self) -> int:
        return self._action_size

    @property
    def specs(self) -> EnvSpecs:
        return self._specs

    @property
    def jax_env(self) -> Env:
        """The brax_core training env (episode time limit, vmap, auto-reset) that the jitted step runs."""
        return self._compiled.env

    @property
    def unwrapped_env(self) -> Env:
        """The unbatched brax_core env inside the training wrappers."""
        return self._compiled.base

    @property
    def episode_length(self) -> int:
        return self._episode_length

    @property
    def action_repeat(self) -> int:
        return self._action_repeat

    @property
    def differentiable(self) -> bool:
        return self._differentiable

    @property
    def gradient_cuts(self) -> torch.Tensor:
        """How many env steps' gradients the backward has cut since the env was built (a 0-d float32 tensor on the
        env's device, read without a host sync): where the physics' reverse pass gives NaN or an infinity for an
        env (MJX's solver does at some converged solves), that env's gradient is zeroed at that step, as an episode
        end cuts it (``brax_core.envs.wrappers.gradients``); every other env's is untouched."""
        return _convert.array_to_tensor(self._cuts.total)

    @property
    def cpu_opt_level(self) -> int:
        """The LLVM level the step compiles at on a CPU, unless ``BRAX_CORE_CPU_OPT_LEVEL`` sets another."""
        return self._cpu_opt_level

    @property
    def dt(self) -> float:
        return float(self._compiled.base.dt) * self._action_repeat

    @property
    def state(self) -> State:
        """The live JAX state. It stays readable after later steps (see the class note on donation)."""
        self._require_reset()
        self._state_read = True
        return self._state

    @property
    def physics(self) -> TensorDict:
        """A snapshot of the physics (pipeline) state fields as torch tensors: ``qpos``, ``qvel``, ...

        Copies, not views: writing into them changes nothing in the simulation (use ``set_physics`` for that),
        and later steps do not change them. Costs one device copy of the physics state per call.
        """
        self._require_reset()
        return fields_to_tensordict(self._state.pipeline_state, self._num_envs, self._device)

    def set_physics(self, fields: Mapping[str, torch.Tensor] | None = None, **named: torch.Tensor) -> None:
        """Replaces fields of the carried physics state; the next ``step`` starts from them.

        ``fields`` (a dict or TensorDict, e.g. an edited ``physics`` snapshot) and/or keyword arguments map
        field names of ``physics`` (``qpos=...``, nested ones as tuples of names in ``fields``) to tensors of
        that field's shape and dtype on any device; the values are copied. Fields derived from positions
        (body poses, contacts) keep their old values until the next step recomputes them from ``qpos``/``qvel``.
        Observations are not recomputed either: the next step's outputs are the first to reflect the edit.
        Gradients never flow across an edit (as across ``reset``).
        """
        self._require_reset()
        updates: dict[Any, Any] = {}
        if fields is not None:
            if not isinstance(fields, (Mapping, TensorDictBase)):
                raise TypeError(f"fields must be a dict or TensorDict of tensors or None, got {type(fields).__name__}")
            nested = isinstance(fields, TensorDictBase)
            items = fields.items(include_nested=True, leaves_only=True) if nested else fields.items()
            updates.update(items)
        updates.update(named)
        if not updates:
            raise ValueError("set_physics needs at least one field, e.g. set_physics(qpos=tensor)")
        with self._exclusive("set_physics"):
            pipeline = self._state.pipeline_state
            for name, value in updates.items():
                pipeline = replace_field(
                    pipeline, (name,) if isinstance(name, str) else tuple(name), value, self._num_envs, self._jax_device
                )
            self._state = self._state.replace(pipeline_state=pipeline)
            self._state_read = False
            self._link = _diff.Link()
            self._token = torch.zeros((), device=self._device)

    @property
    def system(self) -> TensorDict:
        """A snapshot of the model's fields that ``set_system`` takes (``brax_bridge.system.FIELDS``): masses
        ``body_mass``, inertias ``body_inertia``, centres of mass ``body_ipos``, joint damping ``dof_damping``,
        armature ``dof_armature``, joint stiffness ``jnt_stiffness``, friction ``geom_friction``, actuator gear
        ``actuator_gear`` and ``gravity`` (the model's ``opt.gravity``), as torch copies on the env's device.

        A field shared by every env has the model's shape; one set per env (by ``set_system`` or, per env,
        by ``randomization_fn``) shows ``[num_envs, *shape]``. Writing into the snapshot changes nothing.
        """
        return self._system.snapshot()

    def set_system(self, **fields: torch.Tensor | None) -> None:
        """Sets fields of the model the physics simulates (names as in ``system``) from torch tensors: domain
        randomisation driven from torch, or parameters to identify by gradient.

        Each value: a tensor of the model's shape (shared by every env) or ``[num_envs, *shape]`` (one value per
        env), of the model's dtype (``torch.float32``; nothing is cast), on the env's device; or None to return
        the field to the model's own value. Fields not named keep what they had. The values are copied (the fields
        are small): writing into the tensor later changes nothing until the next ``set_system``. What MuJoCo
        precomputes from the masses, inertias, centres of mass and armature (subtree masses, the constraints'
        inverse weights) is recomputed from them in the step (``brax_bridge.system``).

        The next ``reset`` or ``step`` runs with them, and every later one until they are set again: they persist
        across resets (auto-resets included) and ``state_dict`` records them. They enter the compiled programs as
        an argument: new values of the same fields, each shared or per env as before, compile nothing; the first
        call with a new layout compiles that layout's programs once. Under ``randomization_fn`` a field set here
        replaces the randomised values of that field in every env; the others stay randomised.

        With ``differentiable=True``, a tensor that requires grad makes every later step's outputs differentiable
        with respect to it: ``backward`` reaches it through the step's VJP, as it reaches the actions (gradients of
        an env whose reverse pass is not finite are cut, as ``gradient_cuts`` counts). Without it such a tensor is
        refused. An unknown field, a wrong type, dtype, shape or device raises before anything changes or compiles.
        """
        checked = self._system.check(fields)
        with self._exclusive("set_system"):
            self._system.set(checked)

    def episode_info(self, copy: bool = True) -> TensorDict:
        """The episode bookkeeping: ``episode_done``, ``steps``, ``episode_metrics``.

        ``copy=True`` (default): a snapshot that later steps and writes cannot touch. ``copy=False``: zero-copy
        views of the current state, for readers on the hot path (the adapters' episode logs, torch_ppo's episode
        totals) that read them before the next step and never write into them.
        """
        self._require_reset()
        info = self._state.info
        source = {k: info[k] for k in ("episode_done", "steps", "truncation") if k in info}
        source["episode_metrics"] = info.get("episode_metrics", {})
        views = _convert.jax_to_torch(source, copy=True if copy else None)  # None: a view wherever one is possible
        return TensorDict(views, batch_size=self.batch_size, device=self._device)

    @property
    def num_compiles(self) -> int:
        """Compiled variants of this configuration's step (stays 1 while stepping; each layout of ``set_system``'s
        fields adds one)."""
        name = "diff_forward" if self._differentiable else "step"
        programs = [self._compiled] + ([self._compiled.system] if self._compiled.system is not None else [])
        return sum(getattr(p, name)._cache_size() for p in programs)

    # ------------------------------------------------------------------ specs

    @property
    def _specs(self) -> EnvSpecs:
        if self._specs_made is None:
            self._specs_made = env_specs(self._num_envs, self.observation_size, self._action_size, self._device)
        return self._specs_made

    # ------------------------------------------------------------------ reset / step

    def _require_reset(self) -> None:
        if self._state is None:
            raise RuntimeError("call reset() before stepping or reading the state")

    @contextlib.contextmanager
    def _exclusive(self, what: str) -> Iterator[None]:
        # A non-blocking lock, cheap next to a step: it turns a silent race on donated buffers into an error.
        if not self._busy.acquire(blocking=False):
            raise RuntimeError(
                f"TorchEnv.{what} was called while another thread is inside step/reset/set_physics on the same "
                "TorchEnv; it is not thread-safe (each call donates the state the other one uses): give each "
                "thread its own TorchEnv, or serialise the calls with a lock"
            )
        try:
            yield
        finally:
            self._busy.release()

    def compile(self) -> None:
        """Compiles ``reset`` and ``step`` for this env now rather than at their first call, leaving the env as it
        was; ``compile_envs`` compiles several envs side by side. With a warm persistent compile cache it only
        loads the programs. In differentiable mode it compiles the step's forward pass (the backward pass compiles
        at the first ``backward``)."""
        compile_envs(self)

    def _lower(self, with_step: bool = True) -> Iterator[jax.stages.Lowered]:
        """Lowers this env's reset, then its step (``programs.lower``), yielding each when lowered."""
        return _programs.lower(
            self._compiled, self._key, self._num_envs, self._action_size, self._jax_device, self._differentiable,
            self._system.args, with_step,
        )

    def _run(self, program: str, *args: Any) -> Any:
        """Runs the compiled ``program`` (``reset``, ``step``, ``held_step``, ``partial_reset``, ``diff_forward``):
        the one taking the system fields when ``set_system`` set any."""
        if self._system.args is None:
            return getattr(self._compiled, program)(*args)
        return getattr(self._compiled.system, program)(*args, self._system.args)

    def detach(self) -> None:
        """Cuts the autograd chain at the current state (truncated backpropagation through time).

        In differentiable mode every step links to the previous one, so a long rollout keeps every step's
        residuals alive until ``reset``/``detach`` (as any torch graph would); later gradients stop here.
        """
        self._link, self._token = _diff.Link(), torch.zeros((), device=self._device)
        if self._obs is not None and self._obs.requires_grad:
            self._obs = self._obs.detach()  # the last observation would otherwise hold the whole graph

    def step(self, action: torch.Tensor | TensorDictBase, hold: torch.Tensor | None = None) -> TensorDictBase:
        """Steps every env once (TorchRL layout; see the module doc for the keys).

        Given a TensorDict, reads ``"action"`` and returns the same TensorDict with ``"next"`` filled.

        ``hold``: optional bool tensor ``[num_envs]`` on the env's device; envs where it is True are not stepped
        (their action is ignored): they keep their state, and their outputs are their current observation (also
        as ``final_observation``), reward 0 and all flags False. Gymnasium's next-step auto-reset needs this to
        deliver a reset observation one call after the episode ended. Not available in differentiable mode.
        """
        self._require_reset()
        if hold is not None:
            hold = self._check_hold(hold)
        td = None
        if isinstance(action, TensorDictBase):
            td = action
            if "action" not in td.keys():
                raise KeyError("the TensorDict passed to step() has no 'action' entry")
            action = td.get("action")
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"action must be a torch.Tensor or a TensorDict with 'action'; got {type(action).__name__}")
        with self._exclusive("step"):
            if self._differentiable and torch.is_grad_enabled() and (
                action.requires_grad or self._token.requires_grad or self._system.requires_grad()
            ):
                next_td = self._step_differentiable(action)
            else:
                if self._differentiable:
                    self.detach()
                next_td = self._step_plain(action, hold)
            prev_obs, self._obs = self._obs, next_td.get("observation")
        if td is None:
            root = {"observation": prev_obs, "action": action, "next": next_td}
            return unchecked_tensordict(root, self.batch_size, self._device)
        td.set("next", next_td)
        return td

    @property
    def step_fn(self) -> Callable[[State, jax.Array], tuple[State, StepOutputs]]:
        """The step as a traced JAX function ``(state, action) -> (state, StepOutputs)`` (the wrapped env's step and
        ``reward_fn``), for a program that steps every env many times in one call (``advance``)."""
        return self._compiled.step_fn

    def advance(self, program: Callable[..., tuple[State, Any, Any]], *args: Any) -> tuple[Any, Any]:
        """Runs ``program(state, *args) -> (state, observation, outputs)``, a jitted JAX function built on ``step_fn``
        that donates the state as ``step`` does (a whole unroll in one call), on the carried state; keeps its state and
        returns ``(observation, outputs)``: the observation as a torch view, ``outputs`` as the program returned them
        (both buffers of their own). Not for differentiable envs or ``system_fields_set``."""
        self._require_reset()
        if self._differentiable or self.system_fields_set:
            raise ValueError("advance runs step_fn alone: not with differentiable=True or fields from set_system")
        with self._exclusive("advance"):
            carried = self._state
            if self._state_read:
                carried, self._state_read = copy_tree(carried), False
            self._state, observation, outputs = program(carried, *args)
            self._obs = self._obs_to_torch(observation)
        return self._obs, outputs

    @property
    def system_fields_set(self) -> bool:
        """Whether ``set_system`` has set fields of the model (every step takes them as an argument then)."""
        return self._system.args is not None

    def _check_hold(self, hold: Any) -> torch.Tensor:
        if self._differentiable:
            raise ValueError("hold is not available with differentiable=True (a held env would cut its gradient)")
        if not isinstance(hold, torch.Tensor) or hold.dtype != torch.bool or tuple(hold.shape) != (self._num_envs,):
            got = f"{hold.dtype} {tuple(hold.shape)}" if isinstance(hold, torch.Tensor) else type(hold).__name__
            raise ValueError(f"hold must be a torch.bool tensor of shape ({self._num_envs},) or None; got {got}")
        if hold.device != self._device:
            raise ValueError(f"hold is on {hold.device}; expected {self._device} (the env's device)")
        return hold

    def _step_plain(self, action: torch.Tensor, hold: torch.Tensor | None = None) -> TensorDictBase:
        action_jax = self._action_to_jax(action.detach())  # validates before anything is donated
        carried = self._state
        if self._state_read:
            # A State handed out by `state` keeps its buffers; the step donates a copy of them instead.
            carried, self._state_read = copy_tree(carried), False
        if hold is None:
            state, out = self._run("step", carried, action_jax)
        else:
            state, out = self._run("held_step", carried, action_jax, _convert.tensor_to_array(hold.contiguous()))
        self._state = state
        t = _convert.array_to_tensor
        return unchecked_tensordict(
            {
                "observation": self._obs_to_torch(out.obs),
                "final_observation": self._obs_to_torch(out.final_obs),
                "reward": t(out.reward),
                "done": t(out.done),
                "terminated": t(out.terminated),
                "truncated": t(out.truncated),
            },
            self.batch_size,
            self._device,
        )

    def _step_differentiable(self, action: torch.Tensor) -> TensorDictBase:
        action_jax = self._action_to_jax(action.detach())  # validates before anything changes
        state, out, vjp_fn = self._run("diff_forward", self._state, action_jax)
        link_in, self._link = self._link, _diff.Link()
        self._state = state
        backward = self._compiled.diff_backward
        if self._system.args is not None:
            backward = functools.partial(self._compiled.system.diff_backward, shared=self._system.shared_names)
        record = _diff.ForwardRecord(
            out=out,
            vjp_fn=vjp_fn,
            link_in=link_in,
            link_out=self._link,
            backward_fn=backward,
            zero_state_cotangent=self._zero_state_cotangent,
            device=self._device,
            cuts=self._cuts,
            param_names=self._system.param_names,
        )
        outs = _diff.DifferentiableStep.apply(record, self._token, action, *self._system.params)
        self._token = outs[0]
        n = len(jax.tree.leaves(self.observation_size)) if isinstance(self.observation_size, Mapping) else 1
        obs, final, (reward, done, terminated, truncated) = outs[1 : 1 + n], outs[1 + n : 1 + 2 * n], outs[1 + 2 * n :]
        return unchecked_tensordict(
            {
                "observation": self._obs_tree_to_torch(list(obs)),
                "final_observation": self._obs_tree_to_torch(list(final)),
                "reward": reward,
                "done": done,
                "terminated": terminated,
                "truncated": truncated,
            },
            self.batch_size,
            self._device,
        )

    # ------------------------------------------------------------------ conversions

    def _action_to_jax(self, action: Any) -> jax.Array:
        return self._actions.to_jax(action, stacklevel=5)

    def _obs_to_torch(self, obs: Any) -> torch.Tensor | TensorDictBase:
        if isinstance(obs, Mapping):
            return unchecked_tensordict({k: self._obs_to_torch(v) for k, v in obs.items()}, self.batch_size,
                                        self._device)
        return _convert.array_to_tensor(obs)

    def _obs_copy(self, obs: Any) -> torch.Tensor | TensorDictBase:
        if isinstance(obs, Mapping):
            return unchecked_tensordict({k: self._obs_copy(v) for k, v in obs.items()}, self.batch_size, self._device)
        return host_tensor(jax.device_get(obs)).to(self._device)

    def _obs_tree_to_torch(self, leaves: list[torch.Tensor]) -> torch.Tensor | TensorDictBase:
        obs_size = self.observation_size
        if not isinstance(obs_size, Mapping):
            return leaves[0]
        return unchecked_tensordict(dict(zip(sorted(obs_size), leaves, strict=True)), self.batch_size, self._device)

    def _zero_state_cotangent(self) -> Any:
        if self._zero_ct is None:
            self._zero_ct = zeros_like_tree(_diff.float_part(self._state))
        return self._zero_ct

    def __repr__(self) -> str:
        return (
            f"TorchEnv({type(self.unwrapped_env).__name__}, num_envs={self._num_envs}, device={self._device}, "
            f"episode_length={self._episode_length}, differentiable={self._differentiable})"
        )


def compile_envs(
    *envs: TorchEnv, programs: Iterable[jax.stages.Lowered] = (), resets_only: Iterable[TorchEnv] = ()
) -> list[jax.stages.Compiled]:
    """Compiles every env's ``reset`` and ``step`` now, side by side: each is traced and lowered in turn on the
    calling thread and handed to XLA at once, which compiles it on a thread pool while the next is traced
    (``brax_core.compile.compile_side_by_side``, as the JAX trainer compiles its programs), so on a 2-core CPU a
    training env and its evaluation env compile in about the time of the slower one.

    ``programs``: more lowered programs to compile beside the envs' (torch_ppo's evaluation rollout), lowered as
    the iterable is consumed, after the envs'; their compiled forms are returned, in order. ``resets_only``: envs whose
    reset alone compiles now (the step at its first call), as where a program of ``programs`` steps the env instead.
    """
    for env in envs:
        if not isinstance(env, TorchEnv):
            raise TypeError(f"compile_envs takes TorchEnv instances, got {type(env).__name__}")
    unique, reset_only = list({id(env): env for env in envs}.values()), {id(env) for env in resets_only}
    lowered = (program for env in unique for program in env._lower(with_step=id(env) not in reset_only))
    compiled = compile_options.compile_side_by_side(itertools.chain(lowered, programs))
    return compiled[sum(1 if id(env) in reset_only else 2 for env in unique) :]  # each env's reset (and step)


def as_torch_env(env: Any, num_envs: int | None = None, **kwargs: Any) -> TorchEnv:
    """The ``TorchEnv`` a library adapter drives: ``env`` itself when it is one (then nothing else may be given),
    otherwise a new one of the registered name, brax_core ``Env`` or Playground ``MjxEnv`` with ``num_envs`` and
    ``TorchEnv``'s kwargs."""
    if isinstance(env, TorchEnv):
        if kwargs or (num_envs is not None and num_envs != env.num_envs):
            raise ValueError("pass either a TorchEnv alone or an env name/Env with num_envs and TorchEnv kwargs")
        return env
    if num_envs is None:
        raise ValueError("num_envs is required when env is a name, a brax_core Env or a Playground MjxEnv")
    return TorchEnv(env, num_envs, **kwargs)
