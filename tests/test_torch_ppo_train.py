"""torch_ppo.train on the `fast` env: learning, the JAX trainer's metric names and bad-input messages, exact
resume, checkpoint errors, zero-copy collection.

Every run uses the tiny configuration of the JAX trainer's tests (tests/test_ppo_train.py), so the two trainers
are compared on the same settings.
"""

import functools
import io
import os

import jax
import numpy as np
import pytest
import torch

import brax_bridge
import torch_ppo
from brax_core import envs
from brax_core.envs import training
from brax_core.envs.base import Wrapper
from brax_core.envs.fast import Fast
from brax_core.training.agents.ppo import presets, programs
from brax_core.training.agents.ppo import train as ppo_train
from torch_ppo import checkpoint
from torch_ppo import environments as torch_environments
from torch_ppo.params import TorchPPOParams

# 4 minibatches of 32 unrolls of 10 steps = 1280 env steps per training step.
STEP = 1280
# The JAX trainer's tests use the same preset, so both trainers are tested on identical settings.
_NOT_TRAINER_SIZE = ("num_timesteps", "num_evals", "num_eval_envs", "network_factory")
TINY = {k: v for k, v in presets.TRAIN_KWARGS["fast"].items() if k not in _NOT_TRAINER_SIZE}
assert TINY["batch_size"] * TINY["num_minibatches"] * TINY["unroll_length"] == STEP
NETS = {k: v for k, v in presets.network_kwargs("fast").items() if k != "activation"}


def _tiny(**overrides):
    return {**TINY, **NETS, **overrides}


class _FastWithPosition(Fast):
    """``fast`` reporting its position as a metric (Brax's ``fast`` has none), so the env's own metrics can be
    followed into the evaluation metrics."""

    def reset(self, rng):
        state = super().reset(rng)
        return state.replace(metrics={"position": state.pipeline_state.qpos[0]})

    def step(self, state, action):
        state = super().step(state, action)
        return state.replace(metrics={**state.metrics, "position": state.pipeline_state.qpos[0]})


def _assert_params_equal(a, b, atol=0.0):
    for part_a, part_b in zip(a, b, strict=True):
        assert part_a.keys() == part_b.keys()
        for key in part_a:
            torch.testing.assert_close(part_a[key], part_b[key], rtol=0, atol=atol, msg=key)


def test_fast_env_learns_with_the_jax_metric_names_and_zero_copy_collection():
    reports, policies = [], []

    def policy_params_fn(step, make_policy, params):
        action, _ = make_policy(params, deterministic=True)(torch.zeros(1, 2))
        policies.append((step, action))

    brax_bridge.reset_stats()
    make_policy, params, metrics = torch_ppo.train(
        _FastWithPosition(),
        num_timesteps=16 * STEP * 2,
        num_evals=3,
        num_eval_envs=32,
        progress_fn=lambda step, m: reports.append((step, dict(m))),
        policy_params_fn=policy_params_fn,
        **_tiny(),
    )
    # Every action crossed to JAX and every output came back without a copy.
    copies = brax_bridge.stats()
    assert copies.copies == 0 and copies.zero_copy > 0, copies
    steps = [s for s, _ in reports]
    assert steps == [0, 16 * STEP, 32 * STEP]
    first, last = reports[0][1]["eval/episode_reward"], reports[-1][1]["eval/episode_reward"]
    # `fast` pays the position reached: pushing every step returns 68.7 over a 100-step episode; the untrained
    # policy pushes about half the time and returns about 34.
    assert first < 45.0 and last > 65.0, (first, last)
    expected = {
        "eval/episode_reward",
        "eval/episode_reward_std",
        "eval/avg_episode_length",
        "eval/std_episode_length",
        "eval/walltime",
        "eval/sps",
        "eval/epoch_eval_time",
        "eval/episode_position",  # the env's own metric
        "eval/episode_position_std",
        "training/sps",
        "training/walltime",
        "training/total_loss",
        "training/policy_loss",
        "training/v_loss",
        "training/entropy_loss",
        "training/approx_kl",
        "training/old_approx_kl",
        "training/clip_fraction",
        "training/explained_variance",
        "training/grad_norm",
        "training/collection",
    }
    assert set(reports[-1][1]) == expected
    training = reports[-1][1]
    assert training["training/collection"] == "fused"  # torch_ppo's own networks: one JAX program per collection
    # The diagnostics of a run that learns: some ratios clipped, gradients flowing, and the critic explaining part
    # of the returns' variance (it fits them from scratch in this run, so between 0 and 1 is what is known).
    assert 0.0 < training["training/clip_fraction"] < 1.0 and training["training/grad_norm"] > 0.0
    assert training["training/explained_variance"] < 1.0
    assert metrics == reports[-1][1]
    assert [s for s, _ in policies] == [0, 16 * STEP, 32 * STEP]  # once before training too, as Brax does
    assert isinstance(params, TorchPPOParams)
    action, extras = make_policy(params)(torch.zeros(3, 2), torch.Generator().manual_seed(0))
    assert action.shape == (3, 1) and set(extras) == {"log_prob", "raw_action"}


def test_training_metrics_without_eval_match_the_jax_trainer_names():
    jax_train = ppo_train.train
    from brax_core.training.agents.ppo import networks as ppo_networks

    common = dict(num_timesteps=4 * STEP, num_evals=0, log_training_metrics=True, training_metrics_steps=2 * STEP)
    torch_reports, jax_reports = [], []
    _, _, metrics = torch_ppo.train("fast", progress_fn=lambda s, m: torch_reports.append((s, m)), **common, **_tiny())
    factory = functools.partial(ppo_networks.make_ppo_networks, **NETS)
    jax_train("fast", progress_fn=lambda s, m: jax_reports.append((s, m)), network_factory=factory, **common, **TINY)
    assert [s for s, _ in torch_reports] == [s for s, _ in jax_reports] == [2 * STEP, 4 * STEP]
    # Besides the JAX trainer's names, torch_ppo says how it collected (the JAX trainer always collects in one program).
    assert set(torch_reports[-1][1]) == set(jax_reports[-1][1]) | {"training/collection"}
    assert metrics == torch_reports[-1][1]
    # `fast` returns between 0 (never pushing) and 68.7 (pushing every step) over 100 steps
    assert metrics["episode/length"] == 100.0 and 0.0 < metrics["episode/sum_reward"] < 68.7
    assert not any(k.startswith("eval/") for k in metrics)


def test_resume_is_exact_and_checkpoints_are_complete_and_bounded(tmp_path):
    common = _tiny(num_evals=0)
    _, straight, _ = torch_ppo.train("fast", num_timesteps=4 * STEP, **common)
    ckpt = tmp_path / "ckpt"
    torch_ppo.train("fast", num_timesteps=2 * STEP, save_checkpoint_path=ckpt, max_to_keep=2, **common)
    state = checkpoint.load(ckpt)
    assert state["env_steps"] == 2 * STEP and state["config"]["env_steps"] == 2 * STEP
    assert {"modules", "optimizer", "rng_state", "env_state"} <= set(state)
    _, resumed, _ = torch_ppo.train(
        "fast",
        num_timesteps=4 * STEP,
        restore_checkpoint_path=ckpt,
        save_checkpoint_path=ckpt,
        max_to_keep=2,
        **common,
    )
    # Same weights, optimiser, RNG stream and env states: the resumed run is the straight run, bit for bit on CPU.
    _assert_params_equal(straight, resumed, atol=0.0)
    # Atomic writes leave no temporary files; max_to_keep bounds the directory.
    names = sorted(os.listdir(ckpt))
    assert names == [f"{2 * STEP:012d}", f"{4 * STEP:012d}"]
    assert sorted(os.listdir(ckpt / names[-1])) == ["config.json", "manifest.json", "state.pt"]
    # A restored run already at num_timesteps trains nothing and returns the checkpoint's params.
    _, again, metrics = torch_ppo.train("fast", num_timesteps=4 * STEP, restore_checkpoint_path=ckpt, **common)
    _assert_params_equal(resumed, again)
    assert metrics == {}
    # The newest checkpoint alone rebuilds the trained policy.
    make_policy, _, _ = torch_ppo.train("fast", num_timesteps=0, **common)
    obs = torch.randn(5, 2, generator=torch.Generator().manual_seed(1))
    loaded, _ = checkpoint.load_policy(ckpt)(obs)
    expected, _ = make_policy(resumed, deterministic=True)(obs)
    torch.testing.assert_close(loaded, expected, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_missing_or_corrupt_checkpoints_raise_errors_naming_the_path(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        torch_ppo.train("fast", num_timesteps=STEP, restore_checkpoint_path=missing, **_tiny())
    with pytest.raises(FileNotFoundError, match="nowhere"):
        checkpoint.load_policy(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        checkpoint.load(empty)
    # Step directories complete with a manifest that matches their files, holding what no save writes.
    broken = _step_directory_holding(tmp_path / "broken", b"\x80\x04 definitely not a checkpoint")
    with pytest.raises(ValueError, match="corrupt or unreadable") as info:
        torch_ppo.train("fast", num_timesteps=STEP, restore_checkpoint_path=broken.parent.parent, **_tiny())
    assert str(broken) in str(info.value)
    buffer = io.BytesIO()
    torch.save({"weights": torch.zeros(2)}, buffer)
    foreign = _step_directory_holding(tmp_path / "foreign", buffer.getvalue())
    with pytest.raises(ValueError, match="not a torch_ppo checkpoint"):
        checkpoint.load(foreign.parent)


def _step_directory_holding(save_path, state: bytes):
    """A step directory under ``save_path`` whose ``state.pt`` holds ``state``, with a matching manifest; returns
    the ``state.pt`` path."""
    from brax_core.training.run import checkpoints as run_checkpoints

    step_dir = save_path / run_checkpoints.step_name(1280)
    step_dir.mkdir(parents=True)
    (step_dir / checkpoint.STATE_FILE).write_bytes(state)
    (step_dir / checkpoint.CONFIG_FILE).write_text("{}")
    run_checkpoints.write_manifest(str(step_dir), "torch_ppo", 1280, (checkpoint.STATE_FILE, checkpoint.CONFIG_FILE))
    return step_dir / checkpoint.STATE_FILE


def test_a_checkpoint_of_the_other_trainer_is_refused_naming_that_trainer(tmp_path):
    from brax_core.training.agents.ppo import checkpoint as jax_checkpoint

    jax_dir, torch_dir = tmp_path / "jax", tmp_path / "torch"
    net = presets.TRAIN_KWARGS["fast"]["network_factory"]
    ppo_train.train(envs.get_environment("fast"), num_timesteps=STEP, num_evals=0, network_factory=net,
                    save_checkpoint_path=str(jax_dir), **TINY)
    torch_ppo.train("fast", num_timesteps=STEP, save_checkpoint_path=torch_dir, **_tiny())
    with pytest.raises(ValueError, match=r"written by the JAX trainer .*not by torch_ppo: restore it with "
                                         r"brax_core\.training\.agents\.ppo\.train\(\.\.\., restore_checkpoint_path"):
        torch_ppo.train("fast", num_timesteps=2 * STEP, restore_checkpoint_path=jax_dir, **_tiny())
    with pytest.raises(ValueError, match=r"written by torch_ppo, not by the JAX trainer .*restore it with "
                                         r"torch_ppo\.train\(\.\.\., restore_checkpoint_path=PATH\)"):
        ppo_train.train(envs.get_environment("fast"), num_timesteps=2 * STEP, num_evals=0, network_factory=net,
                        restore_checkpoint_path=str(torch_dir), **TINY)
    for load in (jax_checkpoint.load_params, jax_checkpoint.load_config):
        with pytest.raises(ValueError, match="written by torch_ppo"):
            load(torch_dir)
    with pytest.raises(ValueError, match="written by the JAX trainer"):
        checkpoint.load_policy(jax_dir)
    # Each trainer still reads its own.
    assert checkpoint.load(torch_dir)["env_steps"] == STEP
    assert jax_checkpoint.load_config(jax_dir)["env_steps"] == STEP


def test_num_timesteps_zero_builds_and_returns_the_initial_policy():
    make_policy, params, metrics = torch_ppo.train("fast", num_timesteps=0, **_tiny())
    assert metrics == {}
    assert params.policy_params["hidden_0.weight"].shape == (16, 2)
    assert params.value_params["hidden_2.weight"].shape == (1, 16)
    assert float(params.normalizer_params["count"]) == 0.0
    action, _ = make_policy(params, deterministic=True)(torch.zeros(5, 2))
    assert action.shape == (5, 1) and bool((action.abs() < 1).all())


BAD_INPUTS = [
    dict(num_envs=24),
    dict(batch_size=0),
    dict(unroll_length=-1),
    dict(num_envs=0),
    dict(learning_rate=0.0),
    dict(discounting=1.5),
    dict(gae_lambda=-0.1),
    dict(num_evals=-1),
    dict(episode_length=2.5),
    dict(num_timesteps=-5),
    dict(seed=-1),
    dict(max_grad_norm=0.0),
    dict(normalize_observations="yes"),
    dict(training_metrics_steps=0),
    dict(learning_rate_schedule="adaptive"),
    dict(normalize_observations_mode="mean"),
    dict(use_distributional_critic=True),
    dict(normalize_until_count=0),
    dict(clipping_epsilon_value=-1.0),
    dict(learning_rate_schedule_min_lr=0.1),
]


@pytest.mark.parametrize("overrides", BAD_INPUTS, ids=lambda o: next(iter(o)))
def test_bad_input_gives_the_jax_trainers_error_before_any_work(overrides):
    jax_train = ppo_train.train
    kwargs = {**TINY, "num_timesteps": STEP, **overrides}
    with pytest.raises(ValueError) as jax_error:
        jax_train("fast", **kwargs)
    with pytest.raises(ValueError) as torch_error:
        torch_ppo.train("fast", **kwargs, **NETS)
    assert str(torch_error.value) == str(jax_error.value)


def test_torch_only_bad_input_and_unknown_env():
    with pytest.raises(ValueError, match="unknown environment 'no_such_env'"):
        torch_ppo.train("no_such_env", num_timesteps=STEP)
    with pytest.raises(ValueError, match="activation must be a callable or one of"):
        torch_ppo.train("fast", num_timesteps=STEP, activation="nope", **TINY)
    with pytest.raises(ValueError, match="policy_hidden_layer_sizes must be a sequence of positive integers"):
        torch_ppo.train("fast", num_timesteps=STEP, policy_hidden_layer_sizes=(16, 0), **TINY)
    with pytest.raises(TypeError, match="environment must be"):
        torch_ppo.train(42, num_timesteps=STEP)
    with pytest.raises(ValueError, match=r"device must be None, 'cpu', 'cuda' or 'cuda:<index>'.*got 'bogus'"):
        torch_ppo.train("fast", num_timesteps=STEP, device="bogus", **_tiny())
    env = brax_bridge.TorchEnv("fast", 8)
    with pytest.raises(ValueError, match="the TorchEnv has num_envs=8; expected num_envs=32"):
        torch_ppo.train(env, num_timesteps=STEP, **_tiny())


def test_a_ready_torch_env_and_bootstrap_on_timeout_train():
    env = brax_bridge.TorchEnv("fast", 32, episode_length=100, seed=3)
    reports = []
    _, params, metrics = torch_ppo.train(
        env,
        num_timesteps=2 * STEP,
        num_evals=2,
        num_eval_envs=8,
        bootstrap_on_timeout=True,
        max_grad_norm=0.5,
        progress_fn=lambda s, m: reports.append(s),
        **_tiny(),
    )
    assert reports == [0, 2 * STEP]
    assert np.isfinite(metrics["training/total_loss"]) and metrics["eval/avg_episode_length"] == 100.0
    assert float(params.normalizer_params["count"]) == 2 * STEP


@pytest.mark.parametrize("eval_backend", [None, "torch"])
def test_the_training_env_and_the_evaluation_compile_together_before_the_first_reset(monkeypatch, eval_backend):
    calls = []
    compile_envs, reset = torch_environments.compile_envs, brax_bridge.TorchEnv.reset

    def compile_and_record(*envs, programs=(), resets_only=()):
        programs = list(programs)
        calls.append(("compile", sorted(env.num_envs for env in envs), len(programs)))
        calls.append(("reset only", [env.num_envs for env in resets_only]))
        return compile_envs(*envs, programs=programs, resets_only=resets_only)

    def reset_and_record(env, seed=None):
        calls.append(("reset", env.num_envs))
        return reset(env, seed)

    monkeypatch.setattr(torch_environments, "compile_envs", compile_and_record)
    monkeypatch.setattr(brax_bridge.TorchEnv, "reset", reset_and_record)
    torch_ppo.train(
        "fast", num_timesteps=STEP, num_evals=2, num_eval_envs=8, eval_backend=eval_backend, **_tiny(num_envs=32)
    )
    # One call before any reset: the training env (32 envs) and the collection in one program, with the JAX
    # evaluation rollout (the default), or with the bridge env of 8 that the torch actor evaluates on.
    assert calls[0] == (("compile", [32], 2) if eval_backend is None else ("compile", [8, 32], 1)), calls
    # the collection's program steps the training env: its own step program is left to a first call (none comes)
    assert calls[1] == ("reset only", [32]), calls
    assert [c[0] for c in calls[2:]] == ["reset"] * (len(calls) - 2)


@pytest.mark.parametrize(
    "environment, num_timesteps, train_level, eval_level",
    [
        ("inverted_pendulum", 200_000, 0, 0),
        ("inverted_pendulum", 500_000, 1, 0),
        ("inverted_pendulum", 2_000_000, 1, 1),
        ("halfcheetah", 40_000, 0, 0),
        ("halfcheetah", 80_000, 1, 0),
        ("halfcheetah", 500_000, 1, 1),
    ],
)
def test_the_step_and_the_evaluation_compile_at_the_level_that_pays_for_the_run(
    monkeypatch, environment, num_timesteps, train_level, eval_level
):
    """On a CPU the training env's step compiles at LLVM level 0 for runs too short for level 1's faster steps to
    repay its longer compile: shorter with contacts, and shorter for a physics step alone than for the JAX trainer's
    whole program. The evaluation (either backend) compiles at the JAX trainer's level for the run."""

    class Compiling(Exception):
        pass

    levels = []

    def record(*envs, programs=(), resets_only=()):
        levels.extend(env.cpu_opt_level for env in envs)
        raise Compiling  # the levels are chosen by now: no need to compile

    jax_evaluator = torch_environments.JaxEvaluator
    recording = lambda *a, **k: levels.append(k["cpu_opt_level"]) or jax_evaluator(*a, **k)  # noqa: E731
    monkeypatch.setenv("BRAX_CORE_CPU_OPT_LEVEL", "auto")
    monkeypatch.setattr(torch_environments, "compile_envs", record)
    monkeypatch.setattr(torch_environments, "JaxEvaluator", recording)
    # (The collection in one program compiles at its training env's level: FusedCollection.)
    run = functools.partial(
        torch_ppo.train, environment, num_timesteps=num_timesteps, num_evals=2, num_eval_envs=8, collection="bridge"
    )
    for backend in ("jax", "torch"):
        with pytest.raises(Compiling):
            run(eval_backend=backend, **_tiny(num_envs=32))
    # JAX evaluation: its rollout, then the training env; bridge evaluation: the training env, then its eval env
    assert levels == [eval_level, train_level, train_level, eval_level]
    jax_options = programs.compiler_options(jax.devices("cpu"), num_timesteps, envs.get_environment(environment))
    assert jax_options["xla_backend_optimization_level"] == eval_level


class _RewardBonus(Wrapper):
    """Adds 1 to every reward: a custom layer over brax_core's training wrappers."""

    def step(self, state, action):
        state = self.env.step(state, action)
        return state.replace(reward=state.reward + 1.0)


def test_a_custom_wrap_env_fn_wraps_the_training_and_evaluation_envs():
    """``wrap_env_fn`` as in the JAX trainer: called with the time limit, action repeat and randomisation for both
    envs, and what it returns is what steps; a wrapper without auto-reset or a non-callable is refused by name."""
    calls = []

    def bonus(env, episode_length, action_repeat, randomization_fn):
        calls.append((episode_length, action_repeat, randomization_fn))
        return _RewardBonus(training.wrap(env, episode_length, action_repeat, randomization_fn))

    small = _tiny(num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5, episode_length=20)
    _, _, metrics = torch_ppo.train(
        "fast", num_timesteps=80, num_evals=1, num_eval_envs=4, deterministic_eval=True, wrap_env_fn=bonus, **small
    )
    assert calls == [(20, 1, None), (20, 1, None)]  # the training env, then the evaluation env
    assert np.isfinite(metrics["eval/episode_reward"]) and metrics["eval/avg_episode_length"] == 20
    # What the wrapper returns is what the bridge steps: the same rewards as brax_core's wrappers give, plus 1.
    rewards = []
    for wrap in (None, bonus):
        env = brax_bridge.TorchEnv("fast", 4, episode_length=20, wrap_env_fn=wrap)
        env.reset()
        rewards.append(env.step(torch.ones(4, 1))["next", "reward"])
    torch.testing.assert_close(rewards[1], rewards[0] + 1.0)
    with pytest.raises(ValueError, match=r"wrap_env_fn returned VmapWrapper, whose state has no info \['final_obs'\]"):
        brax_bridge.TorchEnv(
            "fast",
            4,
            wrap_env_fn=lambda env, **kw: training.VmapWrapper(
                training.EpisodeWrapper(env, kw["episode_length"], kw["action_repeat"])
            ),
        )
    with pytest.raises(ValueError, match="wrap_env_fn must be None, MuJoCo Playground's"):
        brax_bridge.TorchEnv("fast", 4, wrap_env_fn="brax")
    with pytest.raises(TypeError, match="wrap_env_fn must be callable, got 42"):  # the JAX trainer's message
        torch_ppo.train("fast", num_timesteps=80, wrap_env_fn=42, **small)


def test_a_ready_torch_env_refuses_another_episode_length():
    env = brax_bridge.TorchEnv("fast", 32, episode_length=100)
    with pytest.raises(ValueError, match="episode_length=60 differs from the TorchEnv's episode_length=100"):
        torch_ppo.train(env, num_timesteps=STEP, **_tiny(episode_length=60))


class _Reached(Exception):
    pass


@pytest.mark.slow
def test_inverted_pendulum_reaches_950_within_2m_steps_with_the_jax_preset():
    preset = {k: v for k, v in presets.TRAIN_KWARGS["inverted_pendulum"].items() if k != "network_factory"}
    preset["num_timesteps"] = 2_000_000
    preset["num_evals"] = 2_000_000 // 40_960 + 1  # an evaluation every 40,960 env steps, as the preset's schedule
    curve = []

    def progress(step, metrics):
        curve.append((step, metrics["eval/episode_reward"]))
        if metrics["eval/episode_reward"] >= 950.0:
            raise _Reached  # stop at the first evaluation past the target

    with pytest.raises(_Reached):
        torch_ppo.train(
            "inverted_pendulum", progress_fn=progress, **preset, **presets.network_kwargs("inverted_pendulum")
        )
    assert curve[-1][0] <= 2_000_000 and curve[-1][1] >= 950.0, curve


@pytest.mark.slow
def test_torch_compile_flag_trains_like_eager():
    common = dict(num_timesteps=2 * STEP, num_evals=0, log_training_metrics=True, **_tiny())
    _, eager, eager_metrics = torch_ppo.train("fast", **common)
    _, compiled, compiled_metrics = torch_ppo.train("fast", torch_compile=True, **common)
    # Same data and updates; only kernel fusion differs, so the results agree to float32 rounding.
    _assert_params_equal(eager, compiled, atol=1e-3)
    assert abs(eager_metrics["training/total_loss"] - compiled_metrics["training/total_loss"]) < 1e-3
