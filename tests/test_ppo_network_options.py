"""make_ppo_networks' options (Brax 0.14.2's) in both frameworks: what each option does, refusals of bad values,
checkpoints that rebuild every variant, and torch parity on identical weights and inputs."""

import functools
import json
import math
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from ml_collections import config_dict
from rollouts import torch_ppo_loss

from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import checkpoint
from brax_core.training.agents.ppo import losses as jax_losses
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as jax_ppo
from brax_core.training.agents.ppo.config import ConfigError, NetworkConfig, PPOConfig
from torch_ppo import policy_transfer as transfer
from torch_ppo.networks import PPOModules
from torch_ppo.params import load_params, make_inference_fn, params_of
from torch_training.layers import resolve_kernel_init

OBS, ACT = 3, 2

# The 'normal' variants each check covers; the last one exercises every option at once.
NORMAL_VARIANTS = {
    "scalar": dict(distribution_type="normal"),
    "log": dict(distribution_type="normal", noise_std_type="log", init_noise_std=0.4),
    "state_dependent_log_clipped": dict(
        distribution_type="normal", noise_std_type="log", state_dependent_std=True, mean_clip_scale=0.5
    ),
}


def _jax_setup(hidden=(8, 8), **options):
    nets = ppo_networks.make_ppo_networks(
        OBS,
        ACT,
        preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=hidden,
        value_hidden_layer_sizes=(8,),
        **options,
    )
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(3), 3)
    stats = running_statistics.init_state(jax.ShapeDtypeStruct((OBS,), jnp.float32))
    stats = running_statistics.update(stats, jax.random.normal(k3, (64, OBS)) * 2.0 + 1.0)
    policy_params = nets.policy_network.init(k1)
    # Move the std parameters off their initial value, so a transfer that dropped them would show.
    policy_params = jax.tree_util.tree_map_with_path(
        lambda path, x: x * 1.7 if "std" in jax.tree_util.keystr(path) else x, policy_params
    )
    return nets, ppo_networks.PPOTrainingParams(stats, policy_params, nets.value_network.init(k2))


def _obs(n=16, seed=0):
    return np.random.default_rng(seed).normal(size=(n, OBS)).astype(np.float32) * 3.0


# ------------------------------------------------------------------------------------------ JAX networks


def test_normal_policy_layout_std_and_mean_clip():
    obs = jnp.asarray(_obs())
    nets, params = _jax_setup(**NORMAL_VARIANTS["scalar"])
    layers = params.policy_params["params"]
    assert sorted(layers) == ["Dense_0", "MLP_0", "std_param"]
    mean, std = nets.policy_network.apply(params.normalizer_params, params.policy_params, obs)
    np.testing.assert_allclose(std, np.broadcast_to(1.7 * np.ones(ACT), (16, ACT)), rtol=1e-6)

    nets, params = _jax_setup(**NORMAL_VARIANTS["log"])
    assert "std_logparam" in params.policy_params["params"]
    fresh = nets.policy_network.init(jax.random.PRNGKey(0))["params"]["std_logparam"]["log_value"]
    np.testing.assert_allclose(fresh, np.full(ACT, math.log(0.4)), rtol=1e-6)

    nets, params = _jax_setup(**NORMAL_VARIANTS["state_dependent_log_clipped"])
    assert "Dense_1" in params.policy_params["params"]
    big, _ = nets.policy_network.apply(params.normalizer_params, params.policy_params, obs * 100.0)
    assert float(jnp.max(jnp.abs(big))) < 0.5 and float(jnp.max(jnp.abs(big))) > 0.3
    mean, std = nets.policy_network.apply(params.normalizer_params, params.policy_params, obs)
    assert float(jnp.std(std[:, 0])) > 0.0 and bool(jnp.all(std > 0))  # depends on the observation
    # 'normal' is not squashed: the mode is the mean itself, and log_prob has no tanh correction.
    dist = nets.parametric_action_distribution
    np.testing.assert_allclose(dist.mode((mean, std)), mean)
    x = mean + 0.3
    expected = np.sum(-0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * math.log(2 * math.pi), axis=-1)
    np.testing.assert_allclose(dist.log_prob((mean, std), x), expected, rtol=1e-5, atol=1e-5)


def test_kernel_initialiser_factories_and_kwargs():
    nets = ppo_networks.make_ppo_networks(
        4,
        ACT,
        policy_hidden_layer_sizes=(8,),
        value_hidden_layer_sizes=(8,),
        distribution_type="normal",
        policy_network_kernel_init_fn=jax.nn.initializers.orthogonal,
        policy_network_kernel_init_kwargs={"scale": 0.5},
        value_network_kernel_init_fn=jax.nn.initializers.constant,
        value_network_kernel_init_kwargs={"value": 0.25},
        mean_kernel_init_fn=jax.nn.initializers.zeros,
    )
    policy = nets.policy_network.init(jax.random.PRNGKey(0))["params"]
    kernel = np.asarray(policy["MLP_0"]["hidden_0"]["kernel"])  # [4, 8]: orthogonal rows, scaled
    np.testing.assert_allclose(kernel @ kernel.T, 0.25 * np.eye(4), atol=1e-5)
    assert not np.any(np.asarray(policy["Dense_0"]["kernel"]))
    value = nets.value_network.init(jax.random.PRNGKey(0))["params"]
    assert np.all(np.asarray(value["hidden_0"]["kernel"]) == 0.25)


@pytest.mark.parametrize(
    "kwargs,named",
    [
        (dict(distribution_type="beta"), "distribution_type"),
        (dict(noise_std_type="exp"), "noise_std_type"),
        (dict(init_noise_std=0.0), "init_noise_std"),
        (dict(mean_clip_scale=-1.0), "mean_clip_scale"),
        (dict(state_dependent_std="yes"), "state_dependent_std"),
        (dict(policy_network_kernel_init_fn=jax.nn.initializers.lecun_uniform()), "policy_network_kernel_init_fn"),
        (dict(value_network_kernel_init_kwargs={"nope": 1}), "value_network_kernel_init_kwargs"),
        (
            dict(kernel_init=jax.nn.initializers.zeros, policy_network_kernel_init_fn=jax.nn.initializers.he_normal),
            "kernel_init",
        ),
        (dict(policy_obs_key=""), "policy_obs_key"),
    ],
)
def test_bad_network_options_name_themselves(kwargs, named):
    with pytest.raises(ValueError, match=named):
        ppo_networks.make_ppo_networks(OBS, ACT, **kwargs)
    torch_kwargs = {k: v for k, v in kwargs.items() if k not in ("kernel_init", "value_network_kernel_init_kwargs")}
    if torch_kwargs and "kernel_init" not in named:
        with pytest.raises(ValueError, match=named):
            PPOModules(OBS, ACT, (4,), (4,), **torch_kwargs)


def test_schema_takes_the_network_options_both_trainers_share():
    network = PPOConfig.from_flat(
        {"num_timesteps": 10, "distribution_type": "normal", "noise_std_type": "log", "init_noise_std": 0.5}
    ).network
    assert (network.distribution_type, network.noise_std_type, network.init_noise_std) == ("normal", "log", 0.5)
    with pytest.raises(ConfigError, match="distribution_type must be one of 'normal', 'tanh_normal', got 'beta'"):
        NetworkConfig(distribution_type="beta")
    with pytest.raises(ConfigError, match="value_obs_key must be a non-empty string"):
        PPOConfig.from_flat({"num_timesteps": 10, "value_obs_key": ""})


# ------------------------------------------------------------------------------------------ checkpoints


def test_network_config_is_a_config_dict_in_brax_argument_order():
    factory = functools.partial(
        ppo_networks.make_ppo_networks,
        distribution_type="normal",
        policy_network_kernel_init_fn=jax.nn.initializers.orthogonal,
        policy_network_kernel_init_kwargs={"scale": 0.1},
    )
    config = checkpoint.network_config({"state": (3,), "privileged_state": (5,)}, ACT, True, factory)
    assert isinstance(config, config_dict.ConfigDict)
    assert config.action_size == ACT and config.normalize_observations is True
    assert config.network_factory_kwargs.distribution_type == "normal"
    assert config.network_factory_kwargs.policy_network_kernel_init_fn is jax.nn.initializers.orthogonal
    plain = json.loads(json.dumps(checkpoint.config_to_json(config)))
    assert plain["observation_size"] == {"state": [3], "privileged_state": [5]}
    nets = checkpoint.networks_from_config(config)
    kernel = nets.policy_network.init(jax.random.PRNGKey(0))["params"]["MLP_0"]["hidden_0"]["kernel"]
    np.testing.assert_allclose(kernel @ kernel.T, 0.01 * np.eye(kernel.shape[0]), atol=1e-6)  # orthogonal, scaled
    with pytest.raises(TypeError, match="network_factory must be callable"):
        checkpoint.network_config(factory, {"state": (3,)}, ACT, True)  # the older argument order


def test_network_config_round_trips_live_values_through_save_and_load_config(tmp_path):
    activation = jax.nn.swish
    factory = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=(8, 4),
        value_hidden_layer_sizes=(4,),
        activation=activation,
        policy_network_kernel_init_fn=jax.nn.initializers.orthogonal,
        policy_network_kernel_init_kwargs={"scale": 0.5},
    )
    config = checkpoint.network_config(2, ACT, True, factory)  # the `fast` env's sizes
    kwargs = config.network_factory_kwargs
    assert kwargs.policy_hidden_layer_sizes == (8, 4) and kwargs.activation is activation
    nets = ppo_networks.make_ppo_networks(
        config.observation_size, config.action_size, preprocess_observations_fn=running_statistics.normalize, **kwargs
    )
    key = jax.random.PRNGKey(0)
    stats = running_statistics.init_state(jax.ShapeDtypeStruct((2,), jnp.float32), std_eps=0.02)
    params = (stats, nets.policy_network.init(key), nets.value_network.init(key))
    # On disk the callables are names and the tuples lists, as checkpoints have always been written.
    saved = checkpoint.config_to_json(config)
    assert saved["network_factory"] == {"name": "make_ppo_networks"}
    assert saved["network_factory_kwargs"]["activation"] == {"callable": {"name": "swish"}}
    assert saved["network_factory_kwargs"]["policy_network_kernel_init_fn"] == {
        "callable": {"kernel_initializer": "orthogonal"}
    }
    assert saved["network_factory_kwargs"]["policy_hidden_layer_sizes"] == [8, 4]

    step_dir = checkpoint.save(tmp_path / "ckpt", step=7, params=params, config=config)  # Brax's signature
    assert checkpoint.load_config_json(step_dir) == {**saved, "env_steps": 7, "normalizer_std_eps": 0.02}
    loaded = checkpoint.load_config(tmp_path / "ckpt" / "000000000007")  # Brax's step name finds step 7
    assert loaded.network_factory_kwargs.to_dict() == kwargs.to_dict()
    assert loaded.network_factory_kwargs.activation is activation
    assert loaded.network_factory_kwargs.value_hidden_layer_sizes == (4,)
    assert (loaded.observation_size, loaded.action_size, loaded.normalize_observations) == (2, ACT, True)
    rebuilt = ppo_networks.make_ppo_networks(
        loaded.observation_size, loaded.action_size, **loaded.network_factory_kwargs
    )
    kernel = rebuilt.policy_network.init(key)["params"]["hidden_0"]["kernel"]
    np.testing.assert_allclose(kernel @ kernel.T, 0.25 * np.eye(2), atol=1e-6)  # orthogonal rows, scale 0.5
    restored = checkpoint.load(step_dir)
    assert restored.normalizer_params.std_eps == 0.02
    np.testing.assert_array_equal(
        restored.policy_params["params"]["hidden_0"]["kernel"], params[1]["params"]["hidden_0"]["kernel"]
    )

    # A value that cannot be named is refused, naming the argument, before anything is written.
    bad = checkpoint.network_config(2, ACT, True, functools.partial(factory, activation=lambda x: x))
    with pytest.raises(ValueError, match=r"network_factory_kwargs\['activation'\].*cannot be named"):
        checkpoint.save(tmp_path / "bad", 1, params, bad)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(TypeError, match="pass the configuration as config, the fourth argument"):
        checkpoint.save(tmp_path / "bad", 1, params, {"optimizer_state": ()}, config)  # state and config swapped
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("variant", ["tanh_normal", "log", "state_dependent_log_clipped"])
def test_load_policy_rebuilds_every_variant_and_params_pickle(tmp_path, variant):
    options = {} if variant == "tanh_normal" else NORMAL_VARIANTS[variant]
    factory = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=(8,),
        value_hidden_layer_sizes=(8,),
        value_network_kernel_init_fn=jax.nn.initializers.he_normal,
        **options,
    )
    make_policy, params, _ = jax_ppo.train(
        "fast",
        num_timesteps=0,
        num_envs=4,
        batch_size=4,
        num_minibatches=1,
        normalize_observations=True,
        network_factory=factory,
        save_checkpoint_path=str(tmp_path),
        num_evals=0,
    )
    obs = jnp.asarray(np.random.default_rng(1).normal(size=(8, 2)).astype(np.float32))
    key = jax.random.PRNGKey(5)
    expected = make_policy(params, deterministic=True)(obs, key)[0]
    np.testing.assert_array_equal(checkpoint.load_policy(str(tmp_path))(obs, key)[0], expected)
    restored = pickle.loads(pickle.dumps(params))
    sampled = make_policy(params)(obs, key)[0]
    np.testing.assert_array_equal(make_policy(restored)(obs, key)[0], sampled)
    # Sampling draws around the mode: not the same actions (the comparison above is not vacuous).
    assert not np.allclose(sampled, expected)


# ------------------------------------------------------------------------------------------ torch parity


def _loss_batch(rng, nets, params, rows=6, steps=5):
    """A [rows, steps] batch whose behaviour log-probs are the policy's own plus noise (ratios away from 1)."""
    obs = rng.normal(size=(rows, steps, OBS)).astype(np.float32) * 2.0
    mean, std = nets.policy_network.apply(params.normalizer_params, params.policy_params, jnp.asarray(obs))
    raw = (np.asarray(mean) + np.asarray(std) * rng.normal(size=mean.shape)).astype(np.float32)
    log_prob = np.asarray(nets.parametric_action_distribution.log_prob((mean, std), raw))
    u = rng.random((rows, steps))
    return dict(
        obs=obs,
        final_obs=rng.normal(size=obs.shape).astype(np.float32),
        raw_action=raw,
        log_prob=(log_prob + rng.normal(size=log_prob.shape) * 0.3).astype(np.float32),
        reward=rng.random((rows, steps)).astype(np.float32),
        termination=(u < 0.15).astype(np.float32),
        truncation=((u >= 0.15) & (u < 0.3)).astype(np.float32),
    )


def _as_transition(b):
    from brax_core.training import types

    return types.Transition(
        observation=jnp.asarray(b["obs"]),
        action=jnp.asarray(b["raw_action"]),
        reward=jnp.asarray(b["reward"]),
        discount=jnp.asarray(1.0 - np.maximum(b["termination"], b["truncation"])),
        next_observation=jnp.asarray(b["final_obs"]),
        extras={
            "policy_extras": {"raw_action": jnp.asarray(b["raw_action"]), "log_prob": jnp.asarray(b["log_prob"])},
            "state_extras": {"truncation": jnp.asarray(b["truncation"])},
        },
    )


def _as_tensordict(b):
    from tensordict import TensorDict

    t = lambda k: torch.from_numpy(b[k])
    return TensorDict(
        {
            "observation": t("obs"),
            "raw_action": t("raw_action"),
            "action_log_prob": t("log_prob"),
            "next": {
                "final_observation": t("final_obs"),
                "reward": t("reward").unsqueeze(-1),
                "terminated": t("termination").bool().unsqueeze(-1),
                "truncated": t("truncation").bool().unsqueeze(-1),
            },
        },
        batch_size=list(b["reward"].shape),
    )


def _torch_modules(options):
    torch.manual_seed(0)
    return PPOModules(OBS, ACT, (8, 8), (8,), "swish", normalize_observations=True, **options)


@pytest.mark.parametrize("variant", sorted(NORMAL_VARIANTS))
def test_torch_policy_matches_jax_on_copied_weights(variant):
    options = NORMAL_VARIANTS[variant]
    nets, params = _jax_setup(**options)
    modules = load_params(_torch_modules(options), transfer.jax_params_to_torch(params))
    obs = _obs()
    mean_j, std_j = nets.policy_network.apply(params.normalizer_params, params.policy_params, jnp.asarray(obs))
    loc, scale = modules.policy(torch.from_numpy(obs))
    np.testing.assert_allclose(loc.detach().numpy(), mean_j, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(scale.detach().numpy(), std_j, rtol=1e-5, atol=1e-6)
    raw = np.asarray(mean_j) + 0.5
    dist = nets.parametric_action_distribution
    lp = modules.policy.log_prob(loc, scale, torch.from_numpy(raw))
    np.testing.assert_allclose(lp.detach().numpy(), dist.log_prob((mean_j, std_j), raw), rtol=1e-5, atol=1e-4)
    ent = modules.policy.entropy(loc, scale, torch.zeros_like(loc))
    np.testing.assert_allclose(ent.detach().numpy(), dist.entropy((mean_j, std_j), jax.random.PRNGKey(0)), atol=1e-5)
    # And back: the torch parameters become the same JAX parameters.
    back = transfer.torch_params_to_jax(params_of(modules))
    for a, b in zip(jax.tree.leaves(back.policy_params), jax.tree.leaves(params.policy_params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("variant", ["scalar", "state_dependent_log_clipped"])
def test_normal_policy_loss_matches_brax_core(variant):
    options = NORMAL_VARIANTS[variant]
    nets, params = _jax_setup(**options)
    data = _loss_batch(np.random.default_rng(2), nets, params)
    hyper = dict(entropy_cost=0.01, discounting=0.97, reward_scaling=10.0, gae_lambda=0.95, clipping_epsilon=0.2)
    key = jax.random.PRNGKey(7)
    loss_fn = lambda p: jax_losses.compute_ppo_loss(
        jax_losses.PPONetworkParams(p.policy_params, p.value_params),
        p.normalizer_params,
        _as_transition(data),
        key,
        nets,
        **hyper,
    )
    (jax_total, jax_metrics), jax_grads = jax.value_and_grad(loss_fn, has_aux=True, allow_int=True)(params)
    modules = load_params(_torch_modules(options), transfer.jax_params_to_torch(params))
    noise = torch.zeros(data["raw_action"].shape[1], data["raw_action"].shape[0], ACT)  # unused by 'normal'
    terms = torch_ppo_loss(modules, _as_tensordict(data), noise, **hyper)
    terms.total_loss.backward()
    for name in ("policy_loss", "v_loss", "entropy_loss", "approx_kl"):
        assert abs(float(getattr(terms, name).detach()) - float(jax_metrics[name])) <= 1e-4, name
    assert abs(float(terms.total_loss.detach()) - float(jax_total)) <= 1e-4
    g_mean = np.asarray(jax_grads.policy_params["params"]["Dense_0"]["kernel"]).T
    np.testing.assert_allclose(modules.policy.mean.weight.grad.numpy(), g_mean, atol=1e-4, rtol=1e-3)
    assert abs(float(jax_metrics["policy_loss"])) > 1e-3


def test_torch_kernel_initialisers_follow_jax_definitions():
    weight = torch.empty(64, 400)  # [out, in]: fan_in 400, fan_out 64
    resolve_kernel_init("fn", "lecun_uniform", "kwargs", None)(weight)
    assert float(weight.abs().max()) <= math.sqrt(3.0 / 400) and float(weight.std()) == pytest.approx(
        math.sqrt(1.0 / 400), rel=0.05
    )
    resolve_kernel_init("fn", jax.nn.initializers.he_normal, "kwargs", None)(weight)
    assert float(weight.std()) == pytest.approx(math.sqrt(2.0 / 400), rel=0.05)
    resolve_kernel_init("fn", "orthogonal", "kwargs", {"scale": 2.0})(weight)
    torch.testing.assert_close(weight @ weight.T, 4.0 * torch.eye(64), atol=1e-4, rtol=0)
    resolve_kernel_init("fn", "uniform", "kwargs", {"scale": 0.1})(weight)
    assert float(weight.min()) >= 0.0 and float(weight.max()) <= 0.1  # jax's uniform is [0, scale)
    with pytest.raises(ValueError, match="policy_network_kernel_init_fn='delta_orthogonal'.*convolution"):
        resolve_kernel_init("policy_network_kernel_init_fn", "delta_orthogonal", "kwargs", None)
    with pytest.raises(ValueError, match="value_network_kernel_init_fn must be one of"):
        resolve_kernel_init("value_network_kernel_init_fn", "glorot", "kwargs", None)
    with pytest.raises(ValueError, match=r"mean_kernel_init_kwargs has \['column_axis'\]"):
        resolve_kernel_init("mean_kernel_init_fn", "orthogonal", "mean_kernel_init_kwargs", {"column_axis": 0})


def test_normal_log_policy_transfers_both_ways():
    options = NORMAL_VARIANTS["log"]
    nets, params = _jax_setup(**options)
    obs = _obs(32, seed=4)
    module = transfer.jax_policy_to_torch(params, activation="swish")
    expected = ppo_networks.make_inference_fn(nets)(params, deterministic=True)(jnp.asarray(obs), None)[0]
    np.testing.assert_allclose(module(torch.from_numpy(obs)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    assert module.network.noise_std_type == "log" and not module.network.squash

    modules = load_params(_torch_modules(options), transfer.jax_params_to_torch(params))
    torch_policy = make_inference_fn(modules)(params_of(modules))
    jax_policy = transfer.torch_policy_to_jax(modules, deterministic=False)
    action, extras = jax_policy(jnp.asarray(obs), jax.random.PRNGKey(2))
    np.testing.assert_array_equal(np.asarray(action), np.asarray(extras["raw_action"]))  # not squashed
    loc, scale = modules.policy(torch.from_numpy(obs))
    log_prob = modules.policy.log_prob(loc, scale, torch.from_numpy(np.array(extras["raw_action"])))
    np.testing.assert_allclose(np.asarray(extras["log_prob"]), log_prob.detach().numpy(), rtol=1e-4, atol=1e-4)
    sample, torch_extras = torch_policy(torch.from_numpy(obs))
    torch.testing.assert_close(sample, torch_extras["raw_action"])
