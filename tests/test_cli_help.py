"""Every command's ``--help`` reads in a normal terminal: at 80 (and 100) columns every flag is written whole,
no line is cut or runs past the terminal, paragraphs are reflowed rather than broken where the source broke them,
fixed sets of values are listed, and the hyperparameter flags stand in sections by group.

The commands and their flags are read from the application itself, so that a flag or command added later is
covered too."""

import functools
import os
import re
import subprocess
import sys

import pytest
from typer.main import get_command

from brax_bridge_app import cli, hparams

GROUP = get_command(cli.app)
COMMANDS = {"": GROUP, **GROUP.commands}
# Flags with a fixed set of values, and how --help lists it.
CHOICES = {
    "--trainer": "jax|torch",
    "--device": "auto|cpu|cuda|cuda:N",
    "--size": "small|medium|large",
    "--video": "mp4|gif|none",
}


@functools.cache
def _help(name: str, columns: int) -> str:
    """``brax-bridge [name] --help`` as a terminal of ``columns`` columns shows it (a process of its own: click's
    test runner fixes the width at 80)."""
    done = subprocess.run(
        [sys.executable, "-m", "brax_bridge_app.cli", *([name] if name else []), "--help"],
        env={**os.environ, "COLUMNS": str(columns)}, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _flags(command) -> list[str]:
    return [flag for param in command.params if param.param_type_name == "option" and not param.hidden
            for flag in [*param.opts, *param.secondary_opts]]


def _sections(text: str) -> dict[str, str]:
    """Section title -> its body (the lines under a title that ends in a colon, up to the next title)."""
    parts = re.split(r"^(\S[^\n]*):\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_fits_the_terminal_and_cuts_nothing(name, columns):
    text = _help(name, columns)
    lines = text.splitlines()
    assert "…" not in text
    assert max(len(line) for line in lines) <= columns, f"a line of `{name} --help` runs past {columns} columns"
    # Lines break at spaces only: no word is split at a hyphen (a flag like --num-|timesteps, a value like ant-|gpu).
    assert not [line for line in lines if re.search(r"\w-$", line)]
    for flag in _flags(COMMANDS[name]):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), f"`{name} --help` lacks {flag} whole"
    for flag, listed in CHOICES.items():
        if flag in _flags(COMMANDS[name]):
            assert f"{flag} {listed} " in text, f"`{name} --help` does not list {flag}'s values as {listed}"
    if columns > 80:  # a wider terminal is used: the layout is not fixed at 80 columns
        assert max(len(line) for line in lines) > 80


@pytest.mark.parametrize("name", list(COMMANDS))
def test_paragraphs_are_reflowed_not_broken_where_the_source_broke_them(name):
    width = 80 - 2  # click leaves two columns free
    text = _help(name, 80)
    description = text.split("\n\n", 1)[1].split("\n\n" + next(iter(_sections(text))) + ":")[0]
    source = " ".join((COMMANDS[name].help or "").split())
    assert " ".join(description.split()) == source  # the whole docstring, word for word
    for paragraph in description.split("\n\n"):
        lines = paragraph.splitlines()
        for line, following in zip(lines, lines[1:], strict=False):
            # a line ends only where the next word would not have fitted on it
            assert len(line) + 1 + len(following.split()[0]) > width, f"{name}: broken early: {line!r}"


@pytest.mark.parametrize("name", [name for name, command in COMMANDS.items()
                                  if any(param.name in hparams.BY_NAME for param in command.params)])
def test_hyperparameters_stand_in_sections_by_group(name):
    sections = _sections(_help(name, 80))
    titles = [cli.HP_PANEL.format(group) for group in hparams.grouped()]
    assert [title for title in sections if title.startswith("Hyperparameters")] == titles
    assert len(titles) >= 6 and cli.HP_PANEL.format(hparams.OTHER) not in titles  # every field has its group
    for group, specs in hparams.grouped().items():
        body = sections[cli.HP_PANEL.format(group)]
        for spec in specs:
            assert re.search(rf"^  {re.escape(spec.flag)}(?![\w-])", body, re.M), f"{spec.flag} not under {group}"
            for choice in spec.choices:  # a fixed set of values is listed, as the metavar or in the help text
                assert re.search(rf"(?<![\w-]){re.escape(choice)}(?![\w-])", body), f"{spec.flag}: {choice}"
    hyperparameters = "".join(body for title, body in sections.items() if title.startswith("Hyperparameters"))
    assert "--trainer " not in hyperparameters and "--device " not in hyperparameters  # the command's own flags
