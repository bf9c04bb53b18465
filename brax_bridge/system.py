"""``TorchEnv``'s system: the MJX model's fields a user identifies or randomises, read as torch snapshots
(``system``) and replaced from torch tensors (``set_system``), shared by every env or one value per env.

How the fields enter the step. The fields set are an argument of their own jitted programs (reset, step, the held
step, the partial reset, the differentiable forward and backward; ``programs.SystemPrograms``), never constants
of a trace: new values recompile nothing, and each layout (which fields, each shared or per env) is traced once.
That argument is ``{"shared": {name: array}, "per_env": {name: array [num_envs, ...]}}``. While such a program is
traced, ``applying`` hands it to the ``SystemWrapper`` that ``TorchEnv`` puts innermost in the env's training
wrappers, inside their ``vmap``: there the env's reset and step run on its model with the fields replaced
(``PipelineEnv.using_sys``, as brax_core's ``DomainRandomizationVmapWrapper`` runs a randomised model). A shared
field enters as it is; a per-env field as its row at the env's index on the vmapped axis
(``brax_core.envs.reversible.ENV_AXIS``, which brax_core's batching wrappers name), which is what ``vmap``'s
``in_axes=0`` would hand each env. Taking the row inside the wrappers rather than adding an ``in_axes`` of its own
lets the fields reach the auto-reset's reset too, and lets them compose with ``randomization_fn``: the model the
wrapper finds in an env is that env's randomised one, so a field set here replaces the randomised values of that
field and leaves the other randomised fields as they are.

Derived fields. MJX reads each field of ``FIELDS`` in its step (the passive forces read ``dof_damping`` and
``jnt_stiffness``, the mass matrix ``body_mass``, ``body_inertia``, ``body_ipos`` and ``dof_armature``, the
collisions ``geom_friction``, the transmission ``actuator_gear``, the bias forces ``opt.gravity``). MuJoCo also
precomputes quantities from the mass matrix at ``qpos0`` (``mj_setConst``) that MJX reads as they are: the
subtree masses (``body_subtreemass``) and the inverse weights that scale the constraints' regularisation, that is
how soft contacts, limits and friction loss are (``body_invweight0``, ``dof_invweight0``). The step recomputes them
from the values set, as ``mj_setConst`` does (``derived``), so a heavier body gets the contact softness a model
compiled with that mass would have. Two more derive from the same fields: ``tendon_invweight0`` (read by tendon
limits and tendon friction loss) and ``actuator_acc0`` (read by muscle actuators); on a model that has either
reader, setting a field of ``INERTIAL`` (or ``actuator_gear``, for muscles) raises ``ValueError``.

Left out, and why: ``dof_frictionloss`` (MJX sizes the constraint rows from which entries are nonzero when it
traces the step), ``opt.timestep`` (``TorchEnv.dt`` and the time limit are fixed at construction), the solver
settings and the kinematic tree (``body_pos``, ``jnt_axis``: MuJoCo derives ``qpos0``-dependent quantities from
them that MJX does not recompute), and ``actuator_ctrlrange`` (the action's mapping, not the physics).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import torch
from mujoco import mjx
from tensordict import TensorDict

from brax_bridge import convert as _convert
from brax_core.envs.base import Env, PipelineEnv, State, Wrapper
from brax_core.envs.reversible import ENV_AXIS

# The fields ``set_system`` takes: name -> where the mjx.Model keeps it.
FIELDS: dict[str, tuple[str, ...]] = {
    "body_mass": ("body_mass",),
    "body_inertia": ("body_inertia",),
    "body_ipos": ("body_ipos",),
    "dof_damping": ("dof_damping",),
    "dof_armature": ("dof_armature",),
    "jnt_stiffness": ("jnt_stiffness",),
    "geom_friction": ("geom_friction",),
    "actuator_gear": ("actuator_gear",),
    "gravity": ("opt", "gravity"),
}
# What the mass matrix at qpos0 is made of: the inverse weights derive from these.
INERTIAL = frozenset({"body_mass", "body_inertia", "body_ipos", "dof_armature"})

SystemArgs = dict[str, dict[str, jax.Array]]  # {"shared": {...}, "per_env": {...}}

_TRACING = threading.local()  # (wrapper, args) while a system program is traced on this thread


@contextlib.contextmanager
def applying(wrapper: SystemWrapper, args: SystemArgs) -> Iterator[None]:
    """While this is entered, ``wrapper``'s reset and step run on the model with ``args``' fields (see the module
    doc; ``with_derived`` adds what derives from them); the jitted system programs enter it around their trace."""
    previous = getattr(_TRACING, "value", None)
    _TRACING.value = (wrapper, args)
    try:
        yield
    finally:
        _TRACING.value = previous


class SystemWrapper(Wrapper):
    """Innermost of a ``TorchEnv``'s training wrappers: while ``applying`` names it, the env's reset and step run
    on the model with the fields set; otherwise it adds nothing to a trace."""

    def reset(self, rng: jax.Array) -> State:
        with self._model():
            return self.env.reset(rng)

    def step(self, state: State, action: jax.Array) -> State:
        with self._model():
            return self.env.step(state, action)

    @contextlib.contextmanager
    def _model(self) -> Iterator[None]:
        current = getattr(_TRACING, "value", None)
        if current is None or current[0] is not self:
            yield
            return
        args = current[1]
        values = dict(args["shared"])
        if args["per_env"]:
            index = jax.lax.axis_index(ENV_AXIS)
            values.update({name: value[index] for name, value in args["per_env"].items()})
        with self.env.using_sys(with_fields(self.env.sys, values)):
            yield


def with_fields(model: mjx.Model, values: Mapping[str, jax.Array]) -> mjx.Model:
    """``model`` with the fields ``values`` names replaced: ``FIELDS``' names, and those ``derived`` computes."""
    model = model.replace(**{name: value for name, value in values.items() if name != "gravity"})
    if "gravity" in values:
        model = model.replace(opt=model.opt.replace(gravity=values["gravity"]))
    return model


def with_derived(args: SystemArgs, model: mjx.Model, randomized: tuple[Any, Any] | None, num_envs: int) -> SystemArgs:
    """``args`` and the fields that derive from them (``derived``), computed once at the top of a system program,
    outside the wrappers' ``vmap``: shared where every input is, else per env (a per-env inertial field, or a
    ``randomization_fn`` that batched the model: each env's derived fields come from its own randomised model).
    ``model``: the env's own; ``randomized``: ``(batched_sys, in_axes)`` of ``randomization_fn``, or None."""
    shared = {name: value for name, value in args["shared"].items() if name in INERTIAL}
    per_env = {name: value for name, value in args["per_env"].items() if name in INERTIAL}
    if not shared and not per_env:
        return args
    models, axes = (model, None) if randomized is None else randomized
    if not per_env and not jax.tree.leaves(axes):
        values = derived(with_fields(models, shared), shared)
        return {"shared": {**args["shared"], **values}, "per_env": args["per_env"]}

    def one(model_i: mjx.Model, per_env_i: dict[str, jax.Array]) -> dict[str, jax.Array]:
        values = {**shared, **per_env_i}
        return derived(with_fields(model_i, values), values)

    values = jax.vmap(one, in_axes=(axes, 0), axis_size=num_envs)(models, per_env)
    return {"shared": args["shared"], "per_env": {**args["per_env"], **values}}


def derived(model: mjx.Model, names: Any) -> dict[str, jax.Array]:
    """The fields MuJoCo's ``mj_setConst`` computes from ``names`` (fields of ``model`` already replaced) that MJX
    reads: ``body_subtreemass`` from the masses, ``body_invweight0`` and ``dof_invweight0`` from the mass matrix at
    ``qpos0``. Traced into the system programs, so gradients reach the fields through them too."""
    names = set(names)
    out = {}
    if "body_mass" in names:
        subtree = jnp.asarray(_subtree_matrix(model.body_parentid), model.body_mass.dtype)
        out["body_subtreemass"] = subtree @ model.body_mass
    if names & INERTIAL and model.nv:
        out["body_invweight0"], out["dof_invweight0"] = _inverse_weights(model)
    return out


def _subtree_matrix(parent: np.ndarray) -> np.ndarray:
    """``S[i, j]`` is 1 where body ``j`` is in body ``i``'s subtree (itself included)."""
    subtree = np.eye(len(parent))
    for body in range(len(parent) - 1, 0, -1):  # children come after their parents
        subtree[parent[body]] += subtree[body]
    return subtree


def _inverse_weights(m: mjx.Model) -> tuple[jax.Array, jax.Array]:
    """``body_invweight0`` and ``dof_invweight0`` as ``mj_setConst`` computes them (MuJoCo's ``set0``): from the
    inverse mass matrix at ``qpos0``, the mean diagonal of ``J M^-1 J'`` for each body's translation and rotation
    at its centre of mass, and for each joint's dofs."""
    data = mjx.com_pos(m, mjx.kinematics(m, mjx.make_data(m)))  # make_data starts at qpos0
    mass_matrix = mjx.full_m(m, mjx.crb(m, data))  # with the armature
    identity = jnp.eye(m.nv, dtype=mass_matrix.dtype)
    inverse = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(mass_matrix), identity)

    def body(index: jax.Array, point: jax.Array) -> tuple[jax.Array, jax.Array]:
        jacp, jacr = mjx.jac(m, data, point, index)  # [nv, 3] each
        return jnp.trace(jacp.T @ inverse @ jacp) / 3, jnp.trace(jacr.T @ inverse @ jacr) / 3

    tran, rot = jax.vmap(body)(jnp.arange(m.nbody), data.xipos)
    inverse_mass = 1 / jnp.maximum(mujoco.mjMINVAL, m.body_mass)
    simple = np.asarray(m.body_simple) == 2  # a body whose joints only slide along its frame's axes: 1/mass
    still = np.asarray(m.body_weldid) == 0  # welded to the world
    tran = jnp.where(still, 0.0, jnp.where(simple, inverse_mass, tran))
    rot = jnp.where(still | simple, 0.0, rot)

    diagonal = jnp.diagonal(inverse)
    dof = diagonal
    for kind, address, owner in zip(m.jnt_type, m.jnt_dofadr, m.jnt_bodyid, strict=True):
        if simple[owner]:
            dof = dof.at[address].set(inverse_mass[owner])
        elif kind == mujoco.mjtJoint.mjJNT_FREE:
            dof = dof.at[address : address + 3].set(jnp.mean(diagonal[address : address + 3]))
            dof = dof.at[address + 3 : address + 6].set(jnp.mean(diagonal[address + 3 : address + 6]))
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            dof = dof.at[address : address + 3].set(jnp.mean(diagonal[address : address + 3]))
    return jnp.stack([tran, rot], axis=-1).astype(m.body_invweight0.dtype), dof.astype(m.dof_invweight0.dtype)


def _get(tree: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        tree = None if tree is None else getattr(tree, name)
    return tree


def refusal(base: Env, custom_wrapper: bool) -> str | None:
    """Why ``set_system`` cannot apply to an env, or None when it can."""
    name = type(base).__name__
    if not isinstance(base, PipelineEnv):
        return f"{name} has no MJX model (it is not a PipelineEnv), so it has no system fields"
    if custom_wrapper:
        return (
            "the env was built with a custom wrap_env_fn, whose batching the bridge cannot reach into; "
            "set_system needs brax_core's training wrappers (wrap_env_fn=None)"
        )
    try:
        with base.using_sys(base.sys):  # a Playground env without a model of its own to swap refuses here
            pass
    except TypeError as err:
        return f"{name}'s model cannot be replaced: {err}"
    return None


def _model_refusal(model: mjx.Model, names: set[str]) -> str | None:
    """Why a model cannot take fields ``names``: the ones whose derived fields the step would leave stale."""
    inertial = sorted(names & INERTIAL)
    tendon_constraints = np.any(model.tendon_limited) or np.any(np.asarray(model.tendon_frictionloss) > 0)
    if inertial and model.ntendon and tendon_constraints:
        return (
            f"{inertial}: this model's tendon limits or tendon friction loss read tendon_invweight0, which derives "
            "from the mass matrix and which the bridge does not recompute"
        )
    muscle = mujoco.mjtGain.mjGAIN_MUSCLE
    has_muscles = np.any(np.asarray(model.actuator_gaintype) == muscle) or np.any(
        np.asarray(model.actuator_biastype) == mujoco.mjtBias.mjBIAS_MUSCLE
    )
    changed = sorted(names & (INERTIAL | {"actuator_gear"}))
    if changed and has_muscles:
        return (
            f"{changed}: this model's muscle actuators read actuator_acc0, which derives from the mass matrix and "
            "the gears and which the bridge does not recompute"
        )
    return None


class SystemValues:
    """The fields set on one ``TorchEnv``: copies as JAX arrays on the env's device, each shared or per env; the
    argument of the system programs (``args``, None while nothing is set: the ordinary programs run); and, in
    differentiable mode, the tensors that require grad (``params``), which the differentiable step takes as inputs
    so that its backward reaches them.

    ``programs``: the env's ``programs.Programs`` (its env, its system programs, what ``randomization_fn``
    returned).
    """

    def __init__(self, programs: Any, num_envs: int, device: torch.device, differentiable: bool) -> None:
        self._model: mjx.Model | None = getattr(programs.base, "sys", None)
        self._randomized: tuple[Any, Any] | None = programs.randomized  # (batched_sys, in_axes)
        self._num_envs = num_envs
        self._device = device
        self._differentiable = differentiable
        self._refused = refusal(programs.base, custom_wrapper=programs.system is None)  # why it takes no fields
        self._values: dict[str, jax.Array] = {}
        self._per_env: set[str] = set()
        self._params: dict[str, torch.Tensor] = {}
        self.args: SystemArgs | None = None

    @property
    def params(self) -> tuple[torch.Tensor, ...]:
        return tuple(self._params.values())

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(self._params)

    @property
    def shared_names(self) -> tuple[str, ...]:
        return tuple(sorted(set(self._values) - self._per_env))

    def requires_grad(self) -> bool:
        return bool(self._params)

    def model_value(self, name: str) -> tuple[Any, bool]:
        """The value a field has without ``set_system``, and whether it is per env (a ``randomization_fn`` that
        batched it)."""
        path = FIELDS[name]
        if self._randomized is not None:
            batched, in_axes = self._randomized
            return _get(batched, path), _get(in_axes, path) is not None
        return _get(self._model, path), False

    def check(self, fields: Mapping[str, Any], what: str = "set_system") -> dict[str, tuple[torch.Tensor | None, bool]]:
        """``fields`` checked: name -> (tensor or None, per env). Raises before anything changes or compiles."""
        if self._refused is not None:
            raise ValueError(f"{what}: {self._refused}")
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise ValueError(f"{what}: no system field {unknown}; the fields are {sorted(FIELDS)}")
        checked = {}
        for name, value in fields.items():
            if value is None:
                checked[name] = (None, False)
                continue
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{what}: {name} must be a torch.Tensor (or None for the model's own value), got "
                                f"{type(value).__name__}")
            current, _ = self.model_value(name)
            shape = tuple(self._model_shape(name))
            dtype = _convert.jax_to_torch(jnp.zeros((), current.dtype)).dtype
            if value.dtype != dtype:
                raise TypeError(
                    f"{what}: {name} has dtype {value.dtype}; expected {dtype}, the model's (nothing is cast)"
                )
            per_env = tuple(value.shape) == (self._num_envs, *shape)
            if tuple(value.shape) != shape and not per_env:
                raise ValueError(
                    f"{what}: {name} has shape {tuple(value.shape)}; expected {shape} (the model's, shared by every "
                    f"env) or {(self._num_envs, *shape)} (one value per env)"
                )
            if value.device != self._device:
                raise ValueError(f"{what}: {name} is on {value.device}; expected {self._device} (the env's device)")
            if value.requires_grad and not self._differentiable:
                raise ValueError(
                    f"{what}: {name} requires grad, but gradients reach system fields only with differentiable=True; "
                    "build the TorchEnv with differentiable=True, or pass name.detach()"
                )
            checked[name] = (value, per_env)
        reason = _model_refusal(self._model, {n for n, (v, _) in checked.items() if v is not None})
        if reason is not None:
            raise ValueError(f"{what}: {reason}")
        return checked

    def _model_shape(self, name: str) -> tuple[int, ...]:
        return tuple(_get(self._model, FIELDS[name]).shape)

    def set(self, checked: Mapping[str, tuple[torch.Tensor | None, bool]], replace_all: bool = False) -> None:
        """Applies fields ``check`` returned; ``replace_all`` first returns every field to the model's value."""
        if replace_all:
            self._values, self._per_env, self._params = {}, set(), {}
        for name, (value, per_env) in checked.items():
            self._values.pop(name, None)
            self._per_env.discard(name)
            self._params.pop(name, None)
            if value is None:
                continue
            # A copy: a later in-place write to the tensor (an optimiser's step) must not reach the physics
            # behind JAX's back; the fields are small, so this costs little.
            self._values[name] = _convert.tensor_to_array(value.detach(), copy=True)
            if per_env:
                self._per_env.add(name)
            if value.requires_grad:
                self._params[name] = value
        if not self._values:
            self.args = None
            return
        self.args = {
            "shared": {n: v for n, v in self._values.items() if n not in self._per_env},
            "per_env": {n: v for n, v in self._values.items() if n in self._per_env},
        }

    def snapshot(self) -> TensorDict:
        """Every field as a torch copy: the value set, else the model's (or ``randomization_fn``'s)."""
        if self._refused is not None:
            raise ValueError(f"system: {self._refused}")
        source = {}
        for name in FIELDS:
            value = self._values.get(name)
            if value is None:
                value, _ = self.model_value(name)
            source[name] = _convert.array_to_tensor(jnp.asarray(value), copy=True).to(self._device)
        return TensorDict(source, batch_size=[], device=self._device)

    def state_items(self) -> dict[str, torch.Tensor]:
        """The fields set, as host copies keyed ``"system.<name>"`` (what ``state_dict`` records)."""
        return {f"system.{name}": _convert.host_tensor(jax.device_get(value)) for name, value in self._values.items()}

    def check_state(self, state: Mapping[str, Any]) -> dict[str, tuple[torch.Tensor | None, bool]]:
        """The fields a ``state_dict`` recorded, checked as ``set_system``'s (moved to the env's device first)."""
        given = {key[len("system.") :]: value for key, value in state.items() if key.startswith("system.")}
        if given and self._refused is not None:
            raise ValueError(
                f"load_state_dict: the saved state sets system fields {sorted(given)}, but {self._refused}"
            )
        moved = {n: v.to(self._device) if isinstance(v, torch.Tensor) else v for n, v in given.items()}
        return self.check(moved, what="load_state_dict") if moved else {}
