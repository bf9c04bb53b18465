"""The Brax-compatible environment API: registry, wrappers, auto-reset, typing and bad input."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_core import envs
from brax_core.envs import training
from brax_core.envs.fast import Fast


def _keys(n: int, seed: int = 0) -> jax.Array:
    return jax.random.split(jax.random.PRNGKey(seed), n)


def test_unknown_environment_lists_registered_names():
    with pytest.raises(ValueError, match="registered environments: .*inverted_pendulum"):
        envs.get_environment("no_such_env")


def test_register_environment_and_create():
    envs.register_environment("fast_copy", envs.get_environment_class("fast"))
    env = envs.create("fast_copy", episode_length=10, batch_size=3)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    assert state.obs.shape == (3, 2)


def test_observation_size_does_not_reset_each_time():
    env = envs.get_environment("inverted_pendulum")
    calls = []
    original = env.reset

    def counting_reset(rng):
        calls.append(1)
        return original(rng)

    env.reset = counting_reset
    assert env.observation_size == 4
    assert env.observation_size == 4
    assert len(calls) <= 1
    assert env.action_size == 1
    assert float(env.dt) == pytest.approx(0.04)


def test_step_compiles_once_and_outputs_are_strongly_typed():
    env = training.wrap(envs.get_environment("inverted_pendulum"), episode_length=5)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state = reset(_keys(4))
    action = jnp.zeros((4, 1), jnp.float32)
    for _ in range(7):  # crosses the time limit, so auto-reset paths run too
        state = step(state, action)
    assert step._cache_size() == 1
    weak = [jax.tree_util.keystr(p) for p, x in jax.tree_util.tree_leaves_with_path(state) if x.weak_type]
    assert weak == []
    assert state.reward.dtype == jnp.float32 and state.done.dtype == jnp.float32


class _PythonNumbers(Fast):
    """A user's env whose reset reports reward and done as Python numbers (weakly typed under jit)."""

    def reset(self, rng):
        return super().reset(rng).replace(reward=0.0, done=0.0)


def test_a_custom_env_with_python_number_rewards_compiles_its_wrapped_step_once():
    env = training.wrap(_PythonNumbers(), episode_length=5)
    state = jax.jit(env.reset)(_keys(2))
    assert not state.reward.weak_type and not state.done.weak_type
    step = jax.jit(env.step)
    for _ in range(7):
        state = step(state, jnp.zeros((2, 1), jnp.float32))
    assert step._cache_size() == 1


def test_episode_wrapper_truncation_and_metrics():
    env = training.wrap(envs.get_environment("fast"), episode_length=6, action_repeat=2)
    state = jax.jit(env.reset)(_keys(2))
    step = jax.jit(env.step)
    action = jnp.ones((2, 1), jnp.float32)  # pushing: fast pays the (growing) position, so rewards differ by step
    rewards = []
    for _ in range(3):
        state = step(state, action)
        rewards.append(state.reward)
    np.testing.assert_array_equal(state.done, [1.0, 1.0])
    np.testing.assert_array_equal(state.info["truncation"], [1.0, 1.0])
    np.testing.assert_array_equal(state.info["steps"], [6.0, 6.0])
    np.testing.assert_allclose(state.info["episode_metrics"]["sum_reward"], sum(rewards), rtol=1e-5)
    np.testing.assert_array_equal(state.info["episode_metrics"]["length"], [6.0, 6.0])
    state = step(state, action)  # the next episode starts counting from zero
    np.testing.assert_array_equal(state.info["steps"], [2.0, 2.0])
    np.testing.assert_array_equal(state.info["truncation"], [0.0, 0.0])
    np.testing.assert_allclose(state.info["episode_metrics"]["sum_reward"], state.reward, rtol=1e-6)


def test_termination_is_not_truncation():
    env = training.wrap(envs.get_environment("inverted_pendulum"), episode_length=1000)
    state = jax.jit(env.reset)(_keys(2))
    step = jax.jit(env.step)
    push = jnp.full((2, 1), 3.0, jnp.float32)
    for _ in range(40):
        state = step(state, push)
        if bool(state.done.any()):
            break
    assert bool(state.done.all())
    np.testing.assert_array_equal(state.info["truncation"], [0.0, 0.0])
    # the terminal observation is kept; the returned observation is the fresh episode's first
    assert np.all(np.abs(np.asarray(state.info["final_obs"])[:, 1]) > 0.2)
    assert np.all(np.abs(np.asarray(state.obs)) <= 0.01 + 1e-6)


class _RandomStart(Fast):
    """``fast`` starting at a random position (Brax's starts at 0), so fresh starts differ from reused ones."""

    def reset(self, rng):
        state = super().reset(rng)
        ps = state.pipeline_state.replace(qpos=jax.random.uniform(rng, (1,), jnp.float32, -1.0, 1.0))
        return state.replace(pipeline_state=ps, obs=jnp.concatenate([ps.qpos, ps.qvel]))


def test_auto_reset_draws_fresh_initial_states_and_brax_mode_reuses_first():
    base = _RandomStart()
    for full_reset, expect_fresh in ((True, True), (False, False)):
        env = training.wrap(base, episode_length=1, full_reset=full_reset)
        state = jax.jit(env.reset)(_keys(3))
        first = np.asarray(state.obs)
        step = jax.jit(env.step)
        starts = []
        for _ in range(3):
            state = step(state, jnp.ones((3, 1), jnp.float32))
            starts.append(np.asarray(state.obs))
        same = all(np.allclose(s, first) for s in starts)
        assert same != expect_fresh
        assert not np.allclose(np.asarray(state.info["final_obs"]), np.asarray(state.obs))


def _scale_mass(sys, rng):
    @jax.vmap
    def randomise(key):
        scale = jax.random.uniform(key, (), minval=0.5, maxval=1.5)
        return sys.body_mass * scale  # reads a sys field inside its own vmap

    body_mass = randomise(rng)
    in_axes = jax.tree.map(lambda _: None, sys)
    in_axes = in_axes.tree_replace({"body_mass": 0})
    return sys.tree_replace({"body_mass": body_mass}), in_axes


def test_domain_randomization_can_wrap_the_same_env_twice_without_leaking_tracers():
    env = envs.get_environment("inverted_pendulum")
    original_mass = np.asarray(env.sys.body_mass)
    for n in (3, 2):  # training and evaluation wrappers of one env object
        fn = functools.partial(_scale_mass, rng=_keys(n, seed=n))
        wrapped = training.wrap(env, episode_length=100, randomization_fn=fn)
        same_start = jnp.stack([jax.random.PRNGKey(1)] * n)
        state = jax.jit(wrapped.reset)(same_start)
        state = jax.jit(wrapped.step)(state, jnp.ones((n, 1), jnp.float32))
        assert not bool(state.done.any())
        assert state.obs.shape == (n, 4)
        assert not isinstance(env.sys.body_mass, jax.core.Tracer)
        # identical starts and actions, different masses: the trajectories must differ
        assert not np.allclose(np.asarray(state.obs[0]), np.asarray(state.obs[1]))
    np.testing.assert_array_equal(np.asarray(env.sys.body_mass), original_mass)


@pytest.mark.parametrize(
    "action, match",
    [
        (jnp.zeros((4, 2), jnp.float32), r"expected shape \(4, 1\)"),
        (jnp.zeros((3, 1), jnp.float32), r"expected shape \(4, 1\)"),
        (jnp.zeros((4, 1), jnp.int32), "floating"),
    ],
)
def test_bad_actions_fail_before_compiling(action, match):
    env = training.wrap(envs.get_environment("fast"), episode_length=10)
    state = env.reset(_keys(4))
    with pytest.raises((ValueError, TypeError), match=match):
        jax.jit(env.step)(state, action)


@pytest.mark.parametrize(
    "kwargs, match", [({"episode_length": 0}, "episode_length"), ({"action_repeat": 0}, "action_repeat")]
)
def test_bad_wrap_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        training.wrap(envs.get_environment("fast"), **kwargs)


def test_bad_env_keywords_and_batch_arguments_are_named():
    with pytest.raises(TypeError, match=r"unknown keyword argument\(s\) \['foo'\]; hopper accepts .*ctrl_cost_weight"):
        envs.get_environment("hopper", foo=1)
    with pytest.raises(TypeError, match="ctrl_cost_weight must be a number .*got 'x'"):
        envs.get_environment("ant", ctrl_cost_weight="x")
    assert envs.get_environment("ant", ctrl_cost_weight=np.float32(0.1)) is not None  # NumPy scalars are numbers
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size must be an integer >= 0 or None"):
            envs.create("fast", batch_size=bad)
    with pytest.raises(ValueError, match="batch_size must be a positive integer or None"):
        training.VmapWrapper(envs.get_environment("fast"), batch_size=0)
    # A batched env's reset takes one key per env; one key alone used to fail inside vmap with JAX's message.
    with pytest.raises(ValueError, match=r"one PRNG key per env, e.g. jax.random.split\(key, num_envs\)"):
        training.wrap(envs.get_environment("fast"), episode_length=10).reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="one PRNG key per env"):
        training.wrap(envs.get_environment("fast"), episode_length=10).reset(0)


def test_randomised_env_reset_names_the_key_count_it_needs():
    env = envs.get_environment("inverted_pendulum")

    def randomize(sys, rng):
        masses = jax.vmap(lambda k: sys.body_mass * jax.random.uniform(k, (), minval=0.9, maxval=1.1))(rng)
        in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"body_mass": 0})
        return sys.tree_replace({"body_mass": masses}), in_axes

    wrapped = training.wrap(env, episode_length=10, randomization_fn=functools.partial(randomize, rng=_keys(4)))
    assert wrapped.reset(_keys(4)).obs.shape == (4, env.observation_size)
    with pytest.raises(ValueError, match=r"got 8 keys for 4 envs .*jax.random.split\(key, 4\)"):
        wrapped.reset(_keys(8))


def test_eval_wrapper_counts_each_episode_once():
    env = training.EvalWrapper(training.wrap(envs.get_environment("fast"), episode_length=4))
    state = jax.jit(env.reset)(_keys(2))
    step = jax.jit(env.step)
    for _ in range(10):
        state = step(state, jnp.zeros((2, 1), jnp.float32))
    metrics = state.info["eval_metrics"]
    np.testing.assert_array_equal(metrics.episode_steps, [4.0, 4.0])
    np.testing.assert_array_equal(metrics.active_episodes, [0.0, 0.0])


def test_brax_backend_names_port_and_unknown_backend_is_rejected():
    with pytest.warns(UserWarning, match="MuJoCo MJX"):
        env = envs.get_environment("inverted_pendulum", backend="generalized")
    assert env.backend == "mjx"
    with pytest.raises(ValueError, match="backend must be one of 'mjx'"):
        envs.get_environment("inverted_pendulum", backend="warp")


def test_pipeline_state_has_brax_views():
    env = envs.get_environment("inverted_pendulum")
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    ps = state.pipeline_state
    np.testing.assert_array_equal(ps.q, ps.qpos)
    np.testing.assert_array_equal(ps.qd, ps.qvel)
    assert ps.x.pos.shape == (env.sys.nbody - 1, 3) and ps.x.rot.shape == (env.sys.nbody - 1, 4)
    stepped = jax.jit(env.step)(state, jnp.zeros(1, jnp.float32))
    assert type(stepped.pipeline_state) is type(ps)


def test_cpu_opt_level_setting_is_validated_and_shared(monkeypatch):
    from brax_core import compile as compile_options

    monkeypatch.delenv("BRAX_CORE_CPU_FUSION_EMITTERS", raising=False)

    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "2")
    assert compile_options.compiler_options("cpu", auto_level=0) == {"xla_backend_optimization_level": 2}
    assert compile_options.compiler_options("gpu") is None
    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "auto")
    fusion = {"xla_cpu_use_fusion_emitters": False} if compile_options.cpu_fusion_emitters_option() else {}
    assert compile_options.compiler_options("cpu", auto_level=0) == {"xla_backend_optimization_level": 0, **fusion}
    options = compile_options.compiler_options("cpu", auto_level=0)
    jax.jit(lambda x: x * 2).lower(jnp.ones(3)).compile(compiler_options=options)  # options this jaxlib knows
    assert compile_options.compiler_options("cpu", auto_level=1) == {"xla_backend_optimization_level": 1}
    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "fastest")
    with pytest.raises(ValueError, match="BRAX_CORE_CPU_OPT_LEVEL must be one of auto, default, 0, 1, 2, 3"):
        compile_options.compiler_options("cpu")


def test_the_fusion_emitters_setting_is_validated_and_applies_at_every_level(monkeypatch):
    from brax_core import compile as compile_options

    # jaxlib 0.11 and later have no such option: there the setting is validated and sets nothing.
    emitters = compile_options.cpu_fusion_emitters_option()
    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "auto")
    monkeypatch.delenv("BRAX_CORE_CPU_FUSION_EMITTERS", raising=False)
    assert "xla_cpu_use_fusion_emitters" not in compile_options.compiler_options("cpu", auto_level=1)  # XLA's own
    monkeypatch.setenv("BRAX_CORE_CPU_FUSION_EMITTERS", "off")
    off = compile_options.compiler_options("cpu", auto_level=1)
    assert off == {"xla_backend_optimization_level": 1, **({"xla_cpu_use_fusion_emitters": False} if emitters else {})}
    jax.jit(lambda x: x + 1).lower(jnp.ones(2)).compile(compiler_options=off)  # options this jaxlib knows
    monkeypatch.setenv("BRAX_CORE_CPU_FUSION_EMITTERS", "on")
    on = compile_options.compiler_options("cpu", auto_level=0)
    assert on == {"xla_backend_optimization_level": 0, **({"xla_cpu_use_fusion_emitters": True} if emitters else {})}
    assert compile_options.compiler_options("gpu") is None
    monkeypatch.setenv("BRAX_CORE_CPU_FUSION_EMITTERS", "fused")
    with pytest.raises(ValueError, match="BRAX_CORE_CPU_FUSION_EMITTERS must be one of auto, on, off; got 'fused'"):
        compile_options.compiler_options("cpu")


class _RefusingJit:
    """Stands in for ``jax.jit`` of a jaxlib whose CPU compiler lacks the fusion-emitters option."""

    def __init__(self, fn, **kwargs):
        pass

    def lower(self, *args):
        return self

    def compile(self, compiler_options):
        raise RuntimeError("INVALID_ARGUMENT: No such compile option: 'xla_cpu_use_fusion_emitters'")


def test_the_fusion_emitters_option_is_asked_of_a_jaxlib_that_may_lack_it(monkeypatch):
    # jaxlib 0.11 refuses the option; from that version on the answer comes from a real compile.
    from brax_core import compile as compile_options

    monkeypatch.setattr(compile_options._jax_install, "jaxlib_version", lambda: (0, 11))
    compile_options.cpu_fusion_emitters_option.cache_clear()
    try:
        assert isinstance(compile_options.cpu_fusion_emitters_option(), bool)  # the probe compiles here
        compile_options.cpu_fusion_emitters_option.cache_clear()
        monkeypatch.setattr(jax, "jit", _RefusingJit)
        assert compile_options.cpu_fusion_emitters_option() is False
        assert compile_options.compiler_options("cpu", auto_level=0) == {"xla_backend_optimization_level": 0}
    finally:
        compile_options.cpu_fusion_emitters_option.cache_clear()


def test_contact_pairs_and_the_jax_ppo_opt_level_follow_the_model(monkeypatch):
    from brax_core import compile as compile_options
    from brax_core.training.agents.ppo import programs

    contact_free = envs.get_environment("inverted_pendulum")
    with_contacts = envs.get_environment("halfcheetah")
    assert compile_options.possible_contact_pairs(contact_free.mj_model) == 0
    assert compile_options.possible_contact_pairs(with_contacts.mj_model) > 0

    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "auto")
    cpu = jax.devices("cpu")
    level = lambda steps, env: programs.compiler_options(cpu, steps, env)["xla_backend_optimization_level"]  # noqa: E731
    assert level(500_000, contact_free) == 0 and level(2_000_000, contact_free) == 1
    assert level(500_000, with_contacts) == 1 and level(50_000, with_contacts) == 0
    assert level(500_000, envs.training.wrap(with_contacts, episode_length=10)) == 1  # read through wrappers
    assert level(500_000, envs.get_environment("fast")) == 0  # no model, no contacts


def test_the_jax_apg_compiles_each_program_at_its_own_level(monkeypatch):
    """The epoch, which runs the physics' reverse pass, leaves level 0 after far fewer env steps than a forward
    program; the first state compiles at level 0; the evaluation follows the forward rule for its env steps."""
    from brax_core import compile as compile_options
    from brax_core.training.agents.apg import train as apg_train

    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "auto")
    contact_free = envs.get_environment("reacher").mj_model
    with_contacts = envs.get_environment("halfcheetah").mj_model
    level = compile_options.auto_level_for_run
    assert level(500_000, contact_free) == 0 and level(500_000, contact_free, differentiated=True) == 1
    assert level(100_000, contact_free, differentiated=True) == 0
    assert level(100_000, with_contacts, differentiated=True) == 1
    assert level(20_000, with_contacts, differentiated=True) == 0

    class Captured(Exception):
        pass

    seen = {}
    original = apg_train.program_cache.Programs.jit

    def recording(self, name, base):
        seen[name.split("/")[0]] = base.keywords["compiler_options"]["xla_backend_optimization_level"]
        return original(self, name, base)

    def stop(jobs):
        raise Captured  # the levels are chosen; nothing needs compiling

    monkeypatch.setattr(apg_train.program_cache.Programs, "jit", recording)
    monkeypatch.setattr(apg_train.ppo_programs, "compile_in_parallel", stop)
    # 400 updates of 16 envs x 32 steps: 204,800 env steps to differentiate, 2 evaluations of 4 x 1,000 steps.
    with pytest.raises(Captured):
        apg_train.train("reacher", episode_length=1000, policy_updates=400, horizon_length=32, num_envs=16,
                        num_evals=2, num_eval_envs=4)
    assert seen == {"first_state": 0, "epoch": 1, "evaluation": 0}


def test_the_jax_ppo_compiles_its_reset_at_level_0_whatever_the_run_length(monkeypatch):
    from brax_core.training.agents.ppo import programs
    from brax_core.training.agents.ppo import train as ppo_train

    class Captured(Exception):
        pass

    seen = []

    def capture(env, mesh, local_envs, jit):
        seen.append(jit.keywords["compiler_options"])
        raise Captured  # nothing more to build

    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "auto")
    monkeypatch.setattr(programs, "make_reset_fn", capture)
    steps = 5_000_000  # long enough for level 1 everywhere else
    assert programs.compiler_options(jax.devices("cpu"), steps, None)["xla_backend_optimization_level"] == 1
    with pytest.raises(Captured):
        ppo_train.train("fast", num_timesteps=steps, num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5)
    assert seen[0]["xla_backend_optimization_level"] == 0


def test_native_model_is_found_for_a_replaced_sys_as_brax_scripts_render_it():
    import mujoco
    from mujoco import mjx

    from brax_core.io import mjcf

    env = envs.get_environment("inverted_pendulum")
    replaced = env.sys.tree_replace({"opt.timestep": env.dt})  # what Brax's tutorials pass to html.render
    assert mjcf.native_model(replaced) is env.mj_model
    stranger = mjx.put_model(mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>"))
    with pytest.raises(ValueError, match="pass mj_model= to PipelineEnv"):
        mjcf.native_model(stranger)


def test_perturbed_init_noise_is_bounded_and_its_kind_is_validated():
    env = envs.get_environment("inverted_pendulum")
    state = jax.jit(lambda k: env.perturbed_init(k, 0.01))(jax.random.PRNGKey(0))
    assert np.all(np.abs(np.asarray(state.qpos - env.sys.qpos0)) <= 0.01)
    assert np.all(np.abs(np.asarray(state.qvel)) <= 0.01) and np.any(np.asarray(state.qvel) != 0)
    with pytest.raises(ValueError, match="qvel_noise must be 'uniform' or 'normal'"):
        env.perturbed_init(jax.random.PRNGKey(0), 0.01, qvel_noise="gaussian")


class _DivergesAfterDone(Fast):
    """``fast`` whose steps after its first done pay NaN, as a finished physics episode that keeps stepping can."""

    def step(self, state, action):
        nstate = super().step(state, action)
        done = nstate.pipeline_state.qpos[0] > 0.0  # the first push ends the episode
        was_done = state.done > 0
        reward = jnp.where(was_done, jnp.float32(jnp.nan), nstate.reward)
        return nstate.replace(reward=reward, done=jnp.where(done, 1.0, 0.0).astype(jnp.float32))


def test_nan_after_an_episode_ended_reaches_no_total():
    push = jnp.ones((2, 1), jnp.float32)
    evaluated = training.EvalWrapper(training.wrap(_DivergesAfterDone(), episode_length=100, action_repeat=3))
    state = jax.jit(evaluated.reset)(_keys(2))
    step = jax.jit(evaluated.step)
    first = step(state, push)
    state = first
    for _ in range(4):
        state = step(state, push)
    totals = state.info["eval_metrics"].episode_metrics
    # the first sub-step ends the episode: its reward is the episode's whole total, in the action-repeat sum
    # (later sub-steps pay NaN), the running episode totals and the eval totals alike
    np.testing.assert_array_equal(first.reward, first.info["episode_metrics"]["sum_reward"])
    assert np.all(np.isfinite(np.asarray(first.reward)))
    np.testing.assert_array_equal(totals["reward"], first.reward)
    np.testing.assert_array_equal(state.info["episode_metrics"]["sum_reward"], first.reward)  # each episode alike


def test_state_has_brax_base_operations_and_tree_replace():
    # Brax's env State extends brax.base.Base: arithmetic, batch-axis indexing and tree_replace by dotted path.
    env = envs.get_environment("fast")
    batch = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 4))
    assert batch.take(jnp.array([3, 5])).obs.tolist() == batch.obs[jnp.array([3, 1])].tolist()  # wraps, as Brax
    assert batch.concatenate(batch, batch).obs.shape == (12, 2)
    assert batch.slice(1, 3).reward.shape == (2,)
    np.testing.assert_array_equal((batch + batch - batch).obs, batch.obs)
    np.testing.assert_array_equal((batch * 2.0 / 2.0).obs, batch.obs)
    changed = batch.index_set(1, jax.tree.map(lambda x: x[0] + 1, batch))
    np.testing.assert_array_equal(changed.obs[1], batch.obs[0] + 1)
    np.testing.assert_array_equal(changed.obs[2], batch.obs[2])
    picked = batch.select(-batch, jnp.array([True, False, True, False]))
    np.testing.assert_array_equal(picked.obs[::2], batch.obs[::2])
    np.testing.assert_array_equal(picked.obs[1::2], -batch.obs[1::2])

    state = jax.jit(env.reset)(jax.random.PRNGKey(1))
    new = state.tree_replace({"pipeline_state.qpos": jnp.array([0.5]), "reward": jnp.float32(2.0), "info.tag": 1})
    assert new.pipeline_state.qpos.tolist() == [0.5] and float(new.reward) == 2.0 and new.info["tag"] == 1
    assert state.pipeline_state.qpos.tolist() != [0.5] and "tag" not in state.info  # a copy
    with pytest.raises(AttributeError, match="'pipeline_state.qpoz'.*no field 'qpoz'"):
        state.tree_replace({"pipeline_state.qpoz": 0.0})
    with pytest.raises(TypeError, match="mapping of dotted field paths"):
        state.tree_replace("reward")


class _BatchedWithSharedBuffer(envs.Env):
    """A batched env (as a Playground task on MJX's Warp implementation is under vmap) whose physics state holds a
    buffer shared by the batch, without a batch axis, beside a per-env position."""

    observation_size, action_size, backend = 1, 1, "mjx"

    def reset(self, rng):
        n = rng.shape[0]
        return envs.State(
            pipeline_state={"x": jnp.zeros(n), "shared": jnp.zeros((0,))},
            obs=jnp.zeros((n, 1)),
            reward=jnp.zeros(n),
            done=jnp.zeros(n),
        )

    def step(self, state, action):
        x = state.pipeline_state["x"] + action[:, 0]
        return state.replace(pipeline_state={**state.pipeline_state, "x": x}, obs=x[:, None])


def test_auto_reset_keeps_a_buffer_the_batch_shares():
    env = training.AutoResetWrapper(training.EpisodeWrapper(_BatchedWithSharedBuffer(), 2, 1))
    state = jax.jit(env.reset)(_keys(3))
    step = jax.jit(env.step)
    for _ in range(3):  # the time limit at step 2 auto-resets every env
        state = step(state, jnp.ones((3, 1), jnp.float32))
    assert state.pipeline_state["shared"].shape == (0,)
    assert state.pipeline_state["x"].tolist() == [1.0, 1.0, 1.0]  # reset at step 2, one step since
