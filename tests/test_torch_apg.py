"""torch_analytic.apg: the JAX APG's policy gradient in PyTorch through the bridge's differentiable step, the same
gradient as the JAX APG's on identical inputs, and a run that learns; bad arguments named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from brax_bridge import TorchEnv
from brax_core.envs import Env, State
from brax_core.training.acme import running_statistics
from brax_core.training.agents.apg import networks as apg_networks
from brax_core.training.agents.apg import train as jax_apg
from torch_analytic import apg
from torch_analytic.networks import APGPolicy


class Glide(Env):
    """A damped point mass in the plane, paid ``1 - |position|`` per step: smooth in the action, so every reward's
    gradient reaches every earlier action. Starts uniformly in ``[-1, 1]^2`` at rest."""

    default_episode_length = 40

    def reset(self, rng: jax.Array) -> State:
        position = jax.random.uniform(rng, (2,), jnp.float32, -1.0, 1.0)
        obs = jnp.concatenate([position, jnp.zeros((2,), jnp.float32)])
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=obs, obs=obs, reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        position, velocity = state.obs[:2], state.obs[2:]
        velocity = 0.9 * velocity + 0.5 * action
        position = position + 0.1 * velocity
        obs = jnp.concatenate([position, velocity])
        return state.replace(pipeline_state=obs, obs=obs, reward=1.0 - jnp.sqrt(jnp.sum(position**2) + 1e-6))

    @property
    def observation_size(self) -> int:
        return 4

    @property
    def action_size(self) -> int:
        return 2


def _jax_noise(key: jax.Array, steps: int, shape: tuple[int, int]) -> tuple[np.ndarray, jax.Array]:
    """The standard normals the JAX APG's loss draws from ``key`` (its split at every step), in order."""
    noise = []
    for _ in range(steps):
        key, key_sample = jax.random.split(key)
        noise.append(np.asarray(jax.random.normal(key_sample, shape)))
    return np.stack(noise)


def test_the_policy_gradient_is_the_jax_apgs_on_identical_inputs():
    """Same env state, parameters and noise: the torch loss and its gradient through the bridge's differentiable
    step equal the JAX APG's ``make_loss`` and ``jax.grad`` of it, within 1e-4."""
    steps, num_envs = 12, 4
    env = TorchEnv(Glide(), num_envs, episode_length=40, differentiable=True, seed=3)
    observation = env.reset().get("observation")
    start = env.state
    network = apg_networks.make_apg_networks(env.observation_size, env.action_size)
    params = network.policy_network.init(jax.random.PRNGKey(1))
    normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((env.observation_size,), jnp.float32))
    key = jax.random.PRNGKey(7)
    loss_fn = jax_apg.make_loss(env.jax_env, apg_networks.make_inference_fn(network), steps)
    (jax_loss, _), jax_grad = jax.value_and_grad(loss_fn, has_aux=True)(params, normalizer, start, key)

    policy = APGPolicy(env.observation_size, env.action_size)
    policy.load_jax_params(params)
    noise = torch.from_numpy(_jax_noise(key, steps, (num_envs, env.action_size)))
    loss, observations, _ = apg.apg_loss(env, policy, observation, noise)
    loss.backward()

    assert observations.shape == (steps, num_envs, env.observation_size)
    assert float(loss.detach()) == pytest.approx(float(jax_loss), abs=1e-5)
    dense = [m for m in policy.mlp if isinstance(m, torch.nn.Linear)]
    norms = [m for m in policy.mlp if isinstance(m, torch.nn.LayerNorm)]
    grads = jax_grad["params"]
    largest = max(float(np.abs(np.asarray(g)).max()) for g in jax.tree.leaves(grads))
    assert largest > 1e-3  # the gradient is not trivially zero: it reached the policy through the physics
    for i, layer in enumerate(dense):
        np.testing.assert_allclose(layer.weight.grad.numpy().T, np.asarray(grads[f"hidden_{i}"]["kernel"]), atol=1e-4)
        np.testing.assert_allclose(layer.bias.grad.numpy(), np.asarray(grads[f"hidden_{i}"]["bias"]), atol=1e-4)
    for i, norm in enumerate(norms):
        np.testing.assert_allclose(norm.weight.grad.numpy(), np.asarray(grads[f"LayerNorm_{i}"]["scale"]), atol=1e-4)


def test_the_update_clips_as_the_jax_apg():
    """Brax's rule: the global norm scaled down to max_gradient_norm, then each component clipped to [-1, 1]."""
    policy = APGPolicy(4, 2, hidden_layer_sizes=(3,), layer_norm=False)
    for p in policy.parameters():
        p.grad = torch.full_like(p, 2.0)
    total = float(torch.sqrt(sum((p.grad**2).sum() for p in policy.parameters())))
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
    norm = apg.apg_step(policy, optimizer, 0.0, max_gradient_norm=total / 4)
    assert float(norm) == pytest.approx(total / 4, rel=1e-5)
    assert all(torch.allclose(p.grad, torch.full_like(p, 0.5)) for p in policy.parameters())
    for p in policy.parameters():
        p.grad = torch.full_like(p, 3.0)
    apg.apg_step(policy, optimizer, 0.0, max_gradient_norm=1e9)
    assert all(torch.equal(p.grad, torch.ones_like(p)) for p in policy.parameters())  # clipped per component


def test_a_short_run_learns_and_reports_the_jax_apgs_metrics():
    reports = []
    _, policy, metrics = apg.train(
        Glide(), episode_length=40, policy_updates=60, horizon_length=10, num_envs=16, num_evals=3,
        num_eval_envs=16, learning_rate=3e-3, seed=0, progress_fn=lambda epoch, m: reports.append((epoch, m)),
    )
    assert [epoch for epoch, _ in reports] == [0, 1, 2]
    untrained, trained = reports[0][1]["eval/episode_reward"], metrics["eval/episode_reward"]
    assert trained > untrained + 1.0, (untrained, trained)
    assert {"training/grad_norm", "training/params_norm", "training/sps", "eval/episode_reward"} <= set(metrics)
    assert isinstance(policy, APGPolicy)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(policy_updates=0), "policy_updates must be a positive integer"),
        (dict(horizon_length=1, action_repeat=2), r"horizon_length \(1\) must be at least action_repeat \(2\)"),
        (dict(adam_b=(0.9,)), r"adam_b must be a pair \(b1, b2\)"),
        (dict(schedule_decay=1.5), "schedule_decay must be"),
        (dict(environment="no_such_env"), "no_such_env"),
        (dict(progress_fn=lambda: None), "progress_fn"),
    ],
)
def test_bad_arguments_are_named_before_anything_compiles(changes, message):
    arguments = {"environment": Glide(), "episode_length": 10, "policy_updates": 2, **changes}
    with pytest.raises((ValueError, TypeError), match=message):
        apg.train(**arguments)


@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_training_episodes_may_be_shorter_than_the_evaluated_ones(trainer, monkeypatch):
    """``training_episode_length`` is the training envs' time limit in both trainers; evaluations still run whole
    episodes of ``episode_length``."""
    from brax_core.training.agents.apg.config import APGConfig
    from torch_analytic import common

    limits = []
    if trainer == "jax":
        original = jax_apg.wrap_for

        def recording(env, num_envs, key, **options):
            limits.append(options["episode_length"])
            return original(env, num_envs, key, **options)

        monkeypatch.setattr(jax_apg, "wrap_for", recording)
        train = jax_apg.train_from_config
    else:

        class RecordingTorchEnv(TorchEnv):
            def __init__(self, env, num_envs, **options):
                limits.append((options["episode_length"], options.get("differentiable", False)))
                super().__init__(env, num_envs, **options)

        monkeypatch.setattr(common, "TorchEnv", RecordingTorchEnv)
        train = apg.train_from_config
    config = APGConfig.from_flat(dict(num_timesteps=160, episode_length=40, training_episode_length=5,
                                      horizon_length=5, num_envs=4, num_evals=2, num_eval_envs=4))
    _, _, metrics = train(config, Glide())
    assert limits == ([5] if trainer == "jax" else [(5, True), (40, False)])
    assert metrics["eval/avg_episode_length"] == 40.0
