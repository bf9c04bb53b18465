"""Evolution strategies by Brax's module path (``brax_core.training.agents.es``).

Brax 0.14.2's own ES tests (``agents/es/train_test.py``) are here with the import prefix changed; its domain
randomisation test moved Brax's own physics' ``sys.link`` offsets, so here the MJX model's masses are randomised."""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_core import envs
from brax_core.training.acme import running_statistics
from brax_core.training.agents.es import networks as es_networks
from brax_core.training.agents.es import train as es


def test_train():  # Brax's testTrain
    _, _, metrics = es.train(environment=envs.get_environment("fast"), num_timesteps=65536, episode_length=128,
                             learning_rate=0.1)
    assert metrics["eval/episode_reward"] > 140


@pytest.mark.parametrize("normalize_observations", [True, False])
def test_model_encoding(normalize_observations):  # Brax's testModelEncoding
    env = envs.get_environment("fast")
    _, params, _ = es.train(env, num_timesteps=128, episode_length=128, normalize_observations=normalize_observations)
    normalize_fn = running_statistics.normalize if normalize_observations else (lambda x, y: x)
    es_network = es_networks.make_es_networks(env.observation_size, env.action_size, normalize_fn)
    inference = es_networks.make_inference_fn(es_network)
    decoded_params = pickle.loads(pickle.dumps(params))
    state = env.reset(jax.random.PRNGKey(0))
    action = inference(decoded_params)(state.obs, jax.random.PRNGKey(0))[0]
    assert action.shape == (env.action_size,) and bool(jnp.all(jnp.abs(action) <= 1.0))
    env.step(state, action)


def test_train_domain_randomize():  # Brax's testTrainDomainRandomize, over the MJX model's masses
    seen = []

    def randomize(sys, rng):
        seen.append(rng.shape[0])
        masses = jax.vmap(lambda key: sys.body_mass * jax.random.uniform(key, (), minval=0.8, maxval=1.2))(rng)
        in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"body_mass": 0})
        return sys.tree_replace({"body_mass": masses}), in_axes

    es.train(envs.get_environment("inverted_pendulum"), num_timesteps=1280, episode_length=128,
             randomization_fn=randomize, population_size=8, num_eval_envs=4)
    assert seen == [16, 4]  # the population's envs (8 directions, both ways), then the evaluation's


def test_fitness_shaping():
    scores = jnp.asarray([3.0, -1.0, 10.0, 0.5])
    np.testing.assert_allclose(es.centered_rank(scores), [1 / 6, -0.5, 0.5, -1 / 6], rtol=1e-6)
    utilities = np.asarray(es.wierstra(scores))
    assert utilities.sum() == pytest.approx(0.0, abs=1e-6)
    assert list(np.argsort(-utilities)[:2]) == [2, 0]  # the best two get the largest utilities, in order
    assert es.FitnessShaping.ORIGINAL.value(scores) is scores


def test_the_step_is_the_weighted_mean_direction_less_weight_decay():
    noise = jnp.asarray([[1.0, 0.0], [0.0, 2.0]])
    delta = es.es_delta(jnp.asarray([1.0, 1.0]), noise, jnp.asarray([0.5, -1.0]), l2coeff=0.1)
    np.testing.assert_allclose(delta, -(np.array([0.5, -2.0]) / 2 - 0.1), rtol=1e-6)


def test_no_evaluations_returns_the_last_epochs_training_metrics():
    _, _, metrics = es.train(envs.get_environment("fast"), num_timesteps=300, episode_length=100, num_evals=0,
                             population_size=2)
    assert "training/eval_scores_mean" in metrics and "eval/episode_reward" not in metrics


@pytest.mark.parametrize(
    ("argument", "value", "words"),
    [
        ("population_size", 0, "population_size"),
        ("learning_rate", 0.0, "learning_rate"),
        ("perturbation_std", -1.0, "perturbation_std"),
        ("l2coeff", -0.5, "l2coeff"),
        ("fitness_shaping", "rank", "fitness_shaping must be a FitnessShaping: ORIGINAL, CENTERED_RANK or WIERSTRA"),
        ("num_evals", 1.5, "num_evals"),
        ("episode_length", 0, "episode_length"),
        ("network_factory", None, "network_factory"),
    ],
)
def test_bad_arguments_are_refused_by_name_before_anything_compiles(argument, value, words, monkeypatch):
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises((ValueError, TypeError), match=words):
        es.train(envs.get_environment("fast"), **{argument: value})


def test_dict_observations_are_refused_by_name(monkeypatch):
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(ValueError, match="environment: ES's policy takes a flat observation vector"):
        es.train(envs.get_environment("fast", obs_mode="dict_state"))
