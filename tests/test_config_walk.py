"""One setting's walk from its flag to each trainer goes one way, for every algorithm: the command line resolves its
flags into one config (PPOConfig, APGConfig, SHACConfig), writes it to config.json and hands that same object to the
trainer, which builds its optimiser and its envs from it; nothing reads the config back from config.json or rebuilds
it from keyword arguments on the way."""

import json

import jax
import pytest
from cli_runner import TINY, invoke

from brax_bridge_app import rundir, trainers
from brax_core import devices
from brax_core.training.agents.ppo import programs
from brax_core.training.agents.ppo import train as ppo_train
from brax_core.training.agents.ppo.config import PPOConfig
from torch_ppo import environments as torch_environments
from torch_ppo import trainer as torch_trainer

LEARNING_RATE, NUM_ENVS = 0.0123, 4


def _counting(monkeypatch, calls: list, owner, name: str) -> None:
    """Counts calls of ``owner.name`` (a classmethod of PPOConfig) in ``calls``."""
    original = getattr(owner, name).__func__

    def counted(cls, *args, **kwargs):
        calls.append(name)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(owner, name, classmethod(counted))


@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_learning_rate_and_num_envs_walk_from_the_flag_to_the_optimiser_and_the_env(tmp_path, monkeypatch, trainer):
    built, seen = [], {}
    _counting(monkeypatch, built, PPOConfig, "from_flat")
    _counting(monkeypatch, built, PPOConfig, "from_json")
    received = []
    if trainer == "jax":
        entry = trainers.ppo_train.train_from_config
        monkeypatch.setattr(trainers.ppo_train, "train_from_config",
                            lambda config, *a, **kw: received.append(config) or entry(config, *a, **kw))
        make_optimizer = ppo_train.ppo_optimizer.make_optimizer
        monkeypatch.setattr(ppo_train.ppo_optimizer, "make_optimizer",
                            lambda lr, *a: seen.setdefault("learning_rate", lr) and make_optimizer(lr, *a))
        make_env = programs.make_training_env

        def training_env(args, *rest):
            env, reset_fn, state = make_env(args, *rest)
            seen["num_envs"] = state.obs.shape[0]  # the batch the reset returns, one row per env
            return env, reset_fn, state

        monkeypatch.setattr(ppo_train.programs, "make_training_env", training_env)
    else:
        entry = trainers.torch_ppo.train_from_config
        monkeypatch.setattr(trainers.torch_ppo, "train_from_config",
                            lambda config, *a, **kw: received.append(config) or entry(config, *a, **kw))
        adam = torch_trainer._adam

        def optimiser(modules, learning_rate, *rest):
            made = adam(modules, learning_rate, *rest)
            seen["learning_rate"] = float(made.param_groups[0]["lr"])
            return made

        monkeypatch.setattr(torch_trainer, "_adam", optimiser)
        make_env = torch_environments.make_env

        def env(*args, **kwargs):
            made = make_env(*args, **kwargs)
            seen["num_envs"] = made.num_envs
            return made

        monkeypatch.setattr(torch_trainer.environments, "make_env", env)

    run_dir = tmp_path / "run"
    result = invoke("train", "--env", "fast", "--trainer", trainer, "--out", str(run_dir), *TINY,
                    "--learning-rate", str(LEARNING_RATE), "--num-envs", str(NUM_ENVS))
    assert result.exit_code == 0, result.output
    # Built once from the flags; never read back from config.json nor rebuilt from keywords on the way.
    assert built == ["from_flat"]
    (config,) = received
    written = json.loads((run_dir / rundir.CONFIG).read_text())
    assert PPOConfig.from_json({s: written[s] for s in ("env", "algorithm", "network", "run")}) == config.replace(
        device=None)  # the file holds what the trainer got (which names the device the run was placed on)
    assert (config.algorithm.learning_rate, config.env.num_envs) == (LEARNING_RATE, NUM_ENVS)
    assert seen["learning_rate"] == pytest.approx(LEARNING_RATE) and seen["num_envs"] == NUM_ENVS


def test_a_config_device_is_placed_by_the_rule_every_entry_point_follows():
    cpu = jax.devices("cpu")[0]
    assert devices.named_device("cpu") == cpu
    with devices.on_device(cpu) as placed:
        assert placed == cpu and jax.config.jax_default_device is None  # already the default: nothing set
    for bad in ("tpu", "cuda:x", "cpu:1", "gpu"):
        with pytest.raises(ValueError, match=rf"config.run.device must be one of cpu, cuda, cuda:<index>; got '{bad}'"):
            devices.named_device(bad, "config.run.device")
    if not any(d.platform == "gpu" for d in jax.devices()):
        config = PPOConfig.from_flat({"num_timesteps": 0, "device": "cuda:0"})
        with pytest.raises(ValueError, match=r"config.run.device is 'cuda:0' but JAX sees 0 gpu device\(s\) here"):
            ppo_train.train_from_config(config, environment="fast")


GRADIENT_TINY = ["--env", "examples/gradients_through_physics.py:Reach", "--num-timesteps", "400", "--horizon-length",
                 "8", "--num-evals", "2", "--num-eval-envs", "4", "--episode-length", "20"]


@pytest.mark.parametrize(("algo", "trainer"), [("apg", "jax"), ("apg", "torch"), ("shac", "torch")])
def test_a_gradient_algorithms_settings_walk_the_same_way(tmp_path, monkeypatch, algo, trainer):
    """As PPO's: one config built from the flags, written to config.json, handed as it is to the trainer, whose
    optimiser and training envs are built from its fields."""
    from brax_bridge_app import algorithms
    from brax_core.training.agents.apg import train as apg_train
    from torch_analytic import common

    config_type = algorithms.CONFIGS[algo]
    built, seen, received = [], {}, []
    _counting(monkeypatch, built, config_type, "from_flat")
    _counting(monkeypatch, built, config_type, "from_json")
    module = trainers.TRAINERS[(algo, trainer)].module
    entry = module.train_from_config
    monkeypatch.setattr(module, "train_from_config",
                        lambda config, *a, **kw: received.append(config) or entry(config, *a, **kw))
    if trainer == "jax":
        make_optimizer = apg_train.make_optimizer
        monkeypatch.setattr(apg_train, "make_optimizer",
                            lambda lr, *a: seen.setdefault("learning_rate", lr) and make_optimizer(lr, *a))
        first_state = apg_train._make_first_state_fn

        def recording_first_state(env, *rest):
            fn = first_state(env, *rest)

            def first(key):
                state = fn(key)
                seen["num_envs"] = state.obs.shape[0]  # static under the trace: one row per env
                return state

            return first

        monkeypatch.setattr(apg_train, "_make_first_state_fn", recording_first_state)
    else:
        import torch

        class RecordingAdam(torch.optim.Adam):
            def __init__(self, params, lr, *args, **kwargs):
                seen.setdefault("learning_rate", lr)  # the actor's: the first built
                super().__init__(params, lr, *args, **kwargs)

        monkeypatch.setattr(torch.optim, "Adam", RecordingAdam)
        torch_env = common.TorchEnv

        def recording_env(env, num_envs, *args, **kwargs):
            if kwargs.get("differentiable"):
                seen["num_envs"] = num_envs
            return torch_env(env, num_envs, *args, **kwargs)

        monkeypatch.setattr(common, "TorchEnv", recording_env)
    flag = "--learning-rate" if algo == "apg" else "--actor-learning-rate"
    run_dir = tmp_path / "run"
    result = invoke("train", "--algo", algo, "--trainer", trainer, "--out", str(run_dir), *GRADIENT_TINY,
                    flag, str(LEARNING_RATE), "--num-envs", str(NUM_ENVS))
    assert result.exit_code == 0, result.output
    assert built == ["from_flat"]
    (config,) = received
    written = json.loads((run_dir / rundir.CONFIG).read_text())
    assert written["algo"] == algo
    assert config_type.from_json({s: written[s] for s in ("env", "algorithm", "network", "run")}) == config.replace(
        device=None)
    assert seen["learning_rate"] == pytest.approx(LEARNING_RATE) and seen["num_envs"] == NUM_ENVS
