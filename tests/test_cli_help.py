"""Every command's ``--help`` reads in a normal terminal: at 80 (and 100) columns every flag is written whole,
no line is cut or runs past the terminal, paragraphs are reflowed rather than broken where the source broke them,
fixed sets of values are listed, and the hyperparameter flags stand in sections by group.

And every ``--help`` speaks one dialect (``brax_bridge_app.helpformat``): values are UPPERCASE metavars or the
list of values they take, never Python types; each argument and option ends its help with ``[default: X]``, or
says it has none with ``[no default]`` (leaving it out means the setting is not used) or ``[required]``; only the
actions (``--help``, ``--version``: eager flags, which set nothing) show neither. The project's housekeeping is
here too: ``--version``, a bare ``brax-bridge``, LICENSE and CITATION.cff.

The commands and their flags are read from the application itself, so that a flag or command added later is
covered too."""

import functools
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from cli_runner import invoke
from typer.main import get_command

import brax_bridge
from brax_bridge_app import algorithms, cli, config_files, flags, helpformat, hparams

ROOT = Path(__file__).resolve().parents[1]

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


# ---------------------------------------------------------------------------------------------- one help dialect

# A metavar: an UPPERCASE placeholder (INT, FLOAT, TEXT, DIR, FILE, SIZES, NAME, ...), or the values a flag takes
# separated by | (jax|torch), where a placeholder may stand for some of them (INT|all, cuda:N).
PLACEHOLDER = r"[A-Z][A-Z_]*"
METAVAR = re.compile(rf"{PLACEHOLDER}|[\w.:-]+(\|[\w.:-]+)+")
# What typer and Python write for a value's type, and the other ways a default was once shown.
PYTHON_TYPES = re.compile(r"<[^<>\s]*>|[{}]|list\[|\bNone:|\bunset:")
OTHER_DEFAULT_STYLES = re.compile(r"(?<!\[)default:|\(no preset|\(None\b")


def _entries(text: str) -> dict[str, str]:
    """Every argument and option that ``--help`` lists (all sections but the command list): its first line's
    names and metavar -> its whole help text, lines joined. An entry starts at a line indented by two spaces."""
    entries = {}
    for title, body in _sections(text).items():
        if title == "Commands":
            continue
        for entry in re.split(r"^(?=  \S)", body, flags=re.M):
            if entry.strip():
                head, rest = [*re.split(r" {2,}|\n", entry.strip(), maxsplit=1), ""][:2]
                entries[head] = " ".join(rest.split())
    return entries


def _actions(name: str) -> list[str]:
    command = COMMANDS[name]
    ctx = command.context_class(command, info_name=name or "brax-bridge")
    return [opt for param in command.get_params(ctx) if helpformat.is_action(param) for opt in param.opts]


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_help_speaks_one_dialect(name, columns):
    text = _help(name, columns)
    assert not PYTHON_TYPES.search(text), f"`{name} --help` shows a Python type: {PYTHON_TYPES.search(text)[0]!r}"
    assert not OTHER_DEFAULT_STYLES.search(text), f"`{name} --help`: {OTHER_DEFAULT_STYLES.search(text)[0]!r}"
    entries = _entries(text)
    actions = _actions(name)
    params = [param for param in COMMANDS[name].params if not param.hidden]
    assert len(entries) == len(params) + 1  # and -h/--help
    for head, help_text in entries.items():
        if any(re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", head) for flag in actions):
            assert "default" not in help_text, f"{name}: the action {head} shows a default"
            continue
        # Says it has a default, or that it has none: `[default: X]`, else `[no default]` (leaving it out means the
        # setting is not used) or `[required]` (the command cannot run without it); nothing after it.
        assert re.search(r"\s\[(default: [^\[\]]+|no default|required)\]$", help_text), f"{name}: {head}"
        assert help_text.count("[default:") + help_text.count("[no default]") + help_text.count("[required]") == 1
    for param in params:
        assert param.metavar is None or METAVAR.fullmatch(param.metavar), f"{name}: {param.name}: {param.metavar}"
        if param.param_type_name == "argument" or not param.is_flag:
            assert param.metavar is not None, f"{name}: {param.name} has no metavar"


def test_out_is_a_folder_wherever_it_appears():
    shown = 0
    for name in COMMANDS:
        for head, help_text in _entries(_help(name, 120)).items():
            if head.split()[0] == "--out":
                shown += 1
                assert head == "--out DIR" and "folder" in help_text, f"{name}: {head} {help_text}"
    assert shown == 2  # train's run folder, compare's report folder
    # bench's results file is --json FILE; its old --out says so rather than writing a file or a folder.
    assert "--json FILE" in _entries(_help("bench", 120))
    result = invoke("bench", "--out", "results.json")
    assert result.exit_code == 2 and "use --json results.json" in " ".join(result.output.split())


def test_each_command_speaks_of_what_it_does():
    entries = {name: _entries(_help(name, 120)) for name in COMMANDS}
    assert "evaluation" in entries["eval"]["--device auto|cpu|cuda|cuda:N"]
    assert "every run" in entries["compare"]["--device auto|cpu|cuda|cuda:N"]
    for name in ("train", "eval"):
        assert "both trainers" not in _help(name, 120)
    # --config lists the keys the command reads, and no other (compare reads no trainer or seed of its own).
    for name in ("train", "compare"):
        text = entries[name]["--config FILE"]
        assert "YAML with its sections (env, algorithm, network, run)" in text
        listed = re.search(r"flat, with (.+?) and hyperparameter names as keys", text)[1]
        assert listed.replace(" and ", ", ").split(", ") == list(config_files.SETTINGS[name])
    assert "trainer and seed are not used" in entries["compare"]["--config FILE"]


def test_hyperparameter_defaults_say_each_algorithms_and_pythons_where_it_differs():
    """Every flag's default is the one each algorithm that takes it really starts from (the preset's, else the
    command line's), with Python's beside it where that differs; a flag of some algorithms says which."""
    entries = _entries(_help("train", 120))
    for spec in hparams.FIELDS:
        (help_text,) = [text for head, text in entries.items() if head.split()[0] == spec.flag]
        assert "[default: the preset's, else " in help_text, spec.flag
        takers = algorithms.algos_of(spec.name)
        for algo in takers:
            shown = flags.flag_value(hparams.spec_of(spec.name, algo), algorithms.default(algo, spec.name))
            assert shown in help_text, (spec.flag, algo, shown)
        if takers != algorithms.ALGOS:
            assert f"(--algo {'|'.join(takers)})" in help_text, spec.flag
        python = {algo: algorithms.CONFIGS[algo].defaults() for algo in takers}  # num_timesteps has none
        differs = [algo for algo in takers if spec.name in algorithms.COMMAND_LINE_DEFAULTS[algo]
                   and spec.name in python[algo] and python[algo][spec.name] != algorithms.default(algo, spec.name)]
        assert (f"in Python: {spec.name}=" in help_text) == bool(differs), spec.flag
    deterministic = next(text for head, text in entries.items() if head.startswith("--deterministic-eval"))
    assert deterministic.endswith("[default: the preset's, else --deterministic-eval (ppo), --no-deterministic-eval "
                                  "(apg, shac, sac); in Python: deterministic_eval=False (ppo)]")
    num_envs = next(text for head, text in entries.items() if head.startswith("--num-envs"))
    assert num_envs.endswith("[default: the preset's, else 2048 (ppo), 64 (apg, shac), 128 (sac); in Python: "
                             "num_envs=1 (ppo, apg, sac)]")
    (keep,) = [text for head, text in entries.items() if head == "--max-to-keep INT|all"]
    assert "an integer >= 1, or all" in keep


@pytest.mark.parametrize(("given", "kept"), [("all", None), ("ALL", None), ("3", 3), (2, 2), (None, None)])
def test_max_to_keep_takes_all_or_a_positive_integer(given, kept):
    assert hparams.from_flags({"max_to_keep": given})["max_to_keep"] == kept
    assert hparams.check("max_to_keep", given) == kept


@pytest.mark.parametrize("given", ["0", 0, "-1", "none", "2.5", 2.5, True])
def test_max_to_keep_refuses_anything_else_naming_the_flag_and_what_it_takes(given):
    with pytest.raises(hparams.HParamError, match=re.escape(f"--max-to-keep must be an integer >= 1 or all; got "
                                                            f"{given!r}")):
        hparams.from_flags({"max_to_keep": given})


# ---------------------------------------------------------------------------------------------- housekeeping


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_version_prints_the_packages_version():
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    assert result.output == f"brax-bridge {brax_bridge.__version__}\n"
    assert brax_bridge.__version__ == _pyproject()["version"]


def test_a_bare_command_prints_the_help_and_succeeds():
    result = invoke()
    assert result.exit_code == 0, result.output
    assert result.output == invoke("--help").output and "Commands:" in result.output
    done = subprocess.run([sys.executable, "-m", "brax_bridge_app.cli"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Commands:" in done.stdout, done.stderr


def test_citation_and_license_match_the_package():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    project = _pyproject()
    assert citation["cff-version"] == "1.2.0" and citation["title"] == project["name"] == "brax-bridge"
    assert citation["version"] == brax_bridge.__version__ == project["version"]
    assert citation["license"] == project["license"]["text"] == "Apache-2.0"
    assert citation["authors"] == [{"name": "The brax-bridge authors"}] and citation["message"].strip()
    assert " ".join(citation["abstract"].split()) == project["description"]
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("Copyright 2026 The brax-bridge authors\n")
    for words in ("Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND "
                  "DISTRIBUTION", "9. Accepting Warranty or Additional Liability.", "END OF TERMS AND CONDITIONS",
                  "APPENDIX: How to apply the Apache License to your work."):
        assert words in license_text, words
