"""What README.md and docs/ claim about the command line and the measurements holds.

Commands: every ``brax-bridge ...`` (or ``python -m brax_bridge_app.cli ...``) in a code block of any language, and
every inline code span holding one, names a command of the command line and only the flags that command takes, as
``--help`` shows them (a hidden flag exists only to refuse an old spelling); in the command line's guide, a flag
written alone (``--json FILE``) in a command's section is a flag of that command.

Figures: every figure in the result column of README.md's "Headline figures" table stands, as written or in an
equivalent rendering, on benchmarks/RESULTS.md or a page of benchmarks/results/, and all the figures of one row on
the same page (``figures``, ``has_source`` and ``row_errors`` give the exact rules).

Both checks read text and the command line's declaration only: they take well under a second.
"""

import re
import shlex
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
import typer
from test_docs import code_blocks

ROOT = Path(__file__).resolve().parents[1]
RESULTS = [ROOT / "benchmarks" / "RESULTS.md", *sorted((ROOT / "benchmarks" / "results").glob("*.md"))]


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


# ---------------------------------------------------------------------------------------------------------------
# Command lines

_INVOCATION = re.compile(r"(?:^|(?<=\s))(?:brax-bridge|python3? -m brax_bridge_app\.cli)(?=\s|$)")
# Shell separators between commands on one line; a `|` inside a word (`auto|cpu`) is a value, not a pipe.
_SEPARATOR = re.compile(r"\s(?:&&|\|\||\|)\s|;(?:\s|$)")
_ELISION = {"...", "…"}


def _is_placeholder(word: str) -> bool:
    return bool(re.fullmatch(r"<[^<>]+>", word))


def command_lines(text: str, page: str = "page.md") -> list[tuple[str, str]]:
    """``(where, command)`` for every command line of a Markdown page: ``where`` is ``page:line`` and ``command``
    starts at ``brax-bridge`` (or ``python -m brax_bridge_app.cli``) and ends at a shell separator, a comment or the
    end of the line or code span."""
    found = []

    def collect(line: str, where: str) -> None:
        for segment in _SEPARATOR.split(line):
            start = _INVOCATION.search(segment)
            if start:
                found.append((where, " ".join(segment[start.start():].split())))

    for block in code_blocks(text, page):
        lines = block["code"].split("\n")
        logical, first = "", None
        for offset, line in enumerate(lines):
            first = block["line"] + offset if first is None else first
            if line.rstrip().endswith("\\"):  # a shell line continued on the next one
                logical += line.rstrip()[:-1] + " "
                continue
            logical += line
            collect(re.sub(r"(^|\s)#.*$", "", logical), f"{page}:{first}")
            logical, first = "", None
    for line, content in code_spans(text, page):
        invocation = _INVOCATION.match(content)
        if invocation and content[invocation.end():].strip():  # not the program's bare name
            collect(content, f"{page}:{line}")
    return found


def code_spans(text: str, page: str = "page.md") -> list[tuple[int, str]]:
    """``(line, content)`` of every inline code span outside the code blocks, its whitespace (a span may go on over
    a line break) made single spaces."""
    in_blocks = set()
    for block in code_blocks(text, page):
        in_blocks.update(range(block["line"] - 1, block["line"] + block["code"].count("\n") + 1))
    # The code blocks' lines blanked, so that the line numbers stay the page's.
    prose = "\n".join("" if number in in_blocks else line for number, line in enumerate(text.split("\n"), 1))
    return [(prose.count("\n", 0, span.start()) + 1, " ".join(span.group(1).split()))
            for span in re.finditer(r"(?<!`)`((?:[^`\n]|\n(?!\n))+)`(?!`)", prose)]


def guide_flags(text: str, page: str = "page.md") -> list[tuple[int, str | None, str]]:
    """``(line, section, span)`` of each inline code span that starts with a flag (``--size small``) in the command
    line's guide: ``section`` is the title of the ``## `` section it stands in, ``None`` before the first."""
    titles = {number: line[3:].strip() for number, line in enumerate(text.split("\n"), 1) if line.startswith("## ")}
    found = []
    for line, content in code_spans(text, page):
        if content.startswith("--"):
            above = [number for number in titles if number < line]
            found.append((line, titles[max(above)] if above else None, content))
    return found


# Typer carries a click of its own, so the group, its commands, contexts and parameters are read through their
# attributes and `context_class`, never checked against the click package's classes.
def _command_line_interface() -> tuple[Any, Any]:
    """The command line's click group and its context (which holds the help flags' spellings, ``-h`` included)."""
    from brax_bridge_app.cli import app

    group = typer.main.get_command(app)
    return group, group.context_class(group, info_name="brax-bridge", **group.context_settings)


def _context(command: Any, name: str, group_context: Any) -> Any:
    return command.context_class(command, parent=group_context, info_name=name, **command.context_settings)


def _options(command: Any, context: Any) -> dict[str, Any]:
    """Every spelling of every visible option of ``command`` -> the option (None for the help option)."""
    options: dict[str, Any] = {name: None for name in command.get_help_option(context).opts}
    for param in command.params:
        if param.param_type_name == "option" and not param.hidden:
            options.update({name: param for name in [*param.opts, *param.secondary_opts]})
    return options


def _positional_capacity(command: Any) -> float:
    arguments = [param for param in command.params if param.param_type_name == "argument"]
    return float("inf") if any(param.nargs < 0 for param in arguments) else sum(param.nargs for param in arguments)


def command_line_errors(command_line: str, group: Any, group_context: Any) -> list[str]:
    """What is wrong with one command line, as sentences; [] when it names a command and only its flags.

    The rules: the word after the program is a command of the group (or a flag of the group itself, such as
    ``--version``); each word starting with ``-`` is a visible spelling of one of that command's options
    (``--flag``, ``--flag=value``, the ``--no-flag`` form where the boolean flag declares one, ``-h``/``--help``);
    the word after an option that takes a value is its value and is not read; ``...`` stands for words left out and
    is skipped; a ``<placeholder>`` may stand for a value, an argument, or the command (then only the flags that
    every command takes are accepted), never for a flag; the command gets no more arguments than it declares.
    """
    try:
        words = shlex.split(command_line)
    except ValueError as error:
        return [f"it does not split into words as a shell would ({error})"]
    words = words[1:] if words[0] == "brax-bridge" else words[3:]  # past `brax-bridge` or `python -m ...cli`
    if not words or words[0].startswith("-"):
        commands = {"": (group, group_context)}
    elif _is_placeholder(words[0]):
        commands = {name: (command, _context(command, name, group_context)) for name, command in group.commands.items()}
        words = words[1:]
    elif words[0] in group.commands:
        command = group.commands[words[0]]
        commands = {words[0]: (command, _context(command, words[0], group_context))}
        words = words[1:]
    else:
        return [f"{words[0]!r} is not a command (the commands: {', '.join(group.commands)})"]
    accepted = [_options(command, context) for command, context in commands.values()]
    spellings = set.intersection(*(set(options) for options in accepted))
    named = "every command" if len(commands) > 1 else next(iter(commands)) or "brax-bridge itself"
    errors, positionals, index, unknown_flags = [], 0, 0, False
    while index < len(words):
        word = words[index]
        index += 1
        if word in _ELISION:
            continue
        if word.startswith("-") and not re.fullmatch(r"-\d[\d.,eE+-]*", word):
            flag = word.split("=", 1)[0]
            if "<" in flag:
                errors.append(f"{word!r} is a placeholder for a flag: name a real flag, so that it can be checked")
            elif flag not in spellings:
                errors.append(f"{flag!r} is not a flag of {named}")
                unknown_flags = True  # whether the next word is its value is unknown: arguments are not counted
            else:
                option = accepted[0][flag]
                takes_value = option is not None and not option.is_flag and not option.count
                if takes_value and "=" not in word:
                    index += option.nargs
                elif not takes_value and "=" in word:
                    errors.append(f"{flag!r} takes no value, got {word!r}")
            continue
        positionals += 1
    capacity = min(_positional_capacity(command) for command, _ in commands.values())
    if positionals > capacity and not unknown_flags:
        errors.append(f"{named} takes {capacity:g} argument(s), got {positionals}")
    return errors


def test_every_command_line_of_the_docs_names_a_command_and_its_flags():
    group, group_context = _command_line_interface()
    found, wrong = 0, []
    for page in _pages():
        for where, command_line in command_lines(page.read_text(encoding="utf-8"), _name(page)):
            found += 1
            wrong += [f"{where}: `{command_line}`: {error}"
                      for error in command_line_errors(command_line, group, group_context)]
    assert found >= 30, f"only {found} command lines found in README.md and docs/: the reader misses some"
    assert not wrong, "command lines that the command line would refuse:\n" + "\n".join(wrong)


def test_every_flag_of_the_command_line_guide_is_a_flag_of_its_section():
    """In docs/guides/command-line.md a flag such as ``--json FILE`` in the section of a command (``## bench``) is a
    flag of that command; in another section (``## Loggers and config files``), a flag of some command."""
    group, group_context = _command_line_interface()
    guide = ROOT / "docs" / "guides" / "command-line.md"
    flags, wrong = guide_flags(guide.read_text(encoding="utf-8"), _name(guide)), []
    for line, section, span in flags:
        commands = [section] if section in group.commands else list(group.commands)
        if all(command_line_errors(f"brax-bridge {name} {span}", group, group_context) for name in commands):
            wrong.append(f"{_name(guide)}:{line}: `{span}` is not a flag of "
                         + (section if section in group.commands else "any command"))
    assert len(flags) >= 20, f"only {len(flags)} flags found in {_name(guide)}: the reader misses some"
    assert not wrong, "flags that the command line would refuse:\n" + "\n".join(wrong)


def test_the_command_check_refuses_what_the_command_line_refuses():
    group, group_context = _command_line_interface()

    def errors(command_line: str) -> list[str]:
        return command_line_errors(command_line, group, group_context)

    for good in ["brax-bridge --help", "brax-bridge --version", "brax-bridge train --env ant --trainer torch",
                 "brax-bridge train --env=ant --num-envs 128 ...", "brax-bridge eval runs/<run> --no-render",
                 "brax-bridge eval runs/x --stochastic -h", "brax-bridge envs ant hopper",
                 "brax-bridge train --resume DIR", "brax-bridge bench --json results.json",
                 "brax-bridge <command> --help", "python -m brax_bridge_app.cli compare --seeds 0,1",
                 "brax-bridge compare --threshold -10"]:
        assert errors(good) == [], good
    assert errors("brax-bridge fit --env ant") == ["'fit' is not a command (the commands: envs, train, compare, "
                                                   "eval, bench)"]
    assert errors("brax-bridge bench --out results.json") == ["'--out' is not a flag of bench"]  # hidden: refuses
    assert errors("brax-bridge train --no-env ant") == ["'--no-env' is not a flag of train"]
    assert errors("brax-bridge train --no-normalize-observations") == []
    assert errors("brax-bridge <command> --env ant") == ["'--env' is not a flag of every command"]
    assert errors("brax-bridge eval runs/x --render=yes") == ["'--render' takes no value, got '--render=yes'"]
    assert errors("brax-bridge train --<field> 3")[0].startswith("'--<field>' is a placeholder for a flag")
    assert errors("brax-bridge compare inverted_pendulum") == ["compare takes 0 argument(s), got 1"]
    assert errors("brax-bridge --env ant") == ["'--env' is not a flag of brax-bridge itself"]
    page = ("Run `brax-bridge train --env ant\n--trainer torch`; the `brax-bridge` command.\n\n```bash\n"
            "WANDB_MODE=offline brax-bridge compare --out runs/c  # both trainers; it's slow\n"
            "cd examples && brax-bridge envs \\\n  my_robot:Arm3\n```\n")
    assert guide_flags("# t\n\n`--help`\n\n## bench\n\nWrites `--json\nFILE`; `a --b`.\n\n```bash\n--out x\n```\n") == [
        (3, None, "--help"), (7, "bench", "--json FILE")]
    assert command_lines(page) == [
        ("page.md:5", "brax-bridge compare --out runs/c"),
        ("page.md:6", "brax-bridge envs my_robot:Arm3"),
        ("page.md:1", "brax-bridge train --env ant --trainer torch"),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Headline figures

_SCALES = {"": Decimal(1), "k": Decimal(1_000), "M": Decimal(1_000_000)}
_NUMBER = (r"(?P<sign>(?<![\w.)])-)?(?<![\w.])(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![.,]?\d)"
           r"(?P<scale>[kM](?![A-Za-z]))?(?P<unit>\s?[×x](?![A-Za-z])|\s(?:s|ms|µs|us|min)(?!\w)|\s?%)?")
_FIGURE = re.compile(_NUMBER)
_RANGE_DASH = re.compile(r"\s?[-–]\s?")


class Figure:
    """A number as a page writes it: its value, the unit of its last written digit (its precision), whether it is
    abbreviated with ``k`` or ``M``, and its unit (``×`` and ``x`` are one unit, a ratio)."""

    def __init__(self, match: re.Match):
        digits = match.group("digits").replace(",", "")
        scale = _SCALES[match.group("scale") or ""]
        self.text = match.group(0).strip()
        self.is_figure = bool(re.search(r"[.,]", match.group("digits")) or match.group("scale") or match.group("unit"))
        self.abbreviated = match.group("scale") is not None
        self.scale = scale
        self.value = (-1 if match.group("sign") else 1) * Decimal(digits) * scale
        self.precision = Decimal(1).scaleb(Decimal(digits).as_tuple().exponent) * scale
        unit = (match.group("unit") or "").strip()
        self.unit = {"x": "×", "us": "µs"}.get(unit, unit)

    def is_rendering_of(self, source: "Figure") -> bool:
        """Whether this figure writes ``source``: the same unit, and the same value, or, where this figure is
        abbreviated (``726k``, ``1.44M``), ``source`` rounded half up to this figure's last digit; never a figure
        more precise than its source (``1.443M`` does not write ``1.44M``)."""
        if self.unit != source.unit or source.precision > self.precision:
            return False
        if not self.abbreviated:
            return self.value == source.value
        places = self.precision / self.scale
        return (source.value / self.scale).quantize(places, rounding=ROUND_HALF_UP) * self.scale == self.value


def figures(text: str) -> list[tuple[str, list[Figure]]]:
    """The numbers of a text outside its code spans, each ``(as written, [Figure])``, with a range such as
    ``0.60-0.67`` as one entry of two figures (a range is a claim of its own: each end taken from a different place
    is not a source for it). Which numbers are figures: ``Figure.is_figure`` (a decimal point, a thousands
    separator, a ``k``/``M`` suffix or a unit: s, ms, µs, min, %, × or x); whole numbers without any of those
    (``128 envs``) are settings and counts, not figures."""
    text = re.sub(r"`[^`]*`", " ", " ".join(text.split()))
    entries: list[tuple[str, list[Figure]]] = []
    end = None
    for match in _FIGURE.finditer(text):
        figure = Figure(match)
        joined = end is not None and _RANGE_DASH.fullmatch(text[end:match.start()])
        if joined and len(entries[-1][1]) == 1 and not match.group("sign"):
            entries[-1] = (f"{entries[-1][0]}-{figure.text}", [*entries[-1][1], figure])
        else:
            entries.append((figure.text, [figure]))
        end = match.end()
    return entries


def _source_text(page: Path) -> str:
    return re.sub(r"^```.*?^```", " ", page.read_text(encoding="utf-8"), flags=re.S | re.M)


def has_source(claim: list[Figure], sources: list[list[Figure]]) -> bool:
    """A single figure has a source where any number of the results pages, alone or as one end of a range, is
    written by it; a range has a source where a range of the results pages has both its ends written by it."""
    if len(claim) == 1:
        return any(claim[0].is_rendering_of(number) for source in sources for number in source)
    return any(len(source) == 2 and all(map(Figure.is_rendering_of, claim, source)) for source in sources)


def headline_rows(readme: str) -> list[tuple[int, str, str]]:
    """``(line, what, result)`` of each row of README.md's "## Headline figures" table."""
    section = re.search(r"^## Headline figures\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    assert section, "README.md has no '## Headline figures' section"
    first_line = readme.count("\n", 0, section.start(1)) + 1
    rows = [(first_line + number, line) for number, line in enumerate(section.group(1).split("\n"))
            if line.startswith("|")]
    assert len(rows) > 2, "README.md's Headline figures section has no table"
    header = [cell.strip() for cell in rows[0][1].strip("|").split("|")]
    assert header[-1] == "result", f"README.md:{rows[0][0]}: the Headline figures table's last column must be 'result'"
    table = []
    for line, row in rows[2:]:
        cells = row.strip().strip("|").split("|")
        table.append((line, cells[0].strip(), "|".join(cells[1:]).strip()))
    return table


def row_errors(result: str, sources: dict[str, list[list[Figure]]]) -> tuple[int, list[str]]:
    """How many figures a headline row's result holds, and what is wrong with them: each figure must have a source
    (``has_source``), and all of them on one and the same page of ``sources`` (page name -> its figures), so that a
    number that happens to stand on some other page, about something else, is not taken for the row's source."""
    claims = [(written, claim) for written, claim in figures(result) if all(figure.is_figure for figure in claim)]
    found = {written: {page for page, numbers in sources.items() if has_source(claim, numbers)}
             for written, claim in claims}
    errors = [f"{written!r} stands on no results page" for written, pages in found.items() if not pages]
    if not errors and claims and not set.intersection(*found.values()):
        best = max(sorted(sources), key=lambda page: sum(page in pages for pages in found.values()))
        errors.append(f"its figures stand on no one results page: {best} holds all but " + ", ".join(
            f"{written!r} (on {', '.join(sorted(pages))})" for written, pages in found.items() if best not in pages))
    return len(claims), errors


def test_every_headline_figure_stands_on_a_results_page():
    sources = {_name(page): [figure for _, figure in figures(_source_text(page))] for page in RESULTS}
    checked, unsourced = 0, []
    for line, what, result in headline_rows((ROOT / "README.md").read_text(encoding="utf-8")):
        count, errors = row_errors(result, sources)
        checked += count
        unsourced += [f"README.md:{line} ({what}): {error}" for error in errors]
    assert checked >= 20, f"only {checked} headline figures read: the reader misses some"
    assert not unsourced, ("headline figures without a source in benchmarks/RESULTS.md or benchmarks/results/*.md "
                           "(take the figure from the page, or remove the row):\n" + "\n".join(unsourced))


def test_a_row_takes_its_figures_from_one_page():
    sources = {name: [figure for _, figure in figures(text)]
               for name, text in {"gpu.md": "raw MJX 1,443,625; 0.62", "brax.md": "1,474,560 steps"}.items()}
    assert row_errors("raw MJX 1.44M (0.62), 128 envs", sources) == (2, [])
    assert row_errors("raw MJX 1.44M and 1.47M (0.62)", sources) == (
        3, ["its figures stand on no one results page: gpu.md holds all but '1.47M' (on brax.md)"])
    assert row_errors("raw MJX 1.45M (0.62)", sources) == (2, ["'1.45M' stands on no results page"])


@pytest.mark.parametrize(("claim", "source", "sourced"), [
    ("1.44M", "raw MJX 1,443,625", True),
    ("1.45M", "raw MJX 1,443,625", False),             # 1,446,703 is another run's
    ("726k", "725,573 (0.62)", True),
    ("725k", "725,573 (0.62)", False),
    ("726k", "726,500", False),                          # rounds half up to 727k
    ("27.9M", "at 27.9M env steps", True),
    ("28M", "at 27.9M env steps", True),
    ("27.95M", "at 27.9M env steps", False),             # more precise than its source
    ("0.62", "`TorchEnv` 0.62", True),
    ("0.6", "`TorchEnv` 0.62", False),                   # a plain number is not rounded
    ("0.60", "0.6 of it", False),
    ("0.6", "0.60 of it", True),
    ("3.4×", "3.4x faster", True),
    ("3.4×", "3.4 faster", False),                       # a ratio is not a plain number
    ("75 s", "after 75 s (JAX)", True),
    ("75 s", "75 (JAX)", False),
    ("3,000", "eval reward 3000", True),
    ("0.60-0.67", "from 0.21-0.34 to 0.60-0.67", True),
    ("0.60-0.69", "0.60-0.67; halfcheetah 0.53 → 0.69", False),  # a range's ends from two places
    ("0.21", "from 0.21-0.34", True),
    ("0.14", "Brax 0.14.2", False),                      # part of a version
    ("10.7", "-10.7 after", False),
    ("1.6M", "`--num-timesteps 1600000`", False),        # a setting in a command, not a result
])
def test_the_figure_rule(claim, source, sourced):
    [(_, claimed)] = figures(claim)
    assert has_source(claimed, [figure for _, figure in figures(source)]) is sourced


def test_settings_and_counts_are_not_figures():
    read = {written: all(figure.is_figure for figure in claim)
            for written, claim in figures("128 envs: 0.96 cold; 1,024 envs; 5 seeds, 13.9 s, 3.4×, 1.6M, 726k, 95 %")}
    assert read == {"128": False, "0.96": True, "1,024": True, "5": False, "13.9 s": True, "3.4×": True,
                    "1.6M": True, "726k": True, "95 %": True}
