"""PPO maths: GAE against independent loop implementations, the loss terms, and the running normaliser."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_core.training import types
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import losses
from brax_core.training.agents.ppo import networks as ppo_networks


def _random_rollout(seed: int, T: int = 12, B: int = 5):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    values = rng.normal(size=(T, B)).astype(np.float32)
    bootstrap = rng.normal(size=(B,)).astype(np.float32)
    done = (rng.random((T, B)) < 0.25).astype(np.float32)
    truncation = done * (rng.random((T, B)) < 0.5).astype(np.float32)
    termination = done * (1.0 - truncation)
    return truncation, termination, rewards, values, bootstrap


def _reference_gae(truncation, termination, rewards, values, bootstrap, lam, gamma):
    """Forward sums of discounted TD errors (an O(T^2) loop, float64), Brax's truncation rule."""
    T, B = rewards.shape
    next_values = np.concatenate([values[1:], bootstrap[None]], 0).astype(np.float64)
    delta = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            if truncation[t, b]:
                continue  # time-limit steps carry no TD error
            delta[t, b] = rewards[t, b] + gamma * (1 - termination[t, b]) * next_values[t, b] - values[t, b]
    vs = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            total, weight = 0.0, 1.0
            for k in range(t, T):
                total += weight * delta[k, b]
                if termination[k, b] or truncation[k, b]:
                    break  # the episode ended at k: later errors belong to another episode
                weight *= gamma * lam
            vs[t, b] = values[t, b] + total
    adv = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            if truncation[t, b]:
                continue
            following = vs[t + 1, b] if t + 1 < T else bootstrap[b]
            adv[t, b] = rewards[t, b] + gamma * (1 - termination[t, b]) * following - values[t, b]
    return vs, adv


@pytest.mark.parametrize("seed,lam,gamma", [(0, 0.95, 0.99), (1, 1.0, 0.9), (2, 0.0, 0.97)])
def test_compute_gae_matches_loop_reference(seed, lam, gamma):
    args = _random_rollout(seed)
    vs, adv = losses.compute_gae(*map(jnp.asarray, args), lambda_=lam, discount=gamma)
    ref_vs, ref_adv = _reference_gae(*args, lam, gamma)
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)


def test_gae_advantage_uses_value_targets_not_raw_values():
    # Two steps, no episode end: adv_0 = r_0 + γ·vs_1 − V_0, with vs_1 = r_1 + γ·bootstrap.
    zeros = jnp.zeros((2, 1))
    rewards = jnp.array([[1.0], [2.0]])
    values = jnp.array([[0.5], [3.0]])
    vs, adv = losses.compute_gae(zeros, zeros, rewards, values, jnp.array([4.0]), lambda_=0.0, discount=0.5)
    np.testing.assert_allclose(vs[:, 0], [1.0 + 0.5 * 3.0, 2.0 + 0.5 * 4.0])
    np.testing.assert_allclose(adv[:, 0], [1.0 + 0.5 * 4.0 - 0.5, 2.0 + 0.5 * 4.0 - 3.0])


def test_bootstrapped_gae_keeps_time_limit_steps():
    truncation, termination, rewards, values, bootstrap = _random_rollout(3)
    rng = np.random.default_rng(4)
    final_values = rng.normal(size=values.shape).astype(np.float32)
    # next_values: V(obs_{t+1}) inside an episode, V(final_obs_t) where the time limit hit.
    shifted = np.concatenate([values[1:], bootstrap[None]], 0)
    next_values = np.where(truncation > 0, final_values, shifted)
    lam, gamma = 0.9, 0.95
    vs, adv = losses.compute_gae_bootstrapped(
        *map(jnp.asarray, (truncation, termination, rewards, values, next_values)), lambda_=lam, discount=gamma
    )
    # Reference: a time-limit step is an ordinary step whose successor value is V(final_obs), with the trace cut.
    T, B = rewards.shape
    ref_vs = np.zeros((T, B))
    for b in range(B):
        acc = 0.0
        for t in reversed(range(T)):
            cont = gamma * (1 - termination[t, b])
            delta = rewards[t, b] + cont * next_values[t, b] - values[t, b]
            acc = delta + cont * (1 - truncation[t, b]) * lam * acc
            ref_vs[t, b] = values[t, b] + acc
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-5, atol=1e-5)
    trunc_idx = truncation > 0
    assert trunc_idx.any()
    expected = rewards + gamma * (1 - termination) * next_values - values
    np.testing.assert_allclose(np.asarray(adv)[trunc_idx], expected[trunc_idx], rtol=1e-5, atol=1e-5)
    # Without time limits both GAE forms agree.
    no_trunc = np.zeros_like(truncation)
    a = losses.compute_gae(no_trunc, termination, rewards, values, bootstrap, lambda_=lam, discount=gamma)
    b_ = losses.compute_gae_bootstrapped(no_trunc, termination, rewards, values, shifted, lambda_=lam, discount=gamma)
    np.testing.assert_allclose(a[0], b_[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a[1], b_[1], rtol=1e-5, atol=1e-5)


@functools.cache
def _loss_inputs(B=4, T=6, obs=3, act=2, seed=0):
    net = ppo_networks.make_ppo_networks(obs, act, policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,))

    @jax.jit
    def build(key):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        params = losses.PPONetworkParams(net.policy_network.init(k1), net.value_network.init(k2))
        normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((obs,), jnp.float32))
        observations = jax.random.normal(k3, (B, T + 1, obs))
        raw = jax.random.normal(k4, (B, T, act))
        done = jnp.zeros((B, T)).at[1, 2].set(1.0).at[2, 4].set(1.0)
        truncation = jnp.zeros((B, T)).at[2, 4].set(1.0)
        data = types.Transition(
            observation=observations[:, :-1],
            action=jnp.tanh(raw),
            reward=jnp.ones((B, T)) * 0.5,
            discount=1.0 - done,
            next_observation=observations[:, 1:],
            extras={
                "policy_extras": {"raw_action": raw, "log_prob": jnp.full((B, T), -1.5)},
                "state_extras": {"truncation": truncation},
            },
        )
        return params, normalizer, data

    return (net, *build(jax.random.PRNGKey(seed)))


def test_ppo_loss_terms_follow_their_definitions():
    net, params, normalizer, data = _loss_inputs()
    kw = dict(
        entropy_cost=0.01,
        discounting=0.97,
        reward_scaling=2.0,
        gae_lambda=0.9,
        clipping_epsilon=0.2,
        vf_loss_coefficient=0.7,
    )

    @jax.jit
    def loss_and_reference(params, normalizer, data):
        total, metrics = losses.compute_ppo_loss(params, normalizer, data, jax.random.PRNGKey(1), net, **kw)
        tm = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), data)
        values = net.value_network.apply(normalizer, params.value, tm.observation)
        bootstrap = net.value_network.apply(normalizer, params.value, tm.next_observation[-1])
        trunc = tm.extras["state_extras"]["truncation"]
        termination = (1 - tm.discount) * (1 - trunc)
        vs, adv = losses.compute_gae(trunc, termination, tm.reward * 2.0, values, bootstrap, 0.9, 0.97)
        logits = net.policy_network.apply(normalizer, params.policy, tm.observation)
        log_prob = net.parametric_action_distribution.log_prob(logits, tm.extras["policy_extras"]["raw_action"])
        ratio = jnp.exp(log_prob + 1.5)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        expected = {
            "v_loss": jnp.mean((vs - values) ** 2) * 0.5 * 0.7,
            "policy_loss": -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv)),
        }
        return total, metrics, expected

    total, metrics, expected = loss_and_reference(params, normalizer, data)
    assert set(metrics) >= {"total_loss", "policy_loss", "v_loss", "entropy_loss", "approx_kl"}
    np.testing.assert_allclose(total, metrics["policy_loss"] + metrics["v_loss"] + metrics["entropy_loss"], rtol=1e-6)
    np.testing.assert_allclose(metrics["v_loss"], expected["v_loss"], rtol=1e-5)
    np.testing.assert_allclose(metrics["policy_loss"], expected["policy_loss"], rtol=1e-5)
    assert float(metrics["entropy_loss"]) != 0.0
    assert float(metrics["approx_kl"]) >= 0.0


def test_default_value_loss_factor_is_a_quarter():
    net, params, normalizer, data = _loss_inputs(seed=3)
    key = jax.random.PRNGKey(0)
    _, m_default = jax.jit(functools.partial(losses.compute_ppo_loss, ppo_network=net))(params, normalizer, data, key)
    one = functools.partial(losses.compute_ppo_loss, ppo_network=net, vf_loss_coefficient=1.0)
    _, m_one = jax.jit(one)(params, normalizer, data, key)
    np.testing.assert_allclose(m_default["v_loss"] * 2.0, m_one["v_loss"], rtol=1e-6)


def test_bootstrap_on_timeout_changes_only_truncated_targets():
    net, params, normalizer, data = _loss_inputs(seed=5)

    @functools.partial(jax.jit, static_argnames="bootstrap")
    def loss(data, bootstrap):
        return losses.compute_ppo_loss(
            params, normalizer, data, jax.random.PRNGKey(0), net, bootstrap_on_timeout=bootstrap
        )[1]

    brax_style, bootstrapped = loss(data, False), loss(data, True)
    assert abs(float(brax_style["v_loss"]) - float(bootstrapped["v_loss"])) > 1e-6
    no_trunc = data._replace(extras={**data.extras, "state_extras": {"truncation": jnp.zeros_like(data.reward)}})
    a, b = loss(no_trunc, False), loss(no_trunc, True)
    for key in ("v_loss", "policy_loss"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-7)


def test_running_statistics_streaming_equals_one_pass():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=(n, 7, 3)).astype(np.float32) for n in (5, 1, 9)]
    state = running_statistics.init_state(jax.ShapeDtypeStruct((3,), jnp.float32))
    update = jax.jit(running_statistics.update)
    for chunk in chunks:
        state = update(state, jnp.asarray(chunk))
    everything = np.concatenate([c.reshape(-1, 3) for c in chunks]).astype(np.float64)
    assert float(state.count) == everything.shape[0]
    np.testing.assert_allclose(state.mean, everything.mean(0), rtol=1e-5)
    np.testing.assert_allclose(state.std, everything.std(0), rtol=1e-4)
    x = jnp.asarray(chunks[0])
    np.testing.assert_allclose(
        running_statistics.denormalize(running_statistics.normalize(x, state), state), x, rtol=1e-5, atol=1e-5
    )
    clipped = running_statistics.normalize(x * 100.0, state, max_abs_value=5.0)
    assert float(jnp.max(jnp.abs(clipped))) <= 5.0


def test_running_statistics_of_nothing_stay_as_they_are():
    """Observations that are all pixel views leave the normaliser nothing to count (Brax's dict_pixels mode)."""
    state = running_statistics.init_state({})
    for mode in running_statistics.MODES:
        updated = running_statistics.update(state, {}, mode=mode)
        assert updated is state and float(updated.count) == 0.0


def test_running_statistics_weights_clip_and_cross_device_sum():
    state = running_statistics.init_state({"a": jnp.zeros((2,))})
    batch = {"a": jnp.array([[1.0, 1.0], [3.0, 1.0], [100.0, 1.0]])}
    s = jax.jit(running_statistics.update)(state, batch, weights=jnp.array([1.0, 1.0, 0.0]))
    np.testing.assert_allclose(s.mean["a"], [2.0, 1.0])
    np.testing.assert_allclose(s.std["a"], [1.0, 1e-6])  # a constant feature is clipped at std_min_value
    # Per-device batches summed over a named axis give the statistics of the union.
    shards = jnp.arange(24.0).reshape(2, 6, 2)
    per_device = jax.vmap(lambda b: running_statistics.update(state, {"a": b}, pmap_axis_name="i"), axis_name="i")
    merged = jax.jit(per_device)(shards)
    whole = jax.jit(running_statistics.update)(state, {"a": shards.reshape(12, 2)})
    for leaf_merged, leaf_whole in zip(jax.tree.leaves(merged), jax.tree.leaves(whole), strict=True):
        np.testing.assert_allclose(leaf_merged[0], leaf_whole, rtol=1e-6)
        np.testing.assert_allclose(leaf_merged[1], leaf_whole, rtol=1e-6)
    with pytest.raises(ValueError, match="statistics shape"):
        running_statistics.update(state, {"a": jnp.zeros((4, 3))})
