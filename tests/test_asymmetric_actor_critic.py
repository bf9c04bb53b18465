"""Asymmetric actor-critic on dict observations: the policy reads ``state``, the critic ``privileged_state``,
the normaliser keeps statistics per key, in both trainers."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from tensordict import TensorDict

import torch_ppo
from brax_bridge import TorchEnv
from brax_core import envs
from brax_core.envs.wrappers.dict_obs import DictObservationWrapper
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as jax_ppo
from torch_ppo import policy_transfer as transfer
from torch_ppo.networks import PPOModules
from torch_ppo.params import load_params
from torch_training.normalizer import DictNormalizer

# fast: observation [position, velocity]; privileged: that plus qpos and qvel (4 values).
SIZES = {"state": 2, "privileged_state": 4}
TINY = dict(
    num_timesteps=400, num_envs=4, batch_size=4, num_minibatches=2, unroll_length=5, episode_length=20,
    num_evals=1, num_eval_envs=4, normalize_observations=True, seed=1,
)


def _env():
    return DictObservationWrapper(envs.get_environment("fast"))


def test_wrapper_gives_dict_observations_and_sizes():
    env = _env()
    assert env.observation_size == {"state": (2,), "privileged_state": (4,)}
    state = env.step(env.reset(jax.random.PRNGKey(0)), jnp.ones((1,)))
    np.testing.assert_allclose(state.obs["privileged_state"][:2], state.obs["state"])
    np.testing.assert_allclose(state.obs["privileged_state"][2:], state.obs["state"])  # qpos, qvel of fast
    with pytest.raises(ValueError, match="state_key and privileged_key must differ"):
        DictObservationWrapper(envs.get_environment("fast"), privileged_key="state")


def test_dict_normaliser_matches_jax_statistics():
    rng = np.random.default_rng(0)
    batches = [{k: rng.normal(size=(5, 3, n)).astype(np.float32) * 2 + 1 for k, n in SIZES.items()} for _ in range(2)]
    stats = running_statistics.init_state({k: jax.ShapeDtypeStruct((n,), jnp.float32) for k, n in SIZES.items()})
    norm = DictNormalizer(SIZES)
    for b in batches:
        stats = running_statistics.update(stats, {k: jnp.asarray(v) for k, v in b.items()})
        norm.update(TensorDict({k: torch.from_numpy(v) for k, v in b.items()}, batch_size=[5, 3]))
    torch_stats = norm.stats()
    assert float(torch_stats["count"]) == float(stats.count) == 30.0
    for key in SIZES:
        np.testing.assert_allclose(torch_stats["mean"][key].numpy(), stats.mean[key], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(torch_stats["std"][key].numpy(), stats.std[key], rtol=1e-5, atol=1e-6)


def test_jax_trainer_reads_each_key_with_its_own_statistics():
    factory = functools.partial(
        ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,),
        value_obs_key="privileged_state",
    )
    make_policy, params, metrics = jax_ppo.train(_env(), network_factory=factory, **TINY)
    assert np.isfinite(metrics["eval/episode_reward"])
    assert set(params.normalizer_params.mean) == set(SIZES) and float(params.normalizer_params.count) > 0
    assert params.policy_params["params"]["hidden_0"]["kernel"].shape[0] == 2
    assert params.value_params["params"]["hidden_0"]["kernel"].shape[0] == 4
    # The policy normalises 'state' with its own statistics: shifting only the privileged input changes nothing.
    obs = {"state": jnp.ones((3, 2)), "privileged_state": jnp.zeros((3, 4))}
    shifted = {**obs, "privileged_state": obs["privileged_state"] + 5.0}
    policy = make_policy(params, deterministic=True)
    np.testing.assert_array_equal(policy(obs, None)[0], policy(shifted, None)[0])
    # The torch side reads the same params (per-key statistics included) and acts alike.
    modules = PPOModules(SIZES, 1, (8,), (8,), "swish", value_obs_key="privileged_state")
    load_params(modules, transfer.jax_params_to_torch(params))
    td = TensorDict({k: torch.from_numpy(np.array(v)) for k, v in obs.items()}, batch_size=[3])
    loc, _ = modules.policy(td)
    np.testing.assert_allclose(torch.tanh(loc).detach().numpy(), policy(obs, None)[0], rtol=1e-5, atol=1e-6)
    value = modules.value(td).squeeze(-1).detach().numpy()
    nets = ppo_networks.make_ppo_networks(
        {k: (n,) for k, n in SIZES.items()}, 1, preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,), value_obs_key="privileged_state",
    )
    expected = nets.value_network.apply(params.normalizer_params, params.value_params, obs)
    np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5)


def test_torch_trainer_on_dict_observations_with_a_normal_policy():
    env = TorchEnv(_env(), 4, episode_length=20, seed=1)
    assert isinstance(env.reset().get("observation"), TensorDict)
    make_policy, params, metrics = torch_ppo.train(
        _env(), policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,), value_obs_key="privileged_state",
        distribution_type="normal", noise_std_type="log", init_noise_std=0.5, **TINY,
    )
    assert np.isfinite(metrics["eval/episode_reward"])
    assert set(params.normalizer_params["mean"]) == set(SIZES) and float(params.normalizer_params["count"]) > 0
    assert params.policy_params["mlp.hidden_0.weight"].shape == (8, 2)
    assert params.value_params["hidden_0.weight"].shape == (8, 4)
    # Training moved the log-std away from log(0.5).
    assert not torch.allclose(params.policy_params["std_logparam"], torch.full((1,), float(np.log(0.5))))
    obs = env.reset().get("observation")
    action, extras = make_policy(params)(obs)
    torch.testing.assert_close(action, extras["raw_action"])  # 'normal': actions are the samples


def test_torch_trainer_refuses_unknown_observation_keys():
    with pytest.raises(ValueError, match=r"value_obs_key='privileged' is not among the env's observation keys"):
        torch_ppo.train(_env(), value_obs_key="privileged", **TINY)
