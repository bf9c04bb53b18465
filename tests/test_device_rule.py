"""The one device rule every entry point follows when no device is given (``brax_bridge.default_device``): JAX's
default device where torch can reach it, else the CPU for both. Shown here with a GPU that JAX reports but that does
not exist (nothing computes on it); tests/test_gpu.py shows it on a real GPU for every entry point."""

import json

import jax
import pytest
import torch

import brax_bridge
from brax_bridge_app import runtime
from torch_training.device import resolve_device


class _ReportedGpu:
    platform = "gpu"
    id = 0
    local_hardware_id = 0


@pytest.fixture
def reported_gpu(monkeypatch):
    """JAX's default device is a GPU; the caller says whether torch has CUDA."""
    real_devices = jax.devices
    gpu = _ReportedGpu()
    monkeypatch.setattr(jax, "devices", lambda backend=None: real_devices("cpu") if backend == "cpu" else [gpu])
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    return gpu


def test_on_a_cpu_machine_every_entry_point_chooses_the_cpu():
    assert brax_bridge.default_device() == torch.device("cpu")
    assert resolve_device(None, "fast") == torch.device("cpu")
    assert runtime.default_device() == "cpu"


def test_jax_on_a_gpu_that_torch_reaches_puts_everything_there(reported_gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert brax_bridge.default_device() == torch.device("cuda", 0)
    assert resolve_device(None, "fast") == torch.device("cuda", 0)  # torch_ppo.train's default
    assert runtime.default_device() == "cuda:0"  # the command line's --device auto
    from brax_bridge import device_rule

    assert device_rule.jax_device(None) is reported_gpu  # TorchEnv(device=None) steps its physics there too


def test_jax_on_a_gpu_beside_a_cpu_only_torch_keeps_both_on_the_cpu(reported_gpu, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert brax_bridge.default_device() == torch.device("cpu")
    assert resolve_device(None, "fast") == torch.device("cpu")
    assert runtime.default_device() == "cpu"
    assert "torch has no CUDA here" in capsys.readouterr().err
    from brax_bridge import device_rule

    assert device_rule.jax_device(None).platform == "cpu"  # TorchEnv(device=None) steps its physics there too


def test_a_ready_torch_env_decides_for_torch_ppo():
    env = brax_bridge.TorchEnv("fast", num_envs=2)
    assert resolve_device(None, env) == env.device
    with pytest.raises(ValueError, match="differs from the TorchEnv's device"):
        resolve_device("cuda:3", env)


def test_every_adapter_and_the_bridge_place_their_env_by_the_rule(monkeypatch):
    """Each entry point with no device given asks the rule (here it answers the CPU, and the env lands there)."""
    from brax_bridge import device_rule
    from brax_bridge.gymnasium import VectorEnv as GymVectorEnv
    from brax_bridge.rsl_rl import RslRlVecEnv
    from brax_bridge.sb3 import VecEnv as Sb3VecEnv
    from brax_bridge.torchrl import BraxBridgeEnv

    asked = []
    rule = device_rule.default_jax_device
    monkeypatch.setattr(device_rule, "default_jax_device", lambda: asked.append(1) or rule())
    makers = {
        "TorchEnv": lambda: brax_bridge.TorchEnv("fast", num_envs=2),
        "torchrl": lambda: BraxBridgeEnv("fast", num_envs=2),
        "gymnasium": lambda: GymVectorEnv("fast", num_envs=2, array="torch"),
        "rsl_rl": lambda: RslRlVecEnv("fast", num_envs=2),
        "sb3": lambda: Sb3VecEnv("fast", num_envs=2),
    }
    for name, make in makers.items():
        before = len(asked)
        env = make()
        bridge = env if isinstance(env, brax_bridge.TorchEnv) else env.bridge
        assert len(asked) > before, name
        assert bridge.device == torch.device("cpu") and bridge.jax_device.platform == "cpu", name


class _Decided(Exception):
    """Raised where a trainer has decided its device, before anything would compute on the reported GPU."""


def _stop_at_the_env(monkeypatch, decided):
    """Every TorchEnv records the device it is given (after the rule has run) and stops the run there."""
    original = brax_bridge.TorchEnv.__init__

    def recording(self, *args, device=None, **kwargs):
        decided.append(str(device if device is not None else brax_bridge.default_device()))
        raise _Decided

    monkeypatch.setattr(brax_bridge.TorchEnv, "__init__", recording)
    return original


def test_every_torch_trainer_trains_where_the_rule_says(reported_gpu, monkeypatch):
    """torch_ppo.train, torch_analytic.apg.train, shac.train and torch_sac.train, given no device, put their envs (and
    so their networks) on JAX's default GPU when torch reaches it, and on the CPU when it does not."""
    import torch_ppo
    import torch_sac
    from torch_analytic import apg, shac

    tiny = dict(episode_length=20, num_envs=4, num_evals=1, num_eval_envs=4)
    for cuda, expected in ((True, "cuda:0"), (False, "cpu")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        decided = []
        _stop_at_the_env(monkeypatch, decided)
        with pytest.raises(_Decided):
            torch_ppo.train("fast", num_timesteps=100, batch_size=4, num_minibatches=1, **tiny)
        with pytest.raises(_Decided):
            apg.train("fast", policy_updates=1, horizon_length=4, **tiny)
        with pytest.raises(_Decided):
            shac.train("fast", policy_updates=1, horizon_length=4, **tiny)
        with pytest.raises(_Decided):
            torch_sac.train("fast", num_timesteps=100, batch_size=4, **tiny)
        assert decided == [expected] * 4, (cuda, decided)


def test_every_load_policy_loads_where_the_rule_says(reported_gpu, monkeypatch, tmp_path):
    """Each torch trainer's load_policy, given no device, puts the policy where the rule says (its checkpoint read
    onto that device); the JAX trainers' onto JAX's default device."""
    import torch_analytic
    import torch_ppo
    import torch_sac
    from torch_analytic import checkpoint as analytic_checkpoint
    from torch_ppo import checkpoint as torch_checkpoint
    from torch_sac import checkpoint as sac_checkpoint

    asked = []
    for module in (torch_checkpoint, analytic_checkpoint, sac_checkpoint):
        monkeypatch.setattr(module, "read_state", lambda path, trainer, fmt, map_location="cpu":
                            asked.append(str(map_location)) or (_ for _ in ()).throw(_Decided()))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for load in (torch_ppo.load_policy, torch_analytic.load_policy, torch_sac.load_policy):
        with pytest.raises(_Decided):
            load(tmp_path)
    assert asked == ["cuda:0"] * 3


def test_train_device_auto_and_the_jax_trainer_from_python_agree(reported_gpu, monkeypatch, tmp_path):
    """``train --device auto`` records the device the rule gives and trains there; the JAX trainer called from
    Python with no device trains on the same one."""
    from cli_runner import TINY, invoke

    from brax_bridge_app import trainers
    from brax_core.training.agents.ppo import train as ppo_train

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    chosen = []
    monkeypatch.setattr(ppo_train, "training_devices",
                        lambda *a: chosen.append(jax.config.jax_default_device or jax.devices()[0]) or
                        (_ for _ in ()).throw(_Decided()))
    recorded = []
    original = trainers.Trainer.train

    def record(self, spec, placement, **kwargs):
        recorded.append((spec.config.run.device, placement.torch_device))
        return original(self, spec, placement, **kwargs)

    monkeypatch.setattr(trainers.Trainer, "train", record)
    result = invoke("train", "--env", "fast", "--trainer", "jax", "--device", "auto", "--out", str(tmp_path / "r"),
                    *TINY)
    assert result.exit_code == 1, result.output  # the run stops where the device is decided, its folder says so
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    # the folder keeps the rule (auto, as None), the trainer is handed the device it gave
    assert config["run"]["device"] is None and recorded == [(None, "cuda:0")]
    with pytest.raises(_Decided):
        ppo_train.train("fast", num_timesteps=100, num_envs=4, batch_size=4, num_minibatches=1, episode_length=20)
    assert [getattr(d, "platform", None) for d in chosen] == ["gpu", "gpu"]


def test_train_device_auto_puts_the_torch_trainer_where_the_rule_says(reported_gpu, monkeypatch, tmp_path):
    """``train --trainer torch --device auto`` hands torch_ppo the device the rule gives (JAX's GPU, which torch
    reaches here), and its env is built there."""
    from cli_runner import TINY, invoke

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    decided = []
    _stop_at_the_env(monkeypatch, decided)
    result = invoke("train", "--env", "fast", "--trainer", "torch", "--device", "auto", "--out", str(tmp_path / "r"),
                    *TINY)
    assert result.exit_code == 1, result.output  # stopped where the env was built
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["run"]["device"] is None and decided == ["cuda:0"]
