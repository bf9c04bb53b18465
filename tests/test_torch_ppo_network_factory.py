"""torch_ppo with networks of the user's own (``network_factory``): training, exact resume, evaluation through the
bridge and ``load_policy`` around them; the errors a module of the wrong size, a conflicting option or a transfer
to JAX get, before anything compiles."""

import functools
import json

import pytest
import torch
from torch import nn

import torch_ppo
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import presets
from torch_ppo import checkpoint, policy_transfer
from torch_ppo import environments as torch_environments
from torch_ppo.networks import PPOModules
from torch_ppo.params import make_inference_fn, params_of

# The `fast` preset's training sizes (1280 env steps per training step), without its networks.
TINY = {k: v for k, v in presets.TRAIN_KWARGS["fast"].items()
        if k not in ("num_timesteps", "num_evals", "network_factory")}
STEP = 1280


class Residual(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm, self.linear = nn.LayerNorm(width), nn.Linear(width, width)

    def forward(self, x):
        return x + self.linear(nn.functional.elu(self.norm(x)))


class FlatValue(nn.Module):
    """A value module giving ``[batch]`` (the other accepted shape is ``[batch, 1]``)."""

    def __init__(self, observation_size: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(observation_size, 8), Residual(8), nn.ELU(), nn.Linear(8, 1))

    def forward(self, x):
        assert x.dim() == 2  # the modules see [batch, observation_size], whatever the caller's leading dims
        return self.net(x).squeeze(-1)


def residual_networks(observation_size: int, action_size: int):
    policy = nn.Sequential(nn.Linear(observation_size, 8), Residual(8), nn.ELU(), nn.Linear(8, 2 * action_size))
    return policy, FlatValue(observation_size)


def _no_compile(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("compiled before the bad input was refused")

    monkeypatch.setattr(torch_environments, "compile_programs", refuse)


def test_a_residual_network_trains_resumes_exactly_evaluates_and_reloads(tmp_path):
    common = dict(TINY, num_evals=0, network_factory=residual_networks)
    _, straight, _ = torch_ppo.train("fast", num_timesteps=2 * STEP, **common)
    ckpt = tmp_path / "ckpt"
    torch_ppo.train("fast", num_timesteps=STEP, save_checkpoint_path=ckpt, **common)
    make_policy, resumed, _ = torch_ppo.train(
        "fast", num_timesteps=2 * STEP, restore_checkpoint_path=ckpt, save_checkpoint_path=ckpt, **common
    )
    assert list(resumed.policy_params) == list(residual_networks(2, 1)[0].state_dict())
    for part_straight, part_resumed in zip(straight, resumed, strict=True):
        for key in part_straight:
            torch.testing.assert_close(part_straight[key], part_resumed[key], rtol=0, atol=0, msg=key)
    recorded = json.loads(next(ckpt.glob(f"{2 * STEP:012d}/config.json")).read_text())["network"]
    assert recorded["network_factory"] == f"{__name__}.residual_networks"
    # load_policy rebuilds the policy with the same factory; without it, it says what to pass.
    observations = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
    loaded, _ = torch_ppo.load_policy(ckpt, network_factory=residual_networks)(observations)
    expected, _ = make_policy(resumed, deterministic=True)(observations)
    torch.testing.assert_close(loaded, expected, rtol=0, atol=0)
    with pytest.raises(checkpoint.CheckpointError, match=r"network_factory=.*residual_networks.*load_policy\(path, "):
        torch_ppo.load_policy(ckpt)
    # A factory of other modules does not fit the checkpoint's weights.
    other = lambda obs, act: (nn.Linear(obs, 2 * act), nn.Linear(obs, 1))  # noqa: E731
    with pytest.raises(ValueError, match="does not fit these networks"):
        torch_ppo.load_policy(ckpt, network_factory=other)


def test_a_custom_actor_evaluates_through_the_bridge():
    reports = []
    torch_ppo.train(
        "fast",
        num_timesteps=STEP,
        num_evals=2,
        network_factory=residual_networks,
        progress_fn=lambda step, metrics: reports.append((step, metrics)),
        **{**TINY, "num_eval_envs": 4, "episode_length": 20},
    )
    assert [step for step, _ in reports] == [0, STEP]
    # `fast` returns between 0 and 68.7 over 100 steps, so less over 20
    assert all(0.0 <= metrics["eval/episode_reward"] < 68.7 for _, metrics in reports)
    assert all(metrics["eval/avg_episode_length"] == 20.0 for _, metrics in reports)


@pytest.mark.parametrize(
    ("factory", "error", "message"),
    [
        (lambda o, a: (nn.Linear(o, 3), nn.Linear(o, 1)), ValueError,
         r"policy module gives outputs of size 3 but the policy needs 2 \* action_size = 2"),
        (lambda o, a: (nn.Linear(o, 2 * a), nn.Linear(o, 2)), ValueError,
         r"value module gives outputs of size 2 but the value needs 1 per observation"),
        (lambda o, a: (nn.Linear(o + 3, 2 * a), nn.Linear(o, 1)), ValueError,
         r"policy module fails on observations \[batch, 2\] \(observation_size = 2\)"),
        (lambda o, a: nn.Linear(o, 2 * a), TypeError, r"must return \(policy_module, value_module\)"),
    ],
    ids=["policy size", "value size", "input size", "not a pair"],
)
def test_a_module_of_the_wrong_size_is_refused_before_training(monkeypatch, factory, error, message):
    _no_compile(monkeypatch)
    with pytest.raises(error, match=message):
        torch_ppo.train("fast", num_timesteps=STEP, network_factory=factory, **TINY)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (dict(policy_hidden_layer_sizes=(8,)), r"policy_hidden_layer_sizes=\(8,\) sets torch_ppo's own networks"),
        (dict(activation="tanh"), r"activation='tanh' sets torch_ppo's own networks, which network_factory replaces"),
        (dict(policy_network_kernel_init_fn="orthogonal"), r"policy_network_kernel_init_fn='orthogonal' sets"),
        (dict(distribution_type="normal"), r"distribution_type='normal' needs torch_ppo's own networks"),
        (dict(use_distributional_critic=True, clipping_epsilon_value=0.2), r"use_distributional_critic=True needs"),
        (dict(eval_backend="jax"), r"eval_backend='jax' rebuilds the actor from brax_core's networks"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else None,
)
def test_an_option_of_the_own_networks_beside_network_factory_is_refused_by_name(given, message):
    with pytest.raises(ValueError, match=message):
        torch_ppo.train("fast", num_timesteps=STEP, network_factory=residual_networks, **{**TINY, **given})


def test_a_network_factory_that_is_not_callable_is_refused_with_what_to_pass():
    with pytest.raises(TypeError, match=r"network_factory must be a callable fn\(observation_size, action_size\)"):
        torch_ppo.train("fast", num_timesteps=STEP, network_factory="residual", **TINY)


def test_a_custom_network_is_refused_by_every_transfer_to_jax_and_sees_flat_batches():
    modules = PPOModules(2, 1, network_factory=residual_networks)
    # The modules see [batch, observation_size] whatever the leading dims; a [batch] value comes back [..., 1].
    loc, scale = modules.policy(torch.zeros(3, 4, 2))
    assert loc.shape == scale.shape == (3, 4, 1) and (scale > 0).all()
    assert modules.value(torch.zeros(3, 4, 2)).shape == (3, 4, 1)
    policy = make_inference_fn(modules)(params_of(modules), deterministic=True)
    for actor in (modules, policy):
        with pytest.raises(ValueError, match=r"an actor of network_factory=.*residual_networks cannot be transferred"):
            policy_transfer.torch_policy_to_jax(actor)
    for convert in (policy_transfer.torch_params_to_jax, policy_transfer.jax_policy_params):
        with pytest.raises(ValueError, match=r"policy parameters named 0.bias, .* cannot be transferred to JAX"):
            convert(params_of(modules))


# Every preset, JAX recipe and GPU recipe, sized down to `fast`'s training (what the preset's networks are stays).
_FAST_SIZED = dict(TINY, num_timesteps=STEP, num_evals=2, num_eval_envs=4)
_ALL_PRESETS = [("TRAIN_KWARGS", name) for name in sorted(presets.TRAIN_KWARGS)] + [
    ("GPU_TRAIN_KWARGS", name) for name in sorted(presets.GPU_TRAIN_KWARGS)
]


@pytest.mark.parametrize(("table", "name"), _ALL_PRESETS)
def test_every_preset_trains_with_torch_ppo_in_one_call(table, name):
    preset = getattr(presets, table)[name]
    _, params, metrics = torch_ppo.train("fast", **{**preset, **_FAST_SIZED})
    keywords = preset["network_factory"].keywords  # the JAX factory's options became torch_ppo's own networks'
    for role, sizes in (("policy", "policy_hidden_layer_sizes"), ("value", "value_hidden_layer_sizes")):
        layers = getattr(params, f"{role}_params")
        widths = [layers[f"hidden_{i}.weight"].shape[0] for i in range(len(keywords[sizes]))]
        assert widths == list(keywords[sizes]), (role, widths)
        assert f"hidden_{len(keywords[sizes]) + 1}.weight" not in layers  # the sizes' layers, then the output
    assert metrics["eval/episode_reward"] == metrics["eval/episode_reward"]  # a number, trained and evaluated


def test_the_jax_factory_conflicting_with_an_argument_is_refused():
    factory = presets.TRAIN_KWARGS["fast"]["network_factory"]
    with pytest.raises(ValueError, match=r"policy_hidden_layer_sizes=\(4,\) differs from network_factory's"):
        torch_ppo.train("fast", network_factory=factory, policy_hidden_layer_sizes=(4,), **_FAST_SIZED)
    foreign = functools.partial(ppo_networks.make_ppo_networks, layer_norm=True)
    with pytest.raises(ValueError, match="sets layer_norm=True, which torch_ppo's networks do not have"):
        torch_ppo.train("fast", network_factory=foreign, **_FAST_SIZED)
