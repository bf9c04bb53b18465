"""How ``--help`` reads: click's own help layout, with the options in sections.

click writes every flag whole with its metavar, puts the help text beside it or, for a long flag, on the lines
under it, and reflows docstring paragraphs and help texts at the terminal's width (up to ``MAX_WIDTH`` columns), so
nothing is cut in a narrow terminal and no sentence keeps the line breaks of its source. On top of that
layout, a command lists its options in sections, one per ``rich_help_panel`` (the hyperparameters' groups), and
the command list shows each command's whole first sentence.

One dialect for every command: a value is written as an UPPERCASE metavar (``INT``, ``FLOAT``, ``TEXT``, ``DIR``,
``FILE``, ``SIZES``) or as the list of the values it takes (``jax|torch``), never as a Python type (typer's
``<int>``, ``<list[str]>``, ``{RUN_DIR}``); and every argument and option ends its help with its default in one
form, ``[default: X]``, or says it has none: ``[no default]`` where leaving it out means the setting is not used
(the help says what happens then), ``[required]`` where the command cannot run without it. Options that act rather
than set anything (``--help``, ``--version``: eager flags) show neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup

# typer's own click (a vendored copy in recent typer, the click package in older ones): the context its commands
# make and the help formatter that context makes.
_Context: Any = TyperCommand.context_class

OPTIONS = "Options"
# The widest help is laid out (click's own limit is 80, narrower than many terminals).
MAX_WIDTH = 120
# Stands in for "-" while click wraps text: textwrap breaks lines after a hyphen too, which would split flag names
# (--num-|timesteps) and values (ant-|gpu); it breaks only after an ASCII hyphen.
_HYPHEN = "\u2010"

NO_DEFAULT = "[no default]"
REQUIRED = "[required]"
# The end of every argument's and option's help but the actions': its default, or that it has none.
TRAILER = re.compile(r"  \[(?:default: [^\[\]]+|no default|required)\]$")


def with_default(text: str, default: str | None) -> str:
    """``text`` ended the one way help shows a default: ``[default: DEFAULT]``, or ``[no default]`` for ``None``."""
    return f"{text}  {NO_DEFAULT if default is None else f'[default: {default}]'}"


def is_action(param: Any) -> bool:
    """An option that acts and exits (``--help``, ``--version``) rather than setting anything: it has no default."""
    return param.param_type_name == "option" and param.is_eager and param.is_flag


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


def _type_metavar(param: Any) -> str:
    """The metavar of a value without one of its own, from its type: ``INT``, ``FLOAT``, ``DIR`` (a path that must
    not be a file), ``FILE`` (one that must not be a folder), ``PATH``, ``a|b`` for choices, else ``TEXT``."""
    described = getattr(param, "type_descriptor", None)
    if described is None:  # a typer whose parameters carry click's parameter types
        kind = param.type
        if getattr(kind, "choices", None):
            return "|".join(map(str, kind.choices))
        if hasattr(kind, "file_okay"):
            return "DIR" if not kind.file_okay else "FILE" if not kind.dir_okay else "PATH"
        return {"integer": "INT", "float": "FLOAT"}.get(kind.name, "TEXT")
    if described.is_choice:
        return "|".join(map(str, described.choices))
    if described.is_path:
        return described.path_type.upper()
    return {int: "INT", float: "FLOAT"}.get(described.annotation, "TEXT")


def _shown_default(param: Any) -> str | None:
    """A parameter's own default as help shows it: a two-way flag by the flag that is on, a list comma-separated."""
    value = param.default
    if value is None or callable(value):
        return None
    if param.param_type_name == "option" and param.is_bool_flag and param.secondary_opts:
        return param.opts[0] if value else param.secondary_opts[0]
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) if value else None
    return str(value)


def _one_dialect(params: Sequence[Any]) -> None:
    """typer's own placeholders and ``[default: ...]`` off: every value gets an UPPERCASE metavar, and the help
    record (``_record``) adds the default."""
    for param in params:
        param.show_default = False
        if param.param_type_name == "argument" and param.metavar is None:
            param.metavar = param.name.upper()
        elif param.param_type_name == "option" and not param.is_flag and param.metavar is None:
            param.metavar = _type_metavar(param)


def _record(param: Any, ctx: Any) -> tuple[str, str] | None:
    """``(name, help)`` as help lists it: the name with its metavar, the help ended by its default (``TRAILER``):
    the one its text gives, else its own value's."""
    if param.hidden:
        return None
    if param.param_type_name == "argument":
        name = param.metavar + ("..." if param.nargs != 1 else "")
        text = param.help or ""
        if param.required and not TRAILER.search(text):
            text = f"{text}  {REQUIRED}"
    else:
        record = param.get_help_record(ctx)
        if record is None:
            return None
        name, text = record
    # A value of its own is shown; None may mean a default worked out later (--seed: 0, --out: a folder named
    # after the run) or none, which only the help text can say, so it must (helpformat.with_default).
    shown = _shown_default(param)
    if not TRAILER.search(text) and not is_action(param) and shown is not None:
        text = with_default(text, shown)
    return name, text


def _argument_usage(param: Any) -> str:
    """An argument in the usage line as click writes it: ``NAME`` when required, ``[NAME]`` when not."""
    name = param.metavar if param.required else f"[{param.metavar}]"
    return name + ("..." if param.nargs != 1 else "")


class SectionedCommand(TyperCommand):
    """A command whose ``--help`` lists its arguments, then its options in sections: each option under its
    ``rich_help_panel``, in the order the sections first appear, those without one under "Options"."""

    context_class = HelpContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _one_dialect(self.params)

    def collect_usage_pieces(self, ctx: HelpContext) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                pieces.append(_argument_usage(param))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: HelpContext, formatter: HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = _record(param, ctx)
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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _one_dialect(self.params)

    def format_options(self, ctx: HelpContext, formatter: HelpFormatter) -> None:
        records = [record for param in self.get_params(ctx) if (record := _record(param, ctx)) is not None]
        if records:
            with formatter.section(OPTIONS):
                formatter.write_dl(records)
        self.format_commands(ctx, formatter)

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
