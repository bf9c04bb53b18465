"""Typed run configurations, one per algorithm, all built the same way.

An algorithm's configuration (``PPOConfig``, ``APGConfig``, ``SHACConfig``) is a frozen dataclass of four frozen
sections by concern, each field carrying its default, its help text and a ``FieldSpec`` (kind, range, choices,
which trainers take it) in its metadata:

- ``env``: what is trained on and how many of it (the env's name, episode length, action repeat, env counts);
- ``algorithm``: the algorithm's hyperparameters;
- ``network``: the networks;
- ``run``: how a run goes (its length in env steps, seed, evaluations, checkpoints, trainer, device).

Each section checks its fields on construction and the configuration the rules between them (``check_together``),
so a configuration that exists is valid. Every configuration has ``from_flat`` (fields by name, each placed in its
section: field names are unique across the sections), ``replace``, ``flat``, ``to_json`` / ``from_json`` (the form a
run folder's ``config.json`` and a ``--config`` file hold) and ``defaults``. A new algorithm is one more subclass of
``Config`` with its sections.

Errors name the field and its section in two vocabularies: ``str(error)`` speaks of Python keyword arguments
(``env.num_envs must be a positive integer, got 0``); ``error.flag_message`` of command-line flags
(``--num-envs must be >= 1; got 0``).

Standard library only on purpose: the command line imports the configurations to build ``brax-bridge --help``,
which must answer without loading JAX or torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from brax_core.training.validation import TRAINERS, ConfigError, FieldSpec, check

__all__ = [
    "ACTIVATIONS", "Config", "ConfigError", "EnvSection", "FieldSpec", "RunSection", "Section", "TRAINERS",
    "boolean", "choice", "field", "integer", "real",
]

# Activation names every trainer knows (brax_core.training.networks and torch_ppo.networks map them alike).
ACTIVATIONS = (
    "relu", "tanh", "sigmoid", "swish", "silu", "elu", "gelu", "leaky_relu", "softplus", "selu", "celu",
    "log_sigmoid", "identity",
)

C = TypeVar("C", bound="Config")


def field(default: Any, help: str, kind: str, **spec: Any) -> Any:
    """A section's field: its default (``dataclasses.MISSING``: required), help text and ``FieldSpec``."""
    metadata = {"help": help, "spec": FieldSpec(kind, help, **spec)}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    if isinstance(default, list | dict):
        raise TypeError("a field's default must be immutable: give a tuple")
    return dataclasses.field(default=default, metadata=metadata)


def integer(default: Any, help: str, minimum: int = 1, **spec: Any) -> Any:
    return field(default, help, "int", minimum=minimum, **spec)


def real(default: Any, help: str, minimum: float | None = 0.0, **spec: Any) -> Any:
    return field(default, help, "float", minimum=minimum, **spec)


def boolean(default: bool | None, help: str, **spec: Any) -> Any:
    return field(default, help, "bool", **spec)


def choice(default: Any, help: str, choices: tuple[str, ...], **spec: Any) -> Any:
    return field(default, help, "choice", choices=choices, **spec)


class Section:
    """A section's fields checked (and normalised) on construction; a bad value's error names the section."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            spec = dataclasses.replace(f.metadata["spec"], name=f.name)
            try:
                value = check(spec, getattr(self, f.name))
            except ConfigError as err:
                # "env.num_envs must be ...": the field by its place in the configuration
                raise ConfigError(f"{_section_name(type(self))}.{err}", err.flag_message, err.fields) from None
            object.__setattr__(self, f.name, value)


def _section_name(section: type) -> str:
    return getattr(section, "SECTION", section.__name__)


@dataclasses.dataclass(frozen=True)
class EnvSection(Section):
    """What is trained on: the environment and how many of it run at once (the fields every algorithm has)."""

    SECTION: ClassVar[str] = "env"

    name: str | None = field(
        None, "the registered environment's name (None: the environment is given to the trainer as an object)",
        "name", optional=True, command_line=False,
    )
    episode_length: int | None = integer(
        None, "steps per episode before the time limit (None: the env's own default_episode_length)", optional=True
    )
    action_repeat: int = integer(1, "env steps per policy action")
    num_envs: int = integer(1, "parallel training environments (across all devices)")
    num_eval_envs: int = integer(128, "parallel evaluation environments")


@dataclasses.dataclass(frozen=True)
class RunSection(Section):
    """How a run goes: its length and seed, evaluations, checkpoints, and where and by which trainer it runs (the
    fields every algorithm has)."""

    SECTION: ClassVar[str] = "run"

    num_timesteps: int = integer(
        dataclasses.MISSING, "total environment steps to train; a restored run counts from its checkpoint's steps",
        minimum=0,
    )
    seed: int = integer(0, "random seed", minimum=0, command_line=False)
    num_evals: int = integer(1, "evaluations (and checkpoints) over the run; 0: none", minimum=0)
    deterministic_eval: bool = boolean(False, "evaluate the policy's mode instead of sampling")
    max_to_keep: int | None = integer(None, "the most checkpoints kept (None: all)", optional=True)
    trainer: str | None = choice(
        None, "the trainer that runs this config: jax or torch (None: the one it is given to)", TRAINERS,
        optional=True, command_line=False,
    )
    device: str | None = field(
        None, "where the physics and the networks run: cpu, cuda or cuda:<index> (None or auto: JAX's default "
        "device where torch can reach it, else the CPU)", "device", optional=True, command_line=False,
    )
    preset: str | None = field(
        None, "the preset the values started from, as a record (None: none)", "name", optional=True,
        command_line=False,
    )


@dataclasses.dataclass(frozen=True)
class Config:
    """The base of every algorithm's configuration (see the module docstring). A subclass declares the fields
    ``run``, ``env``, ``algorithm`` and ``network`` (each a ``Section`` dataclass; ``run`` first, since its
    ``num_timesteps`` is required), its ``ALGO`` name, and the rules between fields in ``check_together``."""

    ALGO: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for name, section in self.sections().items():
            value = getattr(self, name)
            if not isinstance(value, section):
                raise TypeError(f"{type(self).__name__}'s {name} must be a {section.__name__}, got "
                                f"{type(value).__name__}")
        self.check_together()

    def check_together(self) -> None:
        """Rules between fields; a subclass raises ``ConfigError`` naming the fields."""

    # ---- the schema

    @classmethod
    def sections(cls) -> dict[str, type]:
        """Section name -> its dataclass, in ``SECTION_ORDER``."""
        return _sections(cls)

    @classmethod
    def specs(cls) -> tuple[FieldSpec, ...]:
        """Every field's spec, with its name and section."""
        return _specs(cls)

    @classmethod
    def by_name(cls) -> dict[str, FieldSpec]:
        return {spec.name: spec for spec in cls.specs()}

    @classmethod
    def section_of(cls, name: str) -> str:
        return cls.by_name()[name].section

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each field's default by name (``num_timesteps`` has none: it is absent)."""
        return {f.name: f.default for section in cls.sections().values() for f in dataclasses.fields(section)
                if f.default is not dataclasses.MISSING}

    # ---- construction from other shapes

    @classmethod
    def from_flat(cls: type[C], values: Mapping[str, Any]) -> C:
        """A configuration from fields given by name, each placed in its section (``{"num_envs": 8,
        "num_timesteps": 1000}``); names the schema does not hold are refused, listing its fields."""
        cls.refuse_unknown(values)
        by_section: dict[str, dict[str, Any]] = {name: {} for name in cls.sections()}
        for name, value in values.items():
            by_section[cls.section_of(name)][name] = value
        if "num_timesteps" not in values:
            raise ConfigError("num_timesteps is required", "--num-timesteps is required", ("num_timesteps",))
        return cls(**{name: cls.sections()[name](**fields) for name, fields in by_section.items()})

    @classmethod
    def from_json(cls: type[C], data: Mapping[str, Any]) -> C:
        """A configuration from ``to_json``'s form: a mapping of sections, each a mapping of its fields (a field
        left out takes its default). A section or key the schema does not hold is refused by name, with a close
        match."""
        sections = cls.sections()
        unknown = sorted(set(data) - set(sections))
        if unknown:
            raise ConfigError(
                f"{cls.__name__} has no sections {unknown}; its sections: {', '.join(sections)}",
                f"{unknown} are no configuration sections; the sections: {', '.join(sections)}",
                tuple(unknown),
            )
        built: dict[str, Any] = {}
        for name, section in sections.items():
            fields = data.get(name, {})
            if not isinstance(fields, Mapping):
                message = f"{name} must be a mapping of its fields to values; got {fields!r}"
                raise ConfigError(message, message, (name,))
            own = {f.name for f in dataclasses.fields(section)}
            stray = [key for key in fields if key not in own]
            if stray:
                message = cls._stray_message(name, stray, own)
                raise ConfigError(message, message, tuple(stray))
            if name == "run" and "num_timesteps" not in fields:
                raise ConfigError("run.num_timesteps is required", "--num-timesteps is required", ("num_timesteps",))
            built[name] = section(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
        return cls(**built)

    def replace(self: C, **changes: Any) -> C:
        """A copy with fields changed by name, each in its section (validated again): ``config.replace(seed=1)``."""
        self.refuse_unknown(changes)
        sections = {name: getattr(self, name) for name in self.sections()}
        for name in sections:
            own = {key: value for key, value in changes.items() if self.section_of(key) == name}
            if own:
                sections[name] = dataclasses.replace(sections[name], **own)
        return type(self)(**sections)

    # ---- to other shapes

    def flat(self) -> dict[str, Any]:
        """Every field by name, section by section (sizes as tuples, a callable activation as it is)."""
        return {spec.name: getattr(getattr(self, spec.section), spec.name) for spec in self.specs()}

    def to_json(self) -> dict[str, dict[str, Any]]:
        """The configuration as JSON-ready sections (tuples as lists); ``from_json`` reads it back. A callable
        has no JSON form and is refused: give its name."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.sections():
            section = {}
            for key, value in dataclasses.asdict(getattr(self, name)).items():
                if callable(value):
                    spec = self.by_name()[key]
                    raise ConfigError(
                        f"{key}={value!r} is a callable, which JSON cannot hold; give its name, one of "
                        f"{', '.join(spec.choices)}",
                        f"{spec.flag} must be one of: {', '.join(spec.choices)}",
                        (key,),
                    )
                section[key] = list(value) if isinstance(value, tuple) else value
            out[name] = section
        return out

    # ---- checks shared by the subclasses

    @classmethod
    def refuse_unknown(cls, values: Mapping[str, Any]) -> None:
        unknown = sorted(set(values) - set(cls.by_name()))
        if unknown:
            raise ConfigError(
                f"{cls.__name__} has no fields {unknown}; its fields: {', '.join(cls.by_name())}",
                f"{unknown} cannot be set from the command line; its hyperparameters: {', '.join(cls.by_name())}",
                tuple(unknown),
            )

    @classmethod
    def check_train_options(cls, config: Any, options: Mapping[str, Any], accepted: Sequence[str]) -> None:
        """``train_from_config``'s check of its arguments: ``config`` is a ``cls``, and every option is one of
        ``accepted`` (a config field among them is refused, naming how to set it)."""
        if not isinstance(config, cls):
            article = "an" if cls.__name__[0] in "AEIOS" else "a"
            raise TypeError(f"config must be {article} {cls.__name__}, got {type(config).__name__}")
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            fields = sorted(set(unknown) & set(cls.by_name()))
            hint = f" ({', '.join(fields)}: set in config, e.g. config.replace({fields[0]}=...))" if fields else ""
            raise TypeError(
                f"train_from_config got unknown options {unknown}{hint}; its options: {', '.join(accepted)}"
            )

    @classmethod
    def _stray_message(cls, section: str, stray: list[str], own: set[str]) -> str:
        hints = []
        for key in stray:
            elsewhere = cls.by_name().get(key)
            if elsewhere is not None:
                hints.append(f"{key!r} (it belongs in {elsewhere.section})")
            elif match := difflib.get_close_matches(key, sorted(own), 1):
                hints.append(f"{key!r} (did you mean {match[0]!r}?)")
            else:
                hints.append(repr(key))
        return f"{section} has no field {', '.join(hints)}; its fields: {', '.join(sorted(own))}"


# The sections' order in every configuration's JSON, flat form and help.
SECTION_ORDER = ("env", "algorithm", "network", "run")


@functools.cache
def _sections(cls: type[Config]) -> dict[str, type]:
    hints = typing.get_type_hints(cls)
    return {name: hints[name] for name in SECTION_ORDER}


@functools.cache
def _specs(cls: type[Config]) -> tuple[FieldSpec, ...]:
    return tuple(
        dataclasses.replace(f.metadata["spec"], name=f.name, section=name)
        for name, section in _sections(cls).items()
        for f in dataclasses.fields(section)
    )
