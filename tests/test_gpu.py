"""On a CUDA GPU: the bridge aliases device memory both ways and keeps stream order, the bridge env steps there
without copies, and both trainers train there with JAX on the GPU.

Marked ``gpu``: conftest skips them unless torch sees a CUDA GPU and JAX has its CUDA plugin. The rest of the suite
keeps JAX's default device on the CPU there (``JAX_PLATFORMS=cpu,cuda``), so these tests name the GPU explicitly;
the trainers run in a fresh process where JAX's default device is the GPU, as a user's would be.
"""

import json
import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import brax_bridge
from brax_bridge import TorchEnv, jax_to_torch, torch_to_jax

pytestmark = pytest.mark.gpu


def _jax_gpu():
    return jax.devices("cuda")[0]


def test_jax_gpu_arrays_reach_torch_as_views():
    x = jax.device_put(jnp.arange(1 << 20, dtype=jnp.float32), _jax_gpu())
    before = brax_bridge.stats()
    t = jax_to_torch(x)
    assert t.device == torch.device("cuda", _jax_gpu().local_hardware_id)
    assert t.data_ptr() == x.unsafe_buffer_pointer()  # the same device memory
    assert brax_bridge.stats().copies == before.copies
    torch.testing.assert_close(t[-3:].cpu(), torch.tensor([1048573.0, 1048574.0, 1048575.0]))


def test_torch_cuda_tensors_reach_jax_as_views():
    t = torch.randn(1024, 256, device="cuda")
    before = brax_bridge.stats()
    x = torch_to_jax(t)
    assert x.devices() == {_jax_gpu()}
    assert x.unsafe_buffer_pointer() == t.data_ptr()
    assert brax_bridge.stats().copies == before.copies
    np.testing.assert_array_equal(np.asarray(x), t.cpu().numpy())


def test_stream_ordering_round_trip():
    big = torch.randn(4096, 4096, device="cuda")
    produced = big @ big  # queued on torch's current stream; JAX must not read it before it is written
    as_jax = torch_to_jax(produced)
    doubled = jax.jit(lambda a: a * 2)(as_jax)
    assert doubled.devices() == {_jax_gpu()}
    back = jax_to_torch(doubled)
    assert back.device.type == "cuda"
    torch.testing.assert_close(back, produced * 2)


@pytest.mark.parametrize("name", ["inverted_pendulum", "ant"])
def test_torch_env_steps_on_the_gpu_without_copies(name):
    env = TorchEnv(name, num_envs=64, device="cuda")
    assert env.device.type == "cuda" and env.jax_device == _jax_gpu()
    td = env.reset()
    before = brax_bridge.stats()
    for _ in range(5):
        td["action"] = torch.rand(64, env.action_size, device="cuda") * 2 - 1
        td = env.step(td)["next"]
    assert brax_bridge.stats().copies == before.copies
    for key in ("observation", "reward", "terminated", "truncated", "done"):
        assert td[key].device.type == "cuda", key
    assert torch.isfinite(td["observation"]).all() and torch.isfinite(td["reward"]).all()
    physics_devices = {d for leaf in jax.tree.leaves(env.state) for d in leaf.devices()}
    assert physics_devices == {_jax_gpu()}  # the physics state stays on the GPU, in JAX
    assert env.num_compiles == 1  # one compiled step for every call


_TRAIN_ON_THE_GPU = r"""
import functools, json, sys
import jax, torch
import torch_ppo
from brax_core import envs
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as ppo

assert jax.default_backend() == "gpu", jax.default_backend()
tiny = dict(num_timesteps=800, episode_length=20, num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5,
            num_evals=3, num_eval_envs=8, seed=3)
hidden = dict(policy_hidden_layer_sizes=(8, 8), value_hidden_layer_sizes=(8, 8))
out = {}
# No device given: the one device rule puts the run where JAX's default device is, the GPU.
_, params, metrics = torch_ppo.train("fast", save_checkpoint_path=sys.argv[1] + "/torch", **hidden, **tiny)
tensors = [t for group in params for t in group.values() if isinstance(t, torch.Tensor)]
out["torch"] = {"reward": float(metrics["eval/episode_reward"]), "devices": sorted({str(t.device) for t in tensors})}
factory = functools.partial(ppo_networks.make_ppo_networks, **hidden)
_, jparams, jmetrics = ppo.train(envs.get_environment("fast"), network_factory=factory,
                                 save_checkpoint_path=sys.argv[1] + "/jax", **tiny)
out["jax"] = {"reward": float(jmetrics["eval/episode_reward"]),
              "devices": sorted({d.platform for leaf in jax.tree.leaves(jparams) for d in leaf.devices()})}
print(json.dumps(out))
"""


def test_both_trainers_train_with_jax_on_the_gpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}  # JAX's default device: the GPU
    out = subprocess.run([sys.executable, "-c", _TRAIN_ON_THE_GPU, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for trainer in ("torch", "jax"):
        assert math.isfinite(result[trainer]["reward"]) and result[trainer]["reward"] > 0, result
    assert result["torch"]["devices"] == ["cuda:0"], result
    assert result["jax"]["devices"] == ["gpu"], result
    assert any((tmp_path / "torch").iterdir()) and any((tmp_path / "jax").iterdir())  # checkpoints written


def _run_with_jax_on_the_gpu(script: str, *args: str) -> dict:
    """Runs ``script`` in a fresh interpreter whose JAX default device is the GPU; returns its last line as JSON."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


_ENTRY_POINTS = r"""
import json
import jax, torch
import brax_bridge
from brax_bridge import TorchEnv
from brax_bridge.gymnasium import VectorEnv as GymVectorEnv
from brax_bridge.rsl_rl import RslRlVecEnv
from brax_bridge.sb3 import VecEnv as Sb3VecEnv
from brax_bridge.torchrl import BraxBridgeEnv
from brax_bridge_app import runtime
from torch_training.device import resolve_device

assert jax.default_backend() == "gpu", jax.default_backend()
out = {"default_device": str(brax_bridge.default_device()), "cli_auto": runtime.default_device(),
       "torch_ppo": str(resolve_device(None, "fast"))}
adapters = {"TorchEnv": lambda: TorchEnv("fast", num_envs=4), "torchrl": lambda: BraxBridgeEnv("fast", num_envs=4),
            "gymnasium": lambda: GymVectorEnv("fast", num_envs=4, array="torch"),
            "rsl_rl": lambda: RslRlVecEnv("fast", num_envs=4), "sb3": lambda: Sb3VecEnv("fast", num_envs=4)}
for name, make in adapters.items():
    env = make()
    bridge = env if isinstance(env, TorchEnv) else env.bridge
    bridge.reset()
    leaves = {d.platform for leaf in jax.tree.leaves(bridge.state) for d in leaf.devices()}
    out[name] = {"device": str(bridge.device), "physics": sorted(leaves)}
print(json.dumps(out))
"""


def test_every_entry_point_lands_on_the_gpu_by_default():
    result = _run_with_jax_on_the_gpu(_ENTRY_POINTS)
    assert result["default_device"] == "cuda:0", result
    assert result["cli_auto"] == "cuda:0" and result["torch_ppo"] == "cuda:0", result
    for name in ("TorchEnv", "torchrl", "gymnasium", "rsl_rl", "sb3"):
        assert result[name] == {"device": "cuda:0", "physics": ["gpu"]}, (name, result)


def test_a_non_finite_action_raises_a_catchable_error_and_cuda_goes_on():
    env = TorchEnv("inverted_pendulum", num_envs=8, device="cuda")
    env.reset()
    action = torch.zeros(8, env.action_size, device="cuda")
    env.step(action)
    bad = action.clone()
    bad[3, 0] = float("nan")
    env.step(bad)
    torch.cuda.synchronize()
    # The check never waits for the GPU: once it has run the bad step, one of the next calls reports it.
    with pytest.raises(ValueError, match=r"NaN or infinity for env\(s\) \[3\], first at step call\(s\) \[2\]"):
        for _ in range(3):
            env.step(action)
    assert (torch.arange(4, device="cuda") * 2).sum().item() == 12  # the CUDA context still works
    env.reset()
    for _ in range(3):
        td = env.step(action)
    torch.cuda.synchronize()
    assert torch.isfinite(td["next", "observation"]).all()
    env.step(action)  # nothing left to report


_NO_SYNC = r"""
import json, sys
import jax, torch
from torch_ppo import arguments, distributed
from torch_ppo.train import DEFAULTS
from torch_training.device import resolve_device
from torch_ppo.trainer import TorchPPOBackend

assert jax.default_backend() == "gpu", jax.default_backend()
compile_update = sys.argv[1] == "compiled"
given = dict(DEFAULTS,
    environment="ant", num_timesteps=10_000_000, num_envs=256, batch_size=128, num_minibatches=4, unroll_length=5,
    num_updates_per_batch=2, episode_length=100, num_evals=0, log_training_metrics=True, normalize_observations=True,
    torch_compile=compile_update, policy_hidden_layer_sizes=(32, 32), value_hidden_layer_sizes=(64, 64), seed=1)
device = resolve_device(None, "ant")
dist = distributed.setup(device)
trainer = TorchPPOBackend(arguments.parse(given, device, dist.world_size), dist)
trainer.build_envs()
trainer.update(trainer.collect())  # compiles
torch.cuda.synchronize()
torch.cuda.set_sync_debug_mode("error")  # any synchronising torch call now raises
for _ in range(3):
    trainer.update(trainer.collect())
torch.cuda.set_sync_debug_mode(0)
metrics = trainer.training_metrics()  # the reports' one host read, outside the training step
print(json.dumps({"device": str(device), "compiled": type(trainer.update).__name__,
                  "finite": all(v == v for v in metrics.values()), "metrics": sorted(metrics)}))
"""


@pytest.mark.parametrize("update", ["eager", "compiled"])
def test_torch_ppo_training_steps_make_no_host_synchronisation(update):
    result = _run_with_jax_on_the_gpu(_NO_SYNC, update)
    assert result["device"] == "cuda:0", result
    assert result["compiled"] == ("CompiledPPOUpdate" if update == "compiled" else "PPOUpdate"), result
    assert result["finite"] and "policy_loss" in result["metrics"] and "episode_count" in result["metrics"], result
