"""--config FILE: a run's config.json (a PPOConfig's sections) and a YAML file as a person writes it, with flags
given beside it overriding it; unknown keys and bad values refused by name."""

import json
import re

import pytest
from cli_runner import TINY, error_text, invoke

from brax_bridge_app import algorithms, config_files, rundir
from brax_core.training.agents.ppo.config import SECTIONS


def _config(run_dir) -> dict:
    return json.loads((run_dir / rundir.CONFIG).read_text())


def _fields(config: dict) -> dict:
    """A config.json's fields by name, across its sections."""
    return {key: value for section in SECTIONS for key, value in config[section].items()}


def test_a_runs_config_json_round_trips_with_flag_overrides(tmp_path):
    first = tmp_path / "first"
    result = invoke("train", "--env", "fast", "--trainer", "jax", "--seed", "2", "--out", str(first), *TINY,
                    "--learning-rate", "0.001", "--max-grad-norm", "0.5", "--no-normalize-observations")
    assert result.exit_code == 0, result.output
    second = tmp_path / "second"
    result = invoke("train", "--config", str(first / rundir.CONFIG), "--out", str(second), "--trainer", "torch",
                    "--num-evals", "2")
    assert result.exit_code == 0, result.output
    before, after = _config(first), _config(second)
    assert list(before)[:5] == ["algo", *SECTIONS]  # the algorithm, its config's sections, then the records
    assert (after["env"]["name"], after["run"]["trainer"], after["run"]["seed"]) == ("fast", "torch", 2)
    assert after["run"]["preset"] == before["run"]["preset"] == "fast"
    # everything else as written
    assert _fields(after) == {**_fields(before), "num_evals": 2, "trainer": "torch"}
    assert after["algorithm"]["learning_rate"] == 0.001 and after["algorithm"]["max_grad_norm"] == 0.5
    assert after["algorithm"]["normalize_observations"] is False
    summary = json.loads((second / rundir.SUMMARY).read_text())
    assert summary["status"] == "completed" and summary["trainer"] == "torch"
    assert len(rundir.read_metrics(str(second))) == 2


def test_a_yaml_file_as_a_person_writes_it(tmp_path):
    path = tmp_path / "pendulum.yaml"
    path.write_text(
        "# flat: settings and hyperparameters side by side\n"
        "env: fast\n"
        "trainer: torch\n"
        "seed: 3\n"
        "learning_rate: 3e-4          # YAML reads this as text; it is a number\n"
        "num_timesteps: 800\n"
        "num_envs: 4\n"
        "batch_size: 8\n"
        "unroll_length: 5\n"
        "num_evals: 2\n"
        "num_eval_envs: 8\n"
        "episode_length: 20\n"
        "policy_hidden_layer_sizes: [8, 8]\n"
        "value_hidden_layer_sizes: 8,8\n"
        "max_to_keep: null            # every checkpoint (the command line's default keeps 3)\n"
        "algorithm:                   # or in the sections, as config.json holds them\n"
        "  num_minibatches: 2\n"
        "network: {activation: tanh}\n"
    )
    run_dir = tmp_path / "run"
    result = invoke("train", "--config", str(path), "--out", str(run_dir), "--num-envs", "8", "--seed", "4")
    assert result.exit_code == 0, result.output
    config = _config(run_dir)
    values = _fields(config)
    assert (values["name"], values["trainer"], values["seed"]) == ("fast", "torch", 4)  # --seed beats the file
    assert values["num_envs"] == 8 and values["batch_size"] == 8 and values["num_minibatches"] == 2  # flag, file
    assert values["learning_rate"] == 3e-4 and values["activation"] == "tanh" and values["max_to_keep"] is None
    assert values["policy_hidden_layer_sizes"] == [8, 8] and values["value_hidden_layer_sizes"] == [8, 8]
    assert set(values) == set(algorithms.command_line_fields("ppo")) | {"name", "seed", "trainer", "device", "preset"}
    summary = json.loads((run_dir / rundir.SUMMARY).read_text())
    assert summary["status"] == "completed" and summary["env_steps"] >= 800


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        ("env: fast\nnum_env: 8\n", [], r"unknown key 'num_env' \(did you mean 'num_envs'\?\) for train; accepted "
                                         r"keys: env, algo, trainer, seed, preset, device, algorithm, network, run, "
                                         r"episode_length, action_repeat"),
        ("env: fast\nseeds: [0, 1]\n", [], "unknown key 'seeds' .*for train"),
        ("env: fast\nhyperparameters:\n  num_envs: 2\n", [], "unknown key 'hyperparameters'.* for train"),
        ("env: fast\nalgorithm:\n  speed: 2\n", [], "algorithm has no field 'speed'"),
        ("env: fast\nalgorithm:\n  num_envs: 2\n", [], r"algorithm has no field 'num_envs' \(it belongs in env\)"),
        ("env: {name: fast, num_envs: 0}\n", [], "num_envs must be a positive integer, got 0"),
        ("env: fast\nnum_envs: 0\n", [], "num_envs must be a positive integer, got 0"),
        ("env: fast\nlearning_rate: fast\n", [], "learning_rate must be a finite number, got 'fast'"),
        ("env: fast\nseed: -1\n", [], "seed must be a non-negative integer; got -1"),
        ("env: fast\nbatch_size: 8\nalgorithm:\n  batch_size: 4\n", [], "batch_size given both at the top and in "
                                                                          "algorithm"),
        ("- env\n- fast\n", [], "must hold a mapping of keys"),
        ("env: [fast\n", [], "is not valid YAML"),
        ("env: nope\n", [], "--env must be one of: "),
        ("env: fast\n", ["--resume", "/tmp"], "leave out --out, --seed, --device and --config"),
    ],
)
def test_bad_config_files_are_refused_by_name_before_anything_runs(tmp_path, text, args, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = invoke("train", "--config", str(path), "--out", str(tmp_path / "run"), *args)
    assert result.exit_code == 2, result.output
    assert re.search(message, error_text(result)), result.output
    assert not (tmp_path / "run").exists()


def test_a_missing_config_file_is_named():
    result = invoke("compare", "--config", "/no/such/file.yaml")
    assert result.exit_code == 2 and "--config /no/such/file.yaml does not exist" in error_text(result)


def test_compare_reads_a_runs_config_json_and_says_it_trains_every_trainer_and_seed(tmp_path):
    path = tmp_path / rundir.CONFIG
    run = {"env": {"name": "fast", "num_envs": 16}, "algorithm": {"max_grad_norm": None},
           "run": {"trainer": "torch", "seed": 3, "preset": "fast", "device": "cpu"},
           "versions": {}, "command": "x", "created": "y"}
    path.write_text(json.dumps(run))
    settings, values, note = config_files.merged(str(path), "compare", {
        "env": None, "preset": None, "device": "auto", "seeds": None, "trainers": None})
    assert settings == {"env": "fast", "preset": "fast", "device": "auto", "seeds": None, "trainers": None}
    assert values == {"num_envs": 16, "max_grad_norm": None}
    assert "the file's trainer 'torch' and seed 3 are not used" in note
    yaml_path = tmp_path / "compare.yaml"
    yaml_path.write_text("env: fast\nseeds: [0, 2, 4]\ntrainers: torch,jax\n")
    settings, _, note = config_files.merged(str(yaml_path), "compare", {"env": None, "seeds": None, "trainers": None})
    assert settings == {"env": "fast", "seeds": "0,2,4", "trainers": "torch,jax"} and note == ""
