"""brax_bridge.gymnasium: Gymnasium's vector API, both auto-reset modes, its wrappers, and a PPO that learns."""

import importlib.util
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

gymnasium = pytest.importorskip("gymnasium")  # optional extra; `make test` installs it

from gymnasium.utils.env_checker import data_equivalence  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import brax_bridge  # noqa: E402
from brax_bridge.gymnasium import VectorEnv  # noqa: E402
from brax_core.envs.fast import Fast  # noqa: E402

N = 4
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


class _Falls(Fast):
    """``fast`` whose episode ends (terminates) once the point passes 0.002: after its third push."""

    def step(self, state, action):
        state = super().step(state, action)
        return state.replace(done=(state.obs[0] > 0.002).astype(jnp.float32))


class _TwoViews(Fast):
    """``fast`` with a dict observation: the position alone, and position with velocity."""

    def reset(self, rng):
        return self._split(super().reset(rng))

    def step(self, state, action):
        return self._split(super().step(state.replace(obs=jnp.zeros(2)), action))

    @staticmethod
    def _split(state):
        full = jnp.concatenate([state.pipeline_state.qpos, state.pipeline_state.qvel])
        return state.replace(obs={"position": full[:1], "full": full})

    @property
    def observation_size(self):
        return {"position": (1,), "full": (2,)}


def _push(n=N, value=1.0):
    return np.full((n, 1), value, np.float32)


def test_spaces_and_metadata():
    env = VectorEnv("fast", N, episode_length=5)
    assert env.num_envs == N
    assert env.single_observation_space == gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    assert env.single_action_space == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert env.observation_space.shape == (N, 2) and env.action_space.shape == (N, 1)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert VectorEnv("fast", N, autoreset_mode="same_step").metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs, infos = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs in env.observation_space and infos == {}
    obs, rew, term, trunc, infos = env.step(env.action_space.sample())
    assert obs in env.observation_space
    assert rew.shape == term.shape == trunc.shape == (N,) and term.dtype == trunc.dtype == np.bool_


def test_dict_observations_become_a_dict_space():
    env = VectorEnv(_TwoViews(), N, episode_length=2, autoreset_mode="same_step")
    assert isinstance(env.single_observation_space, gymnasium.spaces.Dict)
    assert env.observation_space["full"].shape == (N, 2) and env.observation_space["position"].shape == (N, 1)
    obs, _ = env.reset(seed=0)
    assert obs in env.observation_space
    env.step(_push())
    obs, _, _, trunc, infos = env.step(_push())
    assert trunc.all() and obs in env.observation_space
    final = infos["final_obs"][0]
    assert set(final) == {"position", "full"} and final["position"][0] == final["full"][0]


class _RandomStart(Fast):
    """``fast`` starting at a random position (Brax's starts at 0), so different seeds give different starts."""

    def reset(self, rng):
        state = super().reset(rng)
        ps = state.pipeline_state.replace(qpos=jax.random.uniform(rng, (1,), jnp.float32, -1.0, 1.0))
        return state.replace(pipeline_state=ps, obs=jnp.concatenate([ps.qpos, ps.qvel]))


def test_reset_and_step_are_deterministic_under_a_seed():
    env = VectorEnv(_RandomStart(), N, episode_length=3, autoreset_mode="same_step")
    runs = []
    for _ in range(2):
        first, _ = env.reset(seed=7)
        runs.append([first] + [env.step(_push(value=0.3)) for _ in range(5)])
    assert data_equivalence(runs[0], runs[1], exact=True)
    other, _ = env.reset(seed=8)
    assert not np.array_equal(other, runs[0][0])


def test_bad_input_is_refused_with_the_argument_named():
    with pytest.raises(ValueError, match="autoreset_mode"):
        VectorEnv("fast", N, autoreset_mode="later")
    with pytest.raises(ValueError, match="array"):
        VectorEnv("fast", N, array="jax")
    with pytest.raises(ValueError, match="num_envs is required"):
        VectorEnv("fast")
    env = VectorEnv("fast", N)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros((N, 1), np.float32))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(4, 1\)"):
        env.step(np.zeros((N, 2), np.float32))
    with pytest.raises(TypeError, match="actions must be a floating-point"):
        env.step(np.zeros((N, 1), np.int64))
    with pytest.raises(TypeError, match="actions must be a numpy.ndarray or torch.Tensor"):
        env.step([[0.0]] * N)
    with pytest.raises(ValueError, match="seed must be one integer"):
        env.reset(seed=[1, 2, 3, 4])
    env.step(np.zeros((N, 1), np.float64))  # other float dtypes are cast
    env.step(torch.zeros(N, 1))


def test_same_step_returns_the_reset_observation_and_the_true_final_one():
    env = VectorEnv("fast", N, episode_length=3, seed=2, autoreset_mode="same_step")
    twin = brax_bridge.TorchEnv("fast", N, episode_length=3, seed=2)
    obs, _ = env.reset(seed=5)
    assert np.array_equal(obs, twin.reset(seed=5)["observation"].numpy())
    for t in range(7):
        obs, rew, term, trunc, infos = env.step(_push(value=0.5))
        ref = twin.step(torch.full((N, 1), 0.5))["next"]
        assert np.array_equal(obs, ref["observation"].numpy())
        assert np.array_equal(rew, ref["reward"].squeeze(-1).numpy())
        if t % 3 == 2:  # the time limit: every env truncates, none terminates
            assert trunc.all() and not term.any()
            assert infos["_final_obs"].all() and infos["_final_info"].all() and infos["final_obs"].dtype == object
            final = np.stack(infos["final_obs"])
            assert np.array_equal(final, ref["final_observation"].numpy())
            assert not np.array_equal(final, obs)
            assert (obs[:, 1] == 0).all()  # the returned observation is a fresh episode's (at rest)
        else:
            assert not trunc.any() and infos == {}


def test_next_step_returns_the_terminal_observation_then_resets_on_the_next_call():
    env = VectorEnv("fast", N, episode_length=3, seed=2)
    twin = brax_bridge.TorchEnv("fast", N, episode_length=3, seed=2)
    env.reset(seed=5)
    twin.reset(seed=5)
    for _ in range(3):
        obs, rew, term, trunc, infos = env.step(_push(value=0.5))
        ref = twin.step(torch.full((N, 1), 0.5))["next"]
    assert trunc.all() and not term.any() and infos == {}
    assert np.array_equal(obs, ref["final_observation"].numpy())
    # the following call ignores the action: the new episode's first observation, reward 0, no flags
    obs, rew, term, trunc, _ = env.step(_push(value=-1.0))
    assert np.array_equal(obs, ref["observation"].numpy())
    assert (rew == 0).all() and not term.any() and not trunc.any()
    # and the new episode runs its full three steps from there
    flags = [env.step(_push(value=-1.0))[3] for _ in range(3)]
    assert [bool(f.any()) for f in flags] == [False, False, True]


def test_terminations_and_truncations_stay_apart():
    for mode in ("same_step", "next_step"):
        env = VectorEnv(_Falls(), 8, episode_length=6, seed=0, autoreset_mode=mode)
        env.reset(seed=0)
        seen_term = seen_trunc = False
        # the first half push (and terminate after 3 steps), the rest never push (and truncate after 6)
        action = np.where(np.arange(8)[:, None] < 4, 1.0, -1.0).astype(np.float32)
        for _ in range(30):
            _, _, term, trunc, infos = env.step(action)
            assert not (term & trunc).any()
            seen_term |= bool(term.any())
            seen_trunc |= bool(trunc.any())
            if mode == "same_step" and term.any():
                assert np.array_equal(infos["_final_obs"], term | trunc)
                assert all(infos["final_obs"][i][0] > 0.002 for i in np.flatnonzero(term))
        assert seen_term and seen_trunc, mode


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_torch_arrays_never_copy(mode):
    env = VectorEnv("fast", N, episode_length=3, array="torch", autoreset_mode=mode)
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, torch.Tensor)
    action = torch.full((N, 1), 0.2)
    env.step(action)  # compiles
    brax_bridge.reset_stats()
    for _ in range(7):
        obs, rew, term, trunc, infos = env.step(action)
    assert isinstance(rew, torch.Tensor) and rew.shape == (N,) and term.dtype == torch.bool
    assert brax_bridge.stats().copies == 0


def test_numpy_arrays_are_views_that_later_steps_leave_alone():
    env = VectorEnv("fast", N, episode_length=3)
    env.reset(seed=0)
    obs, rew, *_ = env.step(_push())
    kept = obs.copy(), rew.copy()
    brax_bridge.reset_stats()
    for _ in range(4):
        # torch actions: a NumPy array that is not 64-byte aligned (XLA's CPU requirement) is copied on the way in
        env.step(torch.full((N, 1), -1.0))
    assert brax_bridge.stats().copies == 0  # the outputs came out as views
    assert np.array_equal(obs, kept[0]) and np.array_equal(rew, kept[1])


def test_unaligned_numpy_actions_are_copied_once_by_the_adapter_without_a_warning():
    env = VectorEnv("fast", N, episode_length=3)
    env.reset(seed=0)
    buffer = np.zeros(N + 1, dtype=np.float32)
    unaligned = buffer[1:].reshape(N, 1)  # 4 bytes past an aligned start: XLA cannot share it
    assert unaligned.ctypes.data % 64
    unaligned[:] = 1.0
    env.step(unaligned)  # compiles
    brax_bridge.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the bridge's copy warning is for torch users who can avoid the copy
        obs, *_ = env.step(unaligned)
    assert brax_bridge.stats().copies == 0  # the adapter's own copy into aligned torch memory, then a view
    reference = VectorEnv("fast", N, episode_length=3)
    reference.reset(seed=0)
    reference.step(np.ones((N, 1), np.float32))
    np.testing.assert_array_equal(obs, reference.step(np.ones((N, 1), np.float32))[0])


def test_gymnasium_vector_wrappers_run_on_it():
    from gymnasium.wrappers.vector import ClipAction, NormalizeObservation, RecordEpisodeStatistics

    for mode in ("same_step", "next_step"):
        env = RecordEpisodeStatistics(ClipAction(VectorEnv("fast", N, episode_length=4, autoreset_mode=mode)))
        env.reset(seed=0)
        episodes = []
        for _ in range(9):
            *_, infos = env.step(np.full((N, 1), 3.0, np.float32))  # clipped to 1 before the bridge sees it
            if "episode" in infos:
                episodes.append(infos["episode"]["l"][infos["_episode"]])
        assert np.concatenate(episodes).tolist() == [4] * 2 * N, mode

    env = NormalizeObservation(VectorEnv("fast", 16, episode_length=4))
    env.reset(seed=0)
    for _ in range(10):
        obs, *_ = env.step(env.action_space.sample())
    assert env.obs_rms.count > 100 and np.isfinite(obs).all()
    with pytest.raises(ValueError, match="NEXT_STEP"):
        NormalizeObservation(VectorEnv("fast", N, autoreset_mode="same_step"))


def test_cleanrl_style_ppo_learns_fast():
    spec = importlib.util.spec_from_file_location("example_gymnasium_vector_ppo",
                                                  os.path.join(EXAMPLES, "gymnasium_vector_ppo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--tiny"])
    # the deterministic policy over one 20-step episode: `fast` pays the position reached, 0.0308 per step when pushing
    # every step, 0 when never pushing. Seeds 0-2: the untrained policy at 0, 0.027 and 0.0308 (it can push every step
    # by chance; seed 0's never pushes), the trained one at 0.0308 each.
    best = sum(0.02**2 * t * (t + 1) / 2 for t in range(1, 21)) / 20
    before, after = result["eval_reward_before"], result["eval_reward_after"]
    assert after > before + 0.9 * best, (before, after)


@pytest.mark.slow
def test_cleanrl_style_ppo_learns_inverted_pendulum():
    spec = importlib.util.spec_from_file_location("example_gymnasium_vector_ppo",
                                                  os.path.join(EXAMPLES, "gymnasium_vector_ppo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--env", "inverted_pendulum", "--num-envs", "256", "--iterations", "60"])
    assert result["eval_return_before"] < 100 and result["eval_return_after"] >= 900, result
