"""Long runs hold no memory: differentiable stepping across backward windows, and PPO iterations.

What is counted exactly: live JAX arrays and live torch tensors, which a leak (a kept graph, a kept state, a
growing history) raises with every iteration. The process's resident memory is checked against a stated bound
too, in the long versions (marked ``slow``), where allocator noise is small against what a leak would add.

The counts walk the collector's objects, which in a pytest worker are those the running test created: the suite's
``conftest.py`` moves what earlier tests left to the permanent generation, which ``gc.get_objects`` leaves out.
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
LONG_RUN_ITERATIONS = 1_000
LONG_RUN_REPORT_EVERY = 100  # a report (and one gc scan) every 100 iterations: 10 scans, not 1,000
# Allowed growth of the current resident memory from the report at iteration 100 to the one at 1,000: room for
# allocator noise once everything is compiled (glibc arenas, XLA's host buffers: a few MB), yet below what a
# retrace and recompile per iteration or 100 kB kept per iteration (90 MB over 900 iterations) would add.
PPO_RSS_GROWTH_MB = 64


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


def _resident_mb() -> float:
    """The process's current resident memory (Linux's /proc; elsewhere the peak, which only rises)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return _peak_rss_mb()
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


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


def _train_fast(trainer: str, tiny: dict, iterations: int, report_every: int, progress) -> None:
    """Trains ``fast`` with the preset-like ``tiny`` sizes for ``iterations`` training steps, without evaluation,
    calling ``progress`` every ``report_every`` of them."""
    tiny = dict(tiny)
    step = tiny["batch_size"] * tiny["num_minibatches"] * tiny["unroll_length"]
    options = dict(
        num_timesteps=iterations * step,
        num_evals=0,
        log_training_metrics=True,
        training_metrics_steps=report_every * step,
        progress_fn=progress,
        num_eval_envs=tiny.pop("num_eval_envs"),
    )
    if trainer == "jax":
        jax_ppo.train("fast", **options, **tiny)
    else:
        network = tiny.pop("network_factory").keywords
        torch_ppo.train("fast", **options, **tiny, **network)


def _ppo_iterations(trainer: str, iterations: int) -> list[tuple[int, int]]:
    """Footprints at every report of a ``fast`` run reporting after each training step."""
    tiny = {k: v for k, v in presets.TRAIN_KWARGS["fast"].items() if k not in ("num_timesteps", "num_evals")}
    footprints = []

    def progress(_, metrics):
        footprints.append(_footprint())

    _train_fast(trainer, tiny, iterations, 1, progress)
    assert len(footprints) == iterations
    return footprints


@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_ppo_iterations_keep_nothing(trainer):
    footprints = _ppo_iterations(trainer, 12)
    assert _stops_growing(footprints), footprints


def test_torch_ppo_train_frees_its_trainer_without_the_garbage_collector():
    """A trainer that held itself through a reference cycle would keep its envs' JAX state (and under DDP its
    process group) alive after ``train`` returns, until the cyclic collector happened to run."""
    from torch_ppo.trainer import TorchPPOBackend

    tiny = {k: v for k, v in presets.TRAIN_KWARGS["fast"].items() if k not in ("num_timesteps", "num_evals")}
    gc.collect()
    gc.disable()
    try:
        _train_fast("torch", tiny, 1, 1, lambda *_: None)
        left = [o for o in gc.get_objects() if isinstance(o, TorchPPOBackend)]
    finally:
        gc.enable()
    assert left == []


def _long_ppo_run(trainer: str) -> list[tuple[int, float, int, int, int]]:
    """``(iteration, resident MB, live JAX arrays, their bytes, live torch tensors)`` every
    ``LONG_RUN_REPORT_EVERY`` iterations of a ``LONG_RUN_ITERATIONS``-iteration ``fast`` run at tiny sizes."""
    # Tiny sizes keep 1,000 iterations within minutes on a CPU; a leak adds per iteration whatever the size.
    sizes = dict(num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5, num_updates_per_batch=1)
    tiny = {k: v for k, v in presets.TRAIN_KWARGS["fast"].items() if k not in ("num_timesteps", "num_evals")}
    tiny.update(sizes)
    step = tiny["batch_size"] * tiny["num_minibatches"] * tiny["unroll_length"]
    samples = []

    def progress(env_steps, metrics):
        gc.collect()
        arrays = jax.live_arrays()
        sample = (env_steps // step, _resident_mb(), len(arrays), sum(a.nbytes for a in arrays), _torch_tensors())
        del arrays
        samples.append(sample)

    _train_fast(trainer, tiny, LONG_RUN_ITERATIONS, LONG_RUN_REPORT_EVERY, progress)
    return samples


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_a_thousand_ppo_iterations_stay_within_memory_bounds(trainer):
    samples = _long_ppo_run(trainer)
    reports = LONG_RUN_ITERATIONS // LONG_RUN_REPORT_EVERY
    assert [s[0] for s in samples] == [LONG_RUN_REPORT_EVERY * (i + 1) for i in range(reports)]
    # The last report comes with the run's end, where the JAX trainer holds one array more for its final epoch.
    early, late = samples[: reports // 2], samples[reports // 2 : -1]
    # Arrays, their bytes and tensors: the later half of the run never holds more than the earlier half did.
    for index, what in ((2, "live JAX arrays"), (3, "bytes of live JAX arrays"), (4, "live torch tensors")):
        assert max(s[index] for s in late) <= max(s[index] for s in early), (what, samples)
    assert samples[-1][1] - samples[0][1] < PPO_RSS_GROWTH_MB, samples
