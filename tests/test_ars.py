"""Augmented Random Search by Brax's module path (``brax_core.training.agents.ars``), and ``types.UInt64``.

Brax 0.14.2's own ARS tests (``agents/ars/train_test.py``) are here with the import prefix changed; its domain
randomisation test moved Brax's own physics' ``sys.link`` offsets, so here the MJX model's masses are randomised.
Brax's ``training/types_test.py`` follows the same way."""

import functools
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_core import envs
from brax_core.training import acting, types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ars import networks as ars_networks
from brax_core.training.agents.ars import train as ars
from brax_core.training.agents.ppo.environments import make_eval_env

UInt64 = types.UInt64


@pytest.mark.parametrize("normalize_observations", [True, False])
def test_model_encoding(normalize_observations):  # Brax's testModelEncoding
    env = envs.get_environment("fast")
    _, params, _ = ars.train(env, num_timesteps=128, episode_length=128,
                             normalize_observations=normalize_observations)
    normalize_fn = running_statistics.normalize if normalize_observations else (lambda x, y: x)
    ars_network = ars_networks.make_policy_network(env.observation_size, env.action_size, normalize_fn)
    inference = ars_networks.make_inference_fn(ars_network)
    decoded_params = pickle.loads(pickle.dumps(params))
    state = env.reset(jax.random.PRNGKey(0))
    action = inference(decoded_params)(state.obs, jax.random.PRNGKey(0))[0]
    assert action.shape == (env.action_size,)
    env.step(state, action)


def _scale_body_mass(sys, rng):
    masses = jax.vmap(lambda key: sys.body_mass * jax.random.uniform(key, (), minval=0.8, maxval=1.2))(rng)
    in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"body_mass": 0})
    return sys.tree_replace({"body_mass": masses}), in_axes


def test_train_domain_randomize():  # Brax's testTrainDomainRandomize, over the MJX model's masses
    seen = []

    def randomize(sys, rng):
        seen.append(rng.shape[0])
        return _scale_body_mass(sys, rng)

    _, (_, weights), _ = ars.train(envs.get_environment("inverted_pendulum"), num_timesteps=128, episode_length=128,
                                   normalize_observations=True, randomization_fn=randomize, number_of_directions=4,
                                   num_eval_envs=8)
    assert seen == [8, 8]  # the training envs (4 directions, both ways), then the evaluation envs
    assert np.all(np.isfinite(np.asarray(weights))) and np.any(np.asarray(weights) != 0.0)


def test_ars_balances_the_pendulum():
    reports = []
    make_policy, (normalizer, weights), metrics = ars.train(
        envs.get_environment("inverted_pendulum"), num_timesteps=40_000, episode_length=200, num_evals=2,
        number_of_directions=32, top_directions=8, step_size=0.02, exploration_noise_std=0.03,
        normalize_observations=True, num_eval_envs=8, progress_fn=lambda step, m: reports.append((step, m)),
    )
    assert len(reports) == 2 and reports[0][0] < reports[1][0] and reports[1][0] >= 40_000
    assert metrics is reports[-1][1]
    # The reward is the steps the pole stays up: the untrained (zero) linear policy's few, against most of the
    # 200-step episode once trained.
    eval_env = make_eval_env(envs.get_environment("inverted_pendulum"), 8, episode_length=200, action_repeat=1)
    untrained = acting.Evaluator(eval_env, make_policy, 8, 200, 1, jax.random.PRNGKey(1)).run_evaluation(
        (normalizer, jnp.zeros_like(weights)), {})["eval/episode_reward"]
    assert untrained < 100.0 and metrics["eval/episode_reward"] >= 190.0, (untrained, metrics["eval/episode_reward"])


def test_no_evaluations_returns_the_last_epochs_training_metrics():
    calls = []
    _, _, metrics = ars.train(envs.get_environment("fast"), num_timesteps=300, episode_length=100, num_evals=0,
                              number_of_directions=2, progress_fn=lambda *a: calls.append(a))
    assert calls == [] and "training/eval_scores_mean" in metrics and "eval/episode_reward" not in metrics


def test_the_step_follows_the_top_directions_scaled_by_their_spread():
    noise = jnp.asarray([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # three directions of a two-weight policy
    plus, minus = jnp.asarray([3.0, 1.0, 0.5]), jnp.asarray([1.0, 2.0, 0.0])
    new, kept = ars.ars_step(jnp.zeros(2), noise, plus, minus, top_directions=2, step_size=0.5)
    # Kept: directions 0 and 1 (their better sides, 3 and 2, beat direction 2's 0.5).
    weight = np.array([3.0 - 1.0, 1.0 - 2.0, 0.0])
    std = np.std([3.0, 1.0, 1.0, 2.0])
    np.testing.assert_allclose(np.asarray(new), 0.5 * (weight @ np.asarray(noise)) / (2 * std), rtol=1e-6)
    assert float(kept) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("argument", "value", "words"),
    [
        ("num_timesteps", -1, "num_timesteps"),
        ("episode_length", 0, "episode_length"),
        ("number_of_directions", 0, "number_of_directions"),
        ("top_directions", 1.5, "top_directions"),
        ("step_size", 0.0, "step_size"),
        ("exploration_noise_std", -0.1, "exploration_noise_std"),
        ("num_evals", -1, "num_evals"),
        ("num_eval_envs", 0, "num_eval_envs"),
        ("max_devices_per_host", 0, "max_devices_per_host"),
        ("progress_fn", "print", "progress_fn"),
        ("randomization_fn", 3, "randomization_fn"),
    ],
)
def test_bad_arguments_are_refused_by_name_before_anything_compiles(argument, value, words, monkeypatch):
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises((ValueError, TypeError), match=words):
        ars.train(envs.get_environment("fast"), **{argument: value})


def test_dict_observations_are_refused_by_name(monkeypatch):
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(ValueError, match="environment: ARS.s policy takes a flat observation vector"):
        ars.train(envs.get_environment("fast", obs_mode="dict_state"))


# ---- Brax's training/types_test.py, by the prefix


def test_add_uint64_basic():
    assert UInt64(hi=jnp.array(0), lo=jnp.array(1)) + UInt64(hi=jnp.array(0), lo=jnp.array(2)) == UInt64(
        hi=jnp.array(0), lo=jnp.array(3))


def test_add_uint64_with_carry():
    a = UInt64(hi=jnp.array(0), lo=jnp.array(2**32 - 1, dtype=jnp.uint32))
    assert a + UInt64(hi=jnp.array(0), lo=jnp.array(1)) == UInt64(hi=jnp.array(1), lo=jnp.array(0))


def test_add_uint64_max_values():
    top = jnp.array(2**32 - 1, dtype=jnp.uint32)
    assert UInt64(hi=top, lo=top) + UInt64(hi=top, lo=top) == UInt64(hi=top, lo=jnp.array(2**32 - 2, jnp.uint32))


def test_uint64_adds_integers_and_arrays_and_reads_back():
    a = UInt64(hi=0, lo=1)
    assert a + 1 == UInt64(hi=jnp.array(0), lo=jnp.array(2))
    assert int(a + (2**40 + 5)) == 2**40 + 6
    assert int(a + jnp.asarray(7, jnp.int32)) == 8
    assert repr(UInt64(hi=jnp.array(1), lo=jnp.array(20))) == "UInt64(hi=1, lo=20)"
    with pytest.raises(TypeError, match="UInt64 adds a UInt64 or an integer"):
        a + 1.5


def test_add_uint64_jit():
    add = jax.jit(lambda a, b: a + b)
    result = add(UInt64(hi=jnp.array(1), lo=jnp.array(2**32 - 1, dtype=jnp.uint32)), UInt64(hi=2, lo=1))
    assert result == UInt64(hi=jnp.array(4), lo=jnp.array(0))
    assert int(jax.jit(functools.partial(lambda a, n: a + n))(UInt64(hi=0, lo=2**32 - 1), jnp.int32(3))) == 2**32 + 2
