"""Networks of the user's own in the torch gradient trainers (``network_factory``, torch_ppo's convention): APG trains
the user's policy module, SHAC the user's actor and critic; a module of the wrong size, or the trainers' own network
options beside a factory, are refused by name."""

import pytest
import torch
from test_torch_analytic_checkpoint import RUN, Drift
from torch import nn

from torch_analytic import apg, shac


def factory(observation_size, action_size):
    policy = nn.Sequential(nn.Linear(observation_size, 16), nn.Tanh(), nn.Linear(16, 2 * action_size))
    value = nn.Sequential(nn.Linear(observation_size, 16), nn.Tanh(), nn.Linear(16, 1), nn.Flatten(0))  # [batch]
    return policy, value


SHORT = {**RUN, "num_evals": 2, "policy_updates": 3}


@pytest.mark.parametrize("trainer", [apg, shac])
def test_the_users_networks_are_the_ones_trained(trainer):
    torch.manual_seed(0)
    untrained = factory(4, 2)[0].state_dict()
    own = {"critic_iterations": 2, "num_critic_batches": 2} if trainer is shac else {"learning_rate": 3e-2}
    _, policy, metrics = trainer.train(Drift(), **SHORT, **own, network_factory=factory)
    assert isinstance(policy.mlp, nn.Sequential) and policy.mlp[0].out_features == 16  # the user's module
    weights = policy.mlp.state_dict()
    assert any(not torch.equal(weights[name], untrained[name]) for name in weights)  # and it trained
    assert torch.isfinite(torch.tensor(metrics["eval/episode_reward"]))


def test_a_wrong_module_or_own_options_beside_a_factory_are_refused():
    wrong = lambda o, a: (nn.Linear(o, 3), nn.Linear(o, 1))
    with pytest.raises(ValueError, match=r"policy module gives outputs of size 3 but the policy needs 2 \* action"):
        apg.train(Drift(), **SHORT, network_factory=wrong)
    with pytest.raises(ValueError, match="hidden_layer_sizes configure the trainer's own networks"):
        apg.train(Drift(), **SHORT, network_factory=factory, hidden_layer_sizes=(8,))
    with pytest.raises(ValueError, match="layer_norm, policy_hidden_layer_sizes configure the trainer.s own networks"):
        shac.train(Drift(), **SHORT, network_factory=factory, policy_hidden_layer_sizes=(8,), layer_norm=False)
    with pytest.raises(TypeError, match="network_factory must be a callable"):
        shac.train(Drift(), **SHORT, network_factory="mlp")
