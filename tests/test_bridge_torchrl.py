"""brax_bridge.torchrl: the TorchRL adapter passes check_env_specs and trains with TorchRL's Collector + ClipPPOLoss."""

import jax
import jax.numpy as jnp
import pytest
import torch

torchrl = pytest.importorskip("torchrl")  # optional extra; `make test` installs it

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import NormalParamExtractor, TensorDictModule  # noqa: E402
from torchrl.envs import AutoResetEnv, StepCounter, TransformedEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import brax_bridge  # noqa: E402
from brax_bridge.torchrl import BraxBridgeEnv  # noqa: E402
from brax_core.envs.fast import Fast  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
N = 8


class _RandomStart(Fast):
    """``fast`` starting at a random position (Brax's starts at 0), so that a real reset shows in the physics."""

    def reset(self, rng):
        state = super().reset(rng)
        ps = state.pipeline_state.replace(qpos=jax.random.uniform(rng, (1,), jnp.float32, -1.0, 1.0))
        return state.replace(pipeline_state=ps, obs=jnp.concatenate([ps.qpos, ps.qvel]))


def _push(td):
    return td.set("action", torch.ones(*td.batch_size, 1))


def _bridge(env):
    while not isinstance(env, BraxBridgeEnv):
        env = env.base_env
    return env.bridge


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
    # after an auto-reset the next root observation is the new episode's first, which the bridge already held
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
    with pytest.raises(ValueError, match="compile must be True, False, None or a dict"):
        BraxBridgeEnv("fast", 2, compile="yes")
    # TorchRL's policy= argument still applies on top of the auto-reset layer (a feed-forward policy adds nothing)
    policy = TensorDictModule(torch.nn.Linear(2, 1), in_keys=["observation"], out_keys=["action"])
    assert isinstance(BraxBridgeEnv("fast", 2, policy=policy), AutoResetEnv)


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


@pytest.mark.parametrize("auto_reset", [True, False])
def test_a_step_counter_time_limit_restarts_the_physics(auto_reset):
    env = TransformedEnv(BraxBridgeEnv("fast", 2, episode_length=100, auto_reset=auto_reset), StepCounter(max_steps=3))
    rollout = env.rollout(7, policy=_push, break_when_any_done=False)
    assert rollout["next", "truncated"].squeeze(-1).sum(1).tolist() == [2, 2]  # at steps 3 and 6
    obs = rollout["observation"]
    assert (obs[:, 3] == 0).all() and (obs[:, 6] == 0).all()  # `fast` starts at rest at the origin
    assert torch.equal(obs[:, 4], obs[:, 1])  # the second episode replays the first
    bridge = _bridge(env)
    # the physics restarted too: one push since the last reset (0.02 * 0.02), its time limit counts from there
    torch.testing.assert_close(bridge.physics["qpos"], torch.full((2, 1), 0.0004))
    assert bridge.episode_info()["steps"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("auto_reset", [True, False])
def test_a_reset_mask_restarts_only_the_envs_it_names(auto_reset):
    env = BraxBridgeEnv(_RandomStart(), 3, episode_length=50, seed=3, auto_reset=auto_reset)
    twin = BraxBridgeEnv(_RandomStart(), 3, episode_length=50, seed=3, auto_reset=auto_reset)
    first = env.reset()["observation"].clone()
    twin.reset()
    td = env.rollout(2, policy=_push, break_when_any_done=False)[..., -1]["next"].exclude("reward")
    twin.rollout(2, policy=_push, break_when_any_done=False)
    before = td["observation"].clone()
    td["_reset"] = torch.tensor([[True], [False], [False]])
    out = env.reset(td)
    # env 0 starts again from a new random draw, at rest; envs 1 and 2 keep their observation
    assert out["observation"][0, 1] == 0 and out["observation"][0, 0] != first[0, 0]
    assert torch.equal(out["observation"][1:], before[1:])
    bridge = _bridge(env)
    assert torch.equal(bridge.physics["qpos"][0], out["observation"][0, :1])
    assert bridge.episode_info()["steps"].tolist() == [0.0, 2.0, 2.0]
    # the next step: env 0 from its new start, envs 1 and 2 exactly as in the twin that was not reset
    nxt = env.step(_push(out.exclude("_reset")))["next", "observation"]
    ref = twin.step(_push(TensorDict({}, batch_size=[3])))["next", "observation"]
    assert torch.equal(nxt[1:], ref[1:]) and not torch.equal(nxt[0], ref[0])
    torch.testing.assert_close(nxt[0], out["observation"][0] + torch.tensor([0.0004, 0.02]))


def test_envs_the_bridge_ended_itself_are_not_reset_twice():
    env = BraxBridgeEnv(_RandomStart(), 3, episode_length=3, seed=5)
    env.reset()
    bridge = _bridge(env)
    bridge.set_episode_steps(torch.tensor([2, 0, 0]))  # env 0's time limit comes at the next step
    nxt = env.step(_push(TensorDict({}, batch_size=[3])))["next"]
    assert nxt["truncated"].squeeze(-1).tolist() == [True, False, False]
    started = nxt["observation"].clone()  # env 0: its new episode's first observation
    td = nxt.select("observation", "done", "terminated", "truncated")  # TorchRL keeps the unmasked envs' entries
    out = env.reset(td.set("_reset", torch.tensor([[True], [True], [False]])))
    assert torch.equal(out["observation"][0], started[0])  # kept, not drawn again
    assert out["observation"][1, 1] == 0 and out["observation"][1, 0] != started[1, 0]  # env 1 reset
    assert torch.equal(out["observation"][2], started[2])
    assert torch.equal(bridge.physics["qpos"][:, 0], out["observation"][:, 0])


@pytest.mark.parametrize("kwargs", [{"auto_reset": False}, {"auto_reset_replace": True}])
def test_specs_check_and_rollouts_in_the_other_auto_reset_settings(kwargs):
    env = BraxBridgeEnv("fast", 2, episode_length=2, seed=0, **kwargs)
    assert isinstance(env, AutoResetEnv) is kwargs.get("auto_reset", True)
    check_env_specs(env, seed=0)
    rollout = env.rollout(5, policy=_push, break_when_any_done=False)
    # every episode starts at rest, also after the ends at steps 2 and 4 (NaN-filled in "next" with replace)
    assert (rollout["observation"][:, ::2] == 0).all()
    assert bool(torch.isnan(rollout["next", "observation"][:, 1]).all()) is kwargs.get("auto_reset_replace", False)
