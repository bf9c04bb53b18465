"""torch_ppo's evaluation: the compiled JAX rollout (the default) scores what the torch actor does, agrees with the
bridge evaluator, loads from the program cache, and refuses what it cannot do."""

import functools
import os

import jax
import numpy as np
import pytest
import torch

import brax_bridge
import torch_ppo
from brax_bridge import env as bridge_env
from brax_bridge import programs as bridge_programs
from brax_core import compile as compile_options
from brax_core import envs, program_cache
from brax_core.envs import training
from brax_core.training import acting
from brax_core.training.agents.ppo import presets
from torch_ppo.evaluation import JaxEvaluator
from torch_ppo.networks import PPOModules
from torch_training.evaluation import BridgeEvaluator

_NOT_TRAINER_SIZE = ("num_timesteps", "num_evals", "num_eval_envs", "network_factory")
TINY = {k: v for k, v in presets.TRAIN_KWARGS["fast"].items() if k not in _NOT_TRAINER_SIZE}
NETS = {k: v for k, v in presets.network_kwargs("fast").items() if k != "activation"}
STEP = TINY["batch_size"] * TINY["num_minibatches"] * TINY["unroll_length"]


def _modules(obs_size, action_size, seed=0):
    torch.manual_seed(seed)
    modules = PPOModules(obs_size, action_size, (16, 16), (16,), "tanh", normalize_observations=True)
    with torch.no_grad():  # statistics away from the identity, so that the normaliser's conversion counts
        modules.normalizer.load_stats(
            {
                "count": torch.tensor(10.0, dtype=torch.float64),
                "mean": torch.linspace(-0.2, 0.3, obs_size),
                "summed_variance": torch.linspace(1.0, 4.0, obs_size) * 9.0,
                "std": torch.linspace(1.0, 2.0, obs_size),
            }
        )
    return modules


@pytest.mark.parametrize("deterministic", [True, False])
def test_the_jax_rollout_scores_what_the_torch_actor_does(deterministic):
    """The rollout's metrics equal those of the same episodes (same resets) driven step by step by the torch actor
    itself, on the JAX trainer's evaluation env."""
    env = envs.get_environment("inverted_pendulum")
    modules = _modules(env.observation_size, env.action_size)
    num_envs, steps, seed = 4, 60, 11
    evaluator = JaxEvaluator(
        env,
        modules,
        num_eval_envs=num_envs,
        episode_length=steps,
        action_repeat=1,
        deterministic=deterministic,
        wrap_env_fn=None,
        randomization_fn=None,
        seed=seed,
        jax_device=jax.devices("cpu")[0],
        cpu_opt_level=0,
    )
    metrics = evaluator.run(modules, deterministic, None)

    # The reference: the evaluation env stepped in Python, actions from the torch actor; samples (when not
    # deterministic) are the rollout's, so that both follow one trajectory.
    run_key = jax.random.split(jax.random.split(jax.random.PRNGKey(seed))[1])[1]  # Evaluator's first unroll key
    reset_key, policy_key = jax.random.split(run_key)
    quick = functools.partial(jax.jit, compiler_options=compile_options.compiler_options("cpu", 0))
    step = quick(evaluator.env.step)
    state = quick(evaluator.env.reset)(jax.random.split(reset_key, num_envs))
    jax_policy = torch_ppo.policy_transfer.torch_policy_to_jax(modules, deterministic=deterministic)
    for _ in range(steps):
        policy_key, step_key = jax.random.split(policy_key)
        obs = torch.from_numpy(np.array(state.obs))
        with torch.no_grad():
            loc, _ = modules.policy(obs)  # the policy normalises its input
        if deterministic:
            action = modules.policy.postprocess(loc)
        else:
            raw = np.asarray(jax_policy(state.obs, step_key)[1]["raw_action"])
            action = modules.policy.postprocess(torch.from_numpy(raw))
        state = step(state, jax.numpy.asarray(action.numpy()))
    expected = {k: float(v) for k, v in acting.summarize_eval(state.info["eval_metrics"]).items()}
    assert expected["eval/avg_episode_length"] > 5  # the episodes ran (a pendulum falls in a few steps at random)
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-4), name
    assert {"eval/walltime", "eval/epoch_eval_time", "eval/sps"} <= metrics.keys()


def test_both_backends_report_the_same_evaluation_on_a_deterministic_task():
    """``fast`` resets to one state and pays by the sign of the action, so the JAX rollout and the bridge evaluator
    must report the same numbers for the same (deterministic) policy; training is the same under both."""
    runs = {}
    for backend in ("jax", "torch"):
        reports = []
        _, params, _ = torch_ppo.train(
            "fast",
            num_timesteps=3 * STEP,
            num_evals=4,
            num_eval_envs=8,
            deterministic_eval=True,
            eval_backend=backend,
            progress_fn=lambda step, m, reports=reports: reports.append((step, m)),
            **TINY,
            **NETS,
        )
        runs[backend] = (reports, params)
    (jax_reports, jax_params), (torch_reports, torch_params) = runs["jax"], runs["torch"]
    for a, b in zip(jax_params, torch_params, strict=True):
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    assert [s for s, _ in jax_reports] == [s for s, _ in torch_reports] and len(jax_reports) == 4
    for (_, a), (_, b) in zip(jax_reports, torch_reports, strict=True):
        names = ("eval/episode_reward", "eval/episode_reward_std", "eval/avg_episode_length", "eval/std_episode_length")
        for name in names:
            assert a[name] == pytest.approx(b[name], rel=1e-5, abs=1e-5), name
    assert len({round(m["eval/episode_reward"], 3) for _, m in jax_reports}) > 1  # the policy changed along the way


def test_the_default_evaluates_in_jax_and_a_ready_torch_env_through_the_bridge(monkeypatch):
    built = []
    for cls in (JaxEvaluator, BridgeEvaluator):
        init = cls.__init__
        monkeypatch.setattr(
            cls, "__init__", lambda self, *a, init=init, **k: init(self, *a, **k) or built.append(type(self))
        )
    kwargs = dict(num_timesteps=STEP, num_evals=2, num_eval_envs=4, **TINY, **NETS)
    torch_ppo.train("fast", **kwargs)
    torch_ppo.train("fast", eval_env=brax_bridge.TorchEnv("fast", 4), **kwargs)
    torch_ppo.train("fast", eval_backend="torch", **kwargs)
    # an activation brax_core's networks do not know: evaluated by the torch actor itself
    torch_ppo.train("fast", **{**kwargs, "activation": lambda x: torch.tanh(x) * 1.5})
    assert built == [JaxEvaluator, BridgeEvaluator, BridgeEvaluator, BridgeEvaluator]


def test_bad_eval_backend_is_refused_before_anything_compiles(monkeypatch):
    monkeypatch.setattr(bridge_env, "compile_envs", lambda *a, **k: pytest.fail("compiled"))
    kwargs = dict(num_timesteps=STEP, num_evals=2, num_eval_envs=4, **TINY, **NETS)
    for bad in ("numpy", "JAX", 1, True):
        with pytest.raises(ValueError, match=r"eval_backend must be one of jax, torch or None, got"):
            torch_ppo.train("fast", eval_backend=bad, **kwargs)
    with pytest.raises(
        ValueError, match=r"eval_backend='jax' evaluates on a brax_core env, but eval_env is a TorchEnv"
    ):
        torch_ppo.train("fast", eval_backend="jax", eval_env=brax_bridge.TorchEnv("fast", 4), **kwargs)
    with pytest.raises(ValueError, match=r"eval_backend='jax': the actor cannot be evaluated in JAX: activation must"):
        torch_ppo.train("fast", eval_backend="jax", **{**kwargs, "activation": lambda x: torch.tanh(x) * 1.5})


def test_a_later_run_loads_the_evaluation_from_the_program_cache(cache_dir, monkeypatch):
    """Stored by a first run with the envs' programs, run from disk by a second (nothing traced), with the same
    evaluations."""
    kwargs = dict(num_timesteps=2 * STEP, num_evals=3, num_eval_envs=4, seed=5, **TINY, **NETS)
    monkeypatch.setattr(bridge_programs, "_COMPILED", {})
    first = []
    torch_ppo.train("inverted_pendulum", progress_fn=lambda s, m: first.append(m["eval/episode_reward"]), **kwargs)
    # The training env's reset and step, the collection in one program, the evaluation.
    assert len(os.listdir(cache_dir)) == 4

    monkeypatch.setattr(bridge_programs, "_COMPILED", {})  # as in a new process
    monkeypatch.setattr(program_cache, "_export", lambda *a: pytest.fail("traced again"))
    second = []
    torch_ppo.train("inverted_pendulum", progress_fn=lambda s, m: second.append(m["eval/episode_reward"]), **kwargs)
    assert second == first and len(first) == 3


def test_randomised_evaluation_envs_and_a_users_wrapper_are_evaluated_in_jax():
    """A randomisation function (user code: traced each run, not stored) and a Brax-style wrapper reach the JAX
    evaluation env as they reach the JAX trainer's."""
    wrapped = []

    def wrap(env, episode_length, action_repeat, randomization_fn):
        wrapped.append(episode_length)
        return training.wrap(
            env, episode_length=episode_length, action_repeat=action_repeat, randomization_fn=randomization_fn
        )

    def scale_gear(sys, rng):  # Brax-style randomisation: one actuator gear per env
        scale = jax.vmap(lambda k: jax.random.uniform(k, (), minval=0.5, maxval=1.5))(rng)
        gear = jax.vmap(lambda s: sys.actuator_gear * s)(scale)
        in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"actuator_gear": 0})
        return sys.tree_replace({"actuator_gear": gear}), in_axes

    _, _, metrics = torch_ppo.train(
        "inverted_pendulum",
        num_timesteps=STEP,
        num_evals=2,
        num_eval_envs=4,
        randomization_fn=scale_gear,
        wrap_env_fn=wrap,
        episode_length=30,
        **{k: v for k, v in TINY.items() if k != "episode_length"},
        **NETS,
    )
    assert wrapped == [30, 30]  # the training env and the evaluation env
    assert np.isfinite(metrics["eval/episode_reward"]) and 0 < metrics["eval/avg_episode_length"] <= 30


def test_each_evaluation_reads_the_current_weights_and_leaves_them_alone():
    env = envs.get_environment("fast")
    modules = _modules(env.observation_size, env.action_size)
    evaluator = JaxEvaluator(
        env,
        modules,
        num_eval_envs=4,
        episode_length=20,
        action_repeat=1,
        deterministic=True,
        wrap_env_fn=None,
        randomization_fn=None,
        seed=0,
        jax_device=jax.devices("cpu")[0],
        cpu_opt_level=0,
    )
    weights = {k: v.clone() for k, v in modules.state_dict().items()}
    last_bias = [p for name, p in modules.policy.named_parameters() if name.endswith("bias")][-1]
    rewards = []
    for push in (1.0, -1.0, 1.0):  # fast pays only for pushing (a positive action): all or nothing here
        with torch.no_grad():
            last_bias[0] = 100.0 * push
        rewards.append(evaluator.run(modules, True, None)["eval/episode_reward"])
    assert rewards[0] == rewards[2] > 0 == rewards[1]
    for name, value in modules.state_dict().items():  # only the bias set above changed
        if value.data_ptr() != last_bias.data_ptr():
            torch.testing.assert_close(value, weights[name], rtol=0, atol=0)
