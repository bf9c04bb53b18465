"""``brax-bridge train --algo apg|shac``: each gradient algorithm with each of its trainers through the command line,
into a run folder whose metrics count env steps as PPO's do; flags of another algorithm, trainers an algorithm has
not and envs whose step does not differentiate refused by name before anything compiles."""

import json
import os

import pytest
from cli_runner import error_text, invoke

from brax_bridge_app import algorithms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REACH = os.path.join(ROOT, "examples", "gradients_through_physics.py") + ":Reach"
# 2,000 env steps of 8 envs x 8 steps: 31 updates, two epochs of 16 (Brax's rounding), evaluations at 0, 1,024, 2,048.
TINY = ["--env", REACH, "--num-timesteps", "2000", "--num-envs", "8", "--horizon-length", "8", "--num-evals", "3",
        "--num-eval-envs", "8", "--episode-length", "30"]


@pytest.mark.parametrize(("algo", "trainer", "own"), [
    ("apg", "torch", ["--learning-rate", "3e-3", "--hidden-layer-sizes", "16,16"]),
    ("apg", "jax", ["--learning-rate", "3e-3", "--no-use-schedule"]),
    ("shac", "torch", ["--critic-iterations", "2", "--gamma", "0.95", "--actor-hidden-layer-sizes", "32,32"]),
])
def test_each_gradient_algorithm_trains_with_each_trainer_into_a_run_folder(tmp_path, algo, trainer, own):
    out = tmp_path / "run"
    result = invoke("train", "--algo", algo, "--trainer", trainer, *TINY, *own, "--out", str(out))
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert (config["algo"], config["trainer"], config["env"]) == (algo, trainer, REACH)
    flags = dict(zip(own[::2], own[1::2], strict=False))
    if "--gamma" in flags:
        assert config["settings"]["gamma"] == 0.95 and config["settings"]["actor_hidden_layer_sizes"] == [32, 32]
    if "--hidden-layer-sizes" in flags:
        assert config["settings"]["hidden_layer_sizes"] == [16, 16]
    if "--no-use-schedule" in own:
        assert config["settings"]["use_schedule"] is False
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0, 1024, 2048]
    assert all("eval/episode_reward" in row for row in rows) and "training/grad_norm" in rows[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["algo"] == algo and summary["env_steps"] == 2048
    assert (summary["checkpoint_step"] == 2048) == (trainer == "torch") and (out / "learning_curve.png").is_file()
    assert f"completed: {trainer} {algo.upper()} on" in " ".join(result.output.split())
    refused = invoke("eval", str(out))
    assert refused.exit_code == 2 and f"a run of --algo {algo}; eval takes PPO runs" in error_text(refused)


@pytest.mark.parametrize(("args", "message"), [
    (["--algo", "shac", "--trainer", "jax"], "--algo shac trains with --trainer torch; got --trainer jax"),
    (["--algo", "apg", "--clipping-epsilon", "0.2"], "--algo apg does not take --clipping-epsilon; its hyperparameter "
                                                     "flags: --num-timesteps,"),
    (["--algo", "apg", "--critic-iterations", "2"], "--algo apg does not take --critic-iterations"),
    (["--algo", "ppo", "--horizon-length", "8"], "--horizon-length: flags of --algo apg|shac; --algo ppo takes"),
    (["--algo", "sac"], "--algo must be one of ppo, apg, shac; got 'sac'"),
    (["--algo", "shac", "--gamma", "1.5"], "--gamma must be <= 1; got 1.5"),
    (["--algo", "shac", "--lr-schedule", "cosine"], "--lr-schedule must be one of: linear, constant; got 'cosine'"),
    (["--algo", "apg", "--hidden-layer-sizes", "a,b"], "--hidden-layer-sizes must be one or more positive integers"),
    (["--algo", "apg", "--preset", "halfcheetah"], "--algo apg does not take --preset: its runs start from the flags"),
    (["--algo", "apg", "--config", "x.yaml"], "--algo apg does not take --config"),
])
def test_bad_gradient_runs_are_refused_by_name(tmp_path, args, message):
    result = invoke("train", "--env", REACH, *args, "--out", str(tmp_path / "run"))
    assert result.exit_code == 2 and message in error_text(result), result.output
    assert not (tmp_path / "run").exists()  # refused before the run folder is written


def test_an_env_whose_step_does_not_differentiate_is_refused_naming_those_that_do(tmp_path):
    result = invoke("train", "--algo", "apg", "--env", "reacher", "--out", str(tmp_path / "run"))
    text = error_text(result)
    assert result.exit_code == 2, result.output
    assert "--env reacher: differentiable=True: reacher's step cannot be differentiated" in text
    assert "inverted_pendulum, halfcheetah, ant and humanoid" in text
    assert "env.sys = env.sys.replace(opt=env.sys.opt.replace(iterations=1))" in text
    assert not (tmp_path / "run").exists()


def test_the_gradient_flags_take_the_trainers_own_defaults():
    import inspect

    from torch_analytic import apg, shac

    for algo, train in (("apg", apg.train), ("shac", shac.train)):
        python = {name: p.default for name, p in inspect.signature(train).parameters.items()}
        for name, value in algorithms.DEFAULTS[algo].items():
            default = python.get(name, inspect.Parameter.empty)
            if default is not inspect.Parameter.empty and name not in ("num_envs", "num_evals"):  # the command line's
                assert value == default, (algo, name, value, default)


def test_train_help_lists_the_gradient_flags_in_their_own_section_with_each_algorithms_default():
    result = invoke("train", "--help")
    text = " ".join(result.output.split())
    assert "APG and SHAC (with --algo apg|shac):" in text
    for name in algorithms.FIELDS:
        assert "--" + name.replace("_", "-") in text
    assert "--horizon-length INT env steps per update: the unroll the gradient flows through (--algo apg|shac) " \
           "[default: 32 (apg); 32 (shac)]" in text


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
    assert config["apg"]["learning_rate"] == 0.003 and config["ppo algorithm"]["learning_rate"] == 0.003
    apg_config = json.loads((out / "apg-torch-seed0" / "config.json").read_text())
    assert apg_config["algo"] == "apg" and apg_config["settings"]["horizon_length"] == 8
    assert (out / "ppo-torch-seed0" / "summary.json").is_file() and "apg/torch" in (out / "report.md").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["--algos", "ppo,sac"], "--algos must list distinct names from ppo, apg, shac; got 'ppo,sac'"),
    (["--algos", "shac", "--trainers", "jax"], "--algos shac trains with --trainers torch; --trainers gives jax"),
    (["--algos", "ppo", "--horizon-length", "8"], "--horizon-length: flags of --algos with apg or shac"),
    (["--algos", "shac", "--preset", "halfcheetah"], "--preset is PPO's"),
    (["--algos", "ppo,shac", "--use-schedule"], "--use-schedule: flags of an algorithm --algos does not name"),
    (["--algos", "shac", "--clipping-epsilon", "0.2"], "--algo shac does not take --clipping-epsilon"),
])
def test_bad_comparisons_of_algorithms_are_refused_by_name(tmp_path, args, message):
    result = invoke("compare", "--env", REACH, *args, "--seeds", "0", "--out", str(tmp_path / "cmp"))
    assert result.exit_code == 2 and message in error_text(result), result.output


def test_a_stopped_gradient_run_resumes_from_its_folder_exactly(tmp_path, monkeypatch):
    from brax_bridge_app import gradient_runs, runs

    whole, parts = tmp_path / "whole", tmp_path / "parts"
    args = ["--algo", "shac", *TINY, "--critic-iterations", "2"]
    assert invoke("train", *args, "--out", str(whole)).exit_code == 0
    # Ctrl-C during the report before training: the run stops there.
    original = gradient_runs.train_run

    def stopped_at_first_report(*a, **k):
        flag = runs.StopFlag()
        flag.requested = True
        return original(*a, **{**k, "stop": flag})

    monkeypatch.setattr(gradient_runs, "train_run", stopped_at_first_report)
    stopped = invoke("train", *args, "--out", str(parts))
    # The run driver saves a run before a callback's exception leaves it: a stop at the report before training
    # leaves the checkpoint of step 0.
    assert stopped.exit_code == 130 and json.loads((parts / "summary.json").read_text())["checkpoint_step"] == 0
    monkeypatch.undo()
    # Stop after the first epoch instead, and resume from there.
    state = {"reports": 0}

    def stopped_after_first_epoch(*a, **k):
        flag = runs.StopFlag()

        def logger(step, metrics):
            state["reports"] += 1
            flag.requested = state["reports"] == 2

        return original(*a, **{**k, "stop": flag, "loggers": [logger]})

    monkeypatch.setattr(gradient_runs, "train_run", stopped_after_first_epoch)
    assert invoke("train", *args, "--out", str(parts)).exit_code == 130
    assert json.loads((parts / "summary.json").read_text())["checkpoint_step"] == 1024
    monkeypatch.undo()
    refused = invoke("train", "--resume", str(parts), "--gamma", "0.5")
    assert refused.exit_code == 2 and "leave out --gamma" in error_text(refused)
    resumed = invoke("train", "--resume", str(parts))
    assert resumed.exit_code == 0, resumed.output
    rows = [json.loads(line) for line in (parts / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0, 1024, 2048]
    final = {name: json.loads((folder / "summary.json").read_text())["final_reward"] for name, folder in
             (("whole", whole), ("parts", parts))}
    assert final["whole"] == final["parts"]  # the same networks at the end, evaluated on the same episodes
    assert json.loads((parts / "config.json").read_text())["resumed"]
