"""A run's configuration: flags, a preset and a ``--config`` file resolved into one configuration of the chosen
algorithm (``algorithms.CONFIGS``: ``PPOConfig``, ``APGConfig``, ``SHACConfig``), and that configuration as a run
folder's ``config.json``.

The walk of a setting goes one way: a flag (or the file's key, or the preset's entry) -> ``resolve`` -> a validated
configuration -> ``RunSpec.to_json`` (``config.json``, written before training) -> the trainer, which receives the
same object (``trainers.Trainer.train``: each trainer's ``train_from_config``). ``config.json`` is read back
(``RunSpec.from_json``) only by the commands that start from a folder: ``--resume``, ``eval``, ``compare``'s run
processes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from brax_bridge_app import algorithms, envinfo, hparams, rundir
from brax_bridge_app.hparams import HParamError
from brax_core.training.agents.apg import presets as apg_presets
from brax_core.training.agents.ppo import presets as ppo_presets
from brax_core.training.agents.ppo.config import fields_of_train_kwargs
from brax_core.training.agents.sac import presets as sac_presets
from brax_core.training.agents.shac import presets as shac_presets
from brax_core.training.config import SECTION_ORDER, Config, ConfigError

RECORDS = rundir.RECORDS


def presets(algo: str = "ppo") -> dict[str, dict[str, Any]]:
    """``algo``'s presets by name, each as the fields it sets: for PPO each env's own under the env's name, and
    Brax's GPU recipes (``presets.GPU_PRESETS``) under ``<env>-gpu``."""
    if algo == "apg":
        return {name: dict(fields) for name, fields in apg_presets.PRESET_FIELDS.items()}
    if algo == "shac":
        return {name: dict(fields) for name, fields in shac_presets.PRESET_FIELDS.items()}
    if algo == "sac":
        return {name: dict(fields) for name, fields in sac_presets.PRESET_FIELDS.items()}
    table = {**ppo_presets.TRAIN_KWARGS, **{f"{env}-gpu": kw for env, kw in ppo_presets.GPU_TRAIN_KWARGS.items()}}
    return {name: _preset_values(kwargs) for name, kwargs in table.items()}


def _preset_values(preset: Mapping[str, Any]) -> dict[str, Any]:
    """A PPO preset's entries as schema fields, a callable activation by its name (run folders are JSON)."""
    values = fields_of_train_kwargs(preset)
    if callable(values.get("activation")):
        values["activation"] = getattr(values["activation"], "__name__", str(values["activation"]))
    return values


def resolve(
    env_name: str,
    preset_name: str | None,
    overrides: Mapping[str, Any],
    configured: Mapping[str, Any] | None = None,
    *,
    algo: str = "ppo",
    trainer: str | None = None,
    seed: int = 0,
    device: str | None = None,
) -> Config:
    """The run's configuration of ``algo``: every command-line hyperparameter's value from the command-line default
    < preset < config file (``configured``, where ``None`` is a value) < flag (``overrides``, where ``None`` means
    not given), with the env's name, the trainer, seed, device and the preset used, validated together
    (``HParamError`` naming the flag).

    ``preset_name=None`` picks the env's own preset of ``algo`` when one exists. An unknown preset name is an error,
    and so is a preset setting something the command line cannot override (it would be a silent setting), and a flag
    ``algo`` has no field for. A preset's seed is dropped: the commands take ``--seed``/``--seeds``.
    """
    config_type = algorithms.CONFIGS[algo]
    try:
        algorithms.refuse_foreign(algo, {**overrides, **{k: 1 for k in configured or {}}})
    except algorithms.AlgorithmError as err:
        raise HParamError(str(err)) from None
    table = presets(algo)
    if preset_name is not None and preset_name not in table:
        listed = ", ".join(sorted(table)) or "none"
        raise HParamError(f"--preset must be one of the presets of --algo {algo}: {listed}; got {preset_name!r}")
    used = preset_name if preset_name is not None else (env_name if env_name in table else None)
    values = hparams.defaults(algo)
    try:
        if used is not None:
            from_preset = dict(table[used])
            from_preset.pop("seed", None)
            unknown = sorted(set(from_preset) - set(algorithms.command_line_fields(algo)))
            if unknown:
                raise HParamError(f"preset {used!r} sets {unknown}, which the command line cannot override")
            values.update(from_preset)
        values.update(hparams.from_flags(dict(configured or {}), algo))
        values.update(hparams.from_flags({k: v for k, v in overrides.items() if v is not None}, algo))
        if values["episode_length"] is None:
            values["episode_length"] = envinfo.default_episode_length(env_name)
        settings = {"name": env_name, "trainer": trainer, "seed": seed, "device": device, "preset": used}
        return config_type.from_flat({**values, **settings})
    except ConfigError as err:
        raise HParamError(err.flag_message) from None


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """A run folder's ``config.json``: the run's algorithm (``algo``) and configuration (its sections ``env``,
    ``algorithm``, ``network``, ``run`` at the top level of the file) and what the folder records about the run
    (``RECORDS``)."""

    config: Config
    records: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def algo(self) -> str:
        return self.config.ALGO

    @property
    def env_name(self) -> str:
        return self.config.env.name

    @property
    def trainer(self) -> str:
        return self.config.run.trainer

    @property
    def seed(self) -> int:
        return self.config.run.seed

    @property
    def import_dir(self) -> str | None:
        return self.records.get(envinfo.IMPORT_DIR)

    def replace(self, **changes: Any) -> RunSpec:
        """A copy with config fields changed by name (``spec.replace(seed=1)``), validated again."""
        return dataclasses.replace(self, config=self.config.replace(**changes))

    def with_records(self, **records: Any) -> RunSpec:
        return dataclasses.replace(self, records={**self.records, **records})

    def to_json(self) -> dict[str, Any]:
        return {"algo": self.algo, **self.config.to_json(), **self.records}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "config.json") -> RunSpec:
        """The spec of ``data`` (a ``config.json``'s contents; without ``algo``, a PPO run's); ``HParamError``
        naming ``where`` and the key otherwise. A run's env name and trainer are required."""
        algo = data.get("algo", "ppo")
        if algo not in algorithms.CONFIGS:
            raise HParamError(f"{where}: algo must be one of {', '.join(algorithms.ALGOS)}; got {algo!r}")
        unknown = sorted(set(data) - set(SECTION_ORDER) - set(RECORDS) - {"algo"})
        if unknown:
            raise HParamError(f"{where}: unknown keys {unknown}; it holds algo, the sections "
                              f"{', '.join(SECTION_ORDER)} and the records {', '.join(RECORDS)}")
        try:
            config = algorithms.CONFIGS[algo].from_json({key: data[key] for key in SECTION_ORDER if key in data})
        except ConfigError as err:
            raise HParamError(f"{where}: {err}") from None
        missing = [name for name, value in (("env.name", config.env.name), ("run.trainer", config.run.trainer))
                   if value is None]
        if missing:
            raise HParamError(f"{where} lacks {' and '.join(missing)}; was it written by brax-bridge train?")
        return cls(config, {key: data[key] for key in RECORDS if key in data})


def read_run(run_dir: str) -> RunSpec:
    """The spec of the run folder ``run_dir`` (its ``config.json``, validated); ``rundir.RunDirError`` naming the file
    and what is wrong otherwise."""
    data = rundir.read_config(run_dir)
    try:
        return RunSpec.from_json(data, where=os.path.join(run_dir, rundir.CONFIG))
    except HParamError as err:
        raise rundir.RunDirError(str(err)) from None
