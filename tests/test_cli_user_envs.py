"""The command line on a user's own env (``--env module.path:Name`` and ``--env path/to/file.py:Name``): train,
compare, eval, resume from another working directory, ``envs``, and every way an import can fail.

The env is a physics-free point written into a temporary file, so each run compiles in seconds."""

import json
import logging
import os
import re
import sys

import jax
import pytest
from typer.testing import CliRunner

from brax_bridge_app import cli, envinfo, rundir, user_envs

runner = CliRunner()

DRIFT = '''
import jax
import jax.numpy as jnp

from brax_core.envs import Env, State


class Drift(Env):
    """A point moved by its action, paid for being near 1 (no physics engine: compiles in milliseconds)."""

    default_episode_length = 12

    @property
    def action_size(self):
        return 1

    @property
    def dt(self):
        return jnp.float32(0.1)

    def reset(self, rng):
        position = jax.random.uniform(rng, (1,), jnp.float32, -0.1, 0.1)
        zero = jnp.zeros((), jnp.float32)
        return State(position, position, zero, zero)

    def step(self, state, action):
        position = state.pipeline_state + 0.1 * action
        return state.replace(pipeline_state=position, obs=position, reward=-jnp.abs(position[0] - 1.0))


def make_drift():
    return Drift()


def needs_a_size(size):
    return Drift()


def returns_a_number():
    return 3


class Helper:
    pass


NOT_AN_ENV = 3
'''

TINY = ["--num-timesteps", "240", "--num-envs", "8", "--batch-size", "8", "--num-minibatches", "2",
        "--unroll-length", "5", "--num-evals", "2", "--num-eval-envs", "8",
        "--policy-hidden-layer-sizes", "8", "--value-hidden-layer-sizes", "8"]


def invoke(*args: str):
    return runner.invoke(cli.app, list(args), catch_exceptions=False)


def _error_text(result) -> str:
    return re.sub(r"[\s│╭╮╰╯─]+", " ", result.output)


def _forget(module_file: str) -> None:
    """Drops the module run from ``module_file`` from this process, as a new process would start without it."""
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == module_file:
            del sys.modules[name]


@pytest.fixture
def drift_file(tmp_path):
    folder = tmp_path / "robots"
    folder.mkdir()
    path = folder / "drift_env.py"
    path.write_text(DRIFT)
    broken = folder / "broken_env.py"
    broken.write_text("import a_package_that_is_not_installed\n")
    return path


def _config(run_dir) -> dict:
    return json.loads((run_dir / rundir.CONFIG).read_text())


def _eval(run_dir) -> dict:
    result = invoke("eval", str(run_dir), "--episodes", "3")
    assert result.exit_code == 0, result.output
    data = json.loads((run_dir / rundir.EVAL).read_text())
    assert data["mean_length"] == 12.0  # Drift's default_episode_length, from the class
    # 12 steps of -|position - 1|: at worst (always moving away) -(1.2 + 1.3 + ... + 2.3) = -21
    assert all(-21.5 < r < 0.0 for r in data["returns"])
    return data


def test_a_relative_file_path_trains_records_its_absolute_path_and_resumes_from_elsewhere(
    drift_file, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    result = invoke("train", "--env", "robots/drift_env.py:Drift", "--trainer", "torch", *TINY)
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("drift_env_Drift-torch-")  # the file's stem and the name: a valid folder name
    config = _config(run_dir)
    assert config["env"]["name"] == f"{drift_file}:Drift" and envinfo.IMPORT_DIR not in config
    assert config["run"]["preset"] is None and config["env"]["episode_length"] == 12
    _eval(run_dir)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    _forget(str(drift_file))
    result = invoke("train", "--resume", str(run_dir), "--num-timesteps", "480")
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / rundir.SUMMARY).read_text())
    assert summary["status"] == "completed" and summary["env_steps"] >= 480
    assert invoke("train", "--resume", str(run_dir), "--env", str(drift_file) + ":Drift").exit_code == 0


def test_a_module_path_trains_and_evaluates_from_another_working_directory(tmp_path, monkeypatch):
    home = tmp_path / "project"
    home.mkdir()
    (home / "drift_module_env.py").write_text(DRIFT)
    monkeypatch.chdir(home)
    run_dir = tmp_path / "run"
    result = invoke("train", "--env", "drift_module_env:Drift", "--out", str(run_dir), *TINY)
    assert result.exit_code == 0, result.output
    config = _config(run_dir)
    assert config["env"]["name"] == "drift_module_env:Drift" and config[envinfo.IMPORT_DIR] == str(home)

    monkeypatch.chdir(tmp_path)  # the module is not on the path from here: the recorded folder finds it
    _forget(str(home / "drift_module_env.py"))
    assert "drift_module_env" not in sys.modules
    _eval(run_dir)
    _forget(str(home / "drift_module_env.py"))
    result = invoke("train", "--resume", str(run_dir), "--num-timesteps", "480")
    assert result.exit_code == 0, result.output
    assert json.loads((run_dir / rundir.SUMMARY).read_text())["env_steps"] >= 480


@pytest.mark.slow
def test_compare_takes_a_factory_by_absolute_path(drift_file, tmp_path):
    """Each run in a process of its own, which imports the user's file again by its path."""
    out = tmp_path / "compare"
    result = invoke("compare", "--env", f"{drift_file}:make_drift", "--out", str(out), "--seeds", "0", *TINY)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "compare.json").read_text())
    assert data["env"] == f"{drift_file}:make_drift" and data["preset"] is None
    assert [(r["trainer"], r["status"]) for r in data["runs"]] == [("jax", "completed"), ("torch", "completed")]
    # A factory function has no default_episode_length of its own: the class of the env it returns has.
    assert data["config"]["env"]["episode_length"] == 12
    for trainer in ("jax", "torch"):
        assert _config(out / f"{trainer}-seed0")["env"]["name"] == f"{drift_file}:make_drift"
        _eval(out / f"{trainer}-seed0")


def test_envs_describes_a_users_env_without_compiling(drift_file, caplog):
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles():
        result = invoke("envs", f"{drift_file}:Drift", "fast")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in result.output.splitlines() if line.count("│") == 7}
    assert rows["fast"] == ["2", "1", "100", "0.02", "yes"]
    described = [row for name, row in rows.items() if name != "fast" and row[0]]  # a long name folds onto more lines
    assert described == [["1", "1", "12", "0.1", "yes"]]  # its step differentiates: checked from shapes
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling")]
    assert not [m for m in compiled if "reset" in m or "step" in m], compiled


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_robot_module:Arm3", r"module 'no_such_robot_module' not found \(looked in .* and on the Python path"),
        ("{dir}/missing.py:Drift", r"file not found: .*/robots/missing\.py"),
        ("{dir}/drift_env.py:Arm3", r"drift_env\.py has no attribute 'Arm3'; its Env classes: Drift"),
        ("{dir}/drift_env.py:Drift.size", r"Drift in .*drift_env\.py has no attribute 'size'"),
        ("{dir}/drift_env.py:NOT_AN_ENV", "is of type int, not a brax_core Env class nor a factory returning one"),
        ("{dir}/drift_env.py:Helper", "is the class Helper, which is not a brax_core Env"),
        ("{dir}/drift_env.py:returns_a_number", r"returns_a_number\(\) returned a value of type int, not a brax_core"),
        ("{dir}/drift_env.py:needs_a_size", r"calling .*needs_a_size\(\) failed: TypeError: .*size"),
        ("{dir}/broken_env.py:Drift", "failed: ModuleNotFoundError: No module named 'a_package_that_is_not_installed'"),
        ("{dir}/drift_env:Drift", "the path .* must name the Python file itself, ending in .py"),
        ("my-robot:Arm3", "'my-robot' is not a module path"),
        ("my_robot:", "both sides of the colon are needed"),
        ("my_robot:3arm", "'3arm' after the colon is not a Python name"),
    ],
)
def test_an_import_that_fails_says_which_part_before_anything_compiles(drift_file, spec, message, caplog):
    spec = spec.format(dir=drift_file.parent)
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles():
        result = invoke("train", "--env", spec, *TINY)
    assert result.exit_code == 2, result.output
    text = _error_text(result).replace(" ", "")  # rich wraps long paths inside words
    assert re.search(message.replace(" ", ""), text), result.output
    assert text.startswith("Usage:") and "--env" in text
    assert not [r for r in caplog.records if r.getMessage().startswith("Compiling")]


@pytest.mark.parametrize("command", [["compare", "--env"], ["envs"]])
def test_compare_and_envs_refuse_a_failing_import_too(command):
    result = invoke(*command, "no_such_robot_module:Arm3")
    assert result.exit_code == 2, result.output
    assert "module 'no_such_robot_module' not found" in _error_text(result), result.output


def test_a_module_that_fails_to_import_is_told_from_a_missing_module(drift_file, monkeypatch):
    monkeypatch.chdir(drift_file.parent)
    result = invoke("train", "--env", "broken_env:Drift")
    assert result.exit_code == 2, result.output
    text = _error_text(result).replace(" ", "")
    expected = "importing module 'broken_env' failed: ModuleNotFoundError: No module named 'a_package_that_is_not"
    assert expected.replace(" ", "") in text


def test_a_run_whose_env_file_moved_is_refused_by_eval_and_resume(drift_file, tmp_path):
    run_dir = tmp_path / "run"
    tiny = [*TINY]
    tiny[tiny.index("--num-timesteps") + 1] = "0"
    assert invoke("train", "--env", f"{drift_file}:Drift", "--out", str(run_dir), *tiny).exit_code == 0
    _forget(str(drift_file))
    drift_file.rename(drift_file.with_name("moved.py"))
    for command, flag in ((["eval", str(run_dir)], "RUN_DIR"), (["train", "--resume", str(run_dir)], "--resume")):
        result = invoke(*command)
        assert result.exit_code == 2, result.output
        text = _error_text(result).replace(" ", "")
        assert f"{flag}: the run's env cannot be built:".replace(" ", "") in text
        assert f"file not found: {drift_file}".replace(" ", "") in text


def test_folder_names_and_recorded_forms():
    assert envinfo.folder_name("my_robot:Arm3") == "my_robot_Arm3"
    assert envinfo.folder_name("robots/arm.py:Arm3") == "arm_Arm3"
    assert envinfo.folder_name("playground:CheetahRun") == "playground_CheetahRun"
    assert envinfo.folder_name("fast") == "fast"
    assert user_envs.canonical("robots/arm.py:Arm3") == os.path.abspath("robots/arm.py") + ":Arm3"
    assert user_envs.canonical("my_robot:Arm3") == "my_robot:Arm3"
    assert user_envs.parse(r"C:\robots\arm.py:Arm3").source == r"C:\robots\arm.py"  # a drive letter stays
    assert not envinfo.is_user_env("playground:CheetahRun") and not envinfo.is_user_env("fast")
