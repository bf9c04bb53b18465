"""The README's quick-start commands are the ones CI runs (verbatim in .ci/run, or targets of the Makefile it calls)."""

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


def _not_run_by_ci(readme: str, ci: str, makefile: str) -> list[str]:
    """README quick-start commands that neither appear in .ci/run nor are targets of the Makefile it calls."""
    ci_calls_make = re.search(r"(^|\s)make(\s|$)", ci, re.M) is not None
    targets = _make_targets(makefile)
    missing = []
    for command in _quick_start_commands(readme):
        words = shlex.split(command)
        is_target = ci_calls_make and words[0] == "make" and len(words) == 2 and words[1] in targets
        if command not in ci and not is_target:
            missing.append(command)
    return missing


def test_readme_commands_are_what_ci_runs():
    readme = ROOT / "README.md"
    assert readme.is_file(), "README.md is missing: it must show the quick-start commands in a ```bash block"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert _not_run_by_ci(readme.read_text(encoding="utf-8"), ci, makefile) == []


def test_the_check_catches_a_command_ci_does_not_run():
    makefile = "run:\n\tpython -m x\ntest:\n\tpytest\n"
    readme = "# t\n\n```bash\nmake run\nmake bench\npython go.py\n```\n"
    assert _not_run_by_ci(readme, "make test\n", makefile) == ["make bench", "python go.py"]
    assert _not_run_by_ci(readme, "python go.py\n", makefile) == ["make run", "make bench"]  # CI never calls make


def test_make_run_is_the_cli_main_job():
    """``make run`` drives the command line's compare on inverted_pendulum (the project's main job)."""
    recipe = _make_targets((ROOT / "Makefile").read_text(encoding="utf-8"))["run"]
    assert "-m brax_bridge_app.cli compare --env inverted_pendulum" in recipe
    from typer.main import get_command

    from brax_bridge_app import cli

    compare = get_command(cli.app).commands["compare"]
    assert "--env" in {opt for param in compare.params for opt in param.opts}
