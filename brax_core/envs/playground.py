"""MuJoCo Playground environments as brax_core environments.

``PlaygroundEnv`` wraps a Playground ``MjxEnv`` (its State has ``data`` where brax_core's has ``pipeline_state``)
so that brax_core's training wrappers (time limit, auto-reset with ``final_obs``, action repeat, vmap, domain
randomisation), both trainers and the bridge use it as they use a built-in env. Registry names take the form
``"playground:CheetahRun"``.

MuJoCo Playground is an optional extra (``pip install ".[playground]"``): this module imports it only
when a Playground task is asked for, so ``brax_core`` never depends on it at import.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from mujoco import mjx

from brax_core.envs.base import PipelineEnv, State
from brax_core.extras import install_line

PREFIX = "playground:"
# Points at an existing MuJoCo Menagerie checkout, used instead of the folder inside the Playground install.
MENAGERIE_ENV_VAR = "BRAX_CORE_MENAGERIE_PATH"
MENAGERIE_URL = "https://github.com/google-deepmind/mujoco_menagerie"

# Task-name prefix -> the Menagerie model folders the task loads (read from Playground 0.2's task modules);
# Control Suite tasks ship their models and are absent here.
_MENAGERIE_MODELS = {
    "Apollo": ("apptronik_apollo",),
    "Barkour": ("google_barkour_vb",),
    "BerkeleyHumanoid": ("berkeley_humanoid",),
    "G1": ("unitree_g1",),
    "Go1": ("unitree_go1",),
    "H1": ("unitree_h1",),
    "Op3": ("robotis_op3",),
    "Spot": ("boston_dynamics_spot",),
    "T1": ("booster_t1",),
    "Aloha": ("aloha",),
    "PandaRobotiq": ("franka_emika_panda", "robotiq_2f85_v4"),
    "Panda": ("franka_emika_panda",),
    "Leap": ("leap_hand",),
    "Aero": ("tetheria_aero_hand_open",),
}


class MenagerieMissingError(FileNotFoundError):
    """A Playground task needs MuJoCo Menagerie models that are not on this machine."""


def _playground() -> Any:
    """The ``mujoco_playground`` module (imported on first use: it is an optional extra, slow to import)."""
    try:
        import mujoco_playground
    except ImportError as e:
        raise ImportError(f"Playground tasks need MuJoCo Playground: {install_line('playground')}") from e
    return mujoco_playground


def is_playground_env(env: Any) -> bool:
    """Whether ``env`` is a MuJoCo Playground ``MjxEnv`` (never imports Playground: an instance implies it is)."""
    module = sys.modules.get("mujoco_playground")
    return module is not None and isinstance(env, module.MjxEnv)


def task_names() -> tuple[str, ...]:
    """Every task in Playground's registry (Control Suite, locomotion, manipulation)."""
    return tuple(_playground().registry.ALL_ENVS)


def control_suite_names() -> tuple[str, ...]:
    """The Control Suite tasks: their models ship with Playground, so they load offline."""
    return tuple(_playground().dm_control_suite.ALL_ENVS)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or name not in task_names():
        raise ValueError(f"unknown Playground task {name!r}; Playground's tasks: {', '.join(task_names())}")


def menagerie_models(name: str) -> tuple[str, ...]:
    """The MuJoCo Menagerie model folders Playground task ``name`` loads (empty for the Control Suite)."""
    if name in control_suite_names():
        return ()
    for prefix, models in _MENAGERIE_MODELS.items():
        if name.startswith(prefix):
            return models
    return ()


def _menagerie_path() -> Path:
    mjx_env = _playground()._src.mjx_env
    override = os.environ.get(MENAGERIE_ENV_VAR)
    if override:
        # Playground's task modules read this module attribute when they load their models.
        mjx_env.MENAGERIE_PATH = type(mjx_env.MENAGERIE_PATH)(override)
    return Path(str(mjx_env.MENAGERIE_PATH))


def check_models(name: str) -> None:
    """Raises ``MenagerieMissingError`` naming the task, the missing models and how to provide them.

    Playground would otherwise try to ``git clone`` the Menagerie on first use, which fails (with a git
    traceback) on a machine without network access.
    """
    if name in control_suite_names():
        return
    path = _menagerie_path()
    models = menagerie_models(name)
    missing = [m for m in models if not (path / m).is_dir()] if path.is_dir() else list(models) or ["(all)"]
    if not missing:
        return
    commit = _playground()._src.mjx_env.MENAGERIE_COMMIT_SHA
    raise MenagerieMissingError(
        f"Playground task {name!r} needs MuJoCo Menagerie model(s) {', '.join(missing)}, not found under {path}. "
        f"Provide them offline by copying a Menagerie checkout there (git clone {MENAGERIE_URL} {path} && "
        f"git -C {path} checkout {commit}), or set {MENAGERIE_ENV_VAR} to an existing checkout. "
        "Control Suite tasks need no download."
    )


def load(
    name: str,
    config: Any = None,
    config_overrides: Mapping[str, Any] | None = None,
) -> PlaygroundEnv:
    """Loads Playground task ``name`` (``registry.load``) wrapped as a brax_core env.

    ``config_overrides`` are Playground's flattened config keys (``{"episode_length": 500}``). Physics defaults
    to MJX's JAX implementation (``impl="jax"``), which runs on every JAX backend; pass ``{"impl": "warp"}`` for
    MuJoCo Warp on an NVIDIA GPU.
    """
    _check_name(name)
    if config_overrides is not None and not isinstance(config_overrides, Mapping):
        raise ValueError(f"config_overrides must be a dict of Playground config keys or None, got {config_overrides!r}")
    check_models(name)
    registry = _playground().registry
    overrides = dict(config_overrides or {})
    default = config if config is not None else registry.get_default_config(name)
    if "impl" in default and "impl" not in overrides and config is None:
        overrides["impl"] = "jax"
    return PlaygroundEnv(registry.load(name, config=config, config_overrides=overrides or None), name=name)


def is_playground_training_wrapper(fn: Any) -> bool:
    """Whether ``fn`` is Playground's ``wrapper.wrap_for_brax_training`` (what its training script passes to Brax's
    PPO as ``wrap_env_fn``). It wraps with Brax's own wrappers, which expect Playground's State; brax_core's
    ``envs.training.wrap`` does the same job (vmap or domain randomisation, time limit, auto-reset) for
    ``PlaygroundEnv``'s brax_core State, so the trainers use that instead."""
    return getattr(fn, "__name__", None) == "wrap_for_brax_training" and str(getattr(fn, "__module__", "")).startswith(
        "mujoco_playground"
    )


class PlaygroundTask:
    """The registry entry of one Playground task: calling it loads the task (keyword arguments as ``load``)."""

    def __init__(self, name: str):
        _check_name(name)
        self.name = name

    @property
    def default_episode_length(self) -> int:
        return int(_playground().registry.get_default_config(self.name).episode_length)

    def episode_length(
        self, episode_length: int | None = None, config: Any = None, config_overrides: Any = None, **_: Any
    ) -> int:
        """The time limit of this task loaded with ``config``/``config_overrides`` (``load``'s arguments) where a
        trainer or the bridge is also given ``episode_length``.

        ``config_overrides["episode_length"]`` decides it, as it does in Playground's own training (its wrapper
        takes the config's episode length); an ``episode_length`` argument that disagrees with it raises
        ``ValueError`` naming both, rather than one silently winning. Without that override: the argument, else
        the episode length of ``config`` (default: the task's default config).
        """
        overrides = config_overrides if isinstance(config_overrides, Mapping) else {}
        if "episode_length" in overrides:
            configured = overrides["episode_length"]
            if isinstance(configured, bool) or not isinstance(configured, int | np.integer) or configured < 1:
                raise ValueError(f"config_overrides['episode_length'] must be a positive integer, got {configured!r}")
            if episode_length is not None and episode_length != configured:
                raise ValueError(
                    f"episode_length={episode_length!r} disagrees with config_overrides['episode_length']="
                    f"{int(configured)} for Playground task {self.name!r}; give one of them, or the same value"
                )
            return int(configured)
        if episode_length is not None:
            return episode_length
        if config is not None and getattr(config, "episode_length", None) is not None:
            return int(config.episode_length)
        return self.default_episode_length

    def __call__(self, **kwargs: Any) -> PlaygroundEnv:
        return load(self.name, **kwargs)

    def __repr__(self) -> str:
        return f"PlaygroundTask({self.name!r})"


# ------------------------------------------------------------------------------------------- the adapter


def _strong(x: Any) -> Any:
    """``x`` as a strongly typed array of its own dtype.

    A weakly typed leaf (Playground's reset gives some tasks a weak ``data.time``; some steps return weak rewards
    or metrics) has another abstract type than the strong leaf the next step produces, so every jitted function
    taking the state would compile again after the first step.
    """
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return x
    return jax.lax.convert_element_type(x, x.dtype)


def _like(new: Any, old: Any) -> Any:
    """``new`` strongly typed, with ``old``'s dtypes where the two have one structure (the state a step was given
    fixes the carried types: scans and the auto-reset's ``cond`` need them unchanged)."""
    if old is not None and jax.tree.structure(new) == jax.tree.structure(old):
        return jax.tree.map(_cast, new, old)
    return jax.tree.map(_strong, new)


def _cast(new: Any, old: Any) -> Any:
    new, dtype = _strong(new), jnp.asarray(old).dtype
    if jnp.issubdtype(new.dtype, jax.dtypes.prng_key) or new.dtype == dtype:
        return new
    return new.astype(dtype)


def _like_dict(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _like(v, old.get(k)) for k, v in new.items()}


class PlaygroundEnv(PipelineEnv):
    """A MuJoCo Playground ``MjxEnv`` with brax_core's ``Env`` API.

    The states it returns are brax_core ``State``s: ``pipeline_state`` is Playground's ``data`` (an
    ``mjx.Data``), ``obs``/``metrics``/``info`` are Playground's own, and every leaf is strongly typed
    (``reward``/``done`` float32), so a jitted step compiles once. Info keys the wrappers add travel through the
    Playground step, and are kept if the step returns a fresh info dict. Domain randomisation swaps the
    Playground env's MJX model as Playground's own wrapper does.

    Args:
      env: the Playground environment (``mujoco_playground.registry.load(...)``).
      name: its registry name, for messages.
    """

    def __init__(self, env: Any, name: str | None = None):
        if not is_playground_env(env):
            raise TypeError(f"env must be a MuJoCo Playground MjxEnv, got {type(env).__name__}")
        self.playground_env = env
        self.name = name or type(env.unwrapped).__name__
        n_frames = max(1, int(env.n_substeps))
        super().__init__(env.mjx_model, n_frames=n_frames, mj_model=env.mj_model)
        config = getattr(env, "_config", None)
        length = getattr(config, "episode_length", None) if config is not None else None
        # The training wrappers' default time limit: the task's own episode length, as Playground trains it.
        self.default_episode_length = int(length) if length is not None else 1000

    @property
    def dt(self) -> float:
        return float(self.playground_env.dt)

    @property
    def action_size(self) -> int:
        return int(self.playground_env.action_size)

    @contextlib.contextmanager
    def using_sys(self, sys: mjx.Model) -> Iterator[PlaygroundEnv]:
        inner = self.playground_env.unwrapped
        if not hasattr(inner, "_mjx_model"):
            raise TypeError(f"{type(inner).__name__} keeps no _mjx_model, so its model cannot be randomised")
        original, original_sys = inner._mjx_model, self.sys
        inner._mjx_model, self.sys = sys, sys
        try:
            yield self
        finally:
            inner._mjx_model, self.sys = original, original_sys

    def reset(self, rng: jax.Array) -> State:
        s = self.playground_env.reset(rng)
        return State(
            pipeline_state=_like(s.data, None),
            obs=_like(s.obs, None),
            reward=_strong(s.reward).astype(jnp.float32),
            done=_strong(s.done).astype(jnp.float32),
            metrics=_like_dict(dict(s.metrics), {}),
            info=_like_dict(dict(s.info), {}),
        )

    def step(self, state: State, action: jax.Array) -> State:
        state_class = _playground().State
        given = state_class(
            data=state.pipeline_state,
            obs=state.obs,
            reward=state.reward,
            done=state.done,
            metrics=dict(state.metrics),
            info=dict(state.info),
        )
        s = self.playground_env.step(given, action)
        return State(
            pipeline_state=_like(s.data, state.pipeline_state),
            obs=_like(s.obs, state.obs),
            reward=_strong(s.reward).astype(jnp.float32),
            done=_strong(s.done).astype(jnp.float32),
            metrics=_like_dict(dict(s.metrics), state.metrics),
            info={**state.info, **_like_dict(dict(s.info), state.info)},
        )

    def __repr__(self) -> str:
        return f"PlaygroundEnv({self.name})"


def brax_ppo_config(name: str) -> Any:
    """Playground's own Brax PPO configuration of task ``name`` (a ``ConfigDict``; see
    ``brax_core.training.agents.ppo.presets.from_playground`` for ``ppo.train``'s keyword arguments)."""
    _check_name(name)
    _playground()
    from mujoco_playground.config import dm_control_suite_params, locomotion_params, manipulation_params

    if name in control_suite_names():
        return dm_control_suite_params.brax_ppo_config(name)
    if name in _playground().locomotion.ALL_ENVS:
        return locomotion_params.brax_ppo_config(name)
    return manipulation_params.brax_ppo_config(name)
