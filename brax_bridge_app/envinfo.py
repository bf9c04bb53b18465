"""Environment facts for the ``envs`` table, found without compiling or stepping any physics."""

from __future__ import annotations

import dataclasses

from brax_core import envs


@dataclasses.dataclass(frozen=True)
class EnvInfo:
    name: str
    observation_size: int | str | None
    action_size: int | None
    episode_length: int | None
    dt: float | None
    error: str | None = None


def registered_names() -> list[str]:
    """Every registered environment name, in registry order."""
    return envs.registered_names()


def playground_names() -> list[str]:
    """MuJoCo Playground's tasks as ``playground:<task>`` names; empty without the ``playground`` extra."""
    try:
        return envs.playground_names()
    except ImportError:
        return []


def check_name(name: str) -> str | None:
    """Why ``name`` names no environment (a message listing the accepted names), or None when it does."""
    if name in registered_names():
        return None
    if name.startswith(envs.playground.PREFIX):
        available = playground_names()
        if not available:
            return f"{name!r} needs MuJoCo Playground: pip install 'brax-bridge[playground]'"
        if name not in available:
            return f"{name!r} is not a Playground task; Playground's tasks: {', '.join(available)}"
        return None
    return (
        f"must be one of: {', '.join(registered_names())} (or a MuJoCo Playground task as "
        f"'{envs.playground.PREFIX}<task>'); got {name!r}"
    )


def describe(name: str) -> EnvInfo:
    """Sizes come from the model and from abstract evaluation of ``reset`` (``jax.eval_shape``): no compile."""
    try:
        env_class = envs.get_environment_class(name)
        env = env_class()
        obs = env.observation_size  # eval_shape of reset, cached by Env
        if isinstance(obs, dict):
            obs = ", ".join(f"{k}: {v}" for k, v in obs.items())
        return EnvInfo(
            name=name,
            observation_size=obs,
            action_size=int(env.action_size),
            episode_length=int(getattr(env_class, "default_episode_length", 1000)),
            dt=round(float(env.dt), 6),  # float32 timestep shown as the decimal it was written as
        )
    except Exception as err:  # one broken or unfinished env must not hide the others
        return EnvInfo(name, None, None, None, None, error=f"{type(err).__name__}: {err}".splitlines()[0][:120])


def describe_all(names: list[str] | None = None) -> list[EnvInfo]:
    """Facts for ``names`` (default: every registered environment), in registry order, then the Playground tasks
    among ``names`` in the order given."""
    wanted = set(names) if names else None
    found = [describe(name) for name in envs.registered_names() if wanted is None or name in wanted]
    return found + [describe(name) for name in names or () if name.startswith(envs.playground.PREFIX)]
