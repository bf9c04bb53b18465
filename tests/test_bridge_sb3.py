"""brax_bridge.sb3: Stable-Baselines3's VecEnv contract, VecNormalize on top, and SB3's PPO learning `fast`."""

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")  # optional extra; `make test` installs it

from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402

import brax_bridge  # noqa: E402
from brax_bridge.sb3 import VecEnv  # noqa: E402
from brax_core.envs.fast import Fast  # noqa: E402

N = 4
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


class _Falls(Fast):
    """``fast`` whose episode ends (terminates) once the point passes 0.002: after its third push."""

    def step(self, state, action):
        state = super().step(state, action)
        return state.replace(done=(state.obs[0] > 0.002).astype(jnp.float32))


class _RandomStart(Fast):
    """``fast`` starting at a random position (Brax's starts at 0), so that a reset shows in the observation."""

    def reset(self, rng):
        state = super().reset(rng)
        ps = state.pipeline_state.replace(qpos=jax.random.uniform(rng, (1,), jnp.float32, -1.0, 1.0))
        return state.replace(pipeline_state=ps, obs=jnp.concatenate([ps.qpos, ps.qvel]))


def _push(n=N, value=0.5):
    return np.full((n, 1), value, np.float32)


def test_truncation_reports_the_terminal_observation_and_time_limit():
    env = VecEnv("fast", N, episode_length=3, seed=2)
    twin = brax_bridge.TorchEnv("fast", N, episode_length=3, seed=2)
    assert env.observation_space.shape == (2,) and env.action_space.shape == (1,) and env.render_mode is None
    env.seed(5)
    obs = env.reset()
    assert np.array_equal(obs, twin.reset(seed=5)["observation"].numpy())
    rewards = np.zeros(N)
    for t in range(6):
        obs, rew, dones, infos = env.step(_push())
        ref = twin.step(torch.full((N, 1), 0.5))["next"]
        rewards += rew
        assert len(infos) == N and rew.shape == dones.shape == (N,) and dones.dtype == np.bool_
        assert np.array_equal(obs, ref["observation"].numpy())  # same-step reset, as SB3's VecEnvs do
        if t % 3 == 2:
            assert dones.all()
            for i, info in enumerate(infos):
                assert info["TimeLimit.truncated"] is True
                assert np.array_equal(info["terminal_observation"], ref["final_observation"][i].numpy())
                assert info["episode"]["l"] == 3 and np.isclose(info["episode"]["r"], rewards[i], atol=1e-5)
            assert (obs[:, 1] == 0).all()  # new episodes start at rest
            rewards[:] = 0
        else:
            assert not dones.any() and infos == [{}] * N


def test_termination_is_not_a_time_limit():
    env = VecEnv(_Falls(), 8, episode_length=6, seed=0)
    env.reset()
    kinds = set()
    # the first half push (and terminate after 3 steps), the rest never push (and reach the 6-step limit)
    action = np.where(np.arange(8)[:, None] < 4, 1.0, -1.0).astype(np.float32)
    for _ in range(30):
        _, _, dones, infos = env.step(action)
        for i in np.flatnonzero(dones):
            truncated = infos[i]["TimeLimit.truncated"]
            kinds.add(truncated)
            if not truncated:
                assert infos[i]["terminal_observation"][0] > 0.002
    assert kinds == {True, False}


def test_attributes_methods_seeds_and_bad_input():
    env = VecEnv("fast", N, episode_length=7, action_repeat=2)
    env.reset()
    infos = [env.step(_push())[3] for _ in range(4)][-1]
    assert infos[0]["episode"]["l"] == 4  # step calls, as Monitor counts them (8 env steps >= 7)
    assert env.get_attr("episode_length") == [7] * N and env.get_attr("render_mode", 1) == [None]
    env.set_attr("tag", "x", indices=[0, 2])
    assert env.get_attr("tag", [0, 2]) == ["x", "x"]
    with pytest.raises(AttributeError, match="'tag'"):
        env.get_attr("tag")
    assert env.env_method("__repr__") == [repr(env.bridge)] * N
    assert env.env_is_wrapped(Monitor) == [True] * N and env.env_is_wrapped(Monitor, [2]) == [True]
    with pytest.raises(ValueError, match="indices must be"):
        env.get_attr("episode_length", [N])
    assert env.seed(3) == [3, 4, 5, 6]  # seed + index, as SB3's vector envs report (the batch draws from one key)
    first = env.reset()
    env.seed(3)
    assert np.array_equal(env.reset(), first)
    with pytest.raises(ValueError, match=r"actions must have shape \(4, 1\)"):
        env.step(np.zeros((N,), np.float32))
    with pytest.raises(RuntimeError, match="step_async"):
        env.step_wait()
    with pytest.raises(ValueError, match="num_envs is required"):
        VecEnv("fast")
    env.close()
    assert env.closed


def test_env_method_reset_restarts_only_the_envs_named_by_indices():
    env, twin = (VecEnv(_RandomStart(), N, episode_length=50, seed=1) for _ in range(2))
    first = env.reset()
    twin.reset()
    for _ in range(3):
        before, *_ = env.step(_push())
        twin.step(_push())
    results = env.env_method("reset", indices=[0, 2])
    assert len(results) == 2 and all(info == {} for _, info in results)
    for i, (obs, _) in zip([0, 2], results, strict=True):
        assert obs.shape == (2,) and obs[1] == 0 and obs[0] != first[i, 0]  # a fresh random start, at rest
    assert env.bridge.episode_info()["steps"].tolist() == [0, 3, 0, 3]
    obs, *_ = env.step(_push())
    ref, *_ = twin.step(_push())
    assert np.array_equal(obs[[1, 3]], ref[[1, 3]])  # the others went on untouched
    np.testing.assert_allclose(obs[0], results[0][0] + [0.0004, 0.02], atol=1e-7)  # one push from rest
    (single,) = env.env_method("reset", indices=3)
    assert single[0][1] == 0 and env.bridge.episode_info()["steps"].tolist() == [1, 4, 1, 0]
    assert len(env.env_method("reset")) == N  # every index: a full reset
    assert env.bridge.episode_info()["steps"].tolist() == [0] * N


def test_per_env_attributes_and_what_no_single_env_has():
    env = VecEnv("fast", N, episode_length=7, seed=0)
    env.reset()
    env.step(_push())
    env.env_method("reset", indices=[1])
    assert env.get_attr("episode_length", np.int64(2)) == [7]
    (qpos,) = env.get_attr("physics", [2])
    assert qpos["qpos"].shape == (1,) and float(qpos["qpos"][0]) > 0
    states = env.get_attr("state", [0, 1])
    assert [float(s.pipeline_state.qvel[0]) for s in states] == pytest.approx([0.02, 0.0])  # env 1 was reset
    assert [float(row["steps"]) for row in env.env_method("episode_info", indices=[0, 1])] == [1.0, 0.0]
    with pytest.raises(AttributeError, match="'num_envs' describes the batch of 4 envs, not one env"):
        env.get_attr("num_envs", indices=[1])
    assert not env.has_attr("batch_size")
    with pytest.raises(ValueError, match=r"TorchEnv.set_episode_steps, which acts on the whole batch: it cannot run "
                                         r"for indices \[0\] alone"):
        env.env_method("set_episode_steps", torch.zeros(N), indices=[0])
    assert env.env_method("set_episode_steps", torch.zeros(N)) == [None] * N
    with pytest.raises(ValueError, match="set_attr cannot set 'episode_length'"):
        env.set_attr("episode_length", 3, indices=[0])
    with pytest.raises(ValueError, match="takes the envs to reset from indices"):
        env.env_method("reset", mask=torch.ones(N, dtype=torch.bool))


def test_vec_normalize_wraps_it_and_normalises_terminal_observations():
    env = VecNormalize(VecEnv("fast", 16, episode_length=4, seed=0), norm_reward=True)
    twin = brax_bridge.TorchEnv("fast", 16, episode_length=4, seed=0)
    env.reset()
    twin.reset()
    rng = np.random.default_rng(0)
    for _ in range(8):
        action = rng.uniform(-1, 1, (16, 1)).astype(np.float32)
        obs, rew, dones, infos = env.step(action)
        ref = twin.step(torch.from_numpy(action))["next"]
    assert dones.all() and np.isfinite(obs).all() and env.obs_rms.count > 100
    assert not np.allclose(obs, env.get_original_obs())
    for i in (0, 15):
        reached = env.normalize_obs(ref["final_observation"][i].numpy())
        assert np.allclose(infos[i]["terminal_observation"], reached, atol=1e-5)


def test_sb3_ppo_learns_fast():
    spec = importlib.util.spec_from_file_location("example_sb3_training", os.path.join(EXAMPLES, "sb3_training.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--tiny"])
    # the deterministic policy over one 20-step episode: `fast` pays the position reached, 0.0308 per step when pushing
    # every step, 0 when never pushing. Seeds 0-2: the untrained policy at 0 each (it never pushed), the trained one at
    # 0.0308, 0.0145 and 0.0308.
    best = sum(0.02**2 * t * (t + 1) / 2 for t in range(1, 21)) / 20
    before, after = result["eval_reward_before"], result["eval_reward_after"]
    assert after > before + 0.9 * best, (before, after)


@pytest.mark.slow
def test_sb3_ppo_learns_inverted_pendulum():
    spec = importlib.util.spec_from_file_location("example_sb3_training", os.path.join(EXAMPLES, "sb3_training.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--env", "inverted_pendulum", "--num-envs", "64", "--timesteps", "200000"])
    # measured (200k steps, about 22 s each on a 2-core CPU): an episode return of 26 before, 1,000 (the longest
    # episode) after, for seeds 0, 1 and 2
    assert result["eval_return_before"] < 100 and result["eval_return_after"] >= 900, result
