"""The bridge's examples run end to end at a tiny size (`main(["--tiny"])`) on the `fast` env (the differentiable one
on its own smooth point mass; the robot examples on their own models)."""

import importlib.util
import json
import os

import jax
import numpy as np
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


def test_gradients_through_physics_trains_apg_and_shac_on_a_users_env():
    result = _load("gradients_through_physics").main(["--tiny"])
    assert len(result["apg"]) == 3 and len(result["shac"]) == 3  # an evaluation before training and after each epoch
    assert result["apg"][-1] > result["apg"][0] + 10.0, result["apg"]  # the analytic gradient improves the policy
    assert result["shac"][-1] > result["shac"][0] + 10.0, result["shac"]  # and SHAC's, its windows closed by the critic
    assert np.isfinite(result["metrics"]["training/critic_loss"]) and result["metrics"]["training/critic_loss"] >= 0.0
    action = result["action"]
    assert action.shape == (1, 2) and bool((action.abs() <= 1.0).all())


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchrl_training_loop_runs_collector_and_ppo():
    pytest.importorskip("torchrl")  # optional extra; `make test` installs it
    result = _load("torchrl_training_loop").main(["--tiny"])
    assert [h["iteration"] for h in result["history"]] == list(range(25))
    # The deterministic policy over one 20-step episode: `fast` pays the position reached, 0.0308 per step when
    # pushing every step, 0 when never pushing. Seeds 0-2: the untrained policy never pushed, the trained one always.
    before, after = result["eval_reward_before"], result["eval_reward_after"]
    assert after > before + 0.9 * BEST_PER_STEP_20, (before, after)
    assert result["copies"] == 0


def test_bring_your_own_robot_runs_both_trainings_and_drives_the_policy_from_torchrl_and_gymnasium():
    pytest.importorskip("torchrl")
    pytest.importorskip("gymnasium")
    # 320 env steps per env: this checks that each part runs, with each reward inside its task's range.
    result = _load("bring_your_own_robot").main(["--tiny"])
    for reports in (result["cart_reports"], result["arm_reports"]):
        assert reports[0][0] == 0 and reports[-1][0] >= 320 and len(reports) == 2
    # Cart over a 20-step episode: at most 1.3 m from the goal (then it has left the rail) and slow at first.
    assert all(-30.0 < reward <= 0.0 for _, reward in result["cart_reports"])
    # Arm3: the fingertip is never more than 0.58 m from a target, and the action costs at most 0.03 a step.
    assert all(-12.3 < reward < 0.0 for _, reward in result["arm_reports"])
    # The residual network's policy, rebuilt from its checkpoint by torch_ppo.load_policy, acts as the trained one.
    assert result["reloaded_actions_match"]
    bridge = result["bridge"]
    assert bridge["torchrl_steps"] == (4, 5) and -3.05 < bridge["torchrl_return"] < 0.0
    assert bridge["gymnasium_observation"] == (4, 15) and -3.05 < bridge["gymnasium_return"] < 0.0
    assert result["cli"] == []  # printed only, without --cli


def test_my_robots_randomisation_gives_each_env_its_own_damping():
    module = _load("my_robot")
    env = module.Arm3()
    sys, in_axes = module.randomize_damping(env.sys, jax.random.split(jax.random.PRNGKey(0), 5))
    scale = np.asarray(sys.dof_damping) / np.asarray(env.sys.dof_damping)
    assert scale.shape == (5, 3) and np.all((scale >= 0.5) & (scale <= 2.0))
    np.testing.assert_allclose(scale, scale[:, :1] * np.ones((1, 3)), rtol=1e-6)  # one factor per env
    assert len(set(np.round(scale[:, 0], 6))) == 5
    assert in_axes.dof_damping == 0 and in_axes.body_mass is None


@pytest.mark.slow  # a minute of compiling the seven-joint arm; the learning run below exercises the same code
def test_real_robot_arm_runs_at_a_tiny_size(monkeypatch):
    pytest.importorskip("gymnasium")  # the arm's MJCF ships with it
    monkeypatch.setenv("BRAX_CORE_CPU_FUSION_EMITTERS", "off")  # what the example sets, undone after the test
    result = _load("real_robot_arm").main(["--tiny"])
    assert (result["observation_size"], result["action_size"]) == (23, 7)
    steps = [step for step, _, _ in result["reports"]]
    assert steps[0] == 0 and steps[-1] >= 320
    # 20 steps of minus the tip's distance (no point the tip can reach is 2.0 m from a target) and at most 0.35 of
    # action cost
    assert all(-47.0 < reward < 0.0 for _, reward, _ in result["reports"])


@pytest.mark.slow
def test_bring_your_own_robots_commands_train_and_evaluate(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _load("bring_your_own_robot").main(["--tiny", "--cli"])
    assert result["cli"] == [0, 0, 0]
    evaluated = json.loads((tmp_path / "runs" / "arm3-torch" / "eval.json").read_text())
    assert len(evaluated["returns"]) == 4 and evaluated["mean_length"] == 20.0


@pytest.mark.slow
def test_real_robot_arm_learns_to_reach(monkeypatch):
    pytest.importorskip("gymnasium")
    monkeypatch.setenv("BRAX_CORE_CPU_FUSION_EMITTERS", "off")  # what the example sets, undone after the test
    result = _load("real_robot_arm").main([])
    rewards = [reward for _, reward, _ in result["reports"]]
    assert rewards[-1] > rewards[0] + 20.0, rewards
