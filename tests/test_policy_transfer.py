"""torch_ppo.policy_transfer: JAX PPO policies as torch modules (exportable) and torch_ppo actors as JAX policies."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import linen

from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as jax_ppo
from torch_ppo import policy_transfer as transfer
from torch_ppo.networks import PPOModules, tanh_normal_log_prob
from torch_ppo.params import make_inference_fn, params_of

OBS, ACT = 5, 3


def _jax_params(activation=linen.swish, hidden=(16, 16)):
    nets = ppo_networks.make_ppo_networks(
        OBS,
        ACT,
        preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=hidden,
        value_hidden_layer_sizes=(8,),
        activation=activation,
    )
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(4), 3)
    stats = running_statistics.init_state(jax.ShapeDtypeStruct((OBS,), jnp.float32))
    # A non-trivial normaliser: transfer must include it.
    stats = running_statistics.update(stats, jax.random.normal(k3, (256, OBS)) * 4.0 - 2.0)
    params = ppo_networks.PPOTrainingParams(stats, nets.policy_network.init(k1), nets.value_network.init(k2))
    return nets, params


def _random_obs(n=64, seed=0):
    return np.random.default_rng(seed).normal(size=(n, OBS)).astype(np.float32) * 5.0


@pytest.mark.parametrize("activation", [linen.swish, linen.tanh, linen.relu])
def test_jax_policy_as_torch_module_gives_the_same_deterministic_actions(activation):
    nets, params = _jax_params(activation)
    obs = _random_obs()
    jax_policy = ppo_networks.make_inference_fn(nets)(params, deterministic=True)
    expected = np.asarray(jax_policy(jnp.asarray(obs), jax.random.PRNGKey(0))[0])
    module = transfer.jax_policy_to_torch(params, observation_size=OBS, action_size=ACT, activation=activation)
    assert isinstance(module, torch.nn.Module)
    with torch.no_grad():
        actions = module(torch.from_numpy(obs)).numpy()
    assert np.max(np.abs(actions - expected)) <= 1e-5
    # The pair (normalizer_params, policy_params) works as well as the full triple.
    pair_module = transfer.jax_policy_to_torch((params.normalizer_params, params.policy_params), activation=activation)
    torch.testing.assert_close(pair_module(torch.from_numpy(obs)), torch.from_numpy(actions), rtol=0, atol=0)
    assert np.abs(expected).max() > 0.05  # not a degenerate policy


def test_wrong_sizes_and_untransferable_activations_are_refused():
    _, params = _jax_params()
    with pytest.raises(ValueError, match="observation_size=7 does not match"):
        transfer.jax_policy_to_torch(params, observation_size=7, activation="swish")
    with pytest.raises(ValueError, match="activation must be one of"):
        transfer.jax_policy_to_torch(params, activation=lambda x: x)
    with pytest.raises(ValueError, match="without a torch counterpart"):
        transfer.jax_policy_to_torch(params, layer_norm=True, activation="swish")
    # A torch actor built on a function torch alone knows: refused, not rebuilt with another activation.
    modules = PPOModules(OBS, ACT, (16,), (8,), activation=lambda x: torch.tanh(x) * 2.0)
    for convert in (transfer.torch_policy_to_jax, transfer.jax_policy_factory):
        with pytest.raises(ValueError, match="activation must be one of .*; this actor's is <function"):
            convert(modules)


def test_torch_ppo_actor_as_jax_policy_matches_torch():
    torch.manual_seed(0)
    modules = PPOModules(OBS, ACT, (16, 16), (8,), activation="tanh", normalize_observations=True)
    modules.normalizer.update(torch.randn(300, OBS) * 3.0 + 1.0)
    obs = _random_obs(seed=1)
    make_policy = make_inference_fn(modules)
    torch_policy = make_policy(params_of(modules), deterministic=True)
    expected = torch_policy(torch.from_numpy(obs))[0].numpy()
    for source in (params_of(modules), modules, torch_policy):
        jax_policy = transfer.torch_policy_to_jax(source, activation="tanh" if source is not modules else None)
        actions = np.asarray(jax_policy(jnp.asarray(obs), jax.random.PRNGKey(0))[0])
        assert np.max(np.abs(actions - expected)) <= 1e-5
    # Stochastic: same extras as brax_core's make_policy, and the log-prob of the sample matches torch's formula.
    sample, extras = transfer.torch_policy_to_jax(modules, deterministic=False)(jnp.asarray(obs), jax.random.PRNGKey(1))
    assert set(extras) == {"log_prob", "raw_action", "distribution_params"}
    loc, scale = modules.policy(torch.from_numpy(obs))
    log_prob = tanh_normal_log_prob(loc, scale, torch.from_numpy(np.array(extras["raw_action"])))
    np.testing.assert_allclose(np.asarray(extras["log_prob"]), log_prob.detach().numpy(), rtol=1e-4, atol=1e-4)
    assert np.allclose(np.tanh(np.asarray(extras["raw_action"])), np.asarray(sample), atol=1e-6)


def test_params_round_trip_between_frameworks_is_exact():
    _, params = _jax_params()
    back = transfer.torch_params_to_jax(transfer.jax_params_to_torch(params))
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(back), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_plain_params_need_the_activation_both_ways():
    # Weights alone do not say which activation made them: guessing would give other actions without an error.
    _, params = _jax_params(activation=linen.tanh)
    with pytest.raises(ValueError, match="activation is required: these JAX parameters do not record"):
        transfer.jax_policy_to_torch(params)
    modules = PPOModules(OBS, ACT, (16, 16), (8,), activation="tanh", normalize_observations=True)
    with pytest.raises(ValueError, match="activation is required: these torch parameters do not record"):
        transfer.torch_policy_to_jax(params_of(modules))
    transfer.torch_policy_to_jax(modules)  # the modules record it


def test_transferred_module_exports_with_torch_export():
    _, params = _jax_params()
    module = transfer.jax_policy_to_torch(params, activation="swish")
    example = torch.from_numpy(_random_obs(8))
    batch = torch.export.Dim("batch", min=1, max=4096)
    exported = torch.export.export(module, (example,), dynamic_shapes={"observation": {0: batch}})
    other = torch.from_numpy(_random_obs(20, seed=5))
    torch.testing.assert_close(exported.module()(other), module(other), rtol=0, atol=1e-6)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_transferred_module_exports_to_onnx(tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    _, params = _jax_params()
    module = transfer.jax_policy_to_torch(params, activation="swish")
    path = tmp_path / "policy.onnx"
    example = torch.from_numpy(_random_obs(8))
    # The TorchScript-based exporter: the dynamo one needs onnxscript and a minute of tracing on this machine.
    torch.onnx.export(
        module,
        (example,),
        str(path),
        input_names=["observation"],
        output_names=["action"],
        dynamic_axes={"observation": {0: "batch"}},
        dynamo=False,
    )
    session = ort.InferenceSession(str(path))
    obs = _random_obs(12, seed=9)
    (actions,) = session.run(None, {"observation": obs})
    np.testing.assert_allclose(actions, module(torch.from_numpy(obs)).detach().numpy(), atol=1e-5)


def test_jax_checkpoint_path_is_accepted(tmp_path):
    factory = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=(8,),
        value_hidden_layer_sizes=(8,),
        activation=linen.tanh,
    )
    make_policy, params, _ = jax_ppo.train(
        "fast",
        num_timesteps=0,
        num_envs=4,
        batch_size=4,
        num_minibatches=2,
        normalize_observations=True,
        network_factory=factory,
        save_checkpoint_path=tmp_path / "ckpt",
    )
    module = transfer.jax_policy_to_torch(str(tmp_path / "ckpt"))
    obs = np.random.default_rng(2).normal(size=(6, 2)).astype(np.float32)
    expected = np.asarray(make_policy(params, deterministic=True)(jnp.asarray(obs), jax.random.PRNGKey(0))[0])
    np.testing.assert_allclose(module(torch.from_numpy(obs)).detach().numpy(), expected, atol=1e-5)
    assert module.network.mlp.activation_name == "tanh"
