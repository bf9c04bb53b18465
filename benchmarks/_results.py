"""Shared by the benchmark reports: writing a section of RESULTS.md without losing what was written there by hand,
and reading learning curves."""

from __future__ import annotations

import os
import re


def replace_section(
    path: str, heading: str, body: str, keep: tuple[str, ...] = (), keep_before_table: bool = False
) -> None:
    """Replaces the section of ``path`` under ``heading`` (up to the next ``## `` heading) with ``heading`` and
    ``body``, or appends it. Paragraphs of the old section that start with one of ``keep`` (the interpretation of
    the figures, written by hand) are carried over to the end of the new section, or with ``keep_before_table`` in
    front of its first table. The file is replaced atomically."""
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    old = pattern.search(text)
    body = body.strip()
    if old and keep:
        starts = "|".join(re.escape(prefix) for prefix in keep)
        kept = [m.group(0).strip() for m in re.finditer(rf"^(?:{starts}).*?(?=\n\n|\Z)", old.group(0), re.S | re.M)]
        kept = [paragraph for paragraph in kept if paragraph not in body]
        if kept:
            table = re.search(r"^\|", body, re.M) if keep_before_table else None
            at = table.start() if table else len(body)
            body = "\n\n".join(part for part in (body[:at].strip(), *kept, body[at:].strip()) if part)
    section = f"{heading}\n\n{body}\n"
    text = pattern.sub(lambda _: section + "\n", text) if old else text.rstrip("\n") + "\n\n" + section
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def first_reaching(curve: list, threshold: float) -> tuple[int, float] | None:
    """``(env steps, seconds)`` of the first ``(step, reward, seconds)`` point of ``curve`` at or above
    ``threshold``, or ``None``."""
    for step, reward, seconds in curve:
        if reward >= threshold:
            return int(step), float(seconds)
    return None
