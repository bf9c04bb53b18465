"""The JAX PPO trainer on the `fast` env: learning, metrics, callbacks, checkpoints, exact resume, bad input.

Every run uses the same tiny configuration, so the training step compiles once per process (later runs hit the
compile cache); each run takes a fraction of a second once compiled.
"""

import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen

from brax_core.envs.fast import Fast
from brax_core.training.agents.ppo import checkpoint, losses, presets
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as ppo

# The `fast` preset without its run length: 4 minibatches of 32 unrolls of 10 steps = 1280 env steps per
# training step. Examples use the same preset, so the whole suite compiles this training step once.
STEP = 1280
TINY = {k: v for k, v in presets.TRAIN_KWARGS["fast"].items()
        if k not in ("num_timesteps", "num_evals", "num_eval_envs")}
assert TINY["batch_size"] * TINY["num_minibatches"] * TINY["unroll_length"] == STEP


def _tiny(**overrides):
    return {**TINY, **overrides}


class _FastWithPosition(Fast):
    """``fast`` reporting its position as a metric (Brax's ``fast`` has none), so the env's own metrics can be
    followed into the training metrics."""

    def reset(self, rng):
        state = super().reset(rng)
        return state.replace(metrics={"position": state.pipeline_state.qpos[0]})

    def step(self, state, action):
        state = super().step(state, action)
        return state.replace(metrics={**state.metrics, "position": state.pipeline_state.qpos[0]})


def _assert_trees_close(a, b, rtol=1e-6, atol=1e-7):
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


class _CountingFast(Fast):
    """``fast`` counting how often its ``reset`` and ``step`` run in Python, i.e. how often they are traced."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = {"reset": 0, "step": 0}

    def reset(self, rng):
        self.calls["reset"] += 1
        return super().reset(rng)

    def step(self, state, action):
        self.calls["step"] += 1
        return super().step(state, action)


def test_env_is_traced_once_per_compiled_use():
    # The minimum with evaluation: the training step traces `step` and, for its auto-reset, `reset`; the
    # training reset traces `reset`; the evaluation traces `reset` and `step`. The observation size comes from
    # the training reset's trace, not from a trace of its own.
    env = _CountingFast()
    ppo.train(env, num_timesteps=STEP, num_evals=2, num_eval_envs=32, **_tiny())
    assert env.calls == {"reset": 3, "step": 2}


def test_fast_env_learns_and_reports_brax_metrics():
    reports, saved_policies = [], []

    def policy_params_fn(step, make_policy, params):
        # Kept to be called after training: Brax hands the callback copies, which later training must not delete.
        saved_policies.append((step, make_policy(params, deterministic=True)))

    make_policy, params, metrics = ppo.train(
        "fast",
        num_timesteps=16 * STEP * 3,
        num_evals=4,
        num_eval_envs=32,
        progress_fn=lambda step, m: reports.append((step, dict(m))),
        policy_params_fn=policy_params_fn,
        **_tiny(),
    )
    steps = [s for s, _ in reports]
    assert steps == [0, 16 * STEP, 32 * STEP, 48 * STEP]
    assert all(isinstance(s, int) for s in steps)
    first, last = reports[0][1]["eval/episode_reward"], reports[-1][1]["eval/episode_reward"]
    # `fast` pays the position reached: pushing every step returns 68.7 over a 100-step episode; the untrained
    # policy pushes about half the time and returns about 34.
    assert first < 45.0 and last > 65.0, (first, last)
    expected = {
        "eval/episode_reward",
        "eval/episode_reward_std",
        "eval/avg_episode_length",
        "eval/std_episode_length",  # Brax 0.14.2's key: every episode of `fast` is 100 steps, so 0
        "eval/walltime",
        "eval/sps",
        "training/sps",
        "training/walltime",
        "training/total_loss",
        "training/policy_loss",
        "training/v_loss",
        "training/entropy_loss",
        "training/approx_kl",
    }
    assert expected <= set(reports[-1][1])
    assert all(isinstance(v, float) for v in reports[-1][1].values())
    assert reports[-1][1]["eval/avg_episode_length"] == 100.0 and reports[-1][1]["eval/std_episode_length"] == 0.0
    assert metrics == reports[-1][1]
    assert isinstance(params, ppo_networks.PPOTrainingParams)
    # Once before training (Brax's "initial policy_params_fn") and after every epoch.
    assert [s for s, _ in saved_policies] == steps
    actions = [float(policy(jnp.ones((1, 2)), jax.random.PRNGKey(0))[0][0, 0]) for _, policy in saved_policies]
    assert len(set(actions)) == len(actions), actions  # each kept policy is its own snapshot
    action, extras = make_policy(params)(jnp.zeros((3, 2)), jax.random.PRNGKey(1))
    assert action.shape == (3, 1) and set(extras) == {"log_prob", "raw_action", "distribution_params"}


def test_training_metrics_without_eval_and_activations_with_and_without_saving(tmp_path):
    for activation in (linen.tanh, linen.sigmoid):
        factory = functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=(16, 16),
            value_hidden_layer_sizes=(16, 16),
            activation=activation,
        )
        results = []
        # tanh trains with and without saving (which must change nothing); sigmoid with saving.
        save_paths = (None, tmp_path / "tanh") if activation is linen.tanh else (tmp_path / "sigmoid",)
        for save_path in save_paths:
            reports = []
            make_policy, params, metrics = ppo.train(
                _FastWithPosition(),
                num_timesteps=6 * STEP,
                num_evals=0,
                log_training_metrics=True,
                training_metrics_steps=2 * STEP,
                progress_fn=lambda step, m, reports=reports: reports.append((step, m)),
                save_checkpoint_path=save_path,
                **_tiny(network_factory=factory),
            )
            assert [s for s, _ in reports] == [2 * STEP, 4 * STEP, 6 * STEP]
            assert metrics == reports[-1][1] and metrics != {}
            for key in (
                "episode/sum_reward",
                "episode/length",
                "episode/position",  # the env's own metric
                "training/sps",
                "training/entropy_loss",
                "training/approx_kl",
            ):
                assert key in metrics, key
            assert metrics["episode/length"] == 100.0  # episodes end only at the time limit
            assert not any(k.startswith("eval/") for k in metrics)
            results.append(params)
        if len(results) == 2:  # saving changes nothing about training
            _assert_trees_close(results[0], results[1], rtol=0, atol=0)
        saved = tmp_path / activation.__name__
        brax_style = checkpoint.load_config(saved)  # Brax's type: attribute access, live values
        assert brax_style.network_factory_kwargs.policy_hidden_layer_sizes == (16, 16)
        assert brax_style.network_factory_kwargs.activation is activation
        config = json.loads(json.dumps(checkpoint.load_config_json(saved)))
        kwargs = config["network_factory_kwargs"]
        assert kwargs["activation"] == {"callable": {"name": activation.__name__}}
        assert kwargs["policy_hidden_layer_sizes"] == [16, 16] and config["observation_size"] == 2
        assert isinstance(config["action_size"], int) and config["env_steps"] == 6 * STEP
        loaded = checkpoint.load_policy(saved, deterministic=True)
        obs = jax.random.normal(jax.random.PRNGKey(2), (5, 2))
        expected, _ = make_policy(results[-1], deterministic=True)(obs, jax.random.PRNGKey(0))
        np.testing.assert_allclose(loaded(obs, jax.random.PRNGKey(0))[0], expected, rtol=1e-6)


def test_unnameable_activation_fails_at_start_only_when_saving(tmp_path):
    factory = functools.partial(ppo_networks.make_ppo_networks, activation=lambda x: x * jax.nn.sigmoid(x))
    start = time.time()
    with pytest.raises(ValueError, match="cannot be named in the checkpoint configuration"):
        ppo.train("fast", num_timesteps=STEP, save_checkpoint_path=tmp_path / "ckpt", **_tiny(network_factory=factory))
    assert time.time() - start < 10.0
    assert not (tmp_path / "ckpt").exists()
    _, params, _ = ppo.train("fast", num_timesteps=0, **_tiny(network_factory=factory))
    assert params.policy_params["params"]["hidden_0"]["kernel"].shape == (2, 32)


def test_resume_is_exact_and_the_step_count_passes_two_to_the_32(tmp_path):
    common = _tiny(num_evals=0, log_training_metrics=True, training_metrics_steps=3 * STEP)
    _, straight, _ = ppo.train("fast", num_timesteps=6 * STEP, **common)
    ckpt = tmp_path / "ckpt"
    ppo.train("fast", num_timesteps=3 * STEP, save_checkpoint_path=ckpt, **common)
    reports = []
    _, resumed, _ = ppo.train(
        "fast",
        num_timesteps=6 * STEP,
        restore_checkpoint_path=ckpt,
        progress_fn=lambda s, m: reports.append(s),
        **common,
    )
    assert reports == [6 * STEP]
    # Same keys, same env states, same updates: identical up to float32 reassociation.
    _assert_trees_close(straight, resumed, rtol=1e-5, atol=1e-6)

    # Rewrite the checkpoint so its count sits just below 2**32, then train across the boundary.
    near = 2**32 - STEP
    params = checkpoint.load_params(ckpt)
    optimizer_target = jax.eval_shape(
        optax.adam(3e-3).init, losses.PPONetworkParams(params.policy_params, params.value_params)
    )
    target = {
        "optimizer_state": optimizer_target,
        "env_steps": jax.ShapeDtypeStruct((2,), jnp.uint32),
        "training_step": jax.ShapeDtypeStruct((), jnp.int32),
        "key": jax.ShapeDtypeStruct((2,), jnp.uint32),
    }
    state = checkpoint.restore_item(ckpt, "state", target)
    state["env_steps"] = jnp.asarray(ppo.steps_to_pair(near))
    config = {**checkpoint.load_config_json(ckpt), "env_steps": near}
    checkpoint.save(tmp_path / "near", near, params, config, state)

    reports = []
    big = tmp_path / "big"
    _, _, metrics = ppo.train(
        "fast",
        num_timesteps=2**32 + 2 * STEP,
        restore_checkpoint_path=tmp_path / "near",
        save_checkpoint_path=big,
        progress_fn=lambda s, m: reports.append(s),
        **common,
    )
    assert reports == [2**32 + 2 * STEP]
    assert checkpoint.load_config(big)["env_steps"] == 2**32 + 2 * STEP
    assert os.path.basename(checkpoint.resolve(big)) == f"{2**32 + 2 * STEP:012d}"
    restored = checkpoint.restore_item(big, "state", target)
    assert ppo.pair_to_steps(restored["env_steps"]) == 2**32 + 2 * STEP


def test_checkpoints_are_bounded_atomic_and_errors_name_the_path(tmp_path):
    ckpt = tmp_path / "ckpt"
    _, trained, _ = ppo.train(
        "fast",
        num_timesteps=3 * STEP,
        num_evals=4,
        num_eval_envs=16,
        max_to_keep=2,
        save_checkpoint_path=ckpt,
        **_tiny(),
    )
    steps = [os.path.basename(d) for d in checkpoint.step_directories(ckpt)]
    # Brax's names: 12 digits, so that they sort as the steps do.
    assert steps == [f"{2 * STEP:012d}", f"{3 * STEP:012d}"]
    # An interrupted save leaves only a temporary directory, which is never taken for a checkpoint.
    (ckpt / f"{10 * STEP}.orbax-checkpoint-tmp-123").mkdir()
    assert os.path.basename(checkpoint.resolve(ckpt)) == f"{3 * STEP:012d}"
    # A path naming the step with other digits (str(step), or checkpoints written before the 12-digit names).
    assert checkpoint.resolve(ckpt / str(3 * STEP)) == checkpoint.resolve(ckpt)
    checkpoint.load_policy(ckpt)
    # num_timesteps=0 builds the networks and restores them, training nothing.
    _, restored, metrics = ppo.train("fast", num_timesteps=0, restore_checkpoint_path=ckpt, **_tiny())
    assert metrics == {}
    _assert_trees_close(trained, restored, rtol=0, atol=0)
    _, fresh, _ = ppo.train("fast", num_timesteps=0, **_tiny())
    assert not np.allclose(
        fresh.policy_params["params"]["hidden_0"]["kernel"], trained.policy_params["params"]["hidden_0"]["kernel"]
    )
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        checkpoint.load_policy(missing)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        ppo.train("fast", num_timesteps=STEP, restore_checkpoint_path=missing, **_tiny())
    broken = ckpt / f"{3 * STEP:012d}"
    for root, _, files in os.walk(broken / "params"):
        for name in files:
            os.remove(os.path.join(root, name))
    with pytest.raises(ValueError, match=str(broken)):
        checkpoint.load_policy(broken)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (dict(num_envs=24), r"batch_size \* num_minibatches .* divisible by num_envs \(24\)"),
        (dict(batch_size=0), "batch_size must be a positive integer"),
        (dict(unroll_length=-1), "unroll_length must be a positive integer"),
        (dict(num_envs=0), "num_envs must be a positive integer"),
        (dict(learning_rate=0.0), "learning_rate must be > 0"),
        (dict(discounting=1.5), "discounting must be"),
        (dict(num_evals=-1), "num_evals must be a non-negative integer"),
        (dict(episode_length=2.5), "episode_length must be a positive integer"),
        (dict(wrap_env="yes"), "wrap_env must be True, False or a wrapper callable"),
        (dict(learning_rate_schedule="adaptive"), "learning_rate_schedule must be one of 'ADAPTIVE_KL', 'NONE'"),
        (dict(normalize_observations_mode="mean"), "normalize_observations_mode must be one of 'welford', 'ema'"),
        (dict(use_distributional_critic=True), "use_distributional_critic=True needs clipping_epsilon_value"),
        (dict(normalize_until_count=0), "normalize_until_count must be a positive integer"),
        (dict(clipping_epsilon_value=0.0), "clipping_epsilon_value must be > 0"),
        (dict(learning_rate_schedule_min_lr=0.1), "learning_rate_schedule_min_lr .* must not exceed"),
        (
            dict(network_factory=functools.partial(ppo_networks.make_ppo_networks, use_distributional_critic=True)),
            "network_factory sets use_distributional_critic=True but train has use_distributional_critic=False",
        ),
    ],
)
def test_bad_input_is_rejected_before_compiling(overrides, message):
    start = time.time()
    with pytest.raises(ValueError, match=message):
        ppo.train("fast", num_timesteps=STEP, **_tiny(**overrides))
    assert time.time() - start < 5.0


def test_unknown_env_and_bad_restore_params():
    with pytest.raises(ValueError, match="unknown environment 'no_such_env'"):
        ppo.train("no_such_env", num_timesteps=STEP)
    with pytest.raises(TypeError, match="restore_params must be PPOTrainingParams"):
        ppo.train("fast", num_timesteps=0, restore_params={"policy": 1}, **_tiny())
    # torch_ppo's parameters (torch tensors) are not JAX parameters: the message names the conversion.
    torch = pytest.importorskip("torch")
    layer = {"hidden_0.weight": torch.zeros(4, 2)}
    torch_params = ({"mean": torch.zeros(2)}, layer, layer)
    with pytest.raises(TypeError, match=r"restore_params holds torch tensors.*torch_params_to_jax"):
        ppo.train("fast", num_timesteps=0, restore_params=torch_params, **_tiny())


class _StopAfterWrapping(Exception):
    pass


def _scale_body_mass(sys, rng):
    @jax.vmap
    def randomise(key):
        return sys.body_mass * jax.random.uniform(key, (), minval=0.8, maxval=1.2)  # reads sys in its own vmap

    in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"body_mass": 0})
    return sys.tree_replace({"body_mass": randomise(rng)}), in_axes


@pytest.mark.parametrize("with_eval_env", [False, True])
def test_randomization_keys_per_env_and_eval_env_used_as_is(with_eval_env):
    # Stops once the training and evaluation envs are wrapped: the wiring is checked without compiling physics.
    # (The slow domain-randomisation example trains end to end.)
    from brax_core import envs
    from brax_core.envs import training

    seen = []

    def wrap_spy(env, episode_length, action_repeat, randomization_fn):
        seen.append((env, randomization_fn))
        wrapped = training.wrap(env, episode_length, action_repeat, randomization_fn=randomization_fn)
        if len(seen) == 2:
            raise _StopAfterWrapping
        return wrapped

    env = envs.get_environment("inverted_pendulum")
    eval_env = envs.get_environment("inverted_pendulum") if with_eval_env else None
    with pytest.raises(_StopAfterWrapping):
        ppo.train(
            env,
            num_timesteps=STEP,
            wrap_env=wrap_spy,
            randomization_fn=_scale_body_mass,
            eval_env=eval_env,
            num_evals=2,
            num_eval_envs=8,
            **_tiny(),
        )
    (train_env, train_fn), (evaluated_env, eval_fn) = seen
    assert train_env is env and train_fn.keywords["rng"].shape == (32, 2)
    if with_eval_env:
        assert evaluated_env is eval_env and eval_fn is None
    else:
        assert evaluated_env is env and eval_fn.keywords["rng"].shape == (8, 2)
        assert not np.array_equal(eval_fn.keywords["rng"][:8], train_fn.keywords["rng"][:8])
    assert not isinstance(env.sys.body_mass, jax.core.Tracer)


def test_mjx_env_state_with_empty_arrays_saves_and_restores(tmp_path):
    """MJX data holds zero-size arrays (``act`` without activation states), which orbax alone cannot write."""
    from brax_core import envs

    env = envs.get_environment("inverted_pendulum")
    env_state = jax.jit(env.reset)(jax.random.PRNGKey(3))
    assert env_state.pipeline_state.act.size == 0
    params = {"w": jnp.ones(2)}
    state = {"training_step": jnp.int32(4)}
    checkpoint.save(tmp_path / "ck", 8, params, {"note": "test"}, state, env_state=env_state)
    target = jax.tree.map(jnp.zeros_like, env_state)
    restored = checkpoint.restore_env_state(tmp_path / "ck", target)
    assert restored is not None
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(env_state), strict=True):
        np.testing.assert_array_equal(got, want)
