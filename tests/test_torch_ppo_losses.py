"""torch_ppo's GAE and PPO loss against brax_core's on identical inputs: both trainers compute the same update."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from brax_core.training import types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import losses as jax_losses
from brax_core.training.agents.ppo import networks as jax_networks
from torch_ppo import losses as torch_losses
from torch_ppo.networks import PPOModules, tanh_normal_entropy, tanh_normal_log_prob
from torch_ppo.params import load_params
from torch_ppo.policy_transfer import jax_params_to_torch

T, B, OBS, ACT = 6, 8, 3, 2


def _episode_flags(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Random, mutually exclusive termination / truncation flags (float32 0/1)."""
    u = rng.random(shape)
    termination = (u < 0.15).astype(np.float32)
    truncation = ((u >= 0.15) & (u < 0.3)).astype(np.float32)
    return termination, truncation


@pytest.mark.parametrize("bootstrapped", [False, True])
def test_gae_matches_brax_core(bootstrapped):
    rng = np.random.default_rng(0)
    termination, truncation = _episode_flags(rng, (T, B))
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    values = rng.normal(size=(T, B)).astype(np.float32)
    if bootstrapped:
        nxt = rng.normal(size=(T, B)).astype(np.float32)
        args = (truncation, termination, rewards, values, nxt, 0.9, 0.97)
        jax_fn, torch_fn = jax_losses.compute_gae_bootstrapped, torch_losses.compute_gae_bootstrapped
    else:
        boot = rng.normal(size=(B,)).astype(np.float32)
        args = (truncation, termination, rewards, values, boot, 0.9, 0.97)
        jax_fn, torch_fn = jax_losses.compute_gae, torch_losses.compute_gae
    vs_j, adv_j = jax_fn(*[jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args])
    vs_t, adv_t = torch_fn(*[torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args])
    np.testing.assert_allclose(vs_t.numpy(), np.asarray(vs_j), atol=1e-5, rtol=0)
    np.testing.assert_allclose(adv_t.numpy(), np.asarray(adv_j), atol=1e-5, rtol=0)
    # Not a vacuous comparison: the flags actually cut traces.
    assert truncation.any() and termination.any()


def _jax_setup(activation):
    nets = jax_networks.make_ppo_networks(
        OBS,
        ACT,
        preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=(16, 16),
        value_hidden_layer_sizes=(16, 16, 16),
        activation=activation,
    )
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    stats = running_statistics.init_state(jax.ShapeDtypeStruct((OBS,), jnp.float32))
    stats = running_statistics.update(stats, jax.random.normal(k1, (64, OBS)) * 3.0 + 1.0)
    params = jax_networks.PPOTrainingParams(stats, nets.policy_network.init(k1), nets.value_network.init(k2))
    return nets, params


def _batch(rng: np.random.Generator, nets, params):
    """A [B, T] batch whose behaviour log-probs come from a perturbed policy (so ratios differ from 1)."""
    obs = rng.normal(size=(B, T, OBS)).astype(np.float32) * 2.0
    final_obs = rng.normal(size=(B, T, OBS)).astype(np.float32) * 2.0
    raw_action = rng.normal(size=(B, T, ACT)).astype(np.float32)
    logits = nets.policy_network.apply(params.normalizer_params, params.policy_params, jnp.asarray(obs))
    log_prob = np.asarray(nets.parametric_action_distribution.log_prob(logits, jnp.asarray(raw_action)))
    log_prob = (log_prob + rng.normal(size=log_prob.shape) * 0.3).astype(np.float32)
    termination, truncation = _episode_flags(rng, (B, T))
    reward = rng.random((B, T)).astype(np.float32)
    return dict(
        obs=obs,
        final_obs=final_obs,
        raw_action=raw_action,
        log_prob=log_prob,
        reward=reward,
        termination=termination,
        truncation=truncation,
    )


def _loss_hyperparameters(normalize_advantage: bool, bootstrap_on_timeout: bool) -> dict:
    """The loss settings both trainers get in these comparisons (reward scaling and entropy far from 1 and 0)."""
    return dict(
        entropy_cost=0.01,
        discounting=0.97,
        reward_scaling=10.0,
        gae_lambda=0.95,
        clipping_epsilon=0.2,
        normalize_advantage=normalize_advantage,
        vf_loss_coefficient=0.5,
        bootstrap_on_timeout=bootstrap_on_timeout,
    )


def _as_transition(b):
    return types.Transition(
        observation=jnp.asarray(b["obs"]),
        action=jnp.tanh(jnp.asarray(b["raw_action"])),
        reward=jnp.asarray(b["reward"]),
        discount=jnp.asarray(1.0 - np.maximum(b["termination"], b["truncation"])),
        next_observation=jnp.asarray(b["final_obs"]),
        extras={
            "policy_extras": {"raw_action": jnp.asarray(b["raw_action"]), "log_prob": jnp.asarray(b["log_prob"])},
            "state_extras": {"truncation": jnp.asarray(b["truncation"])},
        },
    )


def _as_tensordict(b):
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
        batch_size=[B, T],
    )


@pytest.mark.parametrize(
    "activation,bootstrap_on_timeout,normalize_advantage",
    [("swish", False, True), ("tanh", True, False)],
)
def test_ppo_loss_matches_brax_core_with_copied_weights(activation, bootstrap_on_timeout, normalize_advantage):
    import flax.linen as linen

    nets, params = _jax_setup(getattr(linen, activation))
    batch = _batch(np.random.default_rng(2), nets, params)
    hyper = _loss_hyperparameters(normalize_advantage, bootstrap_on_timeout)
    key = jax.random.PRNGKey(7)
    loss_fn = lambda p: jax_losses.compute_ppo_loss(
        jax_losses.PPONetworkParams(p.policy_params, p.value_params),
        p.normalizer_params,
        _as_transition(batch),
        key,
        nets,
        **hyper,
    )
    (jax_total, jax_metrics), jax_grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True, allow_int=True))(params)

    modules = PPOModules(OBS, ACT, (16, 16), (16, 16, 16), activation, normalize_observations=True)
    load_params(modules, jax_params_to_torch(params))
    # The JAX entropy estimate samples normal(key, loc.shape) in time-major layout: hand torch that same noise.
    noise = torch.from_numpy(np.array(jax.random.normal(key, (T, B, ACT))))
    terms = torch_losses.compute_ppo_loss(modules, _as_tensordict(batch), noise, **hyper)
    terms.total_loss.backward()

    for name in ("policy_loss", "v_loss", "entropy_loss", "approx_kl"):
        assert abs(float(getattr(terms, name).detach()) - float(jax_metrics[name])) <= 1e-4, name
    assert abs(float(terms.total_loss.detach()) - float(jax_total)) <= 1e-4
    # Gradients agree too (same loss, same weights), on the first policy and value layers.
    pairs = ((modules.policy.mlp, jax_grads.policy_params), (modules.value.mlp, jax_grads.value_params))
    for torch_mlp, jax_tree in pairs:
        g_kernel = np.asarray(jax_tree["params"]["hidden_0"]["kernel"]).T
        np.testing.assert_allclose(torch_mlp.hidden_0.weight.grad.numpy(), g_kernel, atol=1e-4, rtol=1e-3)
    assert float(jax_metrics["entropy_loss"]) != 0.0 and abs(float(jax_metrics["policy_loss"])) > 1e-3


def test_tanh_normal_log_prob_and_entropy_match_brax_core_distribution():
    from brax_core.training.distribution import NormalTanhDistribution

    dist = NormalTanhDistribution(event_size=ACT)
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(50, 2 * ACT)).astype(np.float32) * 3.0
    raw = rng.normal(size=(50, ACT)).astype(np.float32) * 5.0  # large |x| exercises the stable jacobian
    key = jax.random.PRNGKey(0)
    loc = torch.from_numpy(logits[:, :ACT])
    scale = torch.nn.functional.softplus(torch.from_numpy(logits[:, ACT:])) + 0.001
    lp = tanh_normal_log_prob(loc, scale, torch.from_numpy(raw))
    np.testing.assert_allclose(lp.numpy(), np.asarray(dist.log_prob(jnp.asarray(logits), raw)), rtol=1e-5, atol=1e-4)
    noise = torch.from_numpy(np.array(jax.random.normal(key, (50, ACT))))
    ent = tanh_normal_entropy(loc, scale, noise)
    np.testing.assert_allclose(ent.numpy(), np.asarray(dist.entropy(jnp.asarray(logits), key)), rtol=1e-5, atol=1e-5)
    assert torch.isfinite(lp).all()


def test_one_training_step_gives_the_same_normaliser_and_parameters():
    """One whole training step on one batch: fold the batch's observations into the normaliser, then
    ``num_updates_per_batch`` passes of Adam steps over ``num_minibatches`` minibatches in a given order, with the
    optimiser and loss each trainer uses. Same initial weights, same minibatch order, same entropy noise."""
    import functools

    import flax.linen as linen
    import optax

    from brax_core.training import gradients
    from torch_ppo.params import params_of

    nets, params = _jax_setup(linen.swish)
    rng = np.random.default_rng(5)
    batch = _batch(rng, nets, params)
    hyper = _loss_hyperparameters(normalize_advantage=True, bootstrap_on_timeout=False)
    learning_rate, updates, minibatches = 3e-3, 2, 2
    rows = B // minibatches
    order = [rng.permutation(B) for _ in range(updates)]
    keys = [[jax.random.fold_in(jax.random.PRNGKey(9), 10 * u + m) for m in range(minibatches)] for u in range(updates)]

    modules = PPOModules(OBS, ACT, (16, 16), (16, 16, 16), "swish", normalize_observations=True)
    load_params(modules, jax_params_to_torch(params))

    # brax_core: the normaliser update and gradient step its trainer compiles.
    stats = running_statistics.update(params.normalizer_params, jnp.asarray(batch["obs"]))
    optimizer = optax.adam(learning_rate)
    loss_fn = functools.partial(jax_losses.compute_ppo_loss, ppo_network=nets, **hyper)
    update = jax.jit(gradients.gradient_update_fn(loss_fn, optimizer, pmap_axis_name=None, has_aux=True))
    net_params = jax_losses.PPONetworkParams(params.policy_params, params.value_params)
    optimizer_state = optimizer.init(net_params)
    transition = _as_transition(batch)
    for u in range(updates):
        for m in range(minibatches):
            index = order[u][m * rows : (m + 1) * rows]
            data = jax.tree.map(lambda x, i=index: x[i], transition)
            _, net_params, optimizer_state = update(
                net_params, stats, data, keys[u][m], optimizer_state=optimizer_state
            )

    # torch_ppo: its normaliser update, Adam and loss on the same minibatches.
    modules.normalizer.update(torch.from_numpy(batch["obs"]))
    adam = torch.optim.Adam(modules.parameters(), lr=learning_rate, eps=1e-8)
    td = _as_tensordict(batch)
    for u in range(updates):
        for m in range(minibatches):
            index = torch.from_numpy(order[u][m * rows : (m + 1) * rows])
            noise = torch.from_numpy(np.array(jax.random.normal(keys[u][m], (T, rows, ACT))))
            terms = torch_losses.compute_ppo_loss(modules, td[index], noise, **hyper)
            adam.zero_grad()
            terms.total_loss.backward()
            adam.step()

    expected = jax_params_to_torch(jax_networks.PPOTrainingParams(stats, net_params.policy, net_params.value))
    actual = params_of(modules)
    for part_expected, part_actual in zip(expected, actual, strict=True):
        assert part_expected.keys() == part_actual.keys()
        for name in part_expected:
            torch.testing.assert_close(part_actual[name], part_expected[name], rtol=1e-4, atol=2e-5, msg=name)
    # Not vacuous: the step moved the weights by far more than the tolerance.
    start = jax_params_to_torch(params).policy_params
    moved = max(float((actual.policy_params[k] - start[k]).abs().max()) for k in start)
    assert moved > 1e-3, moved
