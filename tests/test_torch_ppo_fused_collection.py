"""torch_ppo's collection in one JAX program (``torch_ppo.fused_collection``): the JAX networks compute what the torch
actor computes, on its live weights without copies; the batch equals the step-by-step collection's; runs choose,
report and refuse it as documented."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import torch

import torch_ppo
from brax_bridge import TorchEnv
from torch_ppo import update
from torch_ppo.fused_collection import FusedCollection, unsupported_reason
from torch_ppo.networks import PPOModules, TanhNormalSampler
from torch_ppo.policy_transfer import jax_params_of_views, jax_policy_networks, jax_policy_views
from torch_training.layers import ACTIVATIONS

OBS, ACT = 5, 3
# Every distribution layout torch_ppo's own policy has (torch_ppo's networks have no LayerNorm option).
LAYOUTS = {
    "tanh_normal": {},
    "normal, scalar std": {"distribution_type": "normal"},
    "normal, log std": {"distribution_type": "normal", "noise_std_type": "log", "init_noise_std": 0.5},
    "normal, state-dependent std": {
        "distribution_type": "normal", "noise_std_type": "log", "state_dependent_std": True,
    },
    "normal, clipped mean": {"distribution_type": "normal", "mean_clip_scale": 0.7},
}


def _modules(observation_size=OBS, action_size=ACT, **options) -> PPOModules:
    torch.manual_seed(0)
    modules = PPOModules(observation_size, action_size, (16, 8), (8,), **options)
    # Statistics away from the initial ones, so that the normalisation is part of what is compared.
    modules.normalizer.update(torch.randn(64, observation_size) * 3.0 + 1.5)
    return modules


def _jax_distribution(modules: PPOModules, observation: torch.Tensor, raw_action: torch.Tensor):
    networks, _ = jax_policy_networks(modules)
    distribution = networks.parametric_action_distribution

    @jax.jit
    def run(views, obs, raw):
        logits = networks.policy_network.apply(*jax_params_of_views(views), obs)
        dist = distribution.create_dist(logits)
        return dist.loc, dist.scale + 0 * dist.loc, distribution.log_prob(logits, raw), distribution.postprocess(raw)

    out = run(jax_policy_views(modules), observation.numpy(), raw_action.numpy())
    return [torch.from_numpy(np.array(x)) for x in out]


def _assert_the_jax_networks_compute_the_torch_actor(modules: PPOModules, observation: torch.Tensor) -> None:
    """The distribution's loc and scale, a sample's log-probability and its action, within 1e-5 of the torch actor's."""
    raw_action = torch.randn(observation.shape[0], ACT)
    loc, scale, log_prob, action = _jax_distribution(modules, observation, raw_action)
    with torch.no_grad():
        torch_loc, torch_scale = modules.policy(observation)
        torch_log_prob = modules.policy.log_prob(torch_loc, torch_scale, raw_action)
    torch.testing.assert_close(loc, torch_loc, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(scale, torch_scale, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(log_prob, torch_log_prob, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(action, modules.policy.postprocess(raw_action), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_the_jax_networks_compute_the_torch_actor_for_every_activation(activation):
    modules = _modules(activation=activation)
    _assert_the_jax_networks_compute_the_torch_actor(modules, torch.randn(32, OBS) * 2.0)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_jax_networks_compute_the_torch_actor_for_every_distribution_layout(layout):
    modules = _modules(**LAYOUTS[layout])
    with torch.no_grad():
        for parameter in modules.policy.parameters():  # the std parameters away from their initial constant
            parameter.add_(0.1 * torch.randn_like(parameter))
    _assert_the_jax_networks_compute_the_torch_actor(modules, torch.randn(32, OBS))


def test_the_views_share_the_actors_memory_so_an_update_is_seen_without_a_copy():
    modules = _modules()
    normalizer, policy = jax_policy_views(modules)
    for name, tensor in modules.policy.params_state_dict().items():
        assert policy[name].unsafe_buffer_pointer() == tensor.data_ptr(), name
    assert normalizer["mean"].unsafe_buffer_pointer() == modules.normalizer.mean.data_ptr()
    assert normalizer["std"].unsafe_buffer_pointer() == modules.normalizer.std.data_ptr()
    observation, raw_action = torch.randn(4, OBS), torch.randn(4, ACT)
    before = _jax_distribution(modules, observation, raw_action)[0]
    with torch.no_grad():  # an optimiser's in-place step
        for parameter in modules.policy.parameters():
            parameter.mul_(1.5)
    after = _jax_distribution(modules, observation, raw_action)[0]
    with torch.no_grad():
        torch.testing.assert_close(after, modules.policy(observation)[0], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(before, after)


def _env(**kwargs) -> TorchEnv:
    env = TorchEnv("inverted_pendulum", 8, episode_length=5, seed=3, **kwargs)
    env.reset(seed=3)
    return env


def test_the_fused_batch_equals_the_step_by_step_collection_with_the_same_draws():
    """Same env state, weights and standard-normal draws: every key of the batch, the envs' state afterwards and the
    episode sums agree; the unrolls cross time limits and terminations (short episodes)."""
    modules = _modules(observation_size=4, action_size=1)
    num_unrolls, unroll_length = 2, 6
    noise = torch.randn(num_unrolls * unroll_length, 8, 1)
    fused_env, bridge_env = _env(), _env()
    fused = FusedCollection(
        fused_env, modules, num_unrolls=num_unrolls, unroll_length=unroll_length, keep_distribution=True,
        track_episodes=True,
    )
    fused.noise = lambda generator: noise
    batch, observation, sums = fused(torch.Generator())

    draws = list(noise)
    sampler = TanhNormalSampler()
    sampler.noise = lambda loc: draws.pop(0)
    tracker = update.EpisodeTracker(bridge_env)
    reference, reference_observation = update.collect(
        bridge_env, modules, sampler, bridge_env.reset(seed=3).get("observation"), num_unrolls=num_unrolls,
        unroll_length=unroll_length, keep_distribution=True, tracker=tracker,
    )
    assert not draws
    assert batch.batch_size == reference.batch_size == torch.Size([num_unrolls * 8, unroll_length])
    assert set(batch.keys(True, True)) == set(reference.keys(True, True))
    for key in reference.keys(True, True):
        got, want = batch.get(key), reference.get(key)
        assert got.dtype == want.dtype and got.shape == want.shape, key
        if want.dtype == torch.bool:
            assert torch.equal(got, want), key
        else:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=str(key))
    nxt = batch.get("next")
    assert nxt.get("truncated").any() and nxt.get("done").any()
    torch.testing.assert_close(observation, reference_observation, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fused_env.episode_info().get("steps"), bridge_env.episode_info().get("steps"))
    totals = tracker.totals()
    assert set(sums) == set(totals) and sums["count"] > 0
    for name, value in totals.items():
        torch.testing.assert_close(sums[name], value, rtol=1e-5, atol=1e-5)
    # The env goes on from the fused collection's state: a step through the bridge continues the same episodes.
    stepped, reference_stepped = fused_env.step(torch.zeros(8, 1)), bridge_env.step(torch.zeros(8, 1))
    torch.testing.assert_close(stepped.get(("next", "observation")), reference_stepped.get(("next", "observation")),
                               rtol=1e-5, atol=1e-5)


def test_what_the_fused_collection_cannot_run_is_named():
    modules = _modules(observation_size=4, action_size=1)
    assert unsupported_reason(_env(), modules) is None
    differentiable = TorchEnv("inverted_pendulum", 2, differentiable=True)
    assert unsupported_reason(differentiable, modules) == "the env is differentiable"
    with_fields = _env()
    with_fields.set_system(body_mass=with_fields.system.get("body_mass") * 1.1)
    assert "set_system" in unsupported_reason(with_fields, modules)
    with pytest.raises(ValueError, match="cannot run in one JAX program: the env is differentiable"):
        FusedCollection(differentiable, modules, num_unrolls=1, unroll_length=2, keep_distribution=False,
                        track_episodes=False)


TINY = dict(num_timesteps=640, num_envs=16, batch_size=16, num_minibatches=2, unroll_length=5, num_updates_per_batch=1,
            episode_length=50, num_evals=2, num_eval_envs=4, log_training_metrics=True)


def _small_networks(observation_size, action_size):
    nn = torch.nn
    policy = nn.Sequential(nn.Linear(observation_size, 8), nn.Tanh(), nn.Linear(8, 2 * action_size))
    return policy, nn.Sequential(nn.Linear(observation_size, 8), nn.Tanh(), nn.Linear(8, 1))


@pytest.mark.parametrize(
    "options, expected",
    [({}, "fused"), ({"collection": "bridge"}, "bridge"), ({"network_factory": _small_networks}, "bridge")],
    ids=["default", "forced bridge", "network_factory"],
)
def test_runs_report_which_collection_ran(options, expected):
    reports = []
    torch_ppo.train("inverted_pendulum", progress_fn=lambda step, metrics: reports.append(dict(metrics)), **TINY,
                    **options)
    assert reports[-1]["training/collection"] == expected


@pytest.mark.parametrize(
    "options, message",
    [
        ({"collection": "jax"}, r"collection must be one of fused, bridge or None, got 'jax'"),
        ({"collection": "fused", "network_factory": _small_networks},
         r"collection='fused' runs the actor in brax_core's networks, which cannot run network_factory's modules"),
    ],
    ids=["unknown", "network_factory"],
)
def test_a_collection_that_cannot_run_is_refused_before_anything_compiles(monkeypatch, options, message):
    from torch_ppo import environments

    def refuse(*args, **kwargs):
        raise AssertionError("compiled before the bad input was refused")

    monkeypatch.setattr(environments, "compile_programs", refuse)
    with pytest.raises(ValueError, match=message):
        torch_ppo.train("inverted_pendulum", **TINY, **options)


def test_the_envs_state_shapes_are_known_before_the_first_reset_and_advance_refuses_what_it_cannot_run():
    env = TorchEnv("inverted_pendulum", 8, episode_length=5)
    shapes = env.state_shapes
    env.reset(seed=1)
    assert jax.tree.structure(shapes) == jax.tree.structure(env.state)
    for shape, leaf in zip(jax.tree.leaves(shapes), jax.tree.leaves(env.state), strict=True):
        assert (shape.shape, shape.dtype, shape.sharding) == (leaf.shape, leaf.dtype, leaf.sharding)
    differentiable = TorchEnv("inverted_pendulum", 2, differentiable=True)
    differentiable.reset()
    with pytest.raises(ValueError, match="advance runs step_fn alone: not with differentiable=True"):
        differentiable.advance(lambda state: (state, state.obs, None))
