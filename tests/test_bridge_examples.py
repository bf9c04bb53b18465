"""The bridge's examples run end to end at a tiny size (`main(["--tiny"])`) on the `fast` env (the differentiable one
on its own smooth point mass)."""

import importlib.util
import os

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


BEST_PER_STEP_20 = sum(0.02**2 * t * (t + 1) / 2 for t in range(1, 21)) / 20  # 0.0308


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_differentiable_simulation_improves_the_policy_by_gradient():
    result = _load("differentiable_simulation").main(["--tiny"])
    history = result["history"]
    assert len(history) == 6 and result["env"] == "PointMass"
    assert history[-1] > history[0] + 0.05  # analytic gradients through the env improve the fixed-start objective


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchrl_training_loop_runs_collector_and_ppo():
    pytest.importorskip("torchrl")  # optional extra; `make test` installs it
    result = _load("torchrl_training_loop").main(["--tiny"])
    assert [h["iteration"] for h in result["history"]] == list(range(25))
    # The deterministic policy over one 20-step episode: `fast` pays the position reached, 0.0308 per step when
    # pushing every step (0 when never pushing); the untrained one rarely pushes.
    before, after = result["eval_reward_before"], result["eval_reward_after"]
    assert after > 0.9 * BEST_PER_STEP_20 and after >= before, (before, after)
    assert result["copies"] == 0
