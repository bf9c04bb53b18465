"""The install line of an optional extra, worded once for every message and page that needs one.

The package installs from its checkout (it is not on a package index), so an extra is added from the repository
root with pip's path syntax: ``pip install ".[torchrl]"``.
"""

from __future__ import annotations


def install_line(extra: str) -> str:
    """The command that adds ``extra`` (a name in pyproject.toml's optional dependencies), with where to run it."""
    return f'pip install ".[{extra}]" (in the brax-bridge checkout)'
