"""brax_bridge.TorchEnv: TorchRL layout, zero copies on the hot path, one compile, safe returned tensors, bad input.

Mostly the ``fast`` env (compiles in milliseconds); ``inverted_pendulum`` is built once for the module, for action
bounds, termination and the physics view.
"""

import functools
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from tensordict import TensorDict

import brax_bridge
from brax_bridge import TorchEnv
from brax_core import envs
from brax_core.envs.base import State
from brax_core.envs.fast import Fast

N = 6


@pytest.fixture(scope="module")
def pendulum():
    env = TorchEnv("inverted_pendulum", num_envs=4, episode_length=30, seed=1)
    env.reset()
    return env


def _fast(**kwargs) -> TorchEnv:
    kwargs.setdefault("episode_length", 5)
    return TorchEnv("fast", num_envs=N, **kwargs)


def test_reset_and_step_layout():
    env = _fast()
    first = env.reset()
    assert first.batch_size == torch.Size([N]) and first.device == torch.device("cpu")
    assert first["observation"].shape == (N, 2) and first["observation"].dtype == torch.float32
    assert not first["done"].any()
    action = torch.zeros(N, 1)
    td = env.step(action)
    assert td["observation"] is first["observation"]
    assert td["action"] is action
    nxt = td["next"]
    assert nxt["observation"].shape == (N, 2) and nxt["final_observation"].shape == (N, 2)
    assert nxt["reward"].shape == (N, 1) and nxt["reward"].dtype == torch.float32
    for key in ("done", "terminated", "truncated"):
        assert nxt[key].shape == (N, 1) and nxt[key].dtype == torch.bool
    # the next step's root observation is what the previous step returned as ("next", "observation")
    assert env.step(action)["observation"] is nxt["observation"]


def test_tensordict_in_tensordict_out():
    env = _fast()
    td = env.reset()
    td["action"] = torch.full((N, 1), 0.5)
    out = env.step(td)
    assert out is td and ("next", "reward") in out.keys(True)
    with pytest.raises(KeyError, match="'action'"):
        env.step(TensorDict({}, batch_size=[N]))


def test_truncation_terminal_observation_and_auto_reset():
    env = _fast(episode_length=3)
    env.reset(seed=0)
    action = torch.ones(N, 1)
    rows = [env.step(action)["next"] for _ in range(4)]
    for t, nxt in enumerate(rows):
        ended = t == 2
        assert bool(nxt["truncated"].all()) is ended and bool(nxt["done"].all()) is ended
        assert not nxt["terminated"].any()  # 'fast' never terminates: the time limit truncates
        assert torch.equal(nxt["done"], nxt["terminated"] | nxt["truncated"])
    end = rows[2]
    # the transition reached final_observation; the policy's next input is the new episode's first observation
    assert not torch.allclose(end["final_observation"], end["observation"])
    assert torch.all(end["observation"][:, 1] == 0.0)  # fresh episodes start at rest
    # the third push added dt = 0.02 to the velocity the second step reached
    assert torch.allclose(end["final_observation"][:, 1], rows[1]["observation"][:, 1] + 0.02, atol=1e-6)
    assert torch.equal(rows[1]["final_observation"], rows[1]["observation"])


def test_termination_is_not_truncation(pendulum):
    pendulum.reset(seed=2)
    push = torch.full((4, 1), 3.0)
    terminated = torch.zeros(4, 1, dtype=torch.bool)
    for _ in range(25):
        nxt = pendulum.step(push)["next"]
        assert not nxt["truncated"].any()
        assert torch.equal(nxt["done"], nxt["terminated"])
        ended = nxt["terminated"].squeeze(-1)
        if ended.any():
            assert (nxt["final_observation"][ended, 1].abs() > 0.2).all()  # fell: pole angle past 0.2 rad
            assert (nxt["observation"][ended, 1].abs() < 0.02).all()  # reset near upright
        terminated |= nxt["terminated"]
    assert terminated.all()
    assert pendulum.num_compiles == 1  # auto-resets happened inside the one compiled step


def test_hot_path_makes_no_copies_and_compiles_once():
    env = _fast(episode_length=4)
    env.reset()
    action = torch.zeros(N, 1)
    env.step(action)
    before = brax_bridge.stats()
    for _ in range(10):  # crosses two auto-resets
        env.step(action)
    after = brax_bridge.stats()
    assert after.copies == before.copies
    assert after.zero_copy > before.zero_copy  # conversions did happen, all as views
    assert env.num_compiles == 1


def _backend_compiles() -> tuple[list[str], Any]:
    """A list that grows by one for every XLA compile from now on, and the listener to unregister."""
    seen: list[str] = []

    def listener(event: str, duration: float, **kwargs) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            seen.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    return seen, listener


def test_compile_ahead_leaves_the_env_untouched_and_its_calls_compile_nothing_more():
    ahead, plain = _fast(seed=3, episode_length=13), _fast(seed=3, episode_length=13)  # one shared configuration
    evaluation = TorchEnv("fast", num_envs=N + 1, episode_length=13, seed=3)  # another batch: other programs
    seen, listener = _backend_compiles()
    try:
        brax_bridge.compile_envs(ahead, evaluation)
        compiled_ahead = len(seen)
        with pytest.raises(RuntimeError, match="call reset"):  # compiling is no reset
            ahead.step(torch.zeros(N, 1))
        actions = torch.linspace(-1, 1, N)[:, None]
        for env in (ahead, plain, evaluation):
            env.reset()
        evaluation.step(torch.zeros(N + 1, 1))
        for t in range(20):  # crosses auto-resets
            if t == 7:
                ahead.compile()  # in mid-episode: the carried state stays as it is
            a, b = ahead.step(actions)["next"], plain.step(actions)["next"]
            for key in ("observation", "reward", "done"):
                assert torch.equal(a[key], b[key]), (t, key)
        compiled_by_calls = len(seen) - compiled_ahead
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiled_ahead >= 2  # the two configurations' programs (fewer if another test compiled them first)
    assert compiled_by_calls == 0  # the real calls found what compile_envs made
    with pytest.raises(TypeError, match="compile_envs takes TorchEnv instances, got str"):
        brax_bridge.compile_envs("fast")


def test_compile_ahead_of_resets_only_leaves_the_step_to_its_first_call():
    ahead, plain = _fast(seed=5, episode_length=11), _fast(seed=5, episode_length=11)
    seen, listener = _backend_compiles()
    try:
        brax_bridge.compile_envs(ahead, resets_only=(ahead,))
        compiled_ahead = len(seen)
        ahead.reset()
        after_reset, steps_before = len(seen), ahead.num_compiles
        actions = torch.linspace(-1, 1, N)[:, None]
        plain.reset()
        for _ in range(3):
            a, b = ahead.step(actions)["next"], plain.step(actions)["next"]
            assert torch.equal(a["observation"], b["observation"]) and torch.equal(a["reward"], b["reward"])
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert after_reset == compiled_ahead  # the reset was compiled ahead
    assert (steps_before, ahead.num_compiles) == (0, 1)  # the step compiled at its first call, then ran as plain's


def test_the_bridge_compiles_its_reset_at_level_0_and_its_step_at_level_1_on_cpu(monkeypatch):
    from brax_bridge import env as bridge_env

    cpu = jax.devices("cpu")[0]
    level = lambda options: options["xla_backend_optimization_level"]  # noqa: E731
    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "auto")
    assert (level(bridge_env.reset_compiler_options(cpu)), level(bridge_env.compiler_options(cpu))) == (0, 1)
    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "2")  # the user's setting holds for both
    assert (level(bridge_env.reset_compiler_options(cpu)), level(bridge_env.compiler_options(cpu))) == (2, 2)


def test_cpu_opt_level_chooses_the_steps_level_unless_the_user_set_one(monkeypatch):
    from brax_bridge import programs as bridge_programs

    chosen = []
    real = bridge_programs.compiler_options

    def recording(device, cpu_opt_level=None):
        chosen.append(real(device, cpu_opt_level)["xla_backend_optimization_level"])
        return real(device, cpu_opt_level)

    monkeypatch.setattr(bridge_programs, "compiler_options", recording)
    make = functools.partial(TorchEnv, "fast", 3, episode_length=17)  # a configuration no other test compiles
    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "auto")
    assert make(cpu_opt_level=0).cpu_opt_level == 0 and chosen[-1] == 0
    assert make().cpu_opt_level == 1 and chosen[-1] == 1  # None: level 1, as before the argument existed
    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "2")
    overridden = make(cpu_opt_level=0)
    assert chosen[-1] == 2
    assert make(cpu_opt_level=3)._compiled is overridden._compiled  # the level is the variable's: one program
    for bad in (True, 4, -1, 1.0, "0"):
        with pytest.raises(ValueError, match=r"cpu_opt_level must be one of 0, 1, 2, 3 or None, got"):
            make(cpu_opt_level=bad)


def test_writes_to_returned_tensors_do_not_touch_the_simulation():
    clean, dirty = _fast(seed=7), _fast(seed=7)
    clean.reset()
    dirty_td = dirty.reset()
    dirty_td["observation"].fill_(99.0)
    action = torch.full((N, 1), 0.3)
    for _ in range(7):
        a = clean.step(action)["next"]
        b = dirty.step(action.clone())["next"]
        assert torch.equal(a["observation"], b["observation"]) and torch.equal(a["reward"], b["reward"])
        for key in ("observation", "final_observation", "reward"):
            b[key].add_(123.0)
        b["done"].fill_(True)
    assert torch.equal(clean.physics["qpos"], dirty.physics["qpos"])


def test_earlier_outputs_survive_later_steps_and_donation():
    env = _fast(seed=3)
    env.reset()
    held = env.step(torch.zeros(N, 1))["next"]
    snapshot = held.clone()
    physics = env.physics  # a snapshot of the carried state, which the next steps donate
    qpos_then = physics["qpos"].clone()
    for _ in range(12):
        env.step(torch.ones(N, 1))
    assert (held == snapshot).all()
    assert torch.equal(physics["qpos"], qpos_then)
    assert not torch.equal(env.physics["qpos"], qpos_then)


def test_bad_actions_fail_clearly_before_physics():
    env = _fast()
    env.reset()
    with pytest.raises(ValueError, match=r"shape \(6, 2\); expected \(6, 1\)"):
        env.step(torch.zeros(N, 2))
    with pytest.raises(TypeError, match="dtype torch.float64; expected torch.float32"):
        env.step(torch.zeros(N, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="on meta; expected cpu"):
        env.step(torch.zeros(N, 1, device="meta"))
    with pytest.raises(TypeError, match="torch.Tensor"):
        env.step([0.0] * N)
    ref = _fast()
    ref.reset()
    bad = torch.zeros(N, 1)
    bad[2, 0] = float("nan")
    with pytest.raises(ValueError, match=r"NaN or infinity in env\(s\) \[2\]"):
        env.step(bad)
    bad[2, 0], bad[4, 0] = 0.0, float("-inf")
    with pytest.raises(ValueError, match=r"NaN or infinity in env\(s\) \[4\]"):
        env.step(bad)
    # the rejected step left the state alone: both envs continue identically
    zeros = torch.zeros(N, 1)
    assert torch.equal(env.step(zeros)["next", "observation"], ref.step(zeros)["next", "observation"])


def test_an_action_that_must_be_copied_warns_once():
    env = _fast()
    env.reset()
    strided = torch.zeros(N, 2)[:, :1]  # a view with a row stride of 2: JAX cannot share its memory
    before = brax_bridge.stats().copies
    with pytest.warns(UserWarning, match=r"copies this action .*non-compact strides"):
        env.step(strided)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per env
        env.step(strided)
        env.step(torch.zeros(N, 1))
    assert brax_bridge.stats().copies == before + 2


def test_constructor_validates_before_compiling():
    with pytest.raises(ValueError, match="num_envs must be a positive integer"):
        TorchEnv("fast", num_envs=0)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        TorchEnv("fast", num_envs=2, seed=-1)
    with pytest.raises(ValueError, match="registered environments"):
        TorchEnv("no_such_env", num_envs=2)
    with pytest.raises(ValueError, match="env_kwargs"):
        TorchEnv(Fast(), num_envs=2, dt=0.1)
    with pytest.raises(ValueError, match="episode_length"):
        TorchEnv("fast", num_envs=2, episode_length=0)
    with pytest.raises(RuntimeError, match="reset"):
        TorchEnv("fast", num_envs=2).step(torch.zeros(2, 1))


def test_specs_bounds_and_defaults(pendulum):
    fast = TorchEnv("fast", num_envs=3)
    assert fast.episode_length == 100  # the class's default_episode_length
    assert fast.specs.observation.shape == (3, 2) and fast.action_spec.shape == (3, 1)
    assert torch.equal(fast.action_low, -torch.ones(1)) and torch.equal(fast.action_high, torch.ones(1))
    assert fast.reward_spec.dtype == torch.float32 and set(fast.done_spec) == {"done", "terminated", "truncated"}
    assert fast.dt == pytest.approx(0.02)
    assert pendulum.observation_size == 4 and pendulum.action_size == 1
    # Actions lie in [-1, 1] for every env; the pendulum maps them onto its motor's [-3, 3] itself.
    assert torch.equal(pendulum.action_low, -torch.ones(1)) and torch.equal(pendulum.action_high, torch.ones(1))
    assert pendulum.dt == pytest.approx(0.04)
    assert isinstance(pendulum.jax_env, envs.Wrapper) and type(pendulum.unwrapped_env).__name__ == "InvertedPendulum"


def test_physics_view_and_state(pendulum):
    td = pendulum.reset(seed=5)
    physics = pendulum.physics
    assert physics["qpos"].shape == (4, 2) and physics["qvel"].shape == (4, 2)
    state = pendulum.state
    assert isinstance(state, State)
    assert physics["qpos"].data_ptr() != state.pipeline_state.qpos.unsafe_buffer_pointer()  # a snapshot
    assert np.array_equal(physics["qpos"].numpy(), np.asarray(state.pipeline_state.qpos))
    assert torch.allclose(td["observation"], torch.cat([physics["qpos"], physics["qvel"]], -1))
    info = pendulum.episode_info()
    assert info["episode_metrics", "sum_reward"].shape == (4,)


def test_seeded_resets_are_reproducible(pendulum):
    env = pendulum  # random starts (`fast` always starts at rest at the origin)
    a = env.reset(seed=11)["observation"].clone()
    b = env.reset()["observation"].clone()
    c = env.reset(seed=11)["observation"]
    assert torch.equal(a, c) and not torch.equal(a, b)


class _DictObs(Fast):
    """``fast`` with a dict observation, to check nesting."""

    def reset(self, rng):
        return self._dictify(super().reset(rng))

    def step(self, state, action):
        inner = state.replace(obs=jnp.concatenate([state.obs["position"], state.obs["velocity"]]))
        return self._dictify(super().step(inner, action))

    @staticmethod
    def _dictify(state):
        return state.replace(obs={"position": state.obs[:1], "velocity": state.obs[1:]})

    @property
    def observation_size(self):
        return {"position": (1,), "velocity": (1,)}


def test_dict_observations_become_nested_tensordicts():
    env = TorchEnv(_DictObs(), num_envs=3, episode_length=4)
    td = env.reset()
    assert isinstance(td["observation"], TensorDict) and td["observation", "position"].shape == (3, 1)
    nxt = env.step(torch.ones(3, 1))["next"]
    assert nxt["observation", "velocity"].shape == (3, 1) and isinstance(nxt["final_observation"], TensorDict)
    assert env.specs.observation["position"].shape == (3, 1)


def _scale_gear(sys, rng):
    """Brax-style randomisation: one actuator gear per env."""
    scale = jax.vmap(lambda k: jax.random.uniform(k, (), minval=0.5, maxval=1.5))(rng)
    gear = jax.vmap(lambda s: sys.actuator_gear * s)(scale)
    in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"actuator_gear": 0})
    return sys.tree_replace({"actuator_gear": gear}), in_axes


def _cart_velocities_after_one_push(randomization_fn) -> torch.Tensor:
    """Every env from the same state (at rest, upright), pushed by the same action: only the model can differ."""
    env = TorchEnv("inverted_pendulum", num_envs=3, randomization_fn=randomization_fn, seed=4)
    env.reset()
    env.set_physics(qpos=torch.zeros(3, 2), qvel=torch.zeros(3, 2))
    return env.step(torch.full((3, 1), 1.0))["next", "observation"][:, 2]


def test_randomization_fn_gets_one_key_per_env_and_gives_each_env_its_model():
    seen = []

    def record(sys, rng):
        seen.append(rng.shape)
        return _scale_gear(sys, rng)

    randomised = _cart_velocities_after_one_push(functools.partial(record))
    assert seen and seen[0][0] == 3
    assert randomised.unique().numel() == 3  # three gears push the cart three ways
    plain = _cart_velocities_after_one_push(None)
    assert plain.unique().numel() == 1 and plain[0] != 0  # the same model pushes every env alike
    # The push scales with the gear: each env's velocity over the plain model's is its drawn scale, in [0.5, 1.5].
    assert bool(((randomised / plain[0] > 0.5) & (randomised / plain[0] < 1.5)).all())


def test_state_dict_round_trip_continues_the_same_trajectory():
    """A restored env steps exactly as the original would have, and its next reset draws the same key."""
    # The module fixture's configuration (4 envs, 30 steps): the bridge reuses its compiled reset and step.
    source = TorchEnv("inverted_pendulum", num_envs=4, episode_length=30, seed=5)
    source.reset()
    action = torch.full((4, 1), 0.3)
    for _ in range(4):
        source.step(action)
    saved = source.state_dict()
    assert all(isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in saved["leaves"])
    expected = [source.step(action)["next", "observation"].clone() for _ in range(3)]
    expected_reset = source.reset()["observation"]

    target = TorchEnv("inverted_pendulum", num_envs=4, episode_length=30, seed=99)
    target.reset()
    obs = target.load_state_dict(saved)
    assert torch.equal(obs, torch.from_numpy(np.array(target.state.obs)))
    first = target.step(action)
    assert torch.equal(first["observation"], obs)  # the step's root observation is the restored one
    got = [first["next", "observation"].clone()]
    got += [target.step(action)["next", "observation"].clone() for _ in range(2)]
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g, e)
    assert torch.equal(target.reset()["observation"], expected_reset)


def test_load_state_dict_refuses_another_layout_and_keeps_its_state():
    env = _fast()
    env.reset()
    before = env.state_dict()
    other = TorchEnv("fast", num_envs=N + 1, episode_length=5)
    other.reset()
    with pytest.raises(ValueError, match="does not fit"):
        env.load_state_dict(other.state_dict())
    for a, b in zip(env.state_dict()["leaves"], before["leaves"], strict=True):
        assert torch.equal(a, b)
    with pytest.raises(RuntimeError, match="reset"):
        _fast().load_state_dict(before)


def test_held_envs_keep_their_state_and_report_nothing():
    env, twin = TorchEnv("fast", N, episode_length=3, seed=4), TorchEnv("fast", N, episode_length=3, seed=4)
    env.reset()
    twin.reset()
    push = torch.full((N, 1), 0.5)
    hold = torch.zeros(N, dtype=torch.bool)
    hold[:2] = True
    start = env.step(push)["next", "observation"]
    twin.step(push)
    out = env.step(push, hold=hold)["next"]
    assert torch.equal(out["observation"][:2], start[:2]) and torch.equal(out["final_observation"][:2], start[:2])
    assert (out["reward"][:2] == 0).all() and not out["done"][:2].any()
    # the envs not held stepped as usual
    assert torch.equal(out["observation"][2:], twin.step(push)["next", "observation"][2:])
    # a held env goes on from where it stood: its episode still has two steps left
    flags = [env.step(push)["next", "truncated"][:, 0] for _ in range(2)]
    assert not flags[0][:2].any() and flags[1][:2].all() and flags[0][2:].all()
    with pytest.raises(ValueError, match=r"hold must be a torch.bool tensor of shape \(6,\)"):
        env.step(push, hold=torch.zeros(N))
    with pytest.raises(ValueError, match="differentiable"):
        diff = TorchEnv("fast", N, differentiable=True)
        diff.reset()
        diff.step(push, hold=hold)


def test_set_episode_steps_moves_the_time_limit_and_checks_its_input():
    env = TorchEnv("fast", 3, episode_length=4, seed=0)
    env.reset()
    env.set_episode_steps(torch.tensor([0, 2, 3]))
    truncated = [env.step(torch.zeros(3, 1))["next", "truncated"][:, 0].tolist() for _ in range(4)]
    assert truncated == [[False, False, True], [False, True, False], [False, False, False], [True, False, False]]
    with pytest.raises(ValueError, match=r"steps must lie in \[0, 4\)"):
        env.set_episode_steps(torch.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match=r"steps must be a numeric tensor of shape \(3,\)"):
        env.set_episode_steps(torch.zeros(2))


class _RandomStart(Fast):
    """``fast`` starting at a random position (Brax's starts at 0), so that every reset draws a visible start."""

    def reset(self, rng):
        state = super().reset(rng)
        ps = state.pipeline_state.replace(qpos=jax.random.uniform(rng, (1,), jnp.float32, -1.0, 1.0))
        return state.replace(pipeline_state=ps, obs=jnp.concatenate([ps.qpos, ps.qvel]))


def test_a_reset_mask_starts_new_episodes_in_the_envs_it_names():
    env, twin = (TorchEnv(_RandomStart(), 4, episode_length=3, seed=2) for _ in range(2))
    first = env.reset()["observation"].clone()
    twin.reset()
    push = torch.ones(4, 1)
    env.step(push)
    twin.step(push)
    held = env.state  # read before the reset: it must stay readable although the reset donates the state
    qpos_then = np.array(held.pipeline_state.qpos)
    out = env.reset(mask=torch.tensor([[True], [False], [True], [False]]))
    obs = out["observation"]
    assert not out["done"].any() and obs.shape == (4, 2)
    assert (obs[[0, 2], 1] == 0).all() and (obs[[0, 2], 0] != first[[0, 2], 0]).all()  # fresh random starts
    info = env.episode_info()
    assert info["steps"].tolist() == [0, 1, 0, 1] and info["episode_metrics", "sum_reward"][[0, 2]].eq(0).all()
    assert np.array_equal(np.array(held.pipeline_state.qpos), qpos_then)
    kept = obs.clone()
    # the envs not named go on exactly as in the twin; envs 1 and 3 reach their time limit one step before 0 and 2
    for _ in range(2):
        a, b = env.step(push)["next"], twin.step(push)["next"]
        assert torch.equal(a["observation"][[1, 3]], b["observation"][[1, 3]])
    assert a["done"].squeeze(-1).tolist() == [False, True, False, True]
    assert torch.equal(obs, kept)  # the returned observation survived the donating steps
    # envs 1 and 3 already started their new episode: a mask naming them leaves them as they are
    started = a["observation"].clone()
    again = env.reset(mask=torch.ones(4, dtype=torch.bool))["observation"]
    assert torch.equal(again[[1, 3]], started[[1, 3]]) and (again[[0, 2], 1] == 0).all()
    assert env.num_compiles == 1 and env._compiled.partial_reset._cache_size() == 1


def test_a_reset_mask_is_checked_before_anything_changes():
    env = _fast(seed=1)
    with pytest.raises(ValueError, match=r"mask must be a torch.bool tensor of shape \(6,\) or \(6, 1\)"):
        env.reset(mask=torch.ones(N))
    with pytest.raises(ValueError, match=r"mask must be .* got torch.bool \(6, 2\)"):
        env.reset(mask=torch.ones(N, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask must be .* got list"):
        env.reset(mask=[True] * N)
    with pytest.raises(ValueError, match="mask is on meta; expected cpu"):
        env.reset(mask=torch.ones(N, dtype=torch.bool, device="meta"))
    # before the first full reset there is no episode to go on with: a masked reset resets every env
    assert env.reset(mask=torch.zeros(N, dtype=torch.bool))["observation"].shape == (N, 2)
    key = np.array(env._key)
    with pytest.raises(ValueError, match="mask must be"):
        env.reset(seed=5, mask=torch.ones(3, dtype=torch.bool))
    assert np.array_equal(np.array(env._key), key)  # the refused call did not reseed


def test_the_deferred_check_of_non_finite_actions_names_env_and_call_once_the_device_is_there(monkeypatch):
    """The GPU's way (``brax_bridge.action_check``) run on the CPU with an event the test completes by hand: nothing
    is reported before the device has reached the step, then the envs and the call are, once; the GPU test shows it
    on a real device."""
    from brax_bridge import action_check

    class Event:
        reached = False

        def record(self):
            Event.reached = False  # a newly queued copy: the device has not run it yet

        def query(self):
            return Event.reached

    monkeypatch.setattr(torch.cuda, "Event", Event)
    check = action_check.NonFiniteActionCheck(4, torch.device("cpu"), deferred=True)
    good, bad = torch.zeros(4, 2), torch.zeros(4, 2)
    bad[1, 0], bad[3, 1] = float("nan"), float("inf")
    check.step(good)  # call 1 queues a copy ("nothing marked")
    check.step(bad)  # call 2: marked, but the copy in flight is call 1's
    check.check()  # the device has not reached call 1's copy: nothing to say yet, no waiting
    Event.reached = True
    check.step(good)  # call 3: call 1's copy said nothing; a new copy goes (it holds call 2's marks)
    check.step(good)  # call 4: not reached yet
    Event.reached = True
    with pytest.raises(ValueError, match=r"env\(s\) \[1, 3\], first at step call\(s\) \[2\]"):
        check.step(good)
    Event.reached = True
    for _ in range(3):  # reported once: the marks are cleared
        check.step(good)
        Event.reached = True
    check.check()
