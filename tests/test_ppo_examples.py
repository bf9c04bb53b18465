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
    # `fast` pays the position reached: pushing every step returns 68.7 per 100-step episode. The first evaluation is
    # the untrained policy's, sampling its actions as the rollout does (34.6-37.3 over seeds 0-2; the last evaluation
    # 68.3-68.7, the rollout 67.5-68.7).
    untrained = result["eval_rewards"][0]
    assert result["eval_rewards"][-1] > untrained + 25.0, result["eval_rewards"]
    assert result["rollout_reward"] > untrained + 25.0, (untrained, result["rollout_reward"])


def test_save_intermediate_policies_saves_every_eval_and_reloads(tmp_path):
    result = _load("save_intermediate_policies").main(["--tiny", "--out", str(tmp_path)])
    # One per evaluation point (the preset's 4), the untrained policy first, as Brax's callback is called.
    assert len(result["saved"]) == 4 and all(os.path.exists(p) for p in result["saved"])
    assert os.path.basename(result["saved"][0]) == "policy_000000000000.pkl"
    first, last = (result["rewards"][os.path.basename(p)] for p in (result["saved"][0], result["saved"][-1]))
    # The deterministic rollouts of the first (untrained) and last saved policies: `fast` pays at most 68.7 per
    # 100-step episode, for pushing every step. Seeds 0-2: 0 untrained (it never pushes from rest), 68.7 trained.
    assert last > first + 60.0, (first, last)


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
