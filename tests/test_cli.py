"""The brax-bridge command line, run in-process at tiny sizes; every file it writes is opened and checked."""

import json
import logging
import re

import jax
import pytest
from PIL import Image
from typer.testing import CliRunner

from brax_bridge import cli
from brax_bridge.app import hparams, plots, report, rundir

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(cli.app, list(args), catch_exceptions=False)


def _error_text(result) -> str:
    # click prints usage errors inside a box; collapse it to one line for matching.
    return re.sub(r"[\s│╭╮╰╯─]+", " ", result.output)


def test_envs_table_without_compiling_physics(caplog):
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles():
        result = invoke("envs", "fast", "inverted_pendulum")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in result.output.splitlines() if line.count("│") == 6}
    assert rows["fast"] == ["2", "1", "100", "0.05"]
    assert rows["inverted_pendulum"] == ["4", "1", "1000", "0.04"]
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling")]
    assert not [m for m in compiled if "reset" in m or "step" in m], compiled  # sizes come from eval_shape only


def test_envs_lists_every_registered_env(monkeypatch):
    from brax_bridge.app import envinfo
    from brax_core import envs

    described = []
    monkeypatch.setattr(envinfo, "describe", lambda name: described.append(name) or envinfo.EnvInfo(name, 3, 2, 7, 0.5))
    result = invoke("envs")
    assert result.exit_code == 0 and described == envs.registered_names()
    assert invoke("envs", "nope").exit_code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--env", "nope"], "--env must be one of: .*inverted_pendulum"),
        (["train"], "--env is required"),
        (["train", "--env", "fast", "--trainer", "tf"], "--trainer must be one of: jax, torch"),
        (["train", "--env", "fast", "--num-envs", "0"], "--num-envs must be >= 1; got 0"),
        (["train", "--env", "fast", "--learning-rate", "0"], "--learning-rate must be > 0"),
        (["train", "--env", "fast", "--discounting", "1.5"], "--discounting must be <= 1"),
        (["train", "--env", "fast", "--policy-hidden-layer-sizes", "32,x"], "--policy-hidden-layer-sizes must be"),
        (["train", "--env", "fast", "--activation", "foo"], "--activation must be one of: relu"),
        (["train", "--env", "fast", "--preset", "nope"], "--preset must be one of"),
        (["train", "--env", "fast", "--num-envs", "3", "--batch-size", "4", "--num-minibatches", "1"],
         r"--batch-size x --num-minibatches \(4 x 1 = 4\) must be divisible by --num-envs \(3\)"),
        (["train", "--env", "fast", "--device", "tpu"], "--device must be auto, cpu, cuda"),
        (["train", "--resume", "/no/such/run"], "--resume: run folder /no/such/run does not exist"),
        (["compare", "--env", "fast", "--seeds", "0,a"], "--seeds must be comma-separated integers"),
        (["compare", "--env", "fast", "--trainers", "jax,jax"], "--trainers must list distinct names"),
        (["eval", "/no/such/run"], "RUN_DIR: run folder /no/such/run does not exist"),
        (["eval", "/tmp", "--episodes", "0"], "--episodes'.*greater than or equal to 1"),
        (["bench", "--size", "huge"], "--size must be one of: small, medium, large"),
    ],
)
def test_bad_flags_are_named_before_anything_runs(args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert re.search(message, _error_text(result)), result.output


def test_help_everywhere():
    for command in ([], ["envs"], ["train"], ["compare"], ["eval"], ["bench"]):
        result = invoke(*command, "--help")
        assert result.exit_code == 0 and "Usage" in result.output
    assert "--num-minibatches" in invoke("train", "--help").output


def test_hyperparameters_resolve_default_preset_flag():
    resolved, used = hparams.resolve("fast", None, {"num_envs": 8, "batch_size": 8, "num_minibatches": 2})
    assert resolved["num_envs"] == 8 and resolved["episode_length"] == 100  # the env's own episode length
    assert set(resolved) == set(hparams.BY_NAME)
    assert resolved["max_grad_norm"] is None
    table = hparams.presets()
    if "fast" in table:
        assert used == "fast"
    resolved, _ = hparams.resolve("fast", None, {"max_grad_norm": 0.0, "num_envs": 1})
    assert resolved["max_grad_norm"] is None  # 0 documents "no clipping"
    assert hparams.parse_sizes("64, 64") == (64, 64)


def _rows(n: int, trainer_offset: float = 0.0) -> list[dict]:
    return [{"step": 1000 * i, "time_s": 2.0 + i, rundir.EVAL_REWARD: 10.0 * i + trainer_offset,
             rundir.EVAL_REWARD_STD: 1.0, rundir.TRAIN_SPS: 500.0} for i in range(n)]


def test_plots_and_report_files(tmp_path):
    curve = plots.learning_curve(_rows(5), str(tmp_path / "curve.png"), title="t")
    with Image.open(curve) as image:
        assert image.size == (640, 400)
    figure = plots.compare([("jax seed 0", _rows(5)), ("torch seed 0", _rows(4, 1.0))], str(tmp_path / "c.png"))
    with Image.open(figure) as image:
        assert image.size == (1100, 420)
    config = {"env": "fast", "trainer": "jax", "seed": 0}
    jax_summary = __import__("brax_bridge.app.training", fromlist=["summarize"]).summarize(
        config, _rows(5), "completed", 9.0)
    assert jax_summary["final_reward"] == 40.0 and jax_summary["env_steps"] == 4000
    assert jax_summary["first_report_s"] == 3.0 and jax_summary["steps_per_s"] == pytest.approx(1000.0)
    torch_summary = dict(jax_summary, trainer="torch", final_reward=31.0)
    text = report.markdown("fast", [jax_summary, torch_summary], {"num_envs": 4}, "test box", "brax-bridge compare")
    table = [line for line in text.splitlines() if line.startswith("| jax") or line.startswith("| torch")]
    assert table[0].split("|")[3].strip() == "40.0" and table[1].split("|")[3].strip() == "31.0"
    assert "| num_envs | 4 |" in text


def test_metrics_log_round_trip(tmp_path):
    log = rundir.MetricsLog(str(tmp_path))
    log.append({"step": 1, "time_s": 0.5, "x": float("nan")})
    log.append({"step": 2, "time_s": 1.0, "eval/episode_reward": 3.0})
    rows = rundir.read_metrics(str(tmp_path))
    assert rows[0]["x"] is None and rundir.reward_of(rows[1]) == 3.0  # NaN stored as null: valid JSON
    for line in (tmp_path / rundir.METRICS).read_text().splitlines():
        json.loads(line)
