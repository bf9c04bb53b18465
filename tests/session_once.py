"""Expensive fixture work (a subprocess that trains, a torchrun launch) done once per test session, not once per
pytest worker.

Under ``pytest -n 2 --dist worksteal`` both workers may take tests of one module, and a worker that leaves a module
and comes back sets its module fixtures up again; a fixture that launches a subprocess full of compiling would run two
or three times. The workers share the session's temporary folder: the first writes the result there under a file lock,
the others read it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock


def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str, produce: Callable[[Path], Any]) -> Any:
    """``produce(folder)``'s JSON-serialisable result, computed once per session with ``folder`` (a new folder that
    every worker sees) and read back by every later caller. Without xdist, simply ``produce(new folder)``."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return produce(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # this session's folder, above each worker's own
    with FileLock(str(shared / f"{name}.lock")):
        stored = shared / f"{name}.json"
        if not stored.exists():
            folder = shared / name
            folder.mkdir(exist_ok=True)
            stored.write_text(json.dumps(produce(folder)))
        return json.loads(stored.read_text())
