"""``brax-bridge train --algo apg|shac``: each gradient algorithm with each of its trainers through the same run path
as PPO (one ``runs.train_run``): a run folder whose config.json holds the algorithm and its configuration, metrics
counted in env steps, a checkpoint at every evaluation (the JAX APG's too), ``eval RUN``, ``--resume RUN`` with a
larger ``--num-timesteps``, ``--config RUN/config.json``, ``--preset``; flags of another algorithm, trainers an
algorithm has not and changes a resume cannot make refused by name before anything compiles."""

import json
import os

import pytest
from cli_runner import error_text, invoke

from brax_bridge_app import algorithms, runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REACH = os.path.join(ROOT, "examples", "gradients_through_physics.py") + ":Reach"
# 2,000 env steps of 8 envs x 8 steps: 31 updates, two epochs of 16 (Brax's rounding), evaluations at 0, 1,024, 2,048.
TINY = ["--env", REACH, "--num-timesteps", "2000", "--num-envs", "8", "--horizon-length", "8", "--num-evals", "3",
        "--num-eval-envs", "8", "--episode-length", "30"]


def _rows(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("algo", "trainer", "own"), [
    ("apg", "torch", ["--learning-rate", "3e-3", "--policy-hidden-layer-sizes", "16,16"]),
    ("apg", "jax", ["--learning-rate", "3e-3", "--no-use-schedule", "--max-grad-norm", "1"]),
    ("shac", "torch", ["--critic-iterations", "2", "--discounting", "0.95", "--policy-hidden-layer-sizes", "32,32"]),
])
def test_each_gradient_algorithm_trains_evaluates_resumes_and_reruns_like_ppo(tmp_path, algo, trainer, own):
    out = tmp_path / "run"
    result = invoke("train", "--algo", algo, "--trainer", trainer, *TINY, *own, "--out", str(out))
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert (config["algo"], config["run"]["trainer"], config["env"]["name"]) == (algo, trainer, REACH)
    flags = dict(zip(own[::2], own[1::2], strict=False))
    if "--discounting" in flags:
        assert config["algorithm"]["discounting"] == 0.95 and config["network"]["policy_hidden_layer_sizes"] == [32, 32]
    if "--policy-hidden-layer-sizes" in flags:
        assert config["network"]["policy_hidden_layer_sizes"] == [int(x) for x in flags[
            "--policy-hidden-layer-sizes"].split(",")]
    if "--no-use-schedule" in own:
        assert config["algorithm"]["use_schedule"] is False and config["algorithm"]["max_grad_norm"] == 1.0
    rows = _rows(out)
    assert [row["step"] for row in rows] == [0, 1024, 2048]
    assert all("eval/episode_reward" in row for row in rows) and "training/grad_norm" in rows[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["algo"] == algo and summary["env_steps"] == 2048
    assert summary["checkpoint_step"] == 2048 and (out / "learning_curve.png").is_file()
    assert f"completed: {trainer} {algo.upper()} on" in " ".join(result.output.split())

    evaluated = invoke("eval", str(out), "--episodes", "3")
    assert evaluated.exit_code == 0, evaluated.output
    returns = json.loads((out / "eval.json").read_text())["returns"]
    assert len(returns) == 3 and all(isinstance(r, float) for r in returns)

    # A larger --num-timesteps trains on from the checkpoint: 4,000 env steps, the 32 updates left in two epochs.
    resumed = invoke("train", "--resume", str(out), "--num-timesteps", "4000")
    assert resumed.exit_code == 0, resumed.output
    assert [row["step"] for row in _rows(out)] == [0, 1024, 2048, 3008, 3968]
    resumed_config = json.loads((out / "config.json").read_text())
    assert resumed_config["run"]["num_timesteps"] == 4000 and resumed_config["resumed"]

    # The run folder's config.json reruns the same configuration elsewhere.
    again = tmp_path / "again"
    rerun = invoke("train", "--config", str(out / "config.json"), "--num-timesteps", "1000", "--num-evals", "2",
                   "--out", str(again))
    assert rerun.exit_code == 0, rerun.output
    again_config = json.loads((again / "config.json").read_text())
    assert again_config["algo"] == algo and again_config["algorithm"] == resumed_config["algorithm"]
    assert again_config["network"] == config["network"] and again_config["run"]["num_evals"] == 2


@pytest.mark.parametrize(("args", "message"), [
    (["--algo", "shac", "--trainer", "jax"], "--algo shac trains with --trainer torch; got --trainer jax"),
    (["--algo", "apg", "--clipping-epsilon", "0.2"], "--algo apg does not take --clipping-epsilon (--clipping-epsilon "
                                                     "is ppo's)"),
    (["--algo", "apg", "--critic-iterations", "2"], "--algo apg does not take --critic-iterations"),
    (["--horizon-length", "8"], "--algo ppo does not take --horizon-length (--horizon-length is apg/shac's)"),
    (["--algo", "sarsa"], "--algo must be one of ppo, apg, shac, sac; got 'sarsa'"),
    (["--algo", "shac", "--discounting", "1.5"], "--discounting must be <= 1; got 1.5"),
    (["--algo", "shac", "--learning-rate-schedule", "cosine"],
     "--learning-rate-schedule must be one of: linear, constant; got 'cosine'"),
    (["--algo", "apg", "--policy-hidden-layer-sizes", "a,b"], "--policy-hidden-layer-sizes must be comma-separated"),
    (["--algo", "apg", "--preset", "nope"],
     "--preset must be one of the presets of --algo apg: ant, halfcheetah, inverted_pendulum, reacher"),
    (["--algo", "apg", "--adam-b", "0.9,1.5"], "--adam-b must be two numbers in [0, 1)"),
])
def test_bad_gradient_runs_are_refused_by_name(tmp_path, args, message):
    result = invoke("train", "--env", REACH, *args, "--out", str(tmp_path / "run"))
    assert result.exit_code == 2 and message in error_text(result), result.output
    assert not (tmp_path / "run").exists()  # refused before the run folder is written


def test_a_preset_of_a_gradient_algorithm_sets_its_fields_and_flags_override_them(tmp_path):
    from brax_bridge_app import configuration
    from brax_core.training.agents.shac import presets

    config = configuration.resolve("halfcheetah", None, {"num_envs": 8}, algo="shac")
    assert config.run.preset == "halfcheetah" and config.env.num_envs == 8  # the env's own preset, then the flag
    assert config.run.num_timesteps == presets.PRESETS["halfcheetah"].run.num_timesteps
    assert config.run.num_evals == presets.PRESET_FIELDS["halfcheetah"]["num_evals"]


def test_the_command_line_defaults_are_each_algorithms_own_where_it_sets_none():
    for algo in algorithms.GRADIENT_ALGOS:
        python = algorithms.CONFIGS[algo].defaults()
        for name, value in algorithms.defaults(algo).items():
            if name not in algorithms.COMMAND_LINE_DEFAULTS[algo]:
                assert value == python[name], (algo, name)


def test_compare_sets_algorithms_side_by_side_at_equal_env_steps(tmp_path):
    ppo_tiny = ["--batch-size", "8", "--num-minibatches", "2", "--unroll-length", "8",
                "--policy-hidden-layer-sizes", "8,8", "--value-hidden-layer-sizes", "8,8"]
    out = tmp_path / "cmp"
    result = invoke("compare", "--algos", "ppo,apg", "--trainers", "torch", *TINY, *ppo_tiny, "--learning-rate", "3e-3",
                    "--seeds", "0", "--out", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "compare.json").read_text())
    assert report["algos"] == ["ppo", "apg"] and list(report["trainers"]) == ["ppo/torch", "apg/torch"]
    assert [run["contestant"] for run in report["runs"]] == ["ppo/torch", "apg/torch"]
    assert {run["env_steps"] for run in report["runs"]} == {2048}  # the same length for both algorithms
    config = report["config"]
    assert config["apg algorithm"]["learning_rate"] == 0.003 and config["ppo algorithm"]["learning_rate"] == 0.003
    assert config["apg network"]["policy_hidden_layer_sizes"] == [8, 8]  # a flag both algorithms have goes to both
    apg_config = json.loads((out / "apg-torch-seed0" / "config.json").read_text())
    assert apg_config["algo"] == "apg" and apg_config["algorithm"]["horizon_length"] == 8
    assert (out / "ppo-torch-seed0" / "summary.json").is_file() and "apg/torch" in (out / "report.md").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["--algos", "ppo,sarsa"], "--algos must list distinct names from ppo, apg, shac, sac; got 'ppo,sarsa'"),
    (["--algos", "shac", "--trainers", "jax"], "--algos shac trains with --trainers torch; --trainers gives jax"),
    (["--algos", "ppo", "--horizon-length", "8"], "--horizon-length: flags of no algorithm of --algos ppo"),
    (["--algos", "shac", "--preset", "inverted_double_pendulum"], "--preset must be one of the presets of --algo shac"),
    (["--algos", "ppo,shac", "--use-schedule"], "--use-schedule: flags of no algorithm of --algos ppo,shac"),
])
def test_bad_comparisons_of_algorithms_are_refused_by_name(tmp_path, args, message):
    result = invoke("compare", "--env", REACH, *args, "--seeds", "0", "--out", str(tmp_path / "cmp"))
    assert result.exit_code == 2 and message in error_text(result), result.output


def test_a_stopped_gradient_run_resumes_from_its_folder_exactly(tmp_path, monkeypatch):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    args = ["--algo", "shac", *TINY, "--critic-iterations", "2"]
    assert invoke("train", *args, "--out", str(whole)).exit_code == 0
    original = runs.train_run
    state = {"reports": 0}

    def stopped_after_first_epoch(*a, **k):
        flag = runs.StopFlag()

        def logger(step, metrics):
            state["reports"] += 1
            flag.requested = state["reports"] == 2

        return original(*a, **{**k, "stop": flag, "loggers": [logger]})

    monkeypatch.setattr(runs, "train_run", stopped_after_first_epoch)
    assert invoke("train", *args, "--out", str(parts)).exit_code == 130
    assert json.loads((parts / "summary.json").read_text())["checkpoint_step"] == 1024
    monkeypatch.undo()
    refused = invoke("train", "--resume", str(parts), "--discounting", "0.5")
    assert refused.exit_code == 2 and "--discounting cannot change on --resume" in error_text(refused)
    assert "for SHAC runs --resume changes --num-timesteps only" in error_text(refused)
    refused = invoke("train", "--resume", str(parts), "--allow-changes", "--discounting", "0.5")
    assert refused.exit_code == 2 and "a resumed SHAC run continues the saved one exactly" in error_text(refused)
    resumed = invoke("train", "--resume", str(parts))
    assert resumed.exit_code == 0, resumed.output
    assert [row["step"] for row in _rows(parts)] == [0, 1024, 2048]
    final = {name: json.loads((folder / "summary.json").read_text())["final_reward"] for name, folder in
             (("whole", whole), ("parts", parts))}
    assert final["whole"] == final["parts"]  # the same networks at the end, evaluated on the same episodes
    assert json.loads((parts / "config.json").read_text())["resumed"]
