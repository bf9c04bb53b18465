"""The torch SAC (``torch_sac``) against the JAX SAC: the same losses and the same SGD step on identical weights and
inputs, the replay buffer on the env's device, bootstrapping from ``final_observation`` where the time limit cut an
episode, learning on a MuJoCo env, exact resume from a checkpoint (replay buffer included), the policy rebuilt from
one, and bad input refused in the JAX SAC's words before anything compiles."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch
from tensordict import TensorDict

import torch_sac
from brax_core import envs
from brax_core.training import types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.sac import losses as jax_losses
from brax_core.training.agents.sac import networks as sac_networks
from brax_core.training.agents.sac import train as jax_sac
from brax_core.training.agents.sac.config import SACConfig
from brax_core.training.config import ConfigError
from torch_sac import losses
from torch_sac.networks import SACActor, TwinQ
from torch_sac.replay_buffer import ReplayBuffer
from torch_sac.train import METRICS, SACUpdate

OBS, ACT, BATCH = 5, 3, 64


def _jax_setup(layer_norm: bool, normalize: bool, seed: int = 0):
    """JAX SAC networks, their parameters and normaliser statistics, and a batch of transitions (a quarter of them
    cut by the time limit, a quarter ended by termination)."""
    preprocess = running_statistics.normalize if normalize else types.identity_observation_preprocessor
    network = sac_networks.make_sac_networks(
        OBS, ACT, preprocess_observations_fn=preprocess, hidden_layer_sizes=(16, 8),
        policy_network_layer_norm=layer_norm, q_network_layer_norm=layer_norm,
    )
    keys = jax.random.split(jax.random.PRNGKey(seed), 8)
    policy_params, q_params = network.policy_network.init(keys[0]), network.q_network.init(keys[1])
    target_q_params = jax.tree.map(lambda x: x + 0.01, q_params)
    observations = 2.0 * jax.random.normal(keys[2], (200, OBS)) + 1.0
    normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((OBS,), jnp.float32))
    if normalize:
        normalizer = running_statistics.update(normalizer, observations)
    truncation = (jnp.arange(BATCH) % 4 == 0).astype(jnp.float32)
    terminated = (jnp.arange(BATCH) % 4 == 1).astype(jnp.float32)
    transitions = types.Transition(
        observation=observations[:BATCH], action=jax.random.uniform(keys[3], (BATCH, ACT), minval=-1, maxval=1),
        reward=jax.random.normal(keys[4], (BATCH,)), discount=1.0 - jnp.maximum(truncation, terminated),
        next_observation=observations[BATCH:2 * BATCH],
        extras={"state_extras": {"truncation": truncation}, "policy_extras": {}},
    )
    return network, (policy_params, q_params, target_q_params, normalizer), transitions, observations


def _torch_copy(params, observations, layer_norm: bool, normalize: bool):
    """The torch networks with the JAX weights and the same statistics."""
    policy_params, q_params, target_q_params, _ = params
    actor = SACActor(OBS, ACT, (16, 8), "relu", layer_norm, normalize)
    actor.load_jax_params(policy_params)
    if normalize:
        actor.normalizer.update(torch.from_numpy(np.array(observations)))
    critic, target = TwinQ(OBS, ACT, (16, 8), "relu", layer_norm), TwinQ(OBS, ACT, (16, 8), "relu", layer_norm)
    critic.load_jax_params(q_params)
    target.load_jax_params(target_q_params)
    return actor, critic, target


def _torch_batch(transitions, actor: SACActor) -> TensorDict:
    t = lambda x: torch.from_numpy(np.array(x))  # noqa: E731
    with torch.no_grad():
        return TensorDict({
            "observation": actor.normalizer(t(transitions.observation)), "action": t(transitions.action),
            "reward": t(transitions.reward), "discount": t(transitions.discount),
            "truncation": t(transitions.extras["state_extras"]["truncation"]),
            "next_observation": actor.normalizer(t(transitions.next_observation)),
        }, batch_size=[BATCH])


def _noise(key) -> torch.Tensor:
    return torch.from_numpy(np.array(jax.random.normal(key, (BATCH, ACT), jnp.float32)))


@pytest.mark.parametrize("bootstrap_on_timeout", [True, False])
@pytest.mark.parametrize("layer_norm,normalize", [(False, False), (True, True)])
def test_each_loss_equals_the_jax_sacs_on_the_same_weights_inputs_and_draws(layer_norm, normalize,
                                                                            bootstrap_on_timeout):
    network, params, transitions, observations = _jax_setup(layer_norm, normalize)
    policy_params, q_params, target_q_params, normalizer = params
    alpha_loss, critic_loss, actor_loss = jax_losses.make_losses(
        network, reward_scaling=2.0, discounting=0.97, action_size=ACT, bootstrap_on_timeout=bootstrap_on_timeout
    )
    log_alpha, key = jnp.float32(-0.3), jax.random.PRNGKey(7)
    alpha = jnp.exp(log_alpha)
    expected = {
        "alpha": alpha_loss(log_alpha, policy_params, normalizer, transitions, key),
        "critic": critic_loss(q_params, policy_params, normalizer, target_q_params, alpha, transitions, key),
        "actor": actor_loss(policy_params, normalizer, q_params, alpha, transitions, key),
    }
    actor, critic, target = _torch_copy(params, observations, layer_norm, normalize)
    batch, noise = _torch_batch(transitions, actor), _noise(key)
    torch_alpha = torch.tensor(np.asarray(alpha))
    got = {
        "alpha": losses.alpha_loss(torch.tensor(-0.3), actor, batch, noise, losses.target_entropy(ACT)),
        "critic": losses.critic_loss(critic, target, actor, torch_alpha, batch, noise, 2.0, 0.97,
                                     bootstrap_on_timeout),
        "actor": losses.actor_loss(actor, critic, torch_alpha, batch, noise),
    }
    for name in expected:
        np.testing.assert_allclose(got[name].item(), float(expected[name]), rtol=1e-4, atol=1e-4, err_msg=name)


def test_one_sgd_step_moves_every_parameter_as_the_jax_sacs():
    """The whole step: the three gradients at the step's starting parameters, the three Adam steps (the
    temperature's at 3e-4) and the target critics' Polyak average, equal to the JAX ``make_sgd_step``'s."""
    network, params, transitions, observations = _jax_setup(layer_norm=True, normalize=True)
    policy_params, q_params, _, normalizer = params
    config = SACConfig.from_train_kwargs(dict(
        num_timesteps=1000, learning_rate=1e-3, discounting=0.97, reward_scaling=2.0, tau=0.05,
        normalize_observations=True, layer_norm=True, hidden_layer_sizes=(16, 8),
    ))
    alpha_opt, policy_opt, q_opt = optax.adam(3e-4), optax.adam(1e-3), optax.adam(1e-3)
    step = jax_sac.make_sgd_step(network, (alpha_opt, policy_opt, q_opt), reward_scaling=2.0, discounting=0.97,
                                 action_size=ACT, tau=0.05, bootstrap_on_timeout=True)
    log_alpha = jnp.zeros((), jnp.float32)
    state = jax_sac.TrainingState(
        policy_optimizer_state=policy_opt.init(policy_params), policy_params=policy_params,
        q_optimizer_state=q_opt.init(q_params), q_params=q_params, target_q_params=q_params,
        gradient_steps=types.UInt64(hi=0, lo=0), env_steps=types.UInt64(hi=0, lo=0),
        alpha_optimizer_state=alpha_opt.init(log_alpha), alpha_params=log_alpha, normalizer_params=normalizer,
    )
    key = jax.random.PRNGKey(3)
    (after, _), jax_metrics = step((state, key), transitions)
    _, key_alpha, key_critic, key_actor = jax.random.split(key, 4)

    update = SACUpdate(config, OBS, ACT, torch.device("cpu"))
    update.actor.load_jax_params(policy_params)
    update.actor.normalizer.update(torch.from_numpy(np.array(observations)))
    update.critic.load_jax_params(q_params)
    update.target_critic.load_state_dict(update.critic.state_dict())
    noise = torch.stack([_noise(key_alpha), _noise(key_critic), _noise(key_actor)])
    metrics = update.sgd_step(_torch_batch(transitions, update.actor), noise)

    for name, value in zip(METRICS, metrics.tolist(), strict=True):
        np.testing.assert_allclose(value, float(jax_metrics[name]), rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(update.log_alpha.item(), float(after.alpha_params), atol=1e-6)
    for module, jax_params in ((update.actor, after.policy_params), (update.critic, after.q_params),
                               (update.target_critic, after.target_q_params)):
        expected_module = SACActor(OBS, ACT, (16, 8), "relu", True, True) if module is update.actor else TwinQ(
            OBS, ACT, (16, 8), "relu", True)
        expected_module.load_jax_params(jax_params)
        for (name, got), (_, want) in zip(module.named_parameters(), expected_module.named_parameters(),
                                          strict=True):
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=2e-6,
                                       err_msg=name)


def test_a_transition_cut_by_the_time_limit_bootstraps_from_the_observation_it_reached():
    """Where the truncation flag decides the target: with bootstrapping the target is reward + gamma * V(next) (the
    next observation's value), without it the transition weighs nothing, as a terminated one keeps only its reward."""
    torch.manual_seed(0)
    actor, critic = SACActor(OBS, ACT, (8,)), TwinQ(OBS, ACT, (8,))
    batch = TensorDict({
        "observation": torch.randn(2, OBS), "action": torch.rand(2, ACT) * 2 - 1, "reward": torch.tensor([1.0, 1.0]),
        "discount": torch.zeros(2), "truncation": torch.tensor([1.0, 0.0]), "next_observation": torch.randn(2, OBS),
    }, batch_size=[2])
    noise, alpha = torch.randn(2, ACT), torch.tensor(0.2)
    with torch.no_grad():
        q = critic(batch["observation"], batch["action"])
        next_action, next_log_prob = losses.sampled_action(actor, batch["next_observation"], noise)
        next_value = critic(batch["next_observation"], next_action).min(-1).values - alpha * next_log_prob
        target = torch.tensor([1.0 + 0.9 * next_value[0], 1.0])
        bootstrapped = losses.critic_loss(critic, critic, actor, alpha, batch, noise, 1.0, 0.9, True)
        dropped = losses.critic_loss(critic, critic, actor, alpha, batch, noise, 1.0, 0.9, False)
    assert next_value[0].abs() > 1e-3  # the bootstrap changes the target
    torch.testing.assert_close(bootstrapped, 0.5 * (q - target[:, None]).square().mean())
    torch.testing.assert_close(dropped, 0.5 * torch.cat([torch.zeros(2), (q[1] - 1.0)]).square().mean())


def test_the_replay_buffer_keeps_the_newest_transitions_on_its_device_and_draws_only_those():
    buffer = ReplayBuffer(5, 2, 1, torch.device("cpu"))

    def batch(start: int, count: int) -> TensorDict:
        values = torch.arange(start, start + count, dtype=torch.float32)
        return TensorDict({"observation": values[:, None].expand(count, 2), "action": values[:, None],
                           "reward": values, "discount": values, "truncation": values,
                           "next_observation": values[:, None].expand(count, 2)}, batch_size=[count])

    buffer.insert(batch(0, 3))
    assert buffer.size == 3
    assert set(buffer.sample(200, torch.Generator().manual_seed(0))["reward"].tolist()) == {0.0, 1.0, 2.0}
    buffer.insert(batch(3, 4))  # wraps: 0 and 1 are overwritten
    assert buffer.size == 5
    assert buffer.ordered()["reward"].tolist() == [2.0, 3.0, 4.0, 5.0, 6.0]
    drawn = buffer.sample(500, torch.Generator().manual_seed(1))
    assert set(drawn["reward"].tolist()) == {2.0, 3.0, 4.0, 5.0, 6.0}
    assert drawn.device == torch.device("cpu") and drawn["observation"].shape == (500, 2)
    restored = ReplayBuffer(4, 2, 1, torch.device("cpu"))  # smaller: the newest four come back
    restored.load_state_dict(buffer.state_dict())
    assert restored.ordered()["reward"].tolist() == [3.0, 4.0, 5.0, 6.0]
    with pytest.raises(ValueError, match="does not fit a replay buffer of 5"):
        buffer.insert(batch(0, 6))


SMALL = dict(num_timesteps=2_048, episode_length=100, num_envs=16, num_eval_envs=16, batch_size=64,
             grad_updates_per_step=2, min_replay_size=256, num_evals=3, hidden_layer_sizes=(32, 32))


def test_an_interrupted_run_resumed_from_its_checkpoint_ends_as_the_unbroken_run(tmp_path):
    """Exact resume: the networks, temperature, optimisers, generator, envs and replay buffer all come back."""
    config = SACConfig.from_train_kwargs({**SMALL, "name": "inverted_pendulum"})
    _, unbroken, _ = torch_sac.train_from_config(config, save_checkpoint_path=tmp_path / "a")

    def stop_after_first(step, metrics):
        if step > 256:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        torch_sac.train_from_config(config, save_checkpoint_path=tmp_path / "b", progress_fn=stop_after_first)
    _, resumed, _ = torch_sac.train_from_config(config, save_checkpoint_path=tmp_path / "b",
                                                restore_checkpoint_path=tmp_path / "b")
    for (name, a), (_, b) in zip(unbroken.state_dict().items(), resumed.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)

    policy = torch_sac.load_policy(tmp_path / "a", device="cpu")
    observation = torch.randn(4, envs.get_environment("inverted_pendulum").observation_size)
    torch.testing.assert_close(policy(observation)[0], unbroken.mode(observation))
    with pytest.raises(ValueError, match="batch_size"):
        torch_sac.train_from_config(config.replace(batch_size=32), restore_checkpoint_path=tmp_path / "a")


def test_the_torch_sac_improves_inverted_pendulum_over_its_untrained_policy():
    """A MuJoCo env at a tiny size: the deterministic evaluation after training beats the one before it."""
    rewards = []
    config = SACConfig.from_train_kwargs(dict(
        name="inverted_pendulum", num_timesteps=12_288, episode_length=200, num_envs=64, num_eval_envs=32,
        batch_size=128, grad_updates_per_step=8, learning_rate=6e-4, discounting=0.97, reward_scaling=10.0,
        min_replay_size=1_024, num_evals=2, deterministic_eval=True, hidden_layer_sizes=(64, 64),
    ))
    torch_sac.train_from_config(config, progress_fn=lambda step, m: rewards.append(m["eval/episode_reward"]))
    assert len(rewards) == 2
    assert rewards[1] > rewards[0] + 30, rewards


@pytest.mark.parametrize("change,words", [
    (dict(min_replay_size=5_000, num_timesteps=4_096), "min_replay_size (5000) must be less than num_timesteps"),
    (dict(tau=0.0), "tau"),
    (dict(max_replay_size=100, batch_size=256), "max_replay_size (100) is smaller than one batch"),
])
def test_bad_settings_are_refused_in_the_same_words_by_both_sac_trainers(monkeypatch, change, words):
    def compiled(*args, **kwargs):
        raise AssertionError("compiled before refusing")

    monkeypatch.setattr(jax, "jit", compiled)
    kwargs = {"num_timesteps": 4_096, "episode_length": 100, "num_envs": 8, **change}
    with pytest.raises(ConfigError) as jax_error:
        jax_sac.train("fast", **kwargs)
    with pytest.raises(ConfigError) as torch_error:
        torch_sac.train("fast", **kwargs)
    assert words in str(jax_error.value)
    assert str(torch_error.value) == str(jax_error.value)


def test_an_env_with_dict_observations_is_refused_in_the_jax_sacs_words(monkeypatch):
    monkeypatch.setattr(jax, "jit", lambda *a, **k: pytest.fail("compiled"))
    env = envs.get_environment("fast", obs_mode="dict_state")
    with pytest.raises(ValueError) as jax_error:
        jax_sac.train(env, num_timesteps=1_000, episode_length=10)
    with pytest.raises(ValueError) as torch_error:
        torch_sac.train(env, num_timesteps=1_000, episode_length=10)
    assert "environment: SAC's networks take a flat observation vector" in str(jax_error.value)
    assert str(torch_error.value) == str(jax_error.value)


def test_the_torch_sac_trains_on_its_configs_device_and_refuses_an_absent_one():
    config = SACConfig.from_train_kwargs({**SMALL, "name": "fast", "num_evals": 0, "device": "cpu"})
    _, actor, metrics = torch_sac.train_from_config(config)
    assert next(actor.parameters()).device == torch.device("cpu")
    assert metrics["training/buffer_current_size"] == 2_048
    if not torch.cuda.is_available():
        with pytest.raises((ValueError, RuntimeError), match="cuda"):
            torch_sac.train_from_config(config.replace(device="cuda"))



@pytest.mark.slow
def test_the_inverted_pendulum_preset_balances_in_torch():
    # The JAX SAC's preset, unchanged (about ten minutes on a 2-core CPU; results/learning.md, "SAC").
    from brax_core.training.agents.sac import presets

    _, _, metrics = torch_sac.train_from_config(presets.PRESETS["inverted_pendulum"], "inverted_pendulum")
    assert metrics["eval/episode_reward"] >= 900
