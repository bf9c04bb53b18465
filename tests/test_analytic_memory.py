"""Memory stays flat over an analytic-gradient run: every update's graph (torch's, and the JAX residuals each
differentiable step keeps for its backward) is released once the update is done, so neither the live JAX arrays nor
the process's resident memory grow from the first tenth of a run to its end. The full-size figure (10^6 env steps)
is ``benchmarks/analytic_gradients.py memory``'s."""

import gc

import jax
import pytest
from test_torch_analytic_checkpoint import Drift  # smooth, so every step's graph reaches every earlier action

from torch_analytic import apg, shac


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.parametrize("algorithm", ["apg", "shac"])
def test_an_analytic_gradient_run_keeps_memory_flat_from_its_first_tenth_to_its_end(algorithm):
    readings = []

    def record(epoch, metrics):
        gc.collect()
        readings.append((len(jax.live_arrays()), _resident_bytes()))

    # 10 evaluations, one after each tenth of 60 updates of 4 envs x 8 steps (1,920 differentiable env steps).
    trainer, own = {"apg": (apg, {}), "shac": (shac, {"critic_iterations": 2, "num_critic_batches": 2})}[algorithm]
    trainer.train(
        Drift(), episode_length=30, policy_updates=60, horizon_length=8, num_envs=4, num_evals=11,
        num_eval_envs=4, progress_fn=record, **own,
    )
    assert len(readings) == 11
    (arrays_first, resident_first), (arrays_end, resident_end) = readings[1], readings[-1]
    assert arrays_end == arrays_first, [r[0] for r in readings]
    assert resident_end <= 1.05 * resident_first, [r[1] >> 20 for r in readings]
