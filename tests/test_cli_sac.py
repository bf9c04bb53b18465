"""``brax-bridge train --algo sac --trainer jax|torch``: SAC with each of its trainers through the run path every
algorithm takes: a run folder whose config.json holds ``SACConfig``, evaluations at env steps, a checkpoint of the
whole run, ``eval RUN``, ``--resume RUN`` with a larger ``--num-timesteps``, ``--config RUN/config.json``,
``compare --algos ppo,sac``; bad SAC settings refused in the flags' words before the run folder is written."""

import json

import pytest
from cli_runner import error_text, invoke

from brax_bridge_app import algorithms

# 2,048 env steps of 16 envs: a prefill of 256 transitions (16 steps), then two epochs of 56 training steps.
TINY = ["--env", "inverted_pendulum", "--num-timesteps", "2048", "--num-envs", "16", "--num-evals", "3",
        "--num-eval-envs", "8", "--episode-length", "100", "--batch-size", "32", "--grad-updates-per-step", "2",
        "--min-replay-size", "256", "--max-replay-size", "8192", "--policy-hidden-layer-sizes", "16,16",
        "--value-hidden-layer-sizes", "16,16"]


def _rows(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_sac_trains_evaluates_resumes_and_reruns_with_each_trainer(tmp_path, trainer):
    out = tmp_path / "run"
    result = invoke("train", "--algo", "sac", "--trainer", trainer, *TINY, "--tau", "0.01", "--out", str(out))
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert (config["algo"], config["run"]["trainer"], config["env"]["name"]) == ("sac", trainer, "inverted_pendulum")
    assert config["algorithm"]["tau"] == 0.01 and config["algorithm"]["min_replay_size"] == 256
    rows = _rows(out)
    assert [row["step"] for row in rows] == [256, 2048 - 896, 2048]
    assert all("eval/episode_reward" in row for row in rows) and "training/critic_loss" in rows[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["algo"] == "sac" and summary["checkpoint_step"] == 2048
    assert f"completed: {trainer} SAC on" in " ".join(result.output.split())

    evaluated = invoke("eval", str(out), "--episodes", "3")
    assert evaluated.exit_code == 0, evaluated.output
    assert len(json.loads((out / "eval.json").read_text())["returns"]) == 3

    resumed = invoke("train", "--resume", str(out), "--num-timesteps", "4096")
    assert resumed.exit_code == 0, resumed.output
    steps = [row["step"] for row in _rows(out)]
    assert steps[:3] == [256, 1152, 2048] and steps[-1] >= 4096 and len(steps) == 5
    assert json.loads((out / "config.json").read_text())["run"]["num_timesteps"] == 4096

    again = tmp_path / "again"
    rerun = invoke("train", "--config", str(out / "config.json"), "--num-timesteps", "1024", "--num-evals", "2",
                   "--out", str(again))
    assert rerun.exit_code == 0, rerun.output
    again_config = json.loads((again / "config.json").read_text())
    assert again_config["algo"] == "sac" and again_config["algorithm"]["tau"] == 0.01


@pytest.mark.parametrize(("args", "message"), [
    (["--tau", "0"], "--tau must be > 0; got 0.0"),
    (["--min-replay-size", "5000", "--num-timesteps", "4096"],
     "--min-replay-size (5000) must be less than --num-timesteps (4096)"),
    (["--max-replay-size", "64", "--batch-size", "128"], "--max-replay-size (64) is smaller than one batch"),
    (["--horizon-length", "8"], "--algo sac does not take --horizon-length (--horizon-length is apg/shac's)"),
    (["--preset", "nope"], "--preset must be one of the presets of --algo sac: inverted_pendulum"),
])
def test_bad_sac_runs_are_refused_by_name(tmp_path, args, message):
    result = invoke("train", "--algo", "sac", "--env", "inverted_pendulum", *args, "--out", str(tmp_path / "run"))
    assert result.exit_code == 2 and message in error_text(result), result.output
    assert not (tmp_path / "run").exists()


def test_sac_has_both_trainers_and_says_what_resume_changes():
    assert algorithms.TRAINERS_OF["sac"] == ("jax", "torch")
    assert "SAC runs: --num-timesteps only (a larger one trains on)" in algorithms.resume_text()


def test_compare_sets_sac_beside_ppo(tmp_path):
    out = tmp_path / "cmp"
    ppo_tiny = ["--num-minibatches", "2", "--unroll-length", "8"]
    result = invoke("compare", "--algos", "ppo,sac", "--trainers", "torch", *TINY, *ppo_tiny, "--seeds", "0",
                    "--out", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "compare.json").read_text())
    assert report["algos"] == ["ppo", "sac"] and list(report["trainers"]) == ["ppo/torch", "sac/torch"]
    assert all(run["status"] == "completed" for run in report["runs"])
