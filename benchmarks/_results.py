"""Shared by the benchmark reports: writing a section of a results page without losing what was written there by
hand, and reading learning curves.

The results are split by topic: ``benchmarks/results/<topic>.md`` holds the sections, ``benchmarks/RESULTS.md`` is
the index. Every section a script writes has one page (``SECTION_PAGES``); ``replace_section`` finds it, and wraps
the prose it writes at ``WIDTH`` columns so that the pages read in an editor as well as rendered.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
INDEX = HERE / "RESULTS.md"
PAGES = HERE / "results"
WIDTH = 120

# "## heading" of every section a benchmark script writes -> its topic page under PAGES. A heading with a suffix
# after a comma ("## PPO parity, 1024 envs") belongs with its stem.
SECTION_PAGES = {
    "## JAX PPO": "training-speed.md",
    "## PPO parity": "training-speed.md",
    "## Main job (`make run`)": "training-speed.md",
    "## Where PPO's training step spends its time": "training-speed.md",
    "## torch_ppo's compiled update": "training-speed.md",
    "## Training speed across the run-driver split": "training-speed.md",
    "## Training speed across the diagnostics and the typed minibatch": "training-speed.md",
    "## Collection in one program": "training-speed.md",
    "## The update's pass in one program": "training-speed.md",
    "## Learning": "learning.md",
    "## Preset tuning": "learning.md",
    "## A real robot arm": "learning.md",
    "## Environment throughput": "throughput.md",
    "## Bridge overhead": "throughput.md",
    "## MuJoCo Playground throughput": "throughput.md",
    "## Adapters": "adapters.md",
    "## Compile options": "startup.md",
    "## Install and test suite (`make test`)": "startup.md",
    "## Warm start (persistent compile cache)": "startup.md",
    "## Against Brax's PPO": "against-brax.md",
    "## GPU: one NVIDIA H200": "gpu.md",
    "## GPU: one NVIDIA H100": "gpu.md",
    "## Where torch_ppo's training step goes": "gpu.md",
    "## Gradients through the physics": "gradients.md",
    "## Package sizes": "code.md",
}


def section_page(heading: str) -> Path:
    """The topic page that holds the section ``heading``; ``ValueError`` naming the known headings otherwise."""
    for known, page in SECTION_PAGES.items():
        if heading == known or heading.startswith(known + ","):
            return PAGES / page
    raise ValueError(f"no results page holds {heading!r}; known sections: {sorted(SECTION_PAGES)}")


# A continuation line starting with one of these would open a list, quote, heading, table or HTML block.
_BLOCK_OPENER = re.compile(r"^(?:[-+*]|#{1,6}|\d{1,9}[.)]|[>|<]\S*|=+|-+|\*+|_+|`{3,}\S*|~{3,}\S*)$")
_LIST_ITEM = re.compile(r"^(\s*)([-+*]|\d+[.)]) ")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _is_block_line(line: str) -> bool:
    stripped = line.lstrip()
    return not stripped or stripped.startswith(("|", "#", "```", "<!--")) or bool(re.fullmatch(r"[-=*_ ]{3,}", line))


def _wrap_paragraph(lines: list[str], width: int) -> list[str]:
    """One paragraph or list item, rewrapped greedily at ``width``. A code span is one word (a command stays whole,
    to copy), and no line starts with what Markdown would read as a new block ("- ", "> ", "1. "): the word before
    it moves down with it."""
    hard_break = lines[-1].endswith("  ")
    marker = _LIST_ITEM.match(lines[0])
    indent = marker.group(0) if marker else re.match(r"\s*", lines[0]).group(0)
    text = " ".join(line.strip() for line in lines)[len(indent.strip()) :]
    words = _CODE_SPAN.sub(lambda m: m.group(0).replace(" ", "\0"), text).split()
    rows: list[list[str]] = [[]]
    for word in words:
        if rows[-1] and len(indent) + len(" ".join(rows[-1])) + 1 + len(word) > width:
            carried: list[str] = []
            while _BLOCK_OPENER.match((carried or [word])[0]) and len(rows[-1]) > 1:
                carried.insert(0, rows[-1].pop())
            if _BLOCK_OPENER.match((carried or [word])[0]):
                rows[-1].extend(carried)  # nothing left to carry: the line runs long instead
            else:
                rows.append(carried)
        rows[-1].append(word)
    lines = [" ".join(row).replace("\0", " ") for row in rows]
    pieces = [indent + lines[0], *(" " * len(indent) + line for line in lines[1:])]
    if hard_break:
        pieces[-1] += "  "
    return pieces


def wrap_prose(text: str, width: int = WIDTH) -> str:
    """``text`` (Markdown) with every paragraph and list item that has a line over ``width`` columns rewrapped;
    tables, headings, code blocks and paragraphs that already fit are left as they are. A line ending in two
    spaces (a hard line break) ends its paragraph."""
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            fits = all(len(line) <= width for line in paragraph)
            out.extend(paragraph if fits else _wrap_paragraph(paragraph, width))
            paragraph.clear()

    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            flush()
            fenced = not fenced
            out.append(line)
        elif fenced or _is_block_line(line):
            flush()
            out.append(line)
        else:
            if _LIST_ITEM.match(line) and paragraph:
                flush()
            paragraph.append(line)
            if line.endswith("  "):
                flush()
    flush()
    return "\n".join(out)


def _section_pattern(heading: str) -> re.Pattern[str]:
    """A section: its heading line and everything up to the next ``## `` heading or the end."""
    return re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)


def _target(path: str | os.PathLike | None, heading: str) -> Path:
    """The file a section is written to: ``path``, or for ``None`` or the index the page that holds the section (a
    command recorded before the results were split by topic names the index)."""
    if not path or Path(path).resolve() == INDEX.resolve():
        return section_page(heading)
    return Path(path)


def replace_section(
    path: str | os.PathLike | None,
    heading: str,
    body: str,
    keep: tuple[str, ...] = (),
    keep_before_table: bool = False,
) -> Path:
    """Replaces the section of ``path`` under ``heading`` (up to the next ``## `` heading) with ``heading`` and
    ``body``, or appends it, and returns the file written. ``path`` ``None`` (or the index ``RESULTS.md``) means
    the topic page that holds the section (``section_page``). Paragraphs of the old section that start with one of
    ``keep`` (the interpretation of the figures, written by hand) are carried over to the end of the new section,
    or with ``keep_before_table`` in front of its first table. Prose is wrapped at ``WIDTH`` columns
    (``wrap_prose``). The file is replaced atomically."""
    path = _target(path, heading)
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    pattern = _section_pattern(heading)
    old = pattern.search(text)
    body = wrap_prose(body.strip())
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
    text = text.rstrip("\n") + "\n"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def add_write_option(parser: argparse.ArgumentParser) -> None:
    """``--write [FILE]``: the script replaces its section of ``FILE``; without ``FILE``, of the page of
    ``benchmarks/results/`` that holds the section."""
    parser.add_argument(
        "--write",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="replace this benchmark's section of FILE (default: the page of benchmarks/results/ that holds it)",
    )


def old_section(path: str | os.PathLike | None, heading: str) -> str:
    """The current text of the section under ``heading`` (heading included) in ``path`` (``None``: its topic
    page), or ``""``."""
    path = _target(path, heading)
    if not path.exists():
        return ""
    found = _section_pattern(heading).search(path.read_text(encoding="utf-8"))
    return found.group(0) if found else ""


def first_reaching(curve: list, threshold: float) -> tuple[int, float] | None:
    """``(env steps, seconds)`` of the first ``(step, reward, seconds)`` point of ``curve`` at or above
    ``threshold``, or ``None``."""
    for step, reward, seconds in curve:
        if reward >= threshold:
            return int(step), float(seconds)
    return None
