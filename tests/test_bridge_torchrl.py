"""brax_bridge.torchrl: the TorchRL adapter passes check_env_specs and trains with TorchRL's Collector + ClipPPOLoss."""

import pytest
import torch

torchrl = pytest.importorskip("torchrl")  # optional extra; `make test` installs it

from tensordict.nn import NormalParamExtractor, TensorDictModule  # noqa: E402
from torchrl.envs import AutoResetEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import brax_bridge  # noqa: E402
from brax_bridge.torchrl import BraxBridgeEnv  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
N = 8


def test_specs_check_and_native_auto_reset_is_declared():
    env = BraxBridgeEnv("fast", N, episode_length=4, seed=1)
    assert isinstance(env, AutoResetEnv) and isinstance(env.base_env, BraxBridgeEnv)
    assert env.batch_size == torch.Size([N])
    assert set(env.done_keys) == {"done", "terminated", "truncated"}
    check_env_specs(env, seed=0)
    assert env.action_spec.space.low.shape == (N, 1) and float(env.action_spec.space.high.max()) == 1.0

    rollout = env.rollout(9, break_when_any_done=False)
    assert rollout.batch_size == torch.Size([N, 9])
    done = rollout["next", "done"].squeeze(-1)
    assert done[:, 3].all() and done[:, 7].all() and done.sum() == 2 * N
    assert torch.equal(rollout["next", "truncated"], rollout["next", "done"])
    # after an auto-reset the next root observation is the new episode's first, served without touching physics
    assert torch.equal(rollout["observation"][:, 4], rollout["next", "observation"][:, 3])
    assert (rollout["observation"][:, 4, 1] == 0).all()
    ended = rollout["next", "final_observation"][:, 3]
    assert not torch.equal(ended, rollout["next", "observation"][:, 3])


def test_bad_construction_is_refused():
    with pytest.raises(ValueError, match="num_envs is required"):
        BraxBridgeEnv("fast")
    bridge = brax_bridge.TorchEnv("fast", num_envs=2)
    with pytest.raises(ValueError, match="TorchEnv alone"):
        BraxBridgeEnv(bridge, 2, seed=3)
    assert isinstance(BraxBridgeEnv(bridge).base_env.bridge, brax_bridge.TorchEnv)


def test_collector_and_clip_ppo_train_for_a_few_iterations():
    from torchrl.collectors import Collector
    from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    torch.manual_seed(0)
    env = BraxBridgeEnv("fast", N, episode_length=10, seed=0)
    body = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(body, in_keys=["observation"], out_keys=["loc", "scale"]),
        spec=env.action_spec,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -1.0, "high": 1.0},
        return_log_prob=True,
    )
    critic = ValueOperator(torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)),
                           in_keys=["observation"])
    loss_fn = ClipPPOLoss(actor, critic, entropy_coeff=1e-3)
    advantage = GAE(gamma=0.97, lmbda=0.95, value_network=critic)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=3e-3)
    before = [p.detach().clone() for p in loss_fn.parameters()]

    collector = Collector(env, actor, frames_per_batch=N * 12, total_frames=N * 12 * 3,
                          auto_register_policy_transforms=False)
    copies = brax_bridge.stats().copies
    batches = 0
    for batch in collector:
        assert batch.batch_size == torch.Size([N, 12])
        assert batch["next", "done"].any()  # the 10-step time limit falls inside every batch
        # Every transition the collector stored is the env's own: `fast` pays the position the step reached,
        # which is the final observation (also where the auto-reset replaced it).
        reached = batch["next", "final_observation"][..., 0]
        torch.testing.assert_close(batch["next", "reward"].squeeze(-1), reached)
        ended = batch["next", "done"].squeeze(-1)
        assert not torch.equal(batch["next", "observation"][ended], batch["next", "final_observation"][ended])
        with torch.no_grad():
            advantage(batch)
        for _ in range(2):
            losses = loss_fn(batch)
            total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
            assert torch.isfinite(total)
            optim.zero_grad()
            total.backward()
            optim.step()
        batches += 1
    collector.shutdown()
    assert batches == 3
    assert brax_bridge.stats().copies == copies  # the collector's steps crossed the bridge without copies
    assert any(not torch.equal(b, p) for b, p in zip(before, loss_fn.parameters(), strict=True))
