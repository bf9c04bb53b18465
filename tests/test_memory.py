"""Long runs hold no memory: differentiable stepping across backward windows, and PPO iterations.

What is counted exactly: live JAX arrays and live torch tensors, which a leak (a kept graph, a kept state, a
growing history) raises with every iteration. The process's resident memory is checked against a stated bound
too, in the long version (marked ``slow``), where allocator noise is small against what a leak would add.
"""

import gc
import importlib.util
import os
import resource

import jax
import pytest
import torch

import torch_ppo
from brax_bridge import TorchEnv
from brax_core.training.agents.ppo import presets
from brax_core.training.agents.ppo import train as jax_ppo

WINDOW = 32  # differentiable steps per backward pass
RSS_BOUND_MB = 200  # allowed growth of the process's peak resident memory after the warm-up


def _stops_growing(footprints: list[tuple[int, int]]) -> bool:
    """Between the first reports and the last (which follows the run's end), the later half never exceeds the
    earlier half: one array more or less between two reports is a step's temporaries; a leak adds with every
    iteration."""
    settled = footprints[2:-1]
    half = len(settled) // 2
    return all(max(f[i] for f in settled[half:]) <= max(f[i] for f in settled[:half]) for i in (0, 1))


def _torch_tensors() -> int:
    return sum(1 for obj in gc.get_objects() if isinstance(obj, torch.Tensor))


def _footprint() -> tuple[int, int]:
    gc.collect()
    return len(jax.live_arrays()), _torch_tensors()


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _point_mass():
    """The smooth point mass of examples/differentiable_simulation.py: gradients reach every earlier action."""
    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "differentiable_simulation.py"
    )
    spec = importlib.util.spec_from_file_location("example_differentiable_simulation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PointMass()


def _differentiable_windows(windows: int) -> tuple[list[tuple[int, int]], float, float]:
    env = TorchEnv(_point_mass(), num_envs=4, episode_length=50, differentiable=True)
    env.reset(seed=0)
    footprints, rss_after_warmup = [], 0.0
    for window in range(windows):
        actions = torch.full((WINDOW, 4, 1), 0.1, requires_grad=True)
        total = torch.zeros(())
        for t in range(WINDOW):
            total = total + env.step(actions[t])["next"]["reward"].sum()
        total.backward()
        assert actions.grad.abs().sum() > 0
        del total, actions
        env.detach()  # the next window's graph starts here
        footprints.append(_footprint())
        if window == 1:
            rss_after_warmup = _peak_rss_mb()
    return footprints, rss_after_warmup, _peak_rss_mb()


def test_differentiable_steps_keep_nothing_across_backward_windows():
    footprints, _, _ = _differentiable_windows(6)
    assert len(set(footprints[1:])) == 1, footprints


@pytest.mark.slow
def test_ten_thousand_differentiable_steps_stay_within_memory_bounds():
    footprints, warm, end = _differentiable_windows(10_000 // WINDOW)
    assert len(set(footprints[1:])) == 1, footprints[:3] + footprints[-3:]
    assert end - warm < RSS_BOUND_MB, (warm, end)


def _ppo_iterations(trainer: str, iterations: int) -> list[tuple[int, int]]:
    """Footprints at every report of a ``fast`` run reporting after each training step."""
    tiny = {k: v for k, v in presets.PRESETS["fast"].items() if k not in ("num_timesteps", "num_evals")}
    step = tiny["batch_size"] * tiny["num_minibatches"] * tiny["unroll_length"]
    footprints = []

    def progress(_, metrics):
        footprints.append(_footprint())

    options = dict(
        num_timesteps=iterations * step,
        num_evals=0,
        log_training_metrics=True,
        training_metrics_steps=step,
        progress_fn=progress,
        num_eval_envs=tiny.pop("num_eval_envs"),
    )
    if trainer == "jax":
        jax_ppo.train("fast", **options, **tiny)
    else:
        network = tiny.pop("network_factory").keywords
        torch_ppo.train("fast", **options, **tiny, **network)
    assert len(footprints) == iterations
    return footprints


@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_ppo_iterations_keep_nothing(trainer):
    footprints = _ppo_iterations(trainer, 12)
    assert _stops_growing(footprints), footprints
