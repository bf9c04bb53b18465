"""The README's quick start: exactly two commands, each a Makefile target; CI runs the test command (`.ci/run` calls
it verbatim) and only that one, so the README may call `make test` what CI runs and must not say so of `make run`,
whose recipe is the command line's main job (the default suite runs that job's path at a tiny size)."""

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quick_start_commands(text: str) -> list[str]:
    blocks = re.findall(r"^```bash[ \t]*\n(.*?)^```", text, re.S | re.M)
    assert blocks, "README.md has no ```bash block with the quick-start commands"
    commands = [line.strip() for line in blocks[0].splitlines() if line.strip() and not line.strip().startswith("#")]
    assert commands, "README.md's first ```bash block holds no command"
    return commands


def _make_targets(makefile: str) -> dict[str, str]:
    """Target name -> its recipe text."""
    targets, current = {}, None
    for line in makefile.splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", line)
        if match and not line.startswith("\t"):
            current = match.group(1)
            targets[current] = ""
        elif current and line.startswith("\t"):
            targets[current] += line.strip() + "\n"
        elif line.strip() and not line.startswith("\t"):
            current = None
    return targets


def _script_commands(script: str) -> list[str]:
    """The commands a shell script runs (its lines that are neither comments, blank, `set` nor `cd`)."""
    lines = [line.strip() for line in script.splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "set ", "cd "))]


def run_by_ci(readme: str, ci: str) -> list[str]:
    """The README's quick-start commands that CI runs: those `.ci/run` runs as they are written."""
    ci_commands = _script_commands(ci)
    return [command for command in _quick_start_commands(readme) if command in ci_commands]


def not_make_targets(readme: str, makefile: str) -> list[str]:
    """The README's quick-start commands that are not `make <target>` of the Makefile."""
    targets = _make_targets(makefile)
    missing = []
    for command in _quick_start_commands(readme):
        words = shlex.split(command)
        if not (len(words) == 2 and words[0] == "make" and words[1] in targets):
            missing.append(command)
    return missing


def test_the_quick_start_is_make_run_and_make_test_and_ci_runs_the_test_command_alone():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert _quick_start_commands(readme) == ["make run", "make test"]
    assert not_make_targets(readme, makefile) == []
    assert run_by_ci(readme, ci) == ["make test"]
    assert _script_commands(ci) == ["make test"]  # CI runs the README's test command and nothing else


def test_the_checks_tell_the_command_ci_runs_from_the_others():
    makefile = "run:\n\tpython -m x\ntest:\n\tpytest\n"
    readme = "# t\n\n```bash\nmake run\nmake test\nmake bench\npython go.py\n```\n"
    ci = "#!/usr/bin/env bash\nset -euo pipefail\ncd here\nmake test\n"
    assert run_by_ci(readme, ci) == ["make test"]  # calling make at all does not make every target CI's
    assert run_by_ci(readme, "python go.py\n") == ["python go.py"]
    assert run_by_ci(readme, "make tests\n") == []  # a different target, not a prefix match
    assert not_make_targets(readme, makefile) == ["make bench", "python go.py"]


def test_make_run_is_the_cli_main_job():
    """``make run`` drives the command line's compare on inverted_pendulum (the project's main job)."""
    recipe = _make_targets((ROOT / "Makefile").read_text(encoding="utf-8"))["run"]
    assert "-m brax_bridge_app.cli compare --env inverted_pendulum" in recipe
    from typer.main import get_command

    from brax_bridge_app import cli

    compare = get_command(cli.app).commands["compare"]
    assert "--env" in {opt for param in compare.params for opt in param.opts}
