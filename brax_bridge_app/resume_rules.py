"""``train --resume DIR``: what a resumed run may change, per algorithm, and the resumed run's spec.

Every algorithm's run continues from its folder's checkpoint with the folder's own configuration; ``--num-timesteps``
may change for every algorithm (a larger one trains on from the checkpoint). A PPO run may change its other
hyperparameters with ``--allow-changes`` (the trainers check that the networks' shapes still fit); an APG or SHAC
run continues the saved one exactly, so nothing else may change.
"""

from __future__ import annotations

import time
from typing import Any

from brax_bridge_app import algorithms, configuration, envinfo, hparams, rundir
from brax_bridge_app.configuration import RunSpec

MAY_CHANGE = algorithms.RESUME_MAY_CHANGE


class ResumeError(ValueError):
    """A flag ``--resume`` cannot take for the run in the folder; the message names it."""


def resumed(run_dir: str, algo: str | None, env: str | None, trainer: str | None, preset: str | None,
            flag_values: dict[str, Any], allow_changes: bool) -> RunSpec:
    """The spec of the run in ``run_dir`` with the flags' changes; ``rundir.RunDirError`` for a folder without a
    valid config.json, ``ResumeError`` naming a flag that cannot change."""
    spec = configuration.read_run(run_dir)
    if algo is not None and algo != spec.algo:
        raise ResumeError(f"--algo {algo} differs from the resumed run's {spec.algo!r}; leave it out with --resume")
    if env is not None and envinfo.canonical(env) != spec.env_name:
        raise ResumeError(f"--env {env} differs from the resumed run's env {spec.env_name!r}; leave it out with "
                          "--resume")
    if trainer is not None and trainer != spec.trainer:
        raise ResumeError(f"--trainer {trainer} differs from the resumed run's {spec.trainer!r}")
    if allow_changes and spec.algo != "ppo":
        raise ResumeError(f"--allow-changes: a resumed {spec.algo.upper()} run continues the saved one exactly; "
                          f"--resume changes {MAY_CHANGE[spec.algo]}")
    try:
        algorithms.refuse_foreign(spec.algo, flag_values)
    except algorithms.AlgorithmError as err:
        raise ResumeError(str(err)) from None
    changed = sorted(k for k, v in flag_values.items() if v is not None and k != "num_timesteps")
    if (changed and not allow_changes) or preset is not None:
        flags = [hparams.BY_NAME[k].flag for k in changed] + (["--preset"] if preset else [])
        raise ResumeError(f"{', '.join(flags)} cannot change on --resume (the checkpoint fixes them); for "
                          f"{spec.algo.upper()} runs --resume changes {MAY_CHANGE[spec.algo]}")
    try:
        given = [name for name in [*changed, "num_timesteps"] if flag_values.get(name) is not None]
        values = {name: hparams.check(name, flag_values[name], spec.algo) for name in given}
        spec = spec.replace(**values)  # the rules between fields, for the changed values
    except hparams.HParamError as err:
        raise ResumeError(str(err)) from None
    except hparams.schema.ConfigError as err:
        raise ResumeError(err.flag_message) from None
    problem = envinfo.check_name(spec.env_name, spec.import_dir)
    if problem is not None:
        raise ResumeError(f"--resume: the run's env cannot be built: {problem}")
    resumed_at = [*spec.records.get("resumed", []), time.strftime("%Y-%m-%dT%H:%M:%S%z")]
    return spec.with_records(versions=rundir.versions(), resumed=resumed_at)
