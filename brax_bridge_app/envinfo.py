"""Every environment the command line names, built from one place: registered names, MuJoCo Playground's tasks
(``playground:<task>``) and the user's own (``module.path:Name``, ``path/to/file.py:Name``; see ``user_envs``).
Also the facts of the ``envs`` table, found without compiling or stepping any physics."""

from __future__ import annotations

import dataclasses
from typing import Any

from brax_bridge import TorchEnv
from brax_bridge_app import rundir, user_envs
from brax_core import envs
from brax_core.extras import install_line

# config.json: the folder a user's env module was imported from, so a run is rebuilt from any working directory.
IMPORT_DIR = rundir.IMPORT_DIR


@dataclasses.dataclass(frozen=True)
class EnvInfo:
    name: str
    observation_size: int | str | None
    action_size: int | None
    episode_length: int | None
    dt: float | None
    error: str | None = None
    differentiable: str | None = None  # "yes", or "no: why" (APG and SHAC need a step that differentiates)


def registered_names() -> list[str]:
    """Every registered environment name, in registry order."""
    return envs.registered_names()


def playground_names() -> list[str]:
    """MuJoCo Playground's tasks as ``playground:<task>`` names; empty without the ``playground`` extra."""
    try:
        return envs.playground_names()
    except ImportError:
        return []


def is_user_env(name: str) -> bool:
    """Whether ``name`` is a user's ``module.path:Name`` or ``path/to/file.py:Name`` (not a registered name)."""
    return user_envs.is_spec(name) and name not in envs.registered_names()


def check_name(name: str, import_dir: str | None = None) -> str | None:
    """Why ``name`` names no environment (a message listing the accepted names, or for a user's env the part that
    failed), or None when it does. A user's env is imported and built (nothing compiles) to be sure."""
    if name in registered_names():
        return None
    if is_user_env(name):
        try:
            user_envs.build(name, import_dir)
        except user_envs.UserEnvError as err:
            return f"{name}: {err}"
        return None
    if name.startswith(envs.playground.PREFIX):
        available = playground_names()
        if not available:
            return f"{name!r} needs MuJoCo Playground: {install_line('playground')}"
        if name not in available:
            return f"{name!r} is not a Playground task; Playground's tasks: {', '.join(available)}"
        return None
    return (
        f"must be one of: {', '.join(registered_names())} (or a MuJoCo Playground task as "
        f"'{envs.playground.PREFIX}<task>', or your own as {user_envs.FORMS}); got {name!r}"
    )


def canonical(name: str) -> str:
    """``name`` as a run folder records it: a user's file path made absolute; any other name (or one of the wrong
    form, which ``check_name`` explains) as it is."""
    try:
        return user_envs.canonical(name) if is_user_env(name) else name
    except user_envs.UserEnvError:
        return name


def recorded(name: str) -> dict[str, Any]:
    """What ``config.json`` records of where the env came from: for a user's module, the folder it was imported
    from (``IMPORT_DIR``); nothing for a registered env or a file."""
    if is_user_env(name) and (folder := user_envs.import_dir(name)) is not None:
        return {IMPORT_DIR: folder}
    return {}


def folder_name(name: str) -> str:
    """``name`` as part of a default folder name: ``playground:CheetahRun`` -> ``playground_CheetahRun`` (a colon is
    not allowed in Windows paths and splits ``PATH``-like lists), ``robots/arm.py:Arm3`` -> ``arm_Arm3``."""
    return user_envs.folder_name(name) if is_user_env(name) else name.replace(":", "_")


def make(name: str, import_dir: str | None = None) -> envs.Env:
    """The env ``name`` names, built with its defaults (``import_dir``: where a user's module is looked for first)."""
    if is_user_env(name):
        return user_envs.build(name, import_dir)
    return envs.get_environment(name)


def of_run(spec: Any) -> envs.Env:
    """The env of a run (a ``configuration.RunSpec``)."""
    return make(spec.env_name, spec.import_dir)


def check_differentiable(name: str, episode_length: int | None = None, import_dir: str | None = None) -> None:
    """Refuses an env whose step JAX cannot differentiate in reverse mode, as ``TorchEnv(differentiable=True)``
    does: from shapes, before anything compiles (``ValueError`` naming what to change). A registered env passes
    without the check: each differentiates (tests/test_every_env_differentiates.py checks each against finite
    differences), and building its ``TorchEnv`` cost the JAX APG's run on ``reacher`` 9-12 s of start-up (torch's
    import and the step's tracing, which that run never uses; results/gradients.md, "a reaching task against
    torch_ppo's wall time")."""
    if name in registered_names():
        return
    environment = make(name, import_dir) if is_user_env(name) else name
    TorchEnv(environment, 1, episode_length=episode_length, differentiable=True)


def default_episode_length(name: str, import_dir: str | None = None, env: envs.Env | None = None) -> int:
    """The env's ``default_episode_length`` (1000 where it sets none); ``env``: the env ``name`` built, if at hand."""
    if is_user_env(name):
        return user_envs.default_episode_length(name, import_dir, env)
    return int(getattr(envs.get_environment_class(name), "default_episode_length", 1000))


def differentiates(name: str) -> str:
    """Whether ``name``'s step differentiates in reverse mode, as APG and SHAC need: "yes" for every registered
    env (each is checked against finite differences by tests/test_every_env_differentiates.py), else the bridge's
    check from shapes (nothing compiles): "yes", or "no: " and why."""
    try:
        check_differentiable(name)
    except ValueError as err:
        return f"no: {err}"
    return "yes"


def describe(name: str) -> EnvInfo:
    """Sizes come from the model and from abstract evaluation of ``reset`` (``jax.eval_shape``): no compile."""
    try:
        env = make(name)
        obs = env.observation_size  # eval_shape of reset, cached by Env
        if isinstance(obs, dict):
            obs = ", ".join(f"{k}: {v}" for k, v in obs.items())
        return EnvInfo(
            name=name,
            observation_size=obs,
            action_size=int(env.action_size),
            episode_length=default_episode_length(name, env=env),
            # float32 timestep shown as the decimal it was written as; an Env need not have one
            dt=round(float(env.dt), 6) if hasattr(env, "dt") else None,
            differentiable=differentiates(name),
        )
    except Exception as err:  # one broken or unfinished env must not hide the others
        return EnvInfo(name, None, None, None, None, error=f"{type(err).__name__}: {err}".splitlines()[0][:120])


def describe_all(names: list[str] | None = None) -> list[EnvInfo]:
    """Facts for ``names`` (default: every registered environment), in registry order, then the Playground tasks
    and the user's envs among ``names`` in the order given."""
    registered = envs.registered_names()
    wanted = set(names) if names else None
    found = [describe(name) for name in registered if wanted is None or name in wanted]
    return found + [describe(name) for name in names or () if name not in registered]
