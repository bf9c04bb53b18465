"""PPO networks: layer layout, the tanh-normal policy's maths, activations and the params make_policy accepts."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen

from brax_core.training import distribution
from brax_core.training.acme import running_statistics
from brax_core.training.agents.ppo import networks as ppo_networks


def _custom_activation(x):
    return x * jax.nn.sigmoid(2.0 * x)


def _mlp_reference(variables, x, activation):
    layers = variables["params"]
    n = len(layers)
    for i in range(n):
        x = x @ layers[f"hidden_{i}"]["kernel"] + layers[f"hidden_{i}"]["bias"]
        if i < n - 1:
            x = activation(x)
    return x


@pytest.mark.parametrize(
    "activation",
    [
        linen.relu,
        linen.tanh,
        linen.sigmoid,
        linen.swish,
        jax.nn.silu,
        linen.elu,
        linen.gelu,
        linen.leaky_relu,
        functools.partial(jax.nn.leaky_relu, negative_slope=0.3),
        _custom_activation,
    ],
)
def test_layer_layout_and_any_activation(activation):
    net = ppo_networks.make_ppo_networks(
        3, 2, policy_hidden_layer_sizes=(5, 4), value_hidden_layer_sizes=(6,), activation=activation
    )
    key = jax.random.PRNGKey(0)
    pp, vp = jax.jit(net.policy_network.init)(key), jax.jit(net.value_network.init)(key)
    shapes = jax.tree.map(jnp.shape, pp)
    assert shapes == {
        "params": {
            "hidden_0": {"kernel": (3, 5), "bias": (5,)},
            "hidden_1": {"kernel": (5, 4), "bias": (4,)},
            "hidden_2": {"kernel": (4, 4), "bias": (4,)},
        }
    }
    assert jax.tree.map(jnp.shape, vp)["params"]["hidden_1"]["kernel"] == (6, 1)
    obs = jax.random.normal(key, (7, 3))
    np.testing.assert_allclose(
        net.policy_network.apply(None, pp, obs), _mlp_reference(pp, obs, activation), rtol=1e-5, atol=1e-6
    )
    value = net.value_network.apply(None, vp, obs)
    assert value.shape == (7,)
    np.testing.assert_allclose(value, _mlp_reference(vp, obs, activation)[:, 0], rtol=1e-5, atol=1e-6)


def test_tanh_normal_log_prob_entropy_and_mode():
    dist = distribution.NormalTanhDistribution(event_size=2)
    params = jnp.array([[0.3, -1.2, 0.5, -2.0], [2.0, 0.1, -0.7, 1.5]])
    loc, raw_scale = np.split(np.asarray(params, np.float64), 2, axis=-1)
    scale = np.log1p(np.exp(raw_scale)) + 0.001
    raw = jnp.array([[0.9, -0.4], [1.7, 0.05]])
    u = np.asarray(raw, np.float64)
    normal_logpdf = -0.5 * ((u - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    expected = np.sum(normal_logpdf - np.log(1.0 - np.tanh(u) ** 2), axis=-1)
    np.testing.assert_allclose(dist.log_prob(params, raw), expected, rtol=1e-5)
    np.testing.assert_allclose(dist.mode(params), np.tanh(loc), rtol=1e-6)
    # The log-det term stays finite where 1 - tanh(u)^2 underflows.
    assert np.isfinite(float(dist.log_prob(params, jnp.full((2, 2), 30.0)).sum()))
    key = jax.random.PRNGKey(3)
    sample = np.asarray(dist.create_dist(params).sample(key), np.float64)
    normal_entropy = 0.5 + 0.5 * np.log(2 * np.pi) + np.log(scale)
    expected_entropy = np.sum(normal_entropy + np.log(1.0 - np.tanh(sample) ** 2), axis=-1)
    np.testing.assert_allclose(dist.entropy(params, key), expected_entropy, rtol=1e-4)


def test_make_policy_accepts_param_structures_and_rejects_others():
    net = ppo_networks.make_ppo_networks(2, 1, policy_hidden_layer_sizes=(4,), value_hidden_layer_sizes=(4,))
    key = jax.random.PRNGKey(0)
    normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((2,), jnp.float32))
    full = ppo_networks.PPOTrainingParams(
        normalizer, jax.jit(net.policy_network.init)(key), jax.jit(net.value_network.init)(key)
    )
    assert full._fields == ("normalizer_params", "policy_params", "value_params")
    make_policy = ppo_networks.make_inference_fn(net)
    obs = jnp.array([[0.5, -0.2]])

    @functools.partial(jax.jit, static_argnames="deterministic")
    def act(params, deterministic):
        return make_policy(params, deterministic=deterministic)(obs, key)

    reference, _ = act(full, deterministic=True)
    for params in (
        full,
        tuple(full),
        (full.normalizer_params, full.policy_params),
        {"normalizer_params": normalizer, "policy_params": full.policy_params},
    ):
        action, extras = act(params, deterministic=True)
        np.testing.assert_array_equal(action, reference)
        assert extras == {}
    action, extras = act(full, deterministic=False)
    assert set(extras) == {"log_prob", "raw_action", "distribution_params"}  # Brax's keys
    np.testing.assert_allclose(action, jnp.tanh(extras["raw_action"]), rtol=1e-6)
    logits = net.policy_network.apply(normalizer, full.policy_params, obs)
    np.testing.assert_array_equal(extras["distribution_params"], logits)
    np.testing.assert_allclose(
        extras["log_prob"], net.parametric_action_distribution.log_prob(logits, extras["raw_action"]), rtol=1e-6
    )
    for bad in (full.policy_params, 3, (normalizer,)):
        with pytest.raises(TypeError, match="make_policy expects PPOTrainingParams"):
            make_policy(bad)


@pytest.mark.parametrize("distributional", [False, True])
def test_make_inference_fn_computes_values_as_brax_does(distributional):
    # Brax 0.14.2: make_inference_fn(ppo_networks, compute_value=False, use_distributional_critic=False) adds the
    # value network's output to a sampled action's extras ("value", and "quantiles" for a distributional critic).
    net = ppo_networks.make_ppo_networks(
        2, 1, policy_hidden_layer_sizes=(4,), value_hidden_layer_sizes=(4,),
        use_distributional_critic=distributional, num_quantiles=5,
    )
    key = jax.random.PRNGKey(0)
    normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((2,), jnp.float32))
    params = ppo_networks.PPOTrainingParams(normalizer, net.policy_network.init(key), net.value_network.init(key))
    obs = jnp.array([[0.5, -0.2], [0.1, 0.3]])
    make_policy = ppo_networks.make_inference_fn(net, compute_value=True, use_distributional_critic=distributional)
    _, extras = make_policy(params)(obs, key)
    expected = net.value_network.apply(normalizer, params.value_params, obs)
    if distributional:
        assert set(extras) == {"log_prob", "raw_action", "distribution_params", "value", "quantiles"}
        assert extras["quantiles"].shape == (2, 5)
        np.testing.assert_array_equal(extras["quantiles"], expected[1])
        np.testing.assert_allclose(extras["value"], jnp.mean(extras["quantiles"], axis=-1), rtol=1e-6)
    else:
        assert set(extras) == {"log_prob", "raw_action", "distribution_params", "value"}
        np.testing.assert_array_equal(extras["value"], expected)
    assert extras["value"].shape == (2,)
    assert make_policy(params, deterministic=True)(obs, key)[1] == {}
    with pytest.raises(TypeError, match="needs the value parameters"):
        make_policy((normalizer, params.policy_params))
    with pytest.raises(TypeError, match="compute_value must be True or False"):
        ppo_networks.make_inference_fn(net, compute_value="yes")


def test_bad_network_arguments_name_themselves():
    with pytest.raises(ValueError, match="policy_hidden_layer_sizes"):
        ppo_networks.make_ppo_networks(2, 1, policy_hidden_layer_sizes=(4, 0))
    with pytest.raises(ValueError, match="action_size"):
        ppo_networks.make_ppo_networks(2, 0)
    with pytest.raises(ValueError, match="activation 'relu_typo' .*'gelu'"):
        ppo_networks.make_ppo_networks(2, 1, activation="relu_typo")
    with pytest.raises(TypeError, match="activation must be a callable"):
        ppo_networks.make_ppo_networks(2, 1, activation=3)
    by_name = ppo_networks.make_ppo_networks(2, 1, policy_hidden_layer_sizes=(3,), activation="tanh")
    by_fn = ppo_networks.make_ppo_networks(2, 1, policy_hidden_layer_sizes=(3,), activation=linen.tanh)
    key = jax.random.PRNGKey(1)
    params = by_name.policy_network.init(key)
    obs = jnp.ones((1, 2))
    np.testing.assert_array_equal(
        by_name.policy_network.apply(None, params, obs), by_fn.policy_network.apply(None, params, obs)
    )


def _dot_operand_ranks(fn, *args):
    """The rank of the left operand of every matrix product ``fn`` traces to (nested programs included)."""
    ranks = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general":
                ranks.append(eqn.invars[0].aval.ndim)
            for value in eqn.params.values():
                inner = getattr(value, "jaxpr", value)
                if hasattr(inner, "eqns"):
                    walk(inner)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return ranks


@pytest.mark.parametrize("distribution_type", ["tanh_normal", "normal"])
def test_batched_inputs_go_through_the_layers_as_matrices_with_unchanged_results(distribution_type):
    """Leading axes are folded into one before the dense layers (XLA's CPU matrix products are much faster on
    [n, features] than on the loss's [time, batch, features]); outputs keep the input's leading axes and equal
    the layer-by-layer product on each sample."""
    nets = ppo_networks.make_ppo_networks(
        3, 2, policy_hidden_layer_sizes=(8, 8), value_hidden_layer_sizes=(16, 16), distribution_type=distribution_type
    )
    key = jax.random.PRNGKey(0)
    policy_params, value_params = nets.policy_network.init(key), nets.value_network.init(key)
    normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((3,), jnp.float32))
    obs = jax.random.normal(key, (5, 7, 3))
    values = nets.value_network.apply(normalizer, value_params, obs)
    assert values.shape == (5, 7)
    expected = jnp.stack([nets.value_network.apply(normalizer, value_params, row) for row in obs])
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-6)
    single = nets.value_network.apply(normalizer, value_params, obs[0, 0])
    assert single.shape == () and np.isclose(single, values[0, 0], rtol=1e-5, atol=1e-6)

    logits = nets.policy_network.apply(normalizer, policy_params, obs)
    logits = logits if isinstance(logits, tuple) else (logits,)
    rows = [nets.policy_network.apply(normalizer, policy_params, row) for row in obs]
    for i, part in enumerate(logits):
        assert part.shape == (5, 7, 4 if distribution_type == "tanh_normal" else 2)
        per_row = jnp.stack([r[i] if isinstance(r, tuple) else r for r in rows])
        np.testing.assert_allclose(part, per_row, rtol=1e-5, atol=1e-6)

    def value_loss(params):
        return jnp.mean(nets.value_network.apply(normalizer, params, obs) ** 2)

    ranks = _dot_operand_ranks(jax.grad(value_loss), value_params)
    assert ranks and set(ranks) == {2}, ranks
