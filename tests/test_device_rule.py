"""The one device rule every entry point follows when no device is given (``brax_bridge.default_device``): JAX's
default device where torch can reach it, else the CPU for both. Shown here with a GPU that JAX reports but that does
not exist (nothing computes on it); tests/test_gpu.py shows it on a real GPU for every entry point."""

import jax
import pytest
import torch

import brax_bridge
from brax_bridge_app import runtime
from torch_ppo import arguments


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
    assert arguments.resolve_device(None, "fast") == torch.device("cpu")
    assert runtime.default_device() == "cpu"


def test_jax_on_a_gpu_that_torch_reaches_puts_everything_there(reported_gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert brax_bridge.default_device() == torch.device("cuda", 0)
    assert arguments.resolve_device(None, "fast") == torch.device("cuda", 0)  # torch_ppo.train's default
    assert runtime.default_device() == "cuda:0"  # the command line's --device auto


def test_jax_on_a_gpu_beside_a_cpu_only_torch_keeps_both_on_the_cpu(reported_gpu, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert brax_bridge.default_device() == torch.device("cpu")
    assert arguments.resolve_device(None, "fast") == torch.device("cpu")
    assert runtime.default_device() == "cpu"
    assert "torch has no CUDA here" in capsys.readouterr().err
    from brax_bridge import _device

    assert _device.jax_device(None).platform == "cpu"  # TorchEnv(device=None) steps its physics there too


def test_a_ready_torch_env_decides_for_torch_ppo():
    env = brax_bridge.TorchEnv("fast", num_envs=2)
    assert arguments.resolve_device(None, env) == env.device
    with pytest.raises(ValueError, match="differs from the TorchEnv's device"):
        arguments.resolve_device("cuda:3", env)


def test_every_adapter_and_the_bridge_place_their_env_by_the_rule(monkeypatch):
    """Each entry point with no device given asks the rule (here it answers the CPU, and the env lands there)."""
    from brax_bridge import _device
    from brax_bridge.gymnasium import VectorEnv as GymVectorEnv
    from brax_bridge.rsl_rl import RslRlVecEnv
    from brax_bridge.sb3 import VecEnv as Sb3VecEnv
    from brax_bridge.torchrl import BraxBridgeEnv

    asked = []
    rule = _device.default_jax_device
    monkeypatch.setattr(_device, "default_jax_device", lambda: asked.append(1) or rule())
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
