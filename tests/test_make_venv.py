"""`make run`'s virtualenv (scripts/venv.sh): a Python that is too old, missing, or without venv/ensurepip stops with
one line naming what to install, before anything is created; a virtualenv is installed into once and then reused;
extras asked for later are added; a folder that is not a virtualenv is refused, never deleted. The whole path
(a fresh virtualenv made with the machine's stock Python, the main job at a tiny size, then reused) runs in
`make test` (tests/fresh_install.sh)."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "venv.sh"


def _run(tmp_path: Path, python: str, venv: Path, extras: str = "", explicit: str = "1"):
    env = {**os.environ, "PYTHON": python, "VENV": str(venv), "EXTRAS": extras, "PYTHON_EXPLICIT": explicit}
    env.pop("TORCH_INDEX", None)
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)


def _fake_python(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/bash\n{body}\nexec {sys.executable} \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def _venv_with_recording_pip(tmp_path: Path) -> tuple[Path, Path]:
    """A real virtualenv whose `python -m pip` only records its arguments (one line per call)."""
    venv, log = tmp_path / "venv", tmp_path / "pip.log"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "pip").mkdir()
    (site / "pip" / "__init__.py").write_text("")
    (site / "pip" / "__main__.py").write_text(
        f"import sys\nwith open({str(log)!r}, 'a') as f:\n    f.write(' '.join(sys.argv[1:]) + '\\n')\n")
    return venv, log


def test_the_oldest_python_named_is_pyproject_requires_python():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    shell = (ROOT / "scripts" / "check_python.sh").read_text()
    assert requires == ">=" + re.search(r"^BRAX_BRIDGE_MIN_PYTHON=(\S+)$", shell, re.M).group(1)


@pytest.mark.parametrize("case", ["old", "no-ensurepip", "missing"])
def test_a_python_that_cannot_serve_stops_with_one_line_before_anything_is_made(tmp_path, case):
    if case == "old":  # every version query answers 3.10
        python = _fake_python(tmp_path, "python3.10", '[[ "$*" == *version_info* ]] && exec '
                              f'{sys.executable} -c "import sys; sys.version_info = (3, 10, 12); exec(sys.argv[1])" '
                              '"${@:2}"')
        wanted = f"PYTHON={python} is Python 3.10; brax-bridge needs Python >= 3.11"
    elif case == "no-ensurepip":  # Debian's python3 without python3-venv
        python = _fake_python(tmp_path, "python3", '[[ "$*" == *ensurepip* ]] && exit 1')
        version = "{}.{}".format(*sys.version_info[:2])
        wanted = f"cannot make a virtualenv with pip: its venv or ensurepip module is missing; install it " \
                 f"(Debian/Ubuntu: sudo apt install python{version}-venv)"
    else:
        python = str(tmp_path / "no-such-python")
        wanted = f"PYTHON={python}: no such command; brax-bridge needs Python >= 3.11"
    venv = tmp_path / "venv"
    result = _run(tmp_path, python, venv)
    assert result.returncode == 2
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: ") and wanted in result.stderr
    assert not venv.exists()


def test_a_virtualenv_is_installed_into_once_then_reused_and_extras_are_added(tmp_path):
    venv, log = _venv_with_recording_pip(tmp_path)
    first = _run(tmp_path, sys.executable, venv)
    assert first.returncode == 0, first.stderr
    assert "installing into the existing virtualenv" in first.stdout
    calls = log.read_text().splitlines()
    # torch pinned first, on its own, then the package with the same pin so that pip keeps that build
    assert [c.split()[-1] for c in calls] == ["torch==2.13.0", "."]
    assert "-e ." in calls[1] and "torch==2.13.0" in calls[1]

    again = _run(tmp_path, sys.executable, venv)
    assert again.returncode == 0 and again.stdout.startswith(f"== reusing the virtualenv {venv}")
    assert log.read_text().splitlines() == calls  # nothing installed

    more = _run(tmp_path, sys.executable, venv, extras="torchrl,test")
    assert more.returncode == 0
    assert log.read_text().splitlines()[-1].endswith("-e .[test,torchrl]")
    # `make run` (no extra) after that keeps the virtualenv as it is, whichever Python is named without PYTHON=
    size = len(log.read_text().splitlines())
    kept = _run(tmp_path, str(tmp_path / "no-such-python"), venv, explicit="0")
    assert kept.returncode == 0 and "reusing" in kept.stdout
    assert len(log.read_text().splitlines()) == size

    # a changed pyproject.toml installs again (the stamp holds its digest)
    stamp = (venv / ".brax-bridge-install").read_text()
    (venv / ".brax-bridge-install").write_text(re.sub(r"key=\w+", "key=0", stamp))
    changed = _run(tmp_path, sys.executable, venv)
    assert changed.returncode == 0 and len(log.read_text().splitlines()) == size + 2
    assert log.read_text().splitlines()[-1].endswith("-e .[test,torchrl]")  # the extras installed before kept


def test_a_folder_that_is_not_a_virtualenv_is_refused_and_left_alone(tmp_path):
    folder = tmp_path / "venv"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    result = _run(tmp_path, sys.executable, folder)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert f"VENV={folder} exists and is not a working virtualenv" in result.stderr
    assert (folder / "notes.txt").read_text() == "mine"


def test_make_run_installs_into_its_virtualenv_and_says_how_to_activate_it():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^run:\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "scripts/venv.sh" in makefile and "VENV_SCRIPT" in recipe.splitlines()[0]
    assert "$(VENV_PYTHON) -m brax_bridge_app.cli compare --env inverted_pendulum" in recipe
    assert "source $(VENV)/bin/activate" in recipe
    recipes = "".join(line for line in makefile.splitlines(keepends=True) if line.startswith("\t"))
    assert "pip" not in recipes  # nothing installs outside the virtualenv
