"""brax_core.training.agents.apg: Brax 0.14.2's own APG tests pass with the import prefix changed, the arguments are
checked before anything compiles, and the update follows the analytic gradient of the unrolled return.

Brax's test file runs in a subprocess (``tests/data/brax_apg_train_test.py.txt``, its imports rewritten), as Brax's
own tests would: it trains with its own global JAX settings. Its ``testTrainDomainRandomize`` writes fields of
Brax's physics (``sys.link.*``) that MJX models do not have, so it is deselected there and its counterpart over the
MJX model's ``body_ipos`` is here (slow at Brax's sizes; the default suite checks the randomisation's wiring).
"""

import functools
import inspect
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen

from brax_core import envs
from brax_core.envs import training as env_training
from brax_core.envs.base import Env, State
from brax_core.training.acme import running_statistics
from brax_core.training.agents.apg import networks as apg_networks
from brax_core.training.agents.apg import train as apg

ROOT = Path(__file__).resolve().parents[1]
BRAX_TEST = ROOT / "tests" / "data" / "brax_apg_train_test.py.txt"


# ---------------------------------------------------------------------------------------------------------------
# Brax 0.14.2's own tests


def _with_brax_core_imports(text: str) -> str:
    """Brax's test text with its ``from brax...`` / ``import brax...`` lines importing ``brax_core`` instead."""
    text = re.sub(r"^from brax(?=[ .])", "from brax_core", text, flags=re.MULTILINE)
    return re.sub(r"^import brax(?=[ .]|$)", "import brax_core", text, flags=re.MULTILINE)


def test_the_rewrite_changes_only_the_import_prefix():
    text = BRAX_TEST.read_text()
    rewritten = _with_brax_core_imports(text)
    changed = [(a, b) for a, b in zip(text.splitlines(), rewritten.splitlines(), strict=True) if a != b]
    assert len(changed) == 4
    assert all(b == a.replace("brax", "brax_core", 1) for a, b in changed)
    assert not re.search(r"^(from|import) brax\b(?!_core)", rewritten, flags=re.MULTILINE)


def test_brax_apg_train_test_passes_with_the_import_prefix_changed(tmp_path):
    # testTrain (200 updates on fast, eval reward > 50) and testNetworkEncoding (both normalisations) at Brax's own
    # sizes: about 25 s here. testTrainDomainRandomize is Brax-physics only (see the module docstring).
    (tmp_path / "brax_apg_train_test.py").write_text(_with_brax_core_imports(BRAX_TEST.read_text()))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "brax_apg_train_test.py"]
    command += ["-k", "not testTrainDomainRandomize"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "3 passed, 1 deselected" in result.stdout, result.stdout[-2000:]


def _offset_inertia(sys, rng):
    """Brax's domain randomisation of its test, over the MJX model: each env's first body's centre of mass
    (``body_ipos``, Brax's ``link.inertia.transform.pos``) set to a random offset in [-0.1, 0.1]³."""

    @jax.vmap
    def offset(key):
        return sys.body_ipos.at[0].set(jax.random.uniform(key, (3,), minval=-0.1, maxval=0.1))

    in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"body_ipos": 0})
    return sys.tree_replace({"body_ipos": offset(rng)}), in_axes


@pytest.mark.slow
def test_train_domain_randomize_at_brax_sizes():
    # Brax's testTrainDomainRandomize with its arguments, on MJX.
    _, params, metrics = apg.train(
        envs.get_environment("inverted_pendulum", backend="spring"),
        policy_updates=200,
        episode_length=100,
        num_envs=8,
        num_evals=10,
        learning_rate=3e-3,
        normalize_observations=True,
        randomization_fn=_offset_inertia,
    )
    assert np.isfinite(metrics["eval/episode_reward"])
    assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(params))


class _Stop(Exception):
    pass


def test_randomization_gives_every_training_and_eval_env_its_own_model():
    # Stops once both envs are wrapped (the randomisation runs while wrapping): the wiring, without compiling MJX.
    calls = []

    def recording(sys, rng):
        calls.append(np.asarray(rng))
        if len(calls) == 2:
            raise _Stop
        return _offset_inertia(sys, rng)

    env = envs.get_environment("inverted_pendulum")
    body_ipos = np.asarray(env.sys.body_ipos)
    with pytest.raises(_Stop):
        apg.train(env, episode_length=10, policy_updates=1, num_envs=4, num_eval_envs=6, randomization_fn=recording)
    train_keys, eval_keys = calls
    assert train_keys.shape[0] == 4 and eval_keys.shape[0] == 6
    assert len({k.tobytes() for k in [*train_keys, *eval_keys]}) == 10
    np.testing.assert_array_equal(np.asarray(env.sys.body_ipos), body_ipos)  # the env's own model is untouched


# ---------------------------------------------------------------------------------------------------------------
# Signature, metrics and compiling once

BRAX_SIGNATURE = [
    ("environment", inspect.Parameter.empty),
    ("episode_length", inspect.Parameter.empty),
    ("policy_updates", inspect.Parameter.empty),
    ("wrap_env", True),
    ("wrap_env_fn", None),
    ("horizon_length", 32),
    ("num_envs", 1),
    ("num_evals", 1),
    ("action_repeat", 1),
    ("max_devices_per_host", None),
    ("num_eval_envs", 128),
    ("learning_rate", 1e-4),
    ("adam_b", (0.7, 0.95)),
    ("use_schedule", True),
    ("use_float64", False),
    ("schedule_decay", 0.997),
    ("seed", 0),
    ("max_gradient_norm", 1e9),
    ("normalize_observations", False),
    ("deterministic_eval", False),
    ("network_factory", apg_networks.make_apg_networks),
    ("progress_fn", None),  # a lambda: compared by name only
    ("eval_env", None),
    ("randomization_fn", None),
]


# After Brax's: what Brax's PPO has and its APG lacks (callbacks at every epoch, checkpoints), all with defaults that
# change nothing, so Brax's calls keep their meaning.
EXTENSIONS = ["policy_params_fn", "save_checkpoint_path", "restore_checkpoint_path", "max_to_keep"]


def test_train_has_brax_0_14_2_signature():
    parameters = inspect.signature(apg.train).parameters
    brax = [(name, p.default) for name, p in parameters.items() if name not in ("progress_fn", *EXTENSIONS)]
    assert brax == [entry for entry in BRAX_SIGNATURE if entry[0] != "progress_fn"]
    assert list(parameters) == [name for name, _ in BRAX_SIGNATURE] + EXTENSIONS
    assert [parameters[name].default for name in EXTENSIONS[1:]] == [None, None, None]
    networks_parameters = inspect.signature(apg_networks.make_apg_networks).parameters
    assert list(networks_parameters) == [
        "observation_size",
        "action_size",
        "preprocess_observations_fn",
        "hidden_layer_sizes",
        "activation",
        "layer_norm",
    ]
    assert networks_parameters["hidden_layer_sizes"].default == (32,) * 4
    assert networks_parameters["activation"].default is linen.elu
    assert networks_parameters["layer_norm"].default is True


def _tiny(**overrides):
    arguments = dict(
        policy_updates=4, episode_length=12, horizon_length=4, num_envs=2, num_eval_envs=2, learning_rate=3e-3
    )
    return {**arguments, **overrides}


def test_each_program_compiles_once_and_metrics_are_brax_names_as_floats(caplog, monkeypatch):
    monkeypatch.setenv("BRAX_BRIDGE_PROGRAM_CACHE", "0")  # traced here, so compiled under the programs' own names
    runs = {}
    for num_evals in (2, 4):
        env = envs.get_environment("fast")
        reported = []
        progress = functools.partial(lambda seen, i, m: seen.append(i), reported)
        caplog.clear()
        with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
            _, params, metrics = apg.train(env, **_tiny(num_evals=num_evals, policy_updates=3), progress_fn=progress)
        runs[num_evals] = (env.step_count, env.reset_count)
        assert reported == list(range(num_evals))  # Brax's count: the evaluation, not env steps
        compiled = [r.getMessage().split()[1] for r in caplog.records if r.getMessage().startswith("Compiling")]
        for program in ("jit(first_env_state)", "jit(epoch)", "jit(generate_eval_unroll)"):
            assert compiled.count(program) == 1, compiled
    # More evaluations and epochs trace nothing more: the env is traced by the same programs whatever their count.
    assert runs[2] == runs[4]
    expected = {"training/sps", "training/walltime", "training/grad_norm", "training/params_norm"}
    expected |= {"eval/episode_reward", "eval/episode_reward_std", "eval/avg_episode_length", "eval/walltime"}
    assert expected <= set(metrics)
    assert all(type(value) is float for value in metrics.values())
    normalizer_params, policy_params = params
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves((normalizer_params, policy_params)))
    assert float(normalizer_params.count) == 3 * 4 * 2  # every update's observations: updates × steps × envs


def test_one_evaluation_means_one_epoch_and_no_evaluation_before_it():
    reported = []
    _, _, metrics = apg.train("fast", **_tiny(num_evals=1), progress_fn=lambda i, m: reported.append(i))
    assert reported == [1] and "eval/episode_reward" in metrics


# ---------------------------------------------------------------------------------------------------------------
# Argument checks: refused, by name, before anything is traced


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(episode_length=0), "episode_length must be a positive integer"),
        (dict(policy_updates=0), "policy_updates must be a positive integer"),
        (dict(policy_updates=2, num_evals=10), r"policy_updates \(2\) leaves no update .* policy_updates >= 5"),
        (dict(num_evals=-1), "num_evals must be a non-negative integer"),
        (dict(horizon_length=2, action_repeat=3), r"horizon_length \(2\) must be at least action_repeat \(3\)"),
        (dict(horizon_length=0), "horizon_length must be a positive integer"),
        (dict(num_envs=0), "num_envs must be a positive integer"),
        (dict(num_eval_envs=1.5), "num_eval_envs must be a positive integer"),
        (dict(action_repeat=0), "action_repeat must be a positive integer"),
        (dict(max_devices_per_host=0), "max_devices_per_host must be a positive integer"),
        (dict(learning_rate=0.0), "learning_rate must be > 0.0"),
        (dict(learning_rate=float("nan")), "learning_rate must be a finite number"),
        (dict(adam_b=(1.0, 0.9)), r"adam_b must be a pair \(b1, b2\) of numbers in \[0, 1\)"),
        (dict(adam_b=0.9), "adam_b must be a pair"),
        (dict(use_schedule="yes"), "use_schedule must be True or False"),
        (dict(schedule_decay=1.5), "schedule_decay must be <= 1.0"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(max_gradient_norm=0), "max_gradient_norm must be > 0.0"),
        (dict(normalize_observations=1), "normalize_observations must be True or False"),
        (dict(deterministic_eval=None), "deterministic_eval must be True or False"),
        (dict(wrap_env="yes"), "wrap_env must be True or False"),
        (dict(wrap_env_fn=3), "wrap_env_fn must be callable"),
        (dict(network_factory=3), "network_factory must be callable"),
        (dict(progress_fn=lambda metrics: None), r"progress_fn must accept 2 positional arguments"),
        (dict(randomization_fn="mass"), "randomization_fn must be callable"),
        (dict(eval_env="fast"), "eval_env must be a brax_core Env"),
        (dict(wrap_env=False), "wrap_env=False trains on environment as it is, which must be batched"),
    ],
)
def test_bad_arguments_are_refused_by_name_before_anything_is_traced(overrides, message):
    env = envs.get_environment("fast")
    with pytest.raises((ValueError, TypeError), match=message):
        apg.train(env, **_tiny(**overrides))
    assert env.reset_count == 0 and env.step_count == 0


def test_environment_and_float64_refusals():
    with pytest.raises(TypeError, match="environment must be a brax_core Env"):
        apg.train(3, episode_length=10, policy_updates=1)
    if not jax.config.jax_enable_x64:
        with pytest.raises(ValueError, match="use_float64=True .*'jax_enable_x64'"):
            apg.train("fast", **_tiny(use_float64=True))
    wrapped = env_training.wrap(envs.get_environment("fast"), episode_length=10)
    with pytest.raises(ValueError, match="wrap_env=True wraps environment for training, but environment is already"):
        apg.train(wrapped, **_tiny())


def test_dictionary_observations_are_refused_before_training():
    with pytest.raises(NotImplementedError, match="dictionary observations are not implemented in APG"):
        apg.train(envs.get_environment("fast", obs_mode="dict_state"), **_tiny())


def test_network_arguments_are_checked():
    with pytest.raises(ValueError, match="hidden_layer_sizes must be a sequence of positive integers"):
        apg_networks.make_apg_networks(2, 1, hidden_layer_sizes=(8, 0))
    with pytest.raises(ValueError, match="observation_size must be a positive integer"):
        apg_networks.make_apg_networks({"state": 2}, 1)
    make_policy = apg_networks.make_inference_fn(apg_networks.make_apg_networks(2, 1))
    with pytest.raises(TypeError, match=r"params must be the \(normalizer_params, policy_params\) pair"):
        make_policy({"params": {}})


# ---------------------------------------------------------------------------------------------------------------
# The analytic gradient


class _PointMass(Env):
    """A differentiable toy: the action accelerates a point on a line, and the reward is its position."""

    def reset(self, rng: jax.Array) -> State:
        del rng
        zero = jnp.zeros((), jnp.float32)
        position = jnp.zeros((2,), jnp.float32)  # position, velocity
        return State(pipeline_state=position, obs=position, reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        position, velocity = state.pipeline_state
        velocity = velocity + 0.5 * action[0]
        position = position + 0.5 * velocity
        physics = jnp.stack([position, velocity])
        return state.replace(pipeline_state=physics, obs=physics, reward=position)

    @property
    def action_size(self) -> int:
        return 1


class _CutGradient(env_training.Wrapper):
    """The same env with the gradient stopped between steps: what a broken analytic gradient would compute."""

    def step(self, state: State, action: jax.Array) -> State:
        return self.env.step(jax.lax.stop_gradient(state), action)


def _loss_and_parameter(env: Env, steps: int):
    """The APG loss of a 3-env, ``steps``-step unroll of ``env``, as a function of one parameter (the bias of the
    policy's mean), and that parameter's value."""
    wrapped = env_training.wrap(env, episode_length=100)
    network = apg_networks.make_apg_networks(2, 1, hidden_layer_sizes=(4,))
    policy_params = network.policy_network.init(jax.random.PRNGKey(1))
    loss = apg.make_loss(wrapped, apg_networks.make_inference_fn(network), steps)
    state = wrapped.reset(jax.random.split(jax.random.PRNGKey(2), 3))
    normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((2,), jnp.float32))

    def of_bias(bias: jax.Array) -> jax.Array:
        params = jax.tree.map(lambda x: x, policy_params)
        params["params"]["hidden_1"]["bias"] = params["params"]["hidden_1"]["bias"].at[0].set(bias)
        return loss(params, normalizer, state, jax.random.PRNGKey(3))[0]

    return of_bias, policy_params["params"]["hidden_1"]["bias"][0]


def test_the_gradient_is_the_analytic_one_through_the_dynamics():
    of_bias, bias = _loss_and_parameter(_PointMass(), steps=6)
    gradient = float(jax.grad(of_bias)(bias))
    eps = 1e-2
    finite_difference = float((of_bias(bias + eps) - of_bias(bias - eps)) / (2 * eps))
    assert abs(finite_difference) > 0.1
    np.testing.assert_allclose(gradient, finite_difference, rtol=1e-2)
    # A gradient cut between steps (only each action's own step counted) is far from it: the check can tell.
    cut, _ = _loss_and_parameter(_CutGradient(_PointMass()), steps=6)
    assert abs(float(jax.grad(cut)(bias)) - finite_difference) > 0.3 * abs(finite_difference)


def test_training_follows_the_gradient_on_a_differentiable_task():
    # Pushing right pays on the point mass; fast's push is a step function (no gradient), so training it moves
    # nothing, and here the policy learns to push.
    env = _PointMass()
    evaluate = functools.partial(
        apg.train, env, episode_length=8, horizon_length=8, num_envs=4, num_eval_envs=4, deterministic_eval=True
    )
    _, _, before = evaluate(policy_updates=1, learning_rate=1e-9)
    _, _, after = evaluate(policy_updates=30, learning_rate=1e-2)
    assert after["training/grad_norm"] > 0
    assert after["eval/episode_reward"] > before["eval/episode_reward"] + 1.0


def test_clip_by_global_norm_is_brax_rule():
    updates = {"a": jnp.array([3.0, 4.0])}
    np.testing.assert_allclose(apg.clip_by_global_norm(updates, 10.0)["a"], [3.0, 4.0])
    np.testing.assert_allclose(apg.clip_by_global_norm(updates, 1.0)["a"], [0.6, 0.8], rtol=1e-6)
