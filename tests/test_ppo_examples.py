"""Each example runs end to end at a tiny size (`main(["--tiny", ...])`)."""

import importlib.util
import os

import numpy as np

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_port_brax_script_trains_and_rolls_out():
    result = _load("port_brax_script").main(["--tiny"])
    assert result["steps"][0] == 0 and result["steps"][-1] >= 61_440
    # `fast` pays the position reached: pushing every step returns 68.7 per 100-step episode, a random policy ~34.
    assert result["eval_rewards"][-1] > 65.0
    assert result["rollout_reward"] > 65.0


def test_save_intermediate_policies_saves_every_eval_and_reloads(tmp_path):
    result = _load("save_intermediate_policies").main(["--tiny", "--out", str(tmp_path)])
    # One per evaluation point (the preset's 4), the untrained policy first, as Brax's callback is called.
    assert len(result["saved"]) == 4 and all(os.path.exists(p) for p in result["saved"])
    assert os.path.basename(result["saved"][0]) == "policy_000000000000.pkl"
    first, last = (result["rewards"][os.path.basename(p)] for p in (result["saved"][0], result["saved"][-1]))
    # `fast` pays at most 68.7 per 100-step episode (~34 at random); one epoch of the preset already comes close
    assert last > 65.0 and last >= first, (first, last)


def test_custom_activation_checkpoint_reloads_from_config_alone(tmp_path):
    module = _load("custom_activation_checkpoint")
    result = module.main(["--tiny", "--out", str(tmp_path)])
    saved = result["saved_config"]["network_factory_kwargs"]["activation"]
    assert saved == {"callable": {"name": "scaled_swish", "kwargs": {"beta": 2.0}}}
    activation = result["config"]["network_factory_kwargs"]["activation"]
    assert activation.func is module.scaled_swish and activation.keywords == {"beta": 2.0}
    assert result["max_action_difference"] < 1e-6


def test_domain_randomization_without_eval_env():
    result = _load("domain_randomization").main(["--tiny"])
    assert [s for s, _ in result["reports"]] == [0, 256]
    metrics = result["metrics"]
    # inverted_pendulum pays exactly 1 per step until the pole falls, so each episode's reward is its length
    # (between 1 and the 20-step limit) and the means agree exactly.
    assert 1.0 <= metrics["eval/avg_episode_length"] <= 20.0
    np.testing.assert_allclose(metrics["eval/episode_reward"], metrics["eval/avg_episode_length"], rtol=1e-6)
    assert metrics["eval/episode_reward"] == result["reports"][-1][1]
