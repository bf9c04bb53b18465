"""The run folder: ``config.json``, ``metrics.jsonl``, ``summary.json``, the checkpoint and the plots.

Everything here is plain files so a run can be inspected, plotted again, evaluated or resumed later.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections.abc import Mapping
from importlib import metadata
from typing import Any

CONFIG = "config.json"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CHECKPOINT = "checkpoint"
TENSORBOARD = "tensorboard"  # --logger tensorboard: the run's event files
CURVE = "learning_curve.png"
EVAL = "eval.json"  # what `brax-bridge eval` measured of the run's policy
EPISODE = "episode"  # `eval --render`: episode.html and the video episode.<format>
# What config.json records about its run beside the config's sections: the folder a user's env module was imported
# from, the package versions, the command line, and when the run was created and resumed.
IMPORT_DIR = "env_import_dir"
RECORDS = (IMPORT_DIR, "versions", "command", "created", "resumed")

EVAL_REWARD = "eval/episode_reward"
EVAL_REWARD_STD = "eval/episode_reward_std"
TRAIN_REWARD = "episode/sum_reward"
TRAIN_SPS = "training/sps"

_PACKAGES = ("brax-bridge", "jax", "jaxlib", "mujoco", "mujoco-mjx", "flax", "optax", "orbax-checkpoint", "torch",
             "tensordict", "numpy")


class RunDirError(ValueError):
    """A run folder that is missing, incomplete or unreadable; the message names the path."""


def versions() -> dict[str, str]:
    found = {"python": platform.python_version(), "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def _json_default(value: Any) -> Any:
    # Metrics arrive as 0-d JAX/NumPy/torch values; everything else must already be JSON.
    for attr in ("item", "tolist"):
        if hasattr(value, attr):
            return getattr(value, attr)()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def write_json(path: str, data: Mapping[str, Any]) -> None:
    """Writes through a temporary file so a crash never leaves half a JSON file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=_json_default, allow_nan=True)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any]:
    if not os.path.isfile(path):
        raise RunDirError(f"{path} does not exist")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as err:
        raise RunDirError(f"{path} is not valid JSON ({err})") from None


def read_config(run_dir: str) -> dict[str, Any]:
    """The run's ``config.json`` as written (``configuration.read_run`` gives it typed and validated)."""
    if not os.path.isdir(run_dir):
        raise RunDirError(f"run folder {run_dir} does not exist")
    return read_json(os.path.join(run_dir, CONFIG))


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Scalar entries as Python floats (one host transfer per report, never inside a training step)."""
    out = {}
    for key, value in metrics.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        out[key] = number
    return out


class MetricsLog:
    """Appends one JSON line per progress report (append mode, so a resumed run continues the same file)."""

    def __init__(self, run_dir: str):
        self.path = os.path.join(run_dir, METRICS)

    def append(self, row: Mapping[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(_line(row))
            f.flush()

    def rewrite(self, rows: list[Mapping[str, Any]]) -> None:
        """Replaces the file's rows (atomically)."""
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(_line(r) for r in rows)
        os.replace(tmp, self.path)


def _line(row: Mapping[str, Any]) -> str:
    # NaN/inf are not JSON: they are written as null.
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
    return json.dumps(clean, default=_json_default) + "\n"


def read_metrics(run_dir: str) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl``.

    A last line that is not valid JSON is what a crash in the middle of ``MetricsLog.append`` leaves; it is
    dropped (a resumed run rewrites the file without it). An invalid line anywhere else raises ``RunDirError``.
    """
    path = os.path.join(run_dir, METRICS)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [(number, line) for number, line in enumerate(f, 1) if line.strip()]
    rows = []
    for index, (number, line) in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if index == len(lines) - 1:
                break  # a torn final write
            raise RunDirError(f"{path} line {number} is not valid JSON") from None
    return rows


def reward_of(row: Mapping[str, Any]) -> float | None:
    """The reward a report carries: evaluation reward, else the training episodes' reward."""
    for key in (EVAL_REWARD, TRAIN_REWARD):
        value = row.get(key)
        if value is not None:
            return float(value)
    return None


def command_line() -> str:
    return " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])
