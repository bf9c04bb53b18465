"""How ``--help`` reads: click's own help layout, with the options in sections.

click writes every flag whole with its metavar, puts the help text beside it or, for a long flag, on the lines
under it, and reflows docstring paragraphs and help texts at the terminal's width (up to ``MAX_WIDTH`` columns), so
nothing is cut in a narrow terminal and no sentence keeps the line breaks of its source. On top of that
layout, a command lists its options in sections, one per ``rich_help_panel`` (the hyperparameters' groups), and
the command list shows each command's whole first sentence.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from typer.core import TyperCommand, TyperGroup

# typer's own click (a vendored copy in recent typer, the click package in older ones): the context its commands
# make and the help formatter that context makes.
_Context: Any = TyperCommand.context_class

OPTIONS = "Options"
# The widest help is laid out (click's own limit is 80, narrower than many terminals).
MAX_WIDTH = 120
# Stands in for "-" while click wraps text: textwrap breaks lines after a hyphen too, which would split flag names
# (--num-|timesteps) and values (ant-|gpu); it breaks only after an ASCII hyphen.
_HYPHEN = "\u2010"


class HelpFormatter(_Context.formatter_class):
    """click's formatter, breaking lines at spaces only."""

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        with self._hyphens_restored():
            super().write_dl([(term, text.replace("-", _HYPHEN)) for term, text in rows], col_max, col_spacing)

    def write_text(self, text: str) -> None:
        with self._hyphens_restored():
            super().write_text(text.replace("-", _HYPHEN))

    @contextmanager
    def _hyphens_restored(self) -> Iterator[None]:
        start = len(self.buffer)
        yield
        self.buffer[start:] = [part.replace(_HYPHEN, "-") for part in self.buffer[start:]]


class HelpContext(_Context):
    formatter_class = HelpFormatter


class SectionedCommand(TyperCommand):
    """A command whose ``--help`` lists its arguments, then its options in sections: each option under its
    ``rich_help_panel``, in the order the sections first appear, those without one under "Options"."""

    context_class = HelpContext

    def format_options(self, ctx: HelpContext, formatter: HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                title = "Arguments"
            else:
                title = getattr(param, "rich_help_panel", None) or OPTIONS
            sections.setdefault(title, []).append(record)
        for title in sorted(sections, key=lambda title: title != "Arguments"):
            with formatter.section(title):
                formatter.write_dl(sections[title])


class CommandList(TyperGroup):
    """The top-level ``--help``: each command with the first sentence of its help, wrapped rather than shortened
    to one line."""

    context_class = HelpContext

    def format_commands(self, ctx: HelpContext, formatter: HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                # click shortens a first sentence longer than its limit with "..."; the layout wraps it instead.
                rows.append((name, command.get_short_help_str(limit=len(command.help or "") + 1)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
