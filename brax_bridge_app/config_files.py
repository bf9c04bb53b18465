"""``--config FILE``: a run's settings from a file, which flags given beside it override.

A file holds a ``PPOConfig`` in its sections, as a run folder's ``config.json`` does (``brax-bridge train`` writes
one there, beside what the run recorded of itself: versions, command, times), in YAML or JSON::

    env: {name: inverted_pendulum, num_envs: 256}
    algorithm: {learning_rate: 3.0e-4}
    network: {policy_hidden_layer_sizes: [64, 64]}
    run: {trainer: torch, seed: 1}

A person may also write it flat, each key at the top level (field names are unique across the sections)::

    env: inverted_pendulum
    trainer: torch
    seed: 1
    num_envs: 256
    learning_rate: 3.0e-4

Keys take the fields' (and flags') names with underscores; a key the command does not take is refused by name,
with the accepted keys listed, and a key given twice (at the top and in its section) too. Values are checked as the
flags' are, and ``null`` (``None``) is a value: ``max_to_keep: null`` keeps every checkpoint.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import numbers
import os
from collections.abc import Mapping
from typing import Any

import yaml

from brax_bridge_app import algorithms, hparams, rundir
from brax_core.training.config import SECTION_ORDER as SECTIONS
from brax_core.training.config import ConfigError
from brax_core.training.validation import check

# Settings besides the hyperparameters, per command (each has a flag of the same name).
SETTINGS = {
    "train": ("env", "algo", "trainer", "seed", "preset", "device"),
    "compare": ("env", "algo", "preset", "device", "seeds", "trainers"),
}
# What a run folder's config.json records about its run rather than settings: read and not used.
RECORDS = rundir.RECORDS
# A run's own trainer and seed, which compare (training every trainer and seed) reads and does not use.
RUN_ONLY = ("trainer", "seed")
# The settings' fields in a config's sections: env.name is --env, run.trainer --trainer, and so on.
SETTING_FIELDS = {"name": "env", "trainer": "trainer", "seed": "seed", "preset": "preset", "device": "device"}
# Every algorithm's fields by name -> the section that holds them (a name means one field in every algorithm).
SECTION_OF = {spec.name: spec.section for config in algorithms.CONFIGS.values() for spec in config.specs()}


class ConfigFileError(ValueError):
    """A config file that cannot be read or holds a key or value its command does not accept."""


@dataclasses.dataclass(frozen=True)
class FileConfig:
    """A config file's contents, checked: ``settings`` (env, trainer, seed, ...) and ``hyperparameters`` as the
    file gives them; ``not_used``: keys read and not applied (the records of a run, and for compare a run's own
    trainer and seed)."""

    settings: dict[str, Any]
    hyperparameters: dict[str, Any]
    not_used: dict[str, Any] = dataclasses.field(default_factory=dict)


def accepted_keys(command: str, algo: str = "ppo") -> list[str]:
    """Every key the command's config file may hold at its top level for ``algo``."""
    return [*SETTINGS[command], *(s for s in SECTIONS if s not in SETTINGS[command]),
            *algorithms.command_line_fields(algo)]


def _flattened(path: str, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its sections' fields at the top level (``env.name`` as ``env``); a key given twice is refused."""
    flat = dict(data)
    for section in SECTIONS:
        fields = flat.get(section)
        if section == "env" and not isinstance(fields, Mapping):
            continue  # env: NAME, the flat form
        fields = flat.pop(section, None)
        if fields is None:
            continue
        if not isinstance(fields, Mapping):
            raise ConfigFileError(f"{path}: {section} must be a mapping of its fields to values; got {fields!r}")
        for key, value in fields.items():
            if SECTION_OF.get(key) != section:
                where = f" (it belongs in {SECTION_OF[key]})" if key in SECTION_OF else ""
                raise ConfigFileError(f"{path}: {section} has no field {key!r}{where}")
            name = SETTING_FIELDS.get(key, key)
            if name in flat:
                raise ConfigFileError(f"{path}: {name} given both at the top and in {section}")
            flat[name] = value
    return flat


def read(path: str, command: str, algo: str | None = None) -> FileConfig:
    """The settings and hyperparameters of the file at ``path`` for ``command`` (``train`` or ``compare``), the
    hyperparameters checked as ``algo``'s (default: the file's ``algo``, else PPO); ``ConfigFileError`` naming the
    file and the key otherwise."""
    data = _flattened(path, _load(path))
    ignored = RECORDS + (RUN_ONLY if command == "compare" else ())
    not_used = {key: data.pop(key) for key in ignored if key in data}
    settings = {key: data.pop(key) for key in SETTINGS[command] if key in data}
    values = data
    settings = {key: _setting(path, key, value) for key, value in settings.items()}
    algo = algo or settings.get("algo") or "ppo"
    if algo not in algorithms.ALGOS:
        raise ConfigFileError(f"{path}: algo must be one of {', '.join(algorithms.ALGOS)}; got {algo!r}")
    unknown = [key for key in values if key not in hparams.BY_NAME]
    if unknown:
        raise ConfigFileError(_unknown_message(path, command, unknown, algo))
    try:
        algorithms.refuse_foreign(algo, values)
    except algorithms.AlgorithmError as err:
        raise ConfigFileError(f"{path}: {err}") from None
    return FileConfig(
        settings=settings,
        hyperparameters={key: _hyperparameter(path, key, value, algo) for key, value in values.items()},
        not_used=not_used,
    )


def _load(path: str) -> dict[str, Any]:
    if not os.path.isfile(path):
        raise ConfigFileError(f"{path} does not exist")
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file) if path.endswith(".json") else yaml.safe_load(file)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ConfigFileError(f"{path} is not valid {'JSON' if path.endswith('.json') else 'YAML'}: {err}") from None
    if not isinstance(data, Mapping):
        raise ConfigFileError(f"{path} must hold a mapping of keys (env, trainer, hyperparameter names) to values")
    return dict(data)


def _unknown_message(path: str, command: str, unknown: list[str], algo: str) -> str:
    accepted = accepted_keys(command, algo)
    hints = [f"{key!r} (did you mean {match[0]!r}?)" if (match := difflib.get_close_matches(key, accepted, 1)) else
             repr(key) for key in unknown]
    return (f"{path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(hints)} for {command}; accepted keys: "
            f"{', '.join(accepted)}")


def _setting(path: str, key: str, value: Any) -> Any:
    """A setting's value checked for its type (what it names is checked as the flag's is)."""
    if key == "seed":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ConfigFileError(f"{path}: seed must be a non-negative integer; got {value!r}")
        return int(value)
    if key in ("seeds", "trainers"):
        if isinstance(value, list | tuple):
            value = ",".join(map(str, value))
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise ConfigFileError(f"{path}: {key} must be a list or comma-separated text; got {value!r}")
        return str(value)
    if key in ("preset", "device") and value is None:
        return None  # no preset; the device rule's own choice (auto)
    if not isinstance(value, str) or not value:
        raise ConfigFileError(f"{path}: {key} must be a non-empty string; got {value!r}")
    return value


def _hyperparameter(path: str, key: str, value: Any, algo: str = "ppo") -> Any:
    """A hyperparameter's value checked by the schema, in the flags' terms (sizes as text or a list, 0 as none where
    the flag takes it). YAML reads ``3e-4`` (no decimal point) as text, so numbers written that way are numbers."""
    spec = hparams.spec_of(key, algo)
    if spec.kind in ("int", "float") and isinstance(value, str):
        try:
            value = float(value) if spec.kind == "float" else int(value)
        except ValueError:
            pass  # the check below names the key and what it takes
    try:
        value = hparams.from_flags({key: value}, algo)[key]
        return check(spec, value)
    except (ConfigError, hparams.HParamError) as err:
        raise ConfigFileError(f"{path}: {err}") from None


def merged(path: str | None, command: str, flags: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """``(settings, hyperparameters, note)`` for ``command``: each of ``flags`` (settings by name, ``None`` when
    not given) as given, else the file's; the file's hyperparameters (flags override those later, in
    ``configuration.resolve``); and a note naming what a run's config.json holds that compare does not use."""
    if path is None:
        return dict(flags), {}, ""
    file = read(path, command, flags.get("algo"))
    settings = {key: value if value is not None else file.settings.get(key) for key, value in flags.items()}
    unused = [f"{key} {file.not_used[key]!r}" for key in RUN_ONLY if key in file.not_used]
    note = (f"{path}: compare trains every trainer and seed it is given (--trainers, --seeds), so the file's "
            f"{' and '.join(unused)} are not used" if unused else "")
    return settings, file.hyperparameters, note
