"""Brax's `fast` env (observation modes, reward, bad input), Brax's PPO tests on it ported to our trainer, and
vision PPO (``networks_vision``, ``train(vision=..., augment_pixels=...)``, checkpoints of vision networks)."""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import torch_ppo
from brax_core import envs
from brax_core.envs.base import Wrapper
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import checkpoint, networks_vision
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as ppo

VIEW = (4, 4, 3)
MODES = {
    "ndarray": None,
    "dict_state": {"state": 2},
    "dict_pixels": {"pixels/view_0": VIEW, "pixels/view_1": VIEW},
    "dict_pixels_state": {"state": 2, "pixels/view_0": VIEW, "pixels/view_1": VIEW},
    "dict_latent_state": {"state": 2, "latent_pixels/view_0": 12, "latent_pixels/view_1": 12},
}
# Pushing every step: the position after step t is dt^2 t(t+1)/2, and the episode pays the sum of positions.
BEST_128 = sum(0.02**2 * t * (t + 1) / 2 for t in range(1, 129))  # 143.1


# ------------------------------------------------------------------------------------------------------ the env


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("asymmetric", [False, True])
def test_observation_modes_have_brax_keys_shapes_and_dtypes(mode, asymmetric):
    if asymmetric and mode == "ndarray":
        with pytest.raises(ValueError, match="asymmetric_obs=True needs a dict obs_mode"):
            envs.get_environment("fast", obs_mode=mode, asymmetric_obs=True)
        return
    env = envs.get_environment("fast", obs_mode=mode, asymmetric_obs=asymmetric)
    expected = MODES[mode]
    if asymmetric and mode != "dict_pixels":  # the pixels-only mode holds the views alone, as Brax's
        expected = {**expected, "privileged_state": 4}
    assert env.observation_size == (2 if expected is None else expected)
    state = env.reset(jax.random.PRNGKey(0))
    state = jax.jit(env.step)(state, jnp.ones(1))
    if expected is None:
        assert state.obs.shape == (2,) and state.obs.dtype == jnp.float32
        position = state.obs[0]
    else:
        assert set(state.obs) == set(expected)
        for key, size in expected.items():
            assert state.obs[key].shape == ((size,) if isinstance(size, int) else size), key
            assert state.obs[key].dtype == jnp.float32
        if "state" in state.obs:
            position = state.obs["state"][0]
        else:
            position = state.pipeline_state.qpos[0]
        for key in expected:
            if key != "state":  # images, latents and the privileged state are placeholders (zeros), as in Brax
                assert not np.asarray(state.obs[key]).any(), key
    assert float(position) == pytest.approx(0.02 * 0.02) and float(state.reward) == float(position)


def test_dynamics_reward_and_episodes_are_brax_fast():
    env = envs.get_environment("fast")
    state = env.reset(jax.random.PRNGKey(3))
    np.testing.assert_array_equal(state.obs, [0.0, 0.0])  # at rest at the origin, whatever the key
    step = jax.jit(env.step)
    total = 0.0
    for _ in range(128):
        state = step(state, jnp.array([0.3]))  # any positive action is one push
        total += float(state.reward)
        assert float(state.done) == 0.0  # no termination: only the time limit ends an episode
    assert total == pytest.approx(BEST_128, rel=1e-4)
    np.testing.assert_allclose(state.obs, [0.02**2 * 128 * 129 / 2, 0.02 * 128], rtol=1e-4)
    idle = step(state, jnp.array([-1.0]))  # a non-positive action coasts
    np.testing.assert_allclose(idle.obs, [state.obs[0] + 0.02 * state.obs[1], state.obs[1]], rtol=1e-6)
    assert env.reset_count >= 1 and env.step_count >= 1  # Brax's trace counters
    assert float(env.dt) == pytest.approx(0.02) and env.action_size == 1


def test_non_finite_action_ends_the_episode_and_misshaped_actions_are_refused():
    env = envs.get_environment("fast")
    state = env.reset(jax.random.PRNGKey(0))
    stepped = jax.jit(env.step)(state, jnp.array([jnp.nan]))
    assert float(stepped.done) == 1.0 and np.isfinite(np.asarray(stepped.obs)).all()
    for action in (jnp.ones(2), jnp.ones((1, 1)), jnp.ones(())):
        with pytest.raises(ValueError, match=r"action has shape .*action_size=1"):
            env.step(state, action)
    with pytest.raises(TypeError, match="floating"):
        env.step(state, jnp.ones(1, jnp.int32))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(obs_mod="dict_state"), r"unknown keyword argument\(s\) \['obs_mod'\]; it accepts asymmetric_obs"),
        (dict(obs_mode="pixels"), "obs_mode must be one of 'ndarray', 'dict_state', 'dict_pixels'"),
        (dict(asymmetric_obs="yes", obs_mode="dict_state"), "asymmetric_obs must be True or False"),
        (dict(pixel_obs=True), "pixel_obs=True needs obs_mode 'dict_pixels' or 'dict_pixels_state'"),
        (dict(backend="warp"), "backend must be one of"),
    ],
)
def test_bad_constructor_arguments_name_what_is_accepted(kwargs, message):
    with pytest.raises(ValueError, match=message):
        envs.get_environment("fast", **kwargs)


# ------------------------------------------------------------------------ Brax's train_test.py, on our trainer

# brax/training/agents/ppo/train_test.py's testTrain settings.
BRAX_TEST_TRAIN = dict(
    num_timesteps=2**15,
    episode_length=128,
    num_envs=64,
    learning_rate=3e-4,
    entropy_cost=1e-2,
    discounting=0.95,
    unroll_length=5,
    batch_size=64,
    num_minibatches=8,
    num_updates_per_batch=4,
    normalize_observations=True,
    seed=2,
    num_evals=3,
    reward_scaling=10,
    normalize_advantage=False,
)


@pytest.mark.parametrize("obs_mode", ["dict_state", pytest.param("ndarray", marks=pytest.mark.slow)])
def test_brax_train_test_threshold_on_fast(obs_mode):
    """Brax asserts an eval reward above 135 (of at most 143.1; ~72 untrained) after 2**15 env steps."""
    reports = []
    _, _, metrics = ppo.train(
        envs.get_environment("fast", obs_mode=obs_mode),
        progress_fn=lambda step, m: reports.append(m["eval/episode_reward"]),
        **BRAX_TEST_TRAIN,
    )
    assert reports[0] < 100.0  # the untrained policy pushes about half the time
    assert 135.0 < metrics["eval/episode_reward"] <= BEST_128 + 1e-3, reports


def test_brax_asymmetric_actor_critic_shapes():
    """Brax's testTrainAsymmetricActorCritic: policy and critic read different keys of a dict observation."""
    env = envs.get_environment("fast", asymmetric_obs=True, obs_mode="dict_state")
    factory = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=(32,),
        value_hidden_layer_sizes=(32,),
        policy_obs_key="state",
        value_obs_key="privileged_state",
    )
    _, (_, policy_params, value_params), _ = ppo.train(
        env, num_timesteps=0, num_envs=8, batch_size=8, num_minibatches=2, network_factory=factory
    )
    assert policy_params["params"]["hidden_0"]["kernel"].shape == (env.observation_size["state"], 32)
    assert value_params["params"]["hidden_0"]["kernel"].shape == (env.observation_size["privileged_state"], 32)


# ----------------------------------------------------------------------------------------------- vision PPO

TINY_VISION = dict(
    num_timesteps=2 * 320,
    episode_length=20,
    num_envs=16,
    batch_size=16,
    num_minibatches=2,
    unroll_length=10,
    num_updates_per_batch=2,
    num_evals=2,
    num_eval_envs=16,
    normalize_observations=True,
    learning_rate=3e-4,
)


def _vision_factory(policy_obs_key, value_obs_key):
    return functools.partial(
        networks_vision.make_ppo_networks_vision,
        policy_hidden_layer_sizes=(32,),
        value_hidden_layer_sizes=(32,),
        policy_obs_key=policy_obs_key,
        value_obs_key=value_obs_key,
        cnn_output_channels=(8, 64),
        cnn_kernel_size=(3, 2),
        cnn_stride=(1, 1),
    )


def test_vision_ppo_trains_augments_checkpoints_and_reloads(tmp_path):
    """Brax's testPixelsPPO (asymmetric, pixels and state) at a tiny size, saved and reloaded by load_policy."""
    env = envs.get_environment("fast", pixel_obs=True, asymmetric_obs=True, obs_mode="dict_pixels_state")
    reports = []
    make_policy, params, metrics = ppo.train(
        env,
        vision=True,
        augment_pixels=True,
        network_factory=_vision_factory("state", "privileged_state"),
        save_checkpoint_path=tmp_path / "ckpt",
        progress_fn=lambda step, m: reports.append(step),
        **TINY_VISION,
    )
    assert reports == [0, 640] and np.isfinite(metrics["eval/episode_reward"])
    num_views, features = 2, 64
    assert params.policy_params["params"]["MLP_0"]["hidden_0"]["kernel"].shape == (num_views * features + 2, 32)
    assert params.value_params["params"]["MLP_0"]["hidden_0"]["kernel"].shape == (num_views * features + 4, 32)
    # the normaliser keeps statistics of the state keys only, and has seen every collected step
    assert set(params.normalizer_params.mean) == {"state", "privileged_state"}
    assert float(params.normalizer_params.count) == 640
    assert float(params.normalizer_params.mean["state"][1]) > 0  # mean velocity: the policy pushes sometimes

    config = checkpoint.load_config(tmp_path / "ckpt")
    assert config["observation_size"]["pixels/view_0"] == VIEW
    assert json.loads(json.dumps(checkpoint.config_to_json(config)))["observation_size"]["pixels/view_0"] == list(VIEW)
    loaded = checkpoint.load_policy(tmp_path / "ckpt", deterministic=True)
    rng = np.random.default_rng(0)
    obs = {
        "state": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32),
        "privileged_state": jnp.zeros((3, 4)),
        "pixels/view_0": jnp.asarray(rng.uniform(size=(3, *VIEW)), jnp.float32),
        "pixels/view_1": jnp.asarray(rng.uniform(size=(3, *VIEW)), jnp.float32),
    }
    expected, _ = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(0))
    np.testing.assert_allclose(loaded(obs, jax.random.PRNGKey(0))[0], expected, rtol=1e-5, atol=1e-6)
    assert expected.shape == (3, 1)


class _ViewsThatVary(Wrapper):
    """``fast`` with image views that hold a spatial pattern moving with the cart (``fast``'s own views are zeros,
    which a shift leaves as they are)."""

    def _with_views(self, state):
        pattern = jnp.arange(float(np.prod(VIEW)), dtype=jnp.float32).reshape(VIEW) / np.prod(VIEW)
        views = {f"pixels/view_{i}": jnp.sin(7.0 * pattern + state.obs["state"][0] + i) for i in range(2)}
        return state.replace(obs={**state.obs, **views})

    def reset(self, rng):
        return self._with_views(self.env.reset(rng))

    def step(self, state, action):
        return self._with_views(self.env.step(state, action))


def test_augment_pixels_shifts_the_views_the_update_learns_from(monkeypatch):
    """Where the views vary, training with the shift differs from the same training (the same random draws) with
    the shift replaced by the identity; the same run twice is identical, so the difference is the shift's."""
    from brax_core.training.agents.ppo import training_step

    monkeypatch.setenv("BRAX_BRIDGE_PROGRAM_CACHE", "0")  # each run traces its own update, the patched one too
    env = _ViewsThatVary(envs.get_environment("fast", pixel_obs=True, obs_mode="dict_pixels_state"))

    def train():
        factory = _vision_factory("state", "state")
        _, params, _ = ppo.train(env, vision=True, augment_pixels=True, network_factory=factory,
                                 **{**TINY_VISION, "num_evals": 0})
        return jax.tree.leaves(params.policy_params)

    shifted, again = train(), train()
    monkeypatch.setattr(training_step, "_shift_pixels", lambda data, key: data)
    unshifted = train()
    assert all(np.array_equal(a, b) for a, b in zip(shifted, again, strict=True))
    assert any(not np.allclose(a, b) for a, b in zip(shifted, unshifted, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize(
    "asymmetric_obs, obs_mode",
    [(False, "dict_pixels_state"), (False, "dict_pixels")],
)
def test_brax_pixels_ppo_parameter_shapes(asymmetric_obs, obs_mode):
    """Brax's testPixelsPPO as it is written: its settings and default CNN, no ``vision`` flag (the pixels-only mode
    leaves the normaliser nothing to count), the first MLP layer's input width."""
    env = envs.get_environment("fast", pixel_obs=True, asymmetric_obs=asymmetric_obs, obs_mode=obs_mode)
    key = "" if obs_mode == "dict_pixels" else "state"
    factory = functools.partial(
        networks_vision.make_ppo_networks_vision,
        policy_hidden_layer_sizes=(32,),
        value_hidden_layer_sizes=(32,),
        policy_obs_key=key,
        value_obs_key=key,
    )
    _, (_, policy_params, _), metrics = ppo.train(
        env,
        network_factory=factory,
        augment_pixels=True,
        **{**BRAX_TEST_TRAIN, "episode_length": 1000, "num_evals": 1},
    )
    width = 2 * 64 + (0 if obs_mode == "dict_pixels" else 2)
    assert policy_params["params"]["MLP_0"]["hidden_0"]["kernel"].shape == (width, 32)
    assert np.isfinite(metrics["eval/episode_reward"])


def test_random_shift_moves_each_view_of_each_unroll_by_one_offset():
    images = jax.random.uniform(jax.random.PRNGKey(0), (6, 3, 8, 8, 2))  # [batch, time, H, W, C]
    obs = {"pixels/a": images, "pixels/b": images, "state": jnp.ones((6, 3, 2))}
    shifted = ppo.random_shift_pixels(obs, jax.random.PRNGKey(1))
    assert shifted["state"] is obs["state"]
    padded = np.pad(np.asarray(images), ((0, 0), (0, 0), (4, 4), (4, 4), (0, 0)), mode="edge")
    offsets = {}
    for name in ("pixels/a", "pixels/b"):
        out = np.asarray(shifted[name])
        assert out.shape == images.shape
        for b in range(6):
            # exactly one window of the edge-padded unroll, the same at every time step
            found = [
                (i, j) for i in range(9) for j in range(9) if np.array_equal(out[b], padded[b, :, i : i + 8, j : j + 8])
            ]
            assert len(found) >= 1
            offsets[name, b] = found[0]
    assert len(set(offsets.values())) > 1  # entries (and views) get different offsets
    again = ppo.random_shift_pixels(obs, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(again["pixels/a"], shifted["pixels/a"])  # observation and next move together


def test_vision_network_sees_the_images_and_normalises_the_state_key_only():
    size = {"pixels/view_0": (8, 8, 3), "state": 3}
    network = networks_vision.make_ppo_networks_vision(
        size,
        2,
        preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=(16,),
        policy_obs_key="state",
        cnn_output_channels=(4,),
        cnn_kernel_size=(3,),
        cnn_stride=(1,),
        cnn_global_pool="spatial_softmax",
        normalise_channels=True,
    )
    params = network.policy_network.init(jax.random.PRNGKey(0))
    stats = running_statistics.init_state({"state": jax.ShapeDtypeStruct((3,), jnp.float32)})
    stats = running_statistics.update(stats, {"state": jnp.array([[1.0, 2.0, 3.0], [3.0, 6.0, 9.0]])})
    images = jax.random.uniform(jax.random.PRNGKey(1), (2, 8, 8, 3))
    obs = {"pixels/view_0": images, "state": jnp.array([[2.0, 4.0, 6.0]] * 2)}  # the state mean: normalised to 0
    out = network.policy_network.apply(stats, params, obs)
    assert out.shape == (2, 4)  # loc and scale of a 2-d tanh-normal
    assert not np.allclose(out[0], out[1])  # different images, different outputs
    zero_state = network.policy_network.apply(stats, params, {**obs, "state": jnp.zeros((2, 3))})
    assert not np.allclose(out, zero_state)
    normalised_input = {**obs, "state": jnp.zeros((2, 3))}
    identity = networks_vision.make_ppo_networks_vision(
        size,
        2,
        policy_hidden_layer_sizes=(16,),
        policy_obs_key="state",
        cnn_output_channels=(4,),
        cnn_kernel_size=(3,),
        cnn_stride=(1,),
        cnn_global_pool="spatial_softmax",
        normalise_channels=True,
    )
    np.testing.assert_allclose(out, identity.policy_network.apply(stats, params, normalised_input), atol=1e-5)
    # spatial softmax: two expected coordinates per channel (4 x 2), then the 3 state values
    assert params["params"]["MLP_0"]["hidden_0"]["kernel"].shape == (4 * 2 + 3, 16)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(observation_size=4), "needs dict observations with image views"),
        (dict(observation_size={"state": 2}), "needs dict observations with image views"),
        (dict(policy_obs_key="velocity"), "policy_obs_key 'velocity' is not among the observation keys"),
        (dict(value_obs_key="pixels/view_0"), "value_obs_key must name a state vector"),
        (dict(distribution_type="beta"), "distribution_type must be one of 'normal', 'tanh_normal'"),
        (dict(distribution_type="normal"), "distribution_type='normal' is not available for vision networks"),
        (dict(cnn_global_pool="mean"), "cnn_global_pool must be one of 'avg', 'max', 'spatial_softmax', 'none'"),
        (dict(cnn_padding="reflect"), "cnn_padding must be 'zeros' or 'valid'"),
        (dict(cnn_kernel_size=(8, 4)), r"cnn_kernel_size must have one entry per convolution \(3\)"),
        (dict(cnn_kernel_init_fn="no_such_init"), "cnn_kernel_init_fn 'no_such_init' is not a jax.nn.initializers"),
        (dict(cnn_activation="nope"), "activation 'nope' is not a known name"),
    ],
)
def test_vision_network_bad_arguments(kwargs, message):
    args = dict(observation_size={"pixels/view_0": VIEW, "state": 2}, action_size=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        networks_vision.make_ppo_networks_vision(**args)


def test_trainers_refuse_vision_settings_they_cannot_honour():
    tiny = dict(num_timesteps=320, num_envs=16, batch_size=16, num_minibatches=2)
    with pytest.raises(ValueError, match=r"vision=True needs dict observations with image views"):
        ppo.train("fast", vision=True, **tiny)
    with pytest.raises(ValueError, match=r"augment_pixels=True needs dict observations with image views"):
        ppo.train(envs.get_environment("fast", obs_mode="dict_state"), augment_pixels=True, **tiny)
    with pytest.raises(ValueError, match=r"vision=True needs action_repeat=1 \(got 2\)"):
        ppo.train(envs.get_environment("fast", obs_mode="dict_pixels"), vision=True, action_repeat=2, **tiny)
    with pytest.raises(ValueError, match="vision must be"):
        ppo.train(envs.get_environment("fast", obs_mode="dict_pixels"), vision="yes", **tiny)
    with pytest.raises(ValueError, match="vision=True: torch_ppo has no networks for image observations"):
        torch_ppo.train("fast", vision=True, **tiny)
    with pytest.raises(ValueError, match="augment_pixels=True: torch_ppo has no networks"):
        torch_ppo.train("fast", augment_pixels=True, **tiny)
