"""MkDocs hook: the table of hyperparameters on the configuration page, made from ``PPOConfig``'s own fields at
build time, so that the page always says what the code accepts (defaults, ranges, help texts, which trainer takes
each field).

A page asks for the table with the line ``<!-- ppo-config-fields -->``. The schema module uses the standard library
only, so building the site loads neither JAX nor torch.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

PLACEHOLDER = "<!-- ppo-config-fields -->"
# The checkout the site documents, as mkdocstrings reads it (mkdocs.yml: `paths: [.]`), before any installed copy.
ROOT = Path(__file__).resolve().parents[2]
_GIVEN_TO = {("jax", "torch"): "both", ("jax",): "JAX trainer", ("torch",): "PyTorch trainer"}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if PLACEHOLDER not in markdown:
        return markdown
    return markdown.replace(PLACEHOLDER, fields_table())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def fields_table() -> str:
    """One row per ``PPOConfig`` field, section by section: section, name, default, accepted values, the trainers
    taking it, its help text."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from brax_core.training.agents.ppo import config

    rows = ["| section | field | default | accepts | taken by | meaning |", "| --- | --- | --- | --- | --- | --- |"]
    for section, cls in config.SECTIONS.items():
        for field in dataclasses.fields(cls):
            spec = config.BY_NAME[field.name]
            default = "required" if field.default is dataclasses.MISSING else f"`{field.default!r}`"
            given_to = _GIVEN_TO[tuple(spec.trainers)]
            if field.name in config.NETWORK_FIELDS:
                given_to += " (JAX: in `network_factory`)"
            rows.append(f"| `{section}` | `{field.name}` | {default} | {_cell(spec.accepted())} | {given_to} | "
                        f"{_cell(spec.help)} |")
    return "\n".join(rows)
