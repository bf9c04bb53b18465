"""Brax's ``brax.io.json``: a trajectory as one JSON document (the scene and per-frame body poses).

The document is the one ``brax_core.io.html`` embeds in its viewer page (``html.trajectory_json``), so a file
written here can be inspected, diffed or played back by the same viewer. Brax's own layout describes its
physics engine's system and differs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from brax_core.io import html


def dumps(sys: Any, states: Sequence[Any] | Any, dt: float | None = None) -> str:
    """The JSON text of ``states`` of ``sys`` (arguments as ``html.render``'s)."""
    return json.dumps(html.trajectory_json(sys, states, dt), separators=(",", ":"))


def save(path: str | os.PathLike, sys: Any, states: Sequence[Any] | Any, dt: float | None = None) -> str:
    """Writes ``dumps(sys, states)`` to ``path`` and returns the path."""
    path = os.fspath(path)
    text = dumps(sys, states, dt)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
