"""The training algorithms the command line runs (``--algo``): each one configuration type, its trainers, and the
values a command-line run starts from where neither a preset nor a flag sets one.

Every algorithm's configuration is built the same way (``brax_core.training.config``), so the command line treats
them alike: one flag per field name across all of them (a field of several algorithms is one flag, e.g.
``--num-envs`` or ``--max-grad-norm``), each value checked by the chosen algorithm's own configuration, a flag the
chosen algorithm has no field for refused by name. ``--num-timesteps`` is the run's length in env steps for every
algorithm, so runs of different algorithms compare at equal env steps.

Standard library only: ``brax-bridge --help`` builds the flags from here without JAX or torch.
"""

from __future__ import annotations

from typing import Any

from brax_core.training.agents.apg.config import APGConfig
from brax_core.training.agents.ppo.config import PPOConfig
from brax_core.training.agents.sac.config import SACConfig
from brax_core.training.agents.shac.config import SHACConfig
from brax_core.training.config import Config

CONFIGS: dict[str, type[Config]] = {"ppo": PPOConfig, "apg": APGConfig, "shac": SHACConfig, "sac": SACConfig}
ALGOS = tuple(CONFIGS)
GRADIENT_ALGOS = ("apg", "shac")
# The trainers each algorithm has, the first its default.
TRAINERS_OF: dict[str, tuple[str, ...]] = {
    "ppo": ("jax", "torch"), "apg": ("torch", "jax"), "shac": ("torch",), "sac": ("jax", "torch"),
}
NAMES = {"ppo": "PPO", "apg": "APG (Brax's analytic policy gradient)", "shac": "SHAC (Short-Horizon Actor-Critic)",
         "sac": "SAC (Soft Actor-Critic)"}

# Where neither a preset nor a flag sets a field, a command-line run starts from these rather than the trainers'
# Python defaults (PPO's: one env, batches of 32, right for a library call and too small for a command-line run;
# PPO's are Brax's locomotion recipe), and keeps the newest few checkpoints (enough to resume, bounded on disk).
COMMAND_LINE_DEFAULTS: dict[str, dict[str, Any]] = {
    "ppo": {
        "num_timesteps": 1_000_000, "num_envs": 2048, "num_evals": 10, "learning_rate": 3e-4, "entropy_cost": 1e-2,
        "discounting": 0.97, "unroll_length": 5, "batch_size": 1024, "num_minibatches": 32,
        "num_updates_per_batch": 4, "reward_scaling": 10.0, "normalize_observations": True,
        "deterministic_eval": True, "max_to_keep": 3,
    },
    "apg": {"num_timesteps": 1_000_000, "num_envs": 64, "num_evals": 10, "max_to_keep": 3},
    "shac": {"num_timesteps": 1_000_000, "num_evals": 10, "max_to_keep": 3},
    # The shape of Brax's notebook SAC recipes (the inverted_pendulum preset's): 128 envs, 32 SGD steps on batches
    # of 128 per env step, a prefilled replay buffer of a million transitions.
    "sac": {
        "num_timesteps": 1_000_000, "num_envs": 128, "num_evals": 10, "learning_rate": 6e-4, "discounting": 0.97,
        "batch_size": 128, "grad_updates_per_step": 32, "reward_scaling": 10.0, "normalize_observations": True,
        "min_replay_size": 8192, "max_replay_size": 1_048_576, "max_to_keep": 3,
    },
}


# What train --resume may change, by algorithm (resume_rules applies it; train --help states it).
RESUME_MAY_CHANGE = {
    "ppo": "--num-timesteps, and other hyperparameter flags with --allow-changes",
    "apg": "--num-timesteps only (a larger one trains on)",
    "shac": "--num-timesteps only (a larger one trains on)",
    "sac": "--num-timesteps only (a larger one trains on)",
}


def resume_text() -> str:
    """What ``--resume`` may change, for every algorithm: one sentence for the help."""
    groups: dict[str, list[str]] = {}
    for algo, text in RESUME_MAY_CHANGE.items():
        groups.setdefault(text, []).append(algo.upper())
    def listed(names: list[str]) -> str:
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"

    return "; ".join(f"{listed(algos)} runs: {text}" for text, algos in groups.items())


class AlgorithmError(ValueError):
    """An algorithm or trainer the command line does not have, or a flag the chosen algorithm does not take; the
    message names it and what is accepted."""


def check_algo(algo: str, flag: str = "--algo") -> str:
    if algo not in ALGOS:
        raise AlgorithmError(f"{flag} must be one of {', '.join(ALGOS)}; got {algo!r}")
    return algo


def check_trainer(algo: str, trainer: str | None) -> str:
    """``trainer`` (``None``: the algorithm's default), refused where the algorithm has no such trainer."""
    trainers = TRAINERS_OF[algo]
    if trainer is None:
        return trainers[0]
    if trainer not in trainers:
        raise AlgorithmError(f"--algo {algo} trains with --trainer {' or '.join(trainers)}; got --trainer {trainer}")
    return trainer


def command_line_fields(algo: str) -> tuple[str, ...]:
    """The fields of ``algo`` that are flags (the settings ``--env``, ``--seed``, ``--trainer``, ``--device`` and
    ``--preset`` are the commands' own)."""
    return tuple(spec.name for spec in CONFIGS[algo].specs() if spec.command_line)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def algos_of(name: str) -> tuple[str, ...]:
    """The algorithms whose configuration has the field ``name`` as a flag."""
    return tuple(algo for algo in ALGOS if name in command_line_fields(algo))


def refuse_foreign(algo: str, given: dict[str, Any]) -> None:
    """Refuses flags given (``name -> value``, ``None``: not given) that ``algo`` has no field for, naming them and
    the algorithms that take them."""
    foreign = [name for name, value in given.items() if value is not None and name not in command_line_fields(algo)]
    if foreign:
        owners = "; ".join(f"{flag(name)} is {'/'.join(algos_of(name))}'s" for name in foreign)
        raise AlgorithmError(
            f"--algo {algo} does not take {', '.join(flag(name) for name in foreign)} ({owners}); see the flags "
            f"of --algo {algo} in train --help"
        )


def default(algo: str, name: str) -> Any:
    """The value a command-line run of ``algo`` gets for ``name`` without a preset or flag setting it."""
    return COMMAND_LINE_DEFAULTS[algo].get(name, CONFIGS[algo].defaults().get(name))


def defaults(algo: str) -> dict[str, Any]:
    """Every flag's value for ``algo`` without a preset or flag."""
    return {name: default(algo, name) for name in command_line_fields(algo)}
