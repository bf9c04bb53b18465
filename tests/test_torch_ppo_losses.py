"""torch_ppo's GAE and PPO loss against brax_core's on identical inputs: both trainers compute the same update."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from rollouts import torch_ppo_loss
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
    terms = torch_ppo_loss(modules, _as_tensordict(batch), noise, **hyper)
    terms.total_loss.backward()

    diagnostics = ("approx_kl", "old_approx_kl", "clip_fraction", "explained_variance")
    for name in ("policy_loss", "v_loss", "entropy_loss", *diagnostics):
        assert abs(float(getattr(terms, name).detach()) - float(jax_metrics[name])) <= 1e-4, name
    assert abs(float(terms.total_loss.detach()) - float(jax_total)) <= 1e-4
    # The diagnostics are informative on this batch (a behaviour policy unlike the current one, a critic that is not
    # exact), so their agreement is not that of two constants.
    assert 0.0 < float(terms.clip_fraction) < 1.0 and float(terms.old_approx_kl) != 0.0
    assert float(terms.explained_variance) < 1.0
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
            terms = torch_ppo_loss(modules, td[index], noise, **hyper)
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


# ---- Brax 0.14.2's further PPO options: the same numbers in both trainers


def test_quantile_huber_loss_matches_brax_core_and_a_hand_computed_value():
    # One step, one env, two quantiles (levels 0.25 and 0.75), target 1, kappa 1:
    # u = (1 - 0, 1 - 3) = (1, -2); Huber (0.5, 1 * (2 - 0.5) = 1.5); weights (0.25, |0.75 - 1| = 0.25).
    quantiles = np.array([[[0.0, 3.0]]], np.float32)
    targets = np.array([[1.0]], np.float32)
    expected = (0.25 * 0.5 + 0.25 * 1.5) / 2
    assert float(jax_losses.quantile_huber_loss(jnp.asarray(quantiles), jnp.asarray(targets), 1.0)) == expected
    got = torch_losses.quantile_huber_loss(torch.from_numpy(quantiles), torch.from_numpy(targets), 1.0)
    assert float(got) == expected
    rng = np.random.default_rng(11)
    quantiles = rng.normal(size=(T, B, 5)).astype(np.float32) * 2.0
    targets = rng.normal(size=(T, B)).astype(np.float32) * 2.0
    for kappa in (0.3, 2.0):
        j = jax_losses.quantile_huber_loss(jnp.asarray(quantiles), jnp.asarray(targets), kappa)
        t = torch_losses.quantile_huber_loss(torch.from_numpy(quantiles), torch.from_numpy(targets), kappa)
        np.testing.assert_allclose(float(t), float(j), rtol=1e-6)


def _behaviour(nets, params, b, rng):
    """The batch's collection-time values and (perturbed) behaviour distribution, for both trainers."""
    obs = jnp.asarray(b["obs"])
    value = nets.value_network.apply(params.normalizer_params, params.value_params, obs)
    value = value[0] if isinstance(value, tuple) else value
    b["value"] = (np.asarray(value) + rng.normal(size=value.shape) * 0.5).astype(np.float32)
    logits = np.asarray(nets.policy_network.apply(params.normalizer_params, params.policy_params, obs))
    b["logits"] = (logits + rng.normal(size=logits.shape) * 0.2).astype(np.float32)
    dist = nets.parametric_action_distribution.create_dist(jnp.asarray(b["logits"]))
    b["loc"], b["scale"] = np.asarray(dist.loc), np.asarray(dist.scale)
    return b


def _with_behaviour(transition, b):
    extras = {**transition.extras["policy_extras"], "value": jnp.asarray(b["value"]),
              "distribution_params": jnp.asarray(b["logits"])}
    return transition._replace(extras={**transition.extras, "policy_extras": extras})


def _td_with_behaviour(b):
    td = _as_tensordict(b)
    td.set("state_value", torch.from_numpy(b["value"]).unsqueeze(-1))
    td.set("loc", torch.from_numpy(b["loc"]))
    td.set("scale", torch.from_numpy(b["scale"]))
    return td


@pytest.mark.parametrize("distributional", [False, True], ids=["clipped_value", "quantile_critic"])
def test_value_loss_options_and_kl_match_brax_core(distributional):
    import flax.linen as linen

    nets = jax_networks.make_ppo_networks(
        OBS, ACT, preprocess_observations_fn=running_statistics.normalize, policy_hidden_layer_sizes=(16, 16),
        value_hidden_layer_sizes=(16, 16), activation=linen.swish, use_distributional_critic=distributional,
        num_quantiles=7,
    )
    k1, k2 = jax.random.split(jax.random.PRNGKey(4))
    stats = running_statistics.update(
        running_statistics.init_state(jax.ShapeDtypeStruct((OBS,), jnp.float32)), jax.random.normal(k1, (64, OBS))
    )
    params = jax_networks.PPOTrainingParams(stats, nets.policy_network.init(k1), nets.value_network.init(k2))
    rng = np.random.default_rng(12)
    batch = _behaviour(nets, params, _batch(rng, nets, params), rng)
    hyper = dict(
        _loss_hyperparameters(normalize_advantage=True, bootstrap_on_timeout=False),
        clipping_epsilon_value=0.1, use_distributional_critic=distributional,
    )
    key = jax.random.PRNGKey(3)
    loss_fn = lambda p: jax_losses.compute_ppo_loss(
        jax_losses.PPONetworkParams(p.policy_params, p.value_params), p.normalizer_params,
        _with_behaviour(_as_transition(batch), batch), key, nets, **hyper,
    )
    (jax_total, jax_metrics), jax_grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True, allow_int=True))(params)
    if not distributional:  # unclipped, the value loss differs: the comparison below exercises the clipping
        unclipped = jax_losses.compute_ppo_loss(
            jax_losses.PPONetworkParams(params.policy_params, params.value_params), params.normalizer_params,
            _as_transition(batch), key, nets, **{**hyper, "clipping_epsilon_value": None},
        )[1]
        assert abs(float(unclipped["v_loss"]) - float(jax_metrics["v_loss"])) > 1e-3

    modules = PPOModules(OBS, ACT, (16, 16), (16, 16), "swish", normalize_observations=True,
                         use_distributional_critic=distributional, num_quantiles=7)
    load_params(modules, jax_params_to_torch(params))
    noise = torch.from_numpy(np.array(jax.random.normal(key, (T, B, ACT))))
    terms = torch_ppo_loss(modules, _td_with_behaviour(batch), noise, **hyper)
    terms.total_loss.backward()
    for name in ("policy_loss", "v_loss", "entropy_loss", "approx_kl", "kl_mean"):
        assert abs(float(getattr(terms, name).detach()) - float(jax_metrics[name])) <= 1e-4, name
    assert abs(float(terms.total_loss.detach()) - float(jax_total)) <= 1e-4
    g_kernel = np.asarray(jax_grads.value_params["params"]["hidden_0"]["kernel"]).T
    np.testing.assert_allclose(modules.value.mlp.hidden_0.weight.grad.numpy(), g_kernel, atol=1e-4, rtol=1e-3)
    assert float(jax_metrics["kl_mean"]) > 1e-3 and float(jax_metrics["v_loss"]) > 1e-3


def test_adaptive_kl_rule_is_the_same_in_both_trainers_and_follows_brax():
    from brax_core.training.agents.ppo import optimizer as jax_optimizer
    from torch_ppo.update import adapt_learning_rate

    desired, low, high = 0.01, 1e-4, 1e-2
    cases = [  # (lr, kl, expected): lowered, clipped at the minimum, raised, clipped at the maximum, kept
        (3e-3, 0.03, 2e-3), (1.2e-4, 0.5, 1e-4), (2e-3, 0.001, 3e-3), (8e-3, 0.0001, 1e-2),
        (2e-3, 0.01, 2e-3), (2e-3, 0.0, 2e-3), (2e-3, 0.02, 2e-3),
    ]
    for lr, kl, expected in cases:
        j = float(jax_optimizer.adapt_learning_rate(jnp.float32(lr), jnp.float32(kl), desired, low, high))
        t = float(adapt_learning_rate(torch.tensor(lr), torch.tensor(kl), desired, low, high))
        assert j == pytest.approx(expected, rel=1e-6) and t == pytest.approx(expected, rel=1e-6), (lr, kl)
    # In the optimizer state (a chain with clipping, as train builds it): the next update uses the new rate.
    opt = jax_optimizer.make_optimizer(3e-3, 1.0, "ADAPTIVE_KL")
    state = opt.init({"w": jnp.zeros(2)})
    state, lr = jax_optimizer.adaptive_kl_learning_rate(state, jnp.float32(0.05), desired, low, high)
    assert float(lr) == pytest.approx(2e-3) and float(state[-1].hyperparams["learning_rate"]) == pytest.approx(2e-3)


@pytest.mark.parametrize("mode", ["welford", "ema"])
def test_normaliser_modes_std_eps_and_until_count_match_brax_core(mode):
    rng = np.random.default_rng(6)
    batches = [rng.normal(size=(n, OBS)).astype(np.float32) * 3.0 + 2.0 for n in (16, 24, 8, 40)]
    settings = dict(mode=mode, std_eps=0.05, until_count=50)
    stats = running_statistics.init_state(jax.ShapeDtypeStruct((OBS,), jnp.float32))
    from torch_training.normalizer import RunningNormalizer

    normaliser = RunningNormalizer(OBS, **settings)
    for x in batches:
        stats = running_statistics.update(stats, jnp.asarray(x), **settings)
        normaliser.update(torch.from_numpy(x))
        for name in ("mean", "summed_variance", "std"):
            np.testing.assert_allclose(getattr(normaliser, name).numpy(), np.asarray(getattr(stats, name)),
                                       rtol=1e-5, atol=1e-6, err_msg=name)
        assert float(normaliser.count) == float(stats.count)
    # 16 + 24 = 40 observations fit under 50; the third batch would make 48 (fits); the fourth 88 (frozen).
    held = np.concatenate(batches[:3])
    assert float(stats.count) == 48.0
    np.testing.assert_allclose(np.asarray(stats.mean), held.mean(0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(stats.std), np.sqrt(held.var(0) + 0.05), rtol=1e-5)


def test_one_adaptive_kl_training_step_with_clipped_values_and_an_ema_normaliser_matches():
    """The whole-step comparison above with ADAPTIVE_KL (rate changed per minibatch from the KL to the behaviour
    distribution, normaliser updated after SGD), the clipped value loss against the pre-SGD values, and the EMA
    normaliser with std_eps and until_count."""
    import functools

    import flax.linen as linen
    import optax

    from brax_core.training import gradients
    from brax_core.training.agents.ppo import optimizer as jax_optimizer
    from torch_ppo.params import params_of
    from torch_ppo.update import adapt_learning_rate

    nets, params = _jax_setup(linen.swish)
    rng = np.random.default_rng(8)
    batch = _batch(rng, nets, params)
    obs = jnp.asarray(batch["obs"])
    batch["value"] = np.asarray(nets.value_network.apply(params.normalizer_params, params.value_params, obs))
    batch["logits"] = np.asarray(nets.policy_network.apply(params.normalizer_params, params.policy_params, obs))
    dist = nets.parametric_action_distribution.create_dist(jnp.asarray(batch["logits"]))
    batch["loc"], batch["scale"] = np.asarray(dist.loc), np.asarray(dist.scale)
    hyper = dict(
        _loss_hyperparameters(normalize_advantage=True, bootstrap_on_timeout=False), clipping_epsilon_value=0.05
    )
    normaliser = dict(mode="ema", std_eps=0.01, until_count=1000)
    schedule = dict(desired_kl=2e-4, min_learning_rate=1e-4, max_learning_rate=2e-2)
    learning_rate, updates, minibatches = 3e-3, 2, 2
    rows = B // minibatches
    order = [rng.permutation(B) for _ in range(updates)]
    keys = [[jax.random.fold_in(jax.random.PRNGKey(9), 10 * u + m) for m in range(minibatches)] for u in range(updates)]

    # brax_core: the adaptive-KL minibatch step its trainer compiles; the normaliser after SGD.
    optimizer = jax_optimizer.make_optimizer(learning_rate, None, "ADAPTIVE_KL")
    loss_fn = functools.partial(jax_losses.compute_ppo_loss, ppo_network=nets, **hyper)
    grad_fn = gradients.loss_and_pgrad(loss_fn, pmap_axis_name=None, has_aux=True)

    @jax.jit
    def step(net_params, optimizer_state, data, key):
        (_, metrics), grads = grad_fn(net_params, params.normalizer_params, data, key)
        optimizer_state, lr = jax_optimizer.adaptive_kl_learning_rate(optimizer_state, metrics["kl_mean"], **schedule)
        updates_, optimizer_state = optimizer.update(grads, optimizer_state, net_params)
        return optax.apply_updates(net_params, updates_), optimizer_state, lr

    net_params = jax_losses.PPONetworkParams(params.policy_params, params.value_params)
    optimizer_state = optimizer.init(net_params)
    transition = _with_behaviour(_as_transition(batch), batch)
    jax_rates = []
    for u in range(updates):
        for m in range(minibatches):
            index = order[u][m * rows : (m + 1) * rows]
            data = jax.tree.map(lambda x, i=index: x[i], transition)
            net_params, optimizer_state, lr = step(net_params, optimizer_state, data, keys[u][m])
            jax_rates.append(float(lr))
    stats = running_statistics.update(params.normalizer_params, obs, **normaliser)

    # torch_ppo: its tensor-rate Adam with the same rule, the loss with the behaviour outputs, then the normaliser.
    modules = PPOModules(OBS, ACT, (16, 16), (16, 16, 16), "swish", normalize_observations=True)
    load_params(modules, jax_params_to_torch(params))
    modules.normalizer.set_update_rule(**normaliser)
    adam = torch.optim.Adam(modules.parameters(), lr=torch.tensor(learning_rate), eps=1e-8)
    td = _td_with_behaviour(batch)
    torch_rates = []
    for u in range(updates):
        for m in range(minibatches):
            index = torch.from_numpy(order[u][m * rows : (m + 1) * rows])
            noise = torch.from_numpy(np.array(jax.random.normal(keys[u][m], (T, rows, ACT))))
            terms = torch_ppo_loss(modules, td[index], noise, **hyper)
            adam.zero_grad()
            terms.total_loss.backward()
            lr = adam.param_groups[0]["lr"]
            lr.copy_(adapt_learning_rate(lr, terms.kl_mean, schedule["desired_kl"], schedule["min_learning_rate"],
                                         schedule["max_learning_rate"]))
            torch_rates.append(float(lr))
            adam.step()
    modules.normalizer.update(torch.from_numpy(batch["obs"]))

    np.testing.assert_allclose(torch_rates, jax_rates, rtol=1e-6)
    assert len(set(jax_rates)) > 1, jax_rates  # the schedule moved the rate
    expected = jax_params_to_torch(jax_networks.PPOTrainingParams(stats, net_params.policy, net_params.value))
    actual = params_of(modules)
    for part_expected, part_actual in zip(expected, actual, strict=True):
        for name in part_expected:
            torch.testing.assert_close(part_actual[name], part_expected[name], rtol=1e-4, atol=2e-5, msg=name)
