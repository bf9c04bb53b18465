"""torch_ppo's training update is bit for bit the plain per-minibatch PPO update: minibatches indexed from the
batch TensorDict, ``losses.ppo_loss``, per-tensor gradient norms and Adam's loop over parameters.

The trainer takes shortcuts for speed (plain tensors gathered once per pass, a fused GAE step, foreach Adam and norms,
stacked loss sums); none may change a single bit of the result. It also equals the JAX trainer's own update on the
same batch, weights and draws (within float32 rounding; a synthetic batch), and a whole training step of each
trainer, collection through the env included, ends in the same env state and parameters.
"""

import inspect

import numpy as np
import pytest
import torch
from rollouts import synthetic_batch, torch_ppo_loss
from tensordict import TensorDict

import torch_ppo
from torch_ppo import arguments, distributed
from torch_ppo.losses import compute_gae
from torch_ppo.trainer import TorchPPOBackend
from torch_ppo.update import loss_config

ENV = "inverted_pendulum"
OBS, ACT = 4, 1
CONFIG = dict(
    num_envs=16,
    batch_size=8,
    num_minibatches=4,
    unroll_length=6,
    num_updates_per_batch=2,
    learning_rate=3e-3,
    entropy_cost=1e-3,
    discounting=0.95,
    normalize_observations=True,
    max_grad_norm=0.5,
    policy_hidden_layer_sizes=(8, 8),
    value_hidden_layer_sizes=(8,),
    num_evals=0,
)
ROWS = CONFIG["batch_size"] * CONFIG["num_minibatches"]
T = CONFIG["unroll_length"]


def _batch(behaviour: bool) -> TensorDict:
    return synthetic_batch(ROWS, T, OBS, ACT, seed=3, end_probability=0.1, behaviour=behaviour)


def _defaults(fn) -> dict:
    """``fn``'s keyword defaults: a trainer's arguments as a call that names only some of them receives them."""
    return {
        name: p.default
        for name, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _trainer(overrides: dict) -> TorchPPOBackend:
    kw = {**_defaults(torch_ppo.train), "environment": ENV, "num_timesteps": 1, **CONFIG, **overrides}
    device = torch.device("cpu")
    return TorchPPOBackend(arguments.parse(kw, device, 1), distributed.setup(device))


def _reference_update(trainer, data: TensorDict) -> None:
    """One training update written plainly, with the trainer's own networks, draws and loss settings."""
    config, modules = trainer.config, trainer.modules
    adaptive = trainer.update.adaptive_kl
    optimizer = (
        trainer.update.optimizer
        if adaptive
        else torch.optim.Adam(modules.parameters(), lr=config.algorithm.learning_rate, eps=1e-8, foreach=False)
    )
    if config.algorithm.clipping_epsilon_value is not None:
        with torch.no_grad():
            data.set("state_value", modules.value(data.get("observation")))
    if not adaptive:
        modules.normalizer.update(data.get("observation"))
    m = config.algorithm.num_minibatches
    for _ in range(config.algorithm.num_updates_per_batch):
        shuffled = data[trainer.update.minibatch_order(ROWS)].reshape(m, ROWS // m, T)
        for i in range(m):
            noise = trainer.update.entropy_noise((T, config.algorithm.batch_size, ACT))
            terms = torch_ppo_loss(modules, shuffled[i], noise, **loss_config(config)._asdict())
            optimizer.zero_grad()
            terms.total_loss.backward()
            grads = [p.grad for p in modules.parameters() if p.grad is not None]
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            limit = config.algorithm.max_grad_norm
            scale = torch.where(norm < limit, torch.ones_like(norm), limit / norm)
            for g in grads:
                g.mul_(scale)
            if adaptive:
                trainer.update.adapt_learning_rate(terms.kl_mean)
            optimizer.step()
    if adaptive:
        modules.normalizer.update(data.get("observation"))


@pytest.mark.parametrize(
    "overrides",
    [{}, {"learning_rate_schedule": "ADAPTIVE_KL", "clipping_epsilon_value": 0.2, "normalize_advantage": False}],
    ids=["default", "adaptive_kl_clipped_value"],
)
def test_the_trainers_update_is_bit_for_bit_the_plain_update(overrides):
    fast, plain = _trainer(overrides), _trainer(overrides)
    behaviour = bool(overrides)
    before = {k: v.clone() for k, v in fast.modules.state_dict().items()}
    fast.update(_batch(behaviour))
    _reference_update(plain, _batch(behaviour))
    after, expected = fast.modules.state_dict(), plain.modules.state_dict()
    for key in expected:
        assert torch.equal(after[key], expected[key]), key
        if ".mlp." in key:  # every weight moved, so equality is not trivial
            assert not torch.equal(after[key], before[key]), key
    assert fast.update.metric_count == CONFIG["num_updates_per_batch"] * CONFIG["num_minibatches"]
    assert torch.isfinite(fast.update.metric_sums).all()


def test_gae_is_bit_for_bit_the_step_by_step_recursion():
    g = torch.Generator().manual_seed(0)
    for steps, envs in ((1, 3), (7, 5), (16, 64)):
        rewards, values = torch.randn(steps, envs, generator=g), torch.randn(steps, envs, generator=g)
        bootstrap = torch.randn(envs, generator=g)
        truncation = (torch.rand(steps, envs, generator=g) < 0.2).float()
        termination = (torch.rand(steps, envs, generator=g) < 0.2).float() * (1 - truncation)
        vs, advantages = compute_gae(truncation, termination, rewards, values, bootstrap, 0.95, 0.97)
        # The recursion as written in Brax: acc_t = delta_t + gamma * lambda * (1 - term_t)(1 - trunc_t) acc_{t+1}.
        mask, continuation = 1.0 - truncation, 0.97 * (1.0 - termination)
        values_next = torch.cat([values[1:], bootstrap[None]])
        deltas = (rewards + continuation * values_next - values) * mask
        decay = continuation * mask * 0.95
        acc, rows = torch.zeros(envs), []
        for t in range(steps - 1, -1, -1):
            acc = deltas[t] + decay[t] * acc
            rows.append(acc)
        expected_vs = torch.stack(rows[::-1]) + values
        assert torch.equal(vs, expected_vs)
        vs_next = torch.cat([expected_vs[1:], bootstrap[None]])
        assert torch.equal(advantages, (rewards + continuation * vs_next - values) * mask)


def _jax_draws(key, rows: int):
    """The minibatch orders and entropy samples the JAX trainer's update draws from ``key``, in the order it uses
    them (``make_ppo_update``: per pass ``key, perm, grad = split(key, 3)``; per minibatch ``k, loss = split(k)``)."""
    import jax

    orders, noises = [], []
    for _ in range(CONFIG["num_updates_per_batch"]):
        key, key_perm, key_grad = jax.random.split(key, 3)
        orders.append(torch.from_numpy(np.array(jax.random.permutation(key_perm, rows))).long())
        for _ in range(CONFIG["num_minibatches"]):
            key_grad, key_loss = jax.random.split(key_grad)
            noise = jax.random.normal(key_loss, (T, CONFIG["batch_size"], ACT))
            noises.append(torch.from_numpy(np.array(noise)))
    return orders, noises


def _jax_trainer_parts(start, overrides: dict):
    """The JAX trainer's networks, PPO update (its own ``make_update``: ``make_ppo_update`` with the loss, clipped
    Adam and normaliser update ``train`` builds from its validated arguments) and a training state at ``start``'s
    weights, for ``CONFIG`` with ``overrides``: the hyperparameters go through each trainer's own argument checks."""
    import functools

    import jax.numpy as jnp

    from brax_core.training.agents.ppo import arguments as jax_arguments
    from brax_core.training.agents.ppo import losses as jax_losses
    from brax_core.training.agents.ppo import networks as jax_networks
    from brax_core.training.agents.ppo import optimizer as jax_optimizer
    from brax_core.training.agents.ppo import train as jax_train
    from brax_core.training.agents.ppo import training_step as jax_training_step

    sizes = ("policy_hidden_layer_sizes", "value_hidden_layer_sizes")
    factory = functools.partial(jax_networks.make_ppo_networks, **{name: CONFIG[name] for name in sizes})
    hyperparameters = {name: value for name, value in CONFIG.items() if name not in sizes}
    args = jax_arguments.validated(
        {
            **_defaults(jax_train.train),
            "environment": ENV,
            "num_timesteps": 1,
            **hyperparameters,
            **overrides,
            "network_factory": factory,
        },
        jax_train.training_devices,
    )
    nets, _, _ = jax_train._make_networks(args, None)
    config = args.config
    algorithm = config.algorithm
    optimizer = jax_optimizer.make_optimizer(
        algorithm.learning_rate, algorithm.max_grad_norm, algorithm.learning_rate_schedule
    )
    update = jax_training_step.make_update(config, nets, optimizer, args.augment_pixels)
    net_params = jax_losses.PPONetworkParams(start.policy_params, start.value_params)
    state = jax_training_step.TrainingState(
        optimizer_state=optimizer.init(net_params),
        params=net_params,
        normalizer_params=start.normalizer_params,
        env_steps=jnp.zeros((2,), jnp.uint32),
        training_step=jnp.zeros((), jnp.int32),
    )
    return nets, update, state


def _assert_same_parameters(jax_state, modules, start) -> None:
    """torch_ppo's ``modules`` hold ``jax_state``'s normaliser and weights within float32 rounding, and SGD moved
    the weights from ``start`` far beyond that tolerance."""
    from brax_core.training.agents.ppo import networks as jax_networks
    from torch_ppo.params import params_of
    from torch_ppo.policy_transfer import jax_params_to_torch

    expected = jax_params_to_torch(
        jax_networks.PPOTrainingParams(jax_state.normalizer_params, jax_state.params.policy, jax_state.params.value)
    )
    actual = params_of(modules)
    before = jax_params_to_torch(start)
    for part_expected, part_actual in zip(expected, actual, strict=True):
        assert part_expected.keys() == part_actual.keys()
        for name in part_expected:
            torch.testing.assert_close(part_actual[name], part_expected[name], rtol=1e-4, atol=2e-5, msg=name)
    moved = max(float((actual.policy_params[k] - before.policy_params[k]).abs().max()) for k in before.policy_params)
    assert moved > 1e-3, moved


def test_both_trainers_updates_give_the_same_parameters_from_the_same_batch():
    """The two trainers' own update functions, not a reference loop: the JAX trainer's ``make_ppo_update`` with the
    optimizer (Adam after global-norm clipping), loss and normaliser update ``train`` builds, and torch_ppo's
    ``TorchPPOBackend.update``, on one batch from the same weights, with the JAX update's minibatch orders and entropy
    samples. Both must end with the same normaliser and parameters."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    from brax_core.training import types
    from torch_ppo.policy_transfer import torch_params_to_jax

    trainer = _trainer({})
    start = torch_params_to_jax(trainer.modules)
    batch = _batch(behaviour=False)
    _, update, state = _jax_trainer_parts(start, {})
    nxt = batch.get("next")
    j = lambda x: jnp.asarray(x.numpy())  # noqa: E731
    truncation = j(nxt.get("truncated").squeeze(-1).float())
    data = types.Transition(
        observation=j(batch.get("observation")),
        action=j(batch.get("action")),
        reward=j(nxt.get("reward").squeeze(-1)),
        discount=1.0 - j(nxt.get("done").squeeze(-1).float()),
        next_observation=j(nxt.get("final_observation")),
        extras={
            "policy_extras": {"raw_action": j(batch.get("raw_action")), "log_prob": j(batch.get("action_log_prob"))},
            "state_extras": {"truncation": truncation},
        },
    )
    key = jax.random.PRNGKey(21)
    mesh = Mesh(np.asarray(jax.devices("cpu")[:1]), ("i",))
    run = jax.shard_map(
        lambda s, d, k: update(s, d, k)[0], mesh=mesh, in_specs=(P(), P("i"), P()), out_specs=P(), check_vma=False
    )
    jax_state = jax.jit(run)(state, data, key)

    orders, noises = _jax_draws(key, ROWS)
    trainer.update.minibatch_order = lambda rows: orders.pop(0)
    trainer.update.entropy_noise = lambda shape: noises.pop(0)
    trainer.update(batch)
    assert not orders and not noises  # every draw was used, in the JAX update's order

    _assert_same_parameters(jax_state, trainer.modules, start)


def _jax_action_noise(key, num_unrolls: int, num_envs: int):
    """The JAX trainer's training step draws from ``key``: the standard-normal samples of its collection in the
    order it takes them, and the key of its SGD. ``make_training_step`` splits ``key_sgd, key_generate``; per
    unroll ``k, k_unroll = split(k)``; per env step (``acting.generate_unroll``) ``step_key, k_unroll =
    split(k_unroll)``, and the policy samples ``normal(step_key, [envs, actions])``."""
    import jax

    key_sgd, key_unrolls = jax.random.split(key)
    noises = []
    for _ in range(num_unrolls):
        key_unrolls, key_steps = jax.random.split(key_unrolls)
        for _ in range(T):
            step_key, key_steps = jax.random.split(key_steps)
            noises.append(torch.from_numpy(np.array(jax.random.normal(step_key, (num_envs, ACT)))))
    return key_sgd, noises


@pytest.mark.parametrize("collection", ["fused", "bridge"])
def test_one_training_step_from_the_same_env_state_gives_the_same_parameters_in_both_trainers(collection):
    """A whole training step of each trainer, collection included: the JAX trainer's own step
    (``make_training_step``: unrolls of its wrapped env, then ``make_ppo_update``) and torch_ppo's ``collect`` and
    ``update`` through its ``TorchEnv``, from the same physics state and weights, with the JAX step's draws (action
    samples, minibatch orders, entropy samples), collected in one JAX program (``fused``) or step by step through the
    bridge. Short episodes make the unrolls cross terminations, time limits and auto-resets. Both must reach the same
    env state and parameters."""
    import jax
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    from brax_core import envs
    from brax_core.training.agents.ppo import environments as jax_environments
    from brax_core.training.agents.ppo import networks as jax_networks
    from brax_core.training.agents.ppo import training_step as jax_training_step
    from torch_ppo.policy_transfer import torch_params_to_jax

    episode = {"episode_length": 4}
    trainer = _trainer({**episode, "collection": collection})
    trainer.build_envs()
    assert (trainer.fused is not None) == (collection == "fused")
    env_state = trainer.env.state  # the physics state (and auto-reset keys) both trainers step from
    start = torch_params_to_jax(trainer.modules)
    nets, update, state = _jax_trainer_parts(start, episode)
    jax_env = jax_environments.wrap_for(
        envs.get_environment(ENV),
        CONFIG["num_envs"],
        None,
        wrap_env=True,
        episode_length=episode["episode_length"],
        action_repeat=1,
        randomization_fn=None,
    )
    training_step = jax_training_step.make_training_step(
        jax_env,
        jax_networks.make_inference_fn(nets),
        update,
        unroll_length=T,
        num_unrolls=trainer.num_unrolls,
        extra_fields=("truncation",),
        log_training_metrics=False,
        env_steps_per_training_step=ROWS * T,
    )
    key = jax.random.PRNGKey(5)
    mesh = Mesh(np.asarray(jax.devices("cpu")[:1]), ("i",))
    run = jax.shard_map(
        lambda s, e, k: training_step(s, e, k)[:2],
        mesh=mesh,
        in_specs=(P(), P("i"), P()),
        out_specs=(P(), P("i")),
        check_vma=False,
    )
    jax_state, jax_env_state = jax.jit(run)(state, env_state, key)

    key_sgd, action_noise = _jax_action_noise(key, trainer.num_unrolls, CONFIG["num_envs"])
    orders, noises = _jax_draws(key_sgd, ROWS)
    if collection == "fused":
        trainer.fused.noise = lambda generator: torch.stack([action_noise.pop(0) for _ in range(len(action_noise))])
    else:
        trainer.actor.module[-1].noise = lambda loc: action_noise.pop(0)
    trainer.update.minibatch_order = lambda rows: orders.pop(0)
    trainer.update.entropy_noise = lambda shape: noises.pop(0)
    data = trainer.collect()
    trainer.update(data)
    assert not action_noise and not orders and not noises  # every draw was used, in the JAX step's order

    nxt = data.get("next")
    assert nxt.get("terminated").any() and nxt.get("truncated").any()  # both kinds of episode end were crossed
    torch.testing.assert_close(trainer.obs, torch.from_numpy(np.array(jax_env_state.obs)), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        trainer.env.episode_info().get("steps"), torch.from_numpy(np.array(jax_env_state.info["steps"]))
    )
    _assert_same_parameters(jax_state, trainer.modules, start)
