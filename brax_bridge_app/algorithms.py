"""The training algorithms the command line runs (``--algo``), and the settings of the two that follow the gradient
of the return through the physics: APG (Brax's analytic policy gradient; the JAX trainer or the torch one) and SHAC
(Short-Horizon Actor-Critic; torch).

PPO's settings are the ``PPOConfig`` schema (``hparams``). APG and SHAC take some of PPO's flags under the same
names and meanings (``SHARED``: the run's length in env steps, the envs, the evaluations, ...) and flags of their
own (``FIELDS``), each checked by the same ``FieldSpec`` rules, with errors in the flags' words. A flag of another
algorithm is refused by name. ``--num-timesteps`` is the run's length in env steps for every algorithm, so runs of
different algorithms compare at equal env steps: a gradient run makes ``num_timesteps // (num_envs *
horizon_length)`` policy updates.

Standard library only, like the PPO schema: ``brax-bridge --help`` builds the flags from here without JAX or torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from brax_bridge_app import hparams
from brax_core.training.validation import ConfigError, FieldSpec, check

ALGOS = ("ppo", "apg", "shac")
GRADIENT_ALGOS = ("apg", "shac")
# The trainers each algorithm has, the first its default.
TRAINERS_OF = {"ppo": ("jax", "torch"), "apg": ("torch", "jax"), "shac": ("torch",)}
LR_SCHEDULES = ("linear", "constant")


def _spec(kind: str, help: str, name: str, **options: Any) -> FieldSpec:
    return FieldSpec(kind, help, name=name, trainers=("jax", "torch"), **options)


# The gradient algorithms' own flags: (spec, the algorithms that take it).
FIELDS: dict[str, tuple[FieldSpec, tuple[str, ...]]] = {
    spec.name: (spec, algos)
    for spec, algos in (
        (_spec("int", "env steps per update: the unroll the gradient flows through", "horizon_length", minimum=1),
         GRADIENT_ALGOS),
        (_spec("float", "the actor's gradient is scaled to this global norm where it exceeds it", "max_gradient_norm",
               minimum=0.0, min_open=True), GRADIENT_ALGOS),
        (_spec("bool", "layer normalisation after each hidden layer", "layer_norm"), GRADIENT_ALGOS),
        (_spec("sizes", "the APG policy's hidden layer sizes", "hidden_layer_sizes"), ("apg",)),
        (_spec("bool", "decay the learning rate by --schedule-decay at every update", "use_schedule"), ("apg",)),
        (_spec("float", "the learning rate's factor per update with --use-schedule", "schedule_decay", minimum=0.0,
               maximum=1.0, min_open=True), ("apg",)),
        (_spec("float", "the actor's Adam learning rate", "actor_learning_rate", minimum=0.0, min_open=True),
         ("shac",)),
        (_spec("float", "the critic's Adam learning rate", "critic_learning_rate", minimum=0.0, min_open=True),
         ("shac",)),
        (_spec("choice", "both learning rates: linear (decayed towards 1e-5 over the run) or constant",
               "lr_schedule", choices=LR_SCHEDULES), ("shac",)),
        (_spec("float", "discount per policy step", "gamma", minimum=0.0, maximum=1.0), ("shac",)),
        (_spec("float", "lambda of the critic's TD(lambda) targets", "td_lambda", minimum=0.0, maximum=1.0),
         ("shac",)),
        (_spec("int", "passes of the critic's fit per update", "critic_iterations", minimum=1), ("shac",)),
        (_spec("int", "minibatches per critic pass", "num_critic_batches", minimum=1), ("shac",)),
        (_spec("float", "the target critic keeps this share of its weights per update (Polyak averaging)",
               "target_critic_alpha", minimum=0.0, maximum=1.0), ("shac",)),
        (_spec("sizes", "the SHAC actor's hidden layer sizes", "actor_hidden_layer_sizes"), ("shac",)),
        (_spec("sizes", "the SHAC critic's hidden layer sizes", "critic_hidden_layer_sizes"), ("shac",)),
    )
}
# PPO's flags that the gradient algorithms take too, with the same meaning.
SHARED: dict[str, tuple[str, ...]] = {
    "num_timesteps": GRADIENT_ALGOS,
    "episode_length": GRADIENT_ALGOS,
    "action_repeat": GRADIENT_ALGOS,
    "num_envs": GRADIENT_ALGOS,
    "num_evals": GRADIENT_ALGOS,
    "num_eval_envs": GRADIENT_ALGOS,
    "normalize_observations": GRADIENT_ALGOS,
    "deterministic_eval": GRADIENT_ALGOS,
    "activation": GRADIENT_ALGOS,
    "learning_rate": ("apg",),
    "reward_scaling": ("shac",),
}
# A gradient run's settings where no flag sets them: the trainers' own defaults (torch_analytic.apg.train's, which
# are Brax's APG's, and torch_analytic.shac.train's, the reference implementation's), with a command-line run's
# length, envs and evaluations.
DEFAULTS: dict[str, dict[str, Any]] = {
    "apg": {
        "num_timesteps": 1_000_000, "episode_length": 1000, "action_repeat": 1, "num_envs": 64, "num_evals": 10,
        "num_eval_envs": 128, "normalize_observations": False, "deterministic_eval": False, "activation": "elu",
        "learning_rate": 1e-4, "horizon_length": 32, "max_gradient_norm": 1e9, "layer_norm": True,
        "hidden_layer_sizes": (32, 32, 32, 32), "use_schedule": True, "schedule_decay": 0.997,
    },
    "shac": {
        "num_timesteps": 1_000_000, "episode_length": 1000, "action_repeat": 1, "num_envs": 64, "num_evals": 10,
        "num_eval_envs": 128, "normalize_observations": True, "deterministic_eval": False, "activation": "elu",
        "reward_scaling": 1.0, "horizon_length": 32, "max_gradient_norm": 1.0, "layer_norm": True,
        "actor_learning_rate": 2e-3, "critic_learning_rate": 2e-3, "lr_schedule": "linear", "gamma": 0.99,
        "td_lambda": 0.95, "critic_iterations": 16, "num_critic_batches": 4, "target_critic_alpha": 0.2,
        "actor_hidden_layer_sizes": (128, 64, 32), "critic_hidden_layer_sizes": (64, 64),
    },
}


class AlgorithmError(ValueError):
    """A flag the chosen algorithm does not take, or a bad value of one; the message names the flag."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def flags_of(algo: str) -> list[str]:
    """The hyperparameter flags ``algo`` (apg or shac) takes."""
    return [_flag(name) for name in DEFAULTS[algo]]


@dataclasses.dataclass(frozen=True)
class GradientConfig:
    """A gradient run's whole configuration: the algorithm, its trainer, the env, seed and device, and ``settings``
    (every hyperparameter of ``DEFAULTS[algo]``, checked)."""

    algo: str
    trainer: str
    env: str
    seed: int
    device: str | None
    settings: Mapping[str, Any]

    @property
    def policy_updates(self) -> int:
        """Updates of the run: its env steps over the env steps of one update (at least one)."""
        per_update = self.settings["num_envs"] * self.settings["horizon_length"]
        return max(self.settings["num_timesteps"] // per_update, 1)

    @property
    def env_steps_per_update(self) -> int:
        return self.settings["num_envs"] * self.settings["horizon_length"]

    def flat(self) -> dict[str, Any]:
        """Every field by name, as the loggers record a run's configuration (the env's name as ``name``)."""
        return {"algo": self.algo, "trainer": self.trainer, "name": self.env, "seed": self.seed,
                "device": self.device, **self.settings}

    def flags(self) -> list[str]:
        """The ``train`` flags that make this run: ``--algo``, ``--trainer``, ``--env``, ``--seed``, ``--device`` and
        every setting (``--flag``/``--no-flag`` for a switch, sizes comma-separated)."""
        out = ["--algo", self.algo, "--trainer", self.trainer, "--env", self.env, "--seed", str(self.seed)]
        if self.device is not None:
            out += ["--device", self.device]
        for name, value in self.settings.items():
            if isinstance(value, bool):
                out.append(_flag(name) if value else "--no-" + _flag(name)[2:])
            elif isinstance(value, tuple | list):
                out += [_flag(name), ",".join(map(str, value))]
            else:
                out += [_flag(name), str(value)]
        return out

    def to_json(self) -> dict[str, Any]:
        settings = {k: list(v) if isinstance(v, tuple) else v for k, v in self.settings.items()}
        return {"algo": self.algo, "trainer": self.trainer, "env": self.env, "seed": self.seed,
                "device": self.device, "settings": settings}


def resolve(
    algo: str, trainer: str | None, env: str, seed: int, device: str | None, given: Mapping[str, Any]
) -> GradientConfig:
    """The run's ``GradientConfig``: ``given`` (flag name -> value, ``None`` where the flag was not given) over
    ``DEFAULTS[algo]``, each value checked. Refuses a trainer ``algo`` has not and a flag it does not take, naming
    the flags it takes."""
    if algo not in GRADIENT_ALGOS:
        raise AlgorithmError(f"--algo must be one of {', '.join(ALGOS)}; got {algo!r}")
    trainers = TRAINERS_OF[algo]
    trainer = trainer or trainers[0]
    if trainer not in trainers:
        raise AlgorithmError(f"--algo {algo} trains with --trainer {' or '.join(trainers)}; got --trainer {trainer}")
    foreign = sorted(_flag(name) for name, value in given.items() if value is not None and name not in DEFAULTS[algo])
    if foreign:
        raise AlgorithmError(
            f"--algo {algo} does not take {', '.join(foreign)}; its hyperparameter flags: {', '.join(flags_of(algo))}"
        )
    settings = dict(DEFAULTS[algo])
    for name, value in given.items():
        if value is None:
            continue
        try:
            if name in FIELDS:
                spec = FIELDS[name][0]
                value = check(spec, _sizes(value) if spec.kind == "sizes" else value)
            else:  # one of PPO's flags, with PPO's checks
                value = hparams.check(name, value)
        except ConfigError as err:
            raise AlgorithmError(err.flag_message) from None
        except hparams.HParamError as err:
            raise AlgorithmError(str(err)) from None
        settings[name] = value
    return GradientConfig(algo, trainer, env, seed, device, settings)


def _sizes(value: Any) -> Any:
    """``"64,64"`` as ``(64, 64)`` (text the flag gives; anything else as it is, for ``check`` to judge)."""
    if not isinstance(value, str):
        return value
    try:
        return tuple(int(part) for part in value.replace(" ", ",").split(",") if part)
    except ValueError:
        return value


def refused_with_ppo(given: Mapping[str, Any]) -> list[str]:
    """The gradient algorithms' own flags among ``given`` (name -> value or ``None``), which ``--algo ppo`` refuses."""
    return sorted(_flag(name) for name, value in given.items() if value is not None and name in FIELDS)
