"""Core environment types: ``State``, ``Env``, ``PipelineEnv`` (MuJoCo MJX) and ``Wrapper``.

The API follows Brax's ``brax.envs.base`` so that code written against Brax ports by changing the
import prefix. The physics pipeline is always ``mujoco.mjx``.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from mujoco import mjx

from brax_core import _quiet, base  # noqa: F401
from brax_core.envs import reversible
from brax_core.io import image, mjcf

ObservationSize = int | Mapping[str, tuple[int, ...] | int]


@struct.dataclass
class State(base.Base):
    """Environment state for training and inference (a pytree; ``base.Base``'s array-like operations)."""

    pipeline_state: Any
    obs: jax.Array | Mapping[str, jax.Array]
    reward: jax.Array
    done: jax.Array
    metrics: dict[str, jax.Array] = struct.field(default_factory=dict)
    info: dict[str, Any] = struct.field(default_factory=dict)


def validate_action(action: Any, action_size: int, batch_shape: tuple[int, ...] | None = None) -> None:
    """Raises a clear error when ``action`` cannot be an action of this env.

    Runs at trace time on static shapes and dtypes, so a bad action fails before anything compiles.
    """
    shape = getattr(action, "shape", None)
    dtype = getattr(action, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"action must be an array of shape (..., {action_size}), got {type(action).__name__}")
    expected = (*batch_shape, action_size) if batch_shape is not None else (..., action_size)
    shape_ok = len(shape) >= 1 and shape[-1] == action_size
    if batch_shape is not None:
        shape_ok = tuple(shape) == tuple(expected)
    if not shape_ok:
        pretty = "(" + ", ".join("..." if d is Ellipsis else str(d) for d in expected) + ")"
        raise ValueError(f"action has shape {tuple(shape)}; expected shape {pretty} (action_size={action_size})")
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"action has dtype {dtype}; expected a floating dtype (float32)")


# Brax's pipeline names: scripts ported from Brax pass them; every one is simulated by MuJoCo MJX here.
BRAX_BACKENDS = ("mjx", "generalized", "positional", "spring")
_warned_backends: set[str] = set()


def _check_backend(backend: str) -> None:
    if backend not in BRAX_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BRAX_BACKENDS))}; got {backend!r}")
    if backend != "mjx" and backend not in _warned_backends:
        _warned_backends.add(backend)
        warnings.warn(
            f"backend={backend!r}: brax_core simulates every environment with MuJoCo MJX; using 'mjx'",
            stacklevel=3,
        )


class Env(abc.ABC):
    """Interface for a driven dynamical system.

    Every environment's ``step`` checks its action first (at trace time, on static shapes and dtypes): an action
    that is not an array of shape ``(action_size,)`` for one env (``(*batch, action_size)`` for a batched state)
    with a floating dtype raises a ``TypeError``/``ValueError`` naming ``action`` before any physics runs.
    Wrappers leave the check to the env they wrap (the training wrappers check batched actions themselves).
    """

    # False for wrappers: the env inside checks the action, or the wrapper does so for its batch itself.
    _checks_step_action: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is None or not cls._checks_step_action or getattr(step, "_checks_action", False):
            return

        @functools.wraps(step)
        def checked_step(self: Env, state: State, action: jax.Array) -> State:
            validate_action(action, self.action_size, tuple(jnp.shape(state.done)))
            return step(self, state, action)

        checked_step._checks_action = True
        cls.step = checked_step

    @abc.abstractmethod
    def reset(self, rng: jax.Array) -> State:
        """Resets the environment to an initial state."""

    @abc.abstractmethod
    def step(self, state: State, action: jax.Array) -> State:
        """Runs one timestep of the environment's dynamics."""

    @property
    def observation_size(self) -> ObservationSize:
        """The size of the observation vector (or a dict of shapes for dict observations).

        Found once by abstract evaluation of ``reset`` (no compile, no physics) and cached.
        """
        cached = self.__dict__.get("_observation_size_cache")
        if cached is None:
            obs = jax.eval_shape(self.reset, jax.random.PRNGKey(0)).obs
            if isinstance(obs, Mapping):
                cached = {k: tuple(v.shape) for k, v in obs.items()}
            else:
                cached = int(obs.shape[-1])
            self.__dict__["_observation_size_cache"] = cached
        return cached

    def remember_observation_size(self, batched_obs: Any) -> None:
        """Fills ``observation_size``'s cache from the abstract observations ``[envs, ...]`` of a batched reset that
        keeps observations as they are (brax_core's training wrappers), saving the trace of ``reset`` it would
        otherwise take. Wrappers are left alone: they answer for the env they wrap."""
        if isinstance(self, Wrapper) or "_observation_size_cache" in self.__dict__:
            return
        if isinstance(batched_obs, Mapping):
            self.__dict__["_observation_size_cache"] = {k: tuple(v.shape[1:]) for k, v in batched_obs.items()}
        else:
            self.__dict__["_observation_size_cache"] = int(batched_obs.shape[-1])

    @property
    @abc.abstractmethod
    def action_size(self) -> int:
        """The size of the action vector."""

    @property
    def unwrapped(self) -> Env:
        return self

    @property
    def backend(self) -> str:
        return "mjx"


class PipelineEnv(Env):
    """An environment driven by a MuJoCo MJX physics pipeline.

    Args:
      sys: the ``mjx.Model`` to simulate (see ``brax_core.io.mjcf.load``).
      backend: only ``'mjx'``; accepted for Brax compatibility.
      n_frames: physics steps per environment step.
      debug: accepted for Brax compatibility.
      mj_model: the native ``mujoco.MjModel`` behind ``sys``, used for rendering and reference physics.
    """

    def __init__(
        self,
        sys: mjx.Model,
        backend: str = "mjx",
        n_frames: int = 1,
        debug: bool = False,
        mj_model: mujoco.MjModel | None = None,
    ):
        _check_backend(backend)
        if not isinstance(n_frames, int) or n_frames < 1:
            raise ValueError(f"n_frames must be an integer >= 1, got {n_frames!r}")
        self.sys = sys
        self._backend = "mjx"
        self._n_frames = n_frames
        self._debug = debug
        if mj_model is None:
            mj_model = mjcf.native_model(sys)
        self.mj_model = mj_model

    def pipeline_init(
        self, q: jax.Array, qd: jax.Array, act: jax.Array | None = None, ctrl: jax.Array | None = None
    ) -> base.State:
        """Initialises the pipeline state at positions ``q`` and velocities ``qd``."""
        return _traced_init(self.sys, q, qd, act, ctrl, reversible.trace_key())

    def perturbed_init(
        self, rng: jax.Array, scale: float, qpos: jax.Array | None = None, qvel_noise: str = "uniform"
    ) -> base.State:
        """The pipeline state at ``qpos`` (default ``sys.qpos0``) plus noise: the usual randomised episode start.

        Positions get uniform noise in ``[-scale, scale]``; velocities get the same (``qvel_noise='uniform'``) or
        ``scale`` times a standard normal (``'normal'``), as the standard locomotion tasks do.
        """
        if qvel_noise not in ("uniform", "normal"):
            raise ValueError(f"qvel_noise must be 'uniform' or 'normal', got {qvel_noise!r}")
        rng_q, rng_qd = jax.random.split(rng)
        q0 = self.sys.qpos0 if qpos is None else qpos
        q = q0 + jax.random.uniform(rng_q, (self.sys.nq,), jnp.float32, -scale, scale)
        if qvel_noise == "uniform":
            qd = jax.random.uniform(rng_qd, (self.sys.nv,), jnp.float32, -scale, scale)
        else:
            qd = scale * jax.random.normal(rng_qd, (self.sys.nv,), jnp.float32)
        return self.pipeline_init(q, qd)

    def render(
        self, trajectory: Any, height: int = 240, width: int = 320, camera: int | str | None = None
    ) -> np.ndarray:
        """Frames ``[T, height, width, 3]`` (uint8) of a trajectory of pipeline states, drawn by MuJoCo's renderer
        as Brax's ``render`` draws them (``brax_core.io.image.render_array``; ``camera`` None: a free camera)."""
        return image.render_array(self, trajectory, height, width, -1 if camera is None else camera)

    def pipeline_step(self, pipeline_state: mjx.Data, action: jax.Array) -> mjx.Data:
        """Takes ``n_frames`` physics steps holding ``action`` as the control."""
        return _traced_step(self.sys, pipeline_state, action, self._n_frames, reversible.trace_key())

    def action_to_ctrl(self, action: jax.Array) -> jax.Array:
        """Maps an action in ``[-1, 1]`` onto the actuators' control range.

        Every environment takes actions in ``[-1, 1]`` (what a tanh policy produces, as in Brax); an env whose
        motors have another control range maps its action with this, as Brax's envs do.
        """
        ctrl_range = self.sys.actuator_ctrlrange
        low, high = ctrl_range[:, 0], ctrl_range[:, 1]
        return low + (action + 1.0) * 0.5 * (high - low)

    def kinematics(self, pipeline_state: mjx.Data, with_com: bool = False) -> mjx.Data:
        """Body and site poses for the state's ``qpos`` (``mjx.kinematics``; with ``with_com``, also the centres of
        mass of ``mjx.com_pos`` that Jacobians need).

        ``mjx.step`` leaves poses at the positions before its last integration; this recomputes them for the
        positions the step reached.
        """
        return _traced_kinematics(self.sys, pipeline_state, with_com)

    @staticmethod
    def end_if_diverged(state: State) -> State:
        """Ends the episode of a state whose simulation diverged, with finite outputs in place of NaN or inf.

        A diverged step (a pole driven round its hinge until the integrator blows up) would otherwise hand NaN
        to the trainer: one NaN reward or observation poisons the advantages, the observation normaliser and,
        in an evaluation that keeps stepping finished episodes, the episode totals. Such a step is done, with
        reward 0 and zero observations and metrics; an auto-reset replaces its physics on the next step.
        """
        diverged = ~jnp.isfinite(state.reward)
        for leaf in jax.tree.leaves(state.obs):
            diverged = diverged | ~jnp.all(jnp.isfinite(leaf))

        def zero_if_diverged(x: jax.Array) -> jax.Array:
            return jnp.where(diverged, jnp.zeros_like(x), x)

        return state.replace(
            obs=jax.tree.map(zero_if_diverged, state.obs),
            reward=zero_if_diverged(state.reward),
            done=jnp.where(diverged, jnp.ones_like(state.done), state.done),
            metrics=jax.tree.map(zero_if_diverged, state.metrics),
        )

    @contextlib.contextmanager
    def using_sys(self, sys: mjx.Model) -> Iterator[PipelineEnv]:
        """Temporarily simulates ``sys`` (e.g. a randomised model inside ``vmap``).

        The original model is always put back, so no tracer outlives the trace that made it.
        """
        original = self.sys
        self.sys = sys
        try:
            yield self
        finally:
            self.sys = original

    @property
    def dt(self) -> jax.Array:
        """The timestep of one environment step."""
        return self.sys.opt.timestep * self._n_frames

    @property
    def n_frames(self) -> int:
        return self._n_frames

    @property
    def action_size(self) -> int:
        return int(self.sys.nu)

    @property
    def backend(self) -> str:
        return self._backend


# The MuJoCo parts of reset and step, jitted with the model as an argument. Tracing MJX is slow (its body-tree
# scans run in Python), and a trainer traces the same reset and step several times
# (observation size, reset, training with auto-reset, evaluation). A jitted function is traced once per argument
# shapes and its trace reused by every later caller, under vmap (domain randomisation too: the model is an
# argument, never a captured tracer) and inside other jits; XLA inlines it, so the compiled program is unchanged.
# ``solve`` (``brax_core.envs.reversible.trace_key()``, static, so part of the trace's key) says which constraint
# solve the trace holds: a trace made for a differentiated program is never reused by an ordinary one.
@functools.partial(jax.jit, static_argnums=5, inline=True)
def _traced_init(
    sys: mjx.Model, q: jax.Array, qd: jax.Array, act: jax.Array | None, ctrl: jax.Array | None, solve: tuple[bool, bool]
) -> mjx.Data:
    data = base.from_data(mjx.make_data(sys))
    data = data.replace(qpos=q, qvel=qd)
    if act is not None:
        data = data.replace(act=act)
    if ctrl is not None:
        data = data.replace(ctrl=ctrl)
    with reversible.reversible_physics(solve[0]):
        return mjx.forward(sys, data)


@functools.partial(jax.jit, static_argnums=(3, 4), inline=True)
def _traced_step(
    sys: mjx.Model, pipeline_state: mjx.Data, action: jax.Array, n_frames: int, solve: tuple[bool, bool]
) -> mjx.Data:
    def one_frame(data: mjx.Data, _: None) -> tuple[mjx.Data, None]:
        return mjx.step(sys, data.replace(ctrl=action)), None

    with reversible.reversible_physics(solve[0]):
        return jax.lax.scan(one_frame, pipeline_state, (), n_frames)[0]


@functools.partial(jax.jit, static_argnums=2, inline=True)
def _traced_kinematics(sys: mjx.Model, pipeline_state: mjx.Data, with_com: bool) -> mjx.Data:
    data = mjx.kinematics(sys, pipeline_state)
    return mjx.com_pos(sys, data) if with_com else data


class Wrapper(Env):
    """Wraps an environment to add functionality."""

    _checks_step_action = False

    def __init__(self, env: Env):
        self.env = env

    def reset(self, rng: jax.Array) -> State:
        return self.env.reset(rng)

    def step(self, state: State, action: jax.Array) -> State:
        return self.env.step(state, action)

    @property
    def observation_size(self) -> ObservationSize:
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        return self.env.action_size

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    @property
    def backend(self) -> str:
        return self.unwrapped.backend

    def __getattr__(self, name: str) -> Any:
        if name == "__setstate__" or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)
