"""--logger tensorboard and wandb: what each writes, read back with TensorBoard's own reader and from the files
W&B writes; each logger as one progress_fn object from Python; a missing extra named before anything runs."""

import functools
import json
import sys

import pytest
from cli_runner import TINY, error_text, invoke
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import plugin_data_pb2
from wandb_records import offline_runs, read_run

from brax_bridge_app import loggers, rundir
from brax_core import envs
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as ppo


def _events(log_dir) -> event_accumulator.EventAccumulator:
    events = event_accumulator.EventAccumulator(str(log_dir), size_guidance={event_accumulator.SCALARS: 0})
    events.Reload()
    return events


def _reported(run_dir) -> dict[str, list[tuple[int, float]]]:
    """Each metric of the run folder's metrics.jsonl as (step, value) pairs, in order."""
    series: dict[str, list[tuple[int, float]]] = {}
    for row in rundir.read_metrics(str(run_dir)):
        for key, value in row.items():
            if key not in ("step", "time_s") and value is not None:
                series.setdefault(key, []).append((row["step"], value))
    return series


def test_train_logger_tensorboard_writes_every_report_and_the_hyperparameters(tmp_path):
    run_dir = tmp_path / "run"
    result = invoke("train", "--env", "fast", "--trainer", "jax", "--out", str(run_dir),
                    "--logger", "jsonl,tensorboard", *TINY)
    assert result.exit_code == 0, result.output
    reported = _reported(run_dir)
    assert len(reported[rundir.EVAL_REWARD]) == 3  # --num-evals 3
    events = _events(run_dir / rundir.TENSORBOARD)
    assert set(reported) <= set(events.Tags()["scalars"])
    for key, series in reported.items():
        logged = [(event.step, event.value) for event in events.Scalars(key)]
        assert [step for step, _ in logged] == [step for step, _ in series], key
        assert [value for _, value in logged] == pytest.approx([value for _, value in series], rel=1e-6), key
    # The hyperparameters as the run's hparams (TensorBoard's HParams tab), eval/episode_reward its metric.
    content = events.PluginTagToContent("hparams")
    session = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hparams = session.session_start_info.hparams
    assert hparams["num_envs"].number_value == 8 and hparams["env"].string_value == "fast"
    assert hparams["trainer"].string_value == "jax" and hparams["policy_hidden_layer_sizes"].string_value == "8,8"
    assert hparams["max_grad_norm"].string_value == "none"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert [metric.name.tag for metric in experiment.metric_infos] == [rundir.EVAL_REWARD]


def test_train_logger_wandb_offline_writes_a_run_with_every_evaluation(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_dir"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    result = invoke("train", "--env", "fast", "--trainer", "torch", "--out", str(run_dir), "--logger", "wandb",
                    "--wandb-project", "brax-bridge-tests", *TINY)
    assert result.exit_code == 0, result.output
    (path,) = offline_runs(str(tmp_path / "wandb_dir"))  # WANDB_DIR, not the run folder
    assert not (run_dir / "wandb").exists()
    config, history = read_run(path)
    assert config["num_envs"] == 8 and config["trainer"] == "torch" and config["env"] == "fast"
    assert config["policy_hidden_layer_sizes"] == [8, 8]
    evaluations = [(row[loggers.WANDB_STEP], row[rundir.EVAL_REWARD]) for row in history if rundir.EVAL_REWARD in row]
    expected = _reported(run_dir)[rundir.EVAL_REWARD]
    assert [step for step, _ in evaluations] == [step for step, _ in expected] and len(expected) == 3
    assert [value for _, value in evaluations] == pytest.approx([value for _, value in expected], rel=1e-6)
    assert json.loads((run_dir / rundir.SUMMARY).read_text())["status"] == "completed"


def test_a_logger_is_one_progress_fn_for_the_trainer(tmp_path):
    network_factory = functools.partial(ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=(8, 8),
                                        value_hidden_layer_sizes=(8, 8))
    with loggers.TensorBoardLogger(str(tmp_path), hyperparameters={"learning_rate": 3e-4}) as log:
        ppo.train(envs.get_environment("fast"), num_timesteps=400, num_envs=4, batch_size=4, num_minibatches=2,
                  unroll_length=5, num_evals=2, num_eval_envs=4, episode_length=20, network_factory=network_factory,
                  progress_fn=log)
    steps = [event.step for event in _events(tmp_path).Scalars(rundir.EVAL_REWARD)]
    assert len(steps) == 2 and steps[0] == 0 and steps[-1] >= 400


def test_tensorboard_logger_takes_jax_and_torch_values(tmp_path):
    import jax.numpy as jnp
    import torch

    with loggers.TensorBoardLogger(str(tmp_path)) as log:
        log(0, {"eval/episode_reward": jnp.float32(1.5), "training/loss": torch.tensor(0.25), "shape": (3, 4)})
        log(10, {"eval/episode_reward": 2.5})
    events = _events(tmp_path)
    assert [(e.step, e.value) for e in events.Scalars("eval/episode_reward")] == [(0, 1.5), (10, 2.5)]
    assert [(e.step, e.value) for e in events.Scalars("training/loss")] == [(0, 0.25)]
    assert "shape" not in events.Tags()["scalars"]  # not a scalar


@pytest.mark.parametrize("extra", ["tensorboard", "wandb"])
def test_a_missing_extra_is_named_before_anything_runs(tmp_path, monkeypatch, extra):
    monkeypatch.setitem(sys.modules, extra, None)  # what an environment without the extra gives on import
    run_dir = tmp_path / "run"
    result = invoke("train", "--env", "fast", "--out", str(run_dir), "--logger", f"jsonl,{extra}", *TINY)
    assert result.exit_code == 2, result.output
    assert f"--logger {extra}: the {extra} logger needs the {extra} extra" in error_text(result)
    assert f'pip install ".[{extra}]" (in the brax-bridge checkout)' in error_text(result)
    assert not run_dir.exists()
    with pytest.raises(loggers.MissingExtraError, match=rf'pip install "\.\[{extra}\]"'):
        loggers.TensorBoardLogger(str(tmp_path)) if extra == "tensorboard" else loggers.WandbLogger()


def test_unknown_logger_names_the_accepted_ones():
    for command in ("train", "compare"):
        result = invoke(command, "--env", "fast", "--logger", "jsonl,mlflow")
        assert result.exit_code == 2
        assert "--logger takes one or more of jsonl, tensorboard, wandb, comma-separated; got 'jsonl,mlflow'" in (
            error_text(result))
