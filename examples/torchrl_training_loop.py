"""Train PPO with TorchRL's own Collector and ClipPPOLoss on a brax_core environment through the bridge.

The physics runs in JAX (MuJoCo MJX) and never leaves it; TorchRL sees ``BraxBridgeEnv``, an ``EnvBase`` with
batch size ``[num_envs]`` whose observations, rewards and flags are zero-copy views. The env resets finished
episodes itself (declared to TorchRL as native auto-reset), and ``("next", "final_observation")`` keeps the
observation each transition reached, which this loop uses to bootstrap the value of time-limited episodes.

  python examples/torchrl_training_loop.py                  # inverted_pendulum
  python examples/torchrl_training_loop.py --tiny           # a few iterations on the `fast` env
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule

import brax_bridge
from brax_bridge.torchrl import BraxBridgeEnv


def _mlp(n_in: int, n_out: int, hidden: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(n_in, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
        torch.nn.Linear(hidden, n_out),
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few iterations on the `fast` env")
    parser.add_argument("--env", default=None, help="environment name (default inverted_pendulum; tiny: fast)")
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)

    from torchrl.collectors import Collector
    from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    name = args.env or ("fast" if args.tiny else "inverted_pendulum")
    num_envs = args.num_envs or (16 if args.tiny else 256)
    iterations = args.iterations or (25 if args.tiny else 40)
    unroll, epochs, minibatches = (16, 4, 2) if args.tiny else (32, 4, 8)
    hidden = 16 if args.tiny else 64
    torch.manual_seed(args.seed)

    env = BraxBridgeEnv(name, num_envs, seed=args.seed, episode_length=20 if args.tiny else None)
    bridge = env.base_env.bridge
    obs_size, act_size = bridge.observation_size, bridge.action_size
    low, high = bridge.action_low, bridge.action_high
    actor = ProbabilisticActor(
        TensorDictModule(torch.nn.Sequential(_mlp(obs_size, 2 * act_size, hidden), NormalParamExtractor()),
                         in_keys=["observation"], out_keys=["loc", "scale"]),
        spec=env.action_spec,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": low, "high": high},
        return_log_prob=True,
    )
    critic = ValueOperator(_mlp(obs_size, 1, hidden), in_keys=["observation"])
    actor, critic = actor.to(env.device), critic.to(env.device)  # beside the physics (brax_bridge.default_device())
    loss_fn = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=1e-3, normalize_advantage=True)
    advantage = GAE(gamma=0.97, lmbda=0.95, value_network=critic)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=3e-4 if not args.tiny else 3e-3)

    frames = num_envs * unroll
    collector = Collector(env, actor, frames_per_batch=frames, total_frames=frames * iterations,
                          auto_register_policy_transforms=False)
    eval_env = BraxBridgeEnv(name, 64, seed=args.seed + 1, episode_length=20 if args.tiny else None)
    eval_steps = 20 if args.tiny else 1000
    reward_before = _deterministic_reward(eval_env, actor, eval_steps)
    copies_before = brax_bridge.stats().copies
    history: list[dict[str, float]] = []
    for i, batch in enumerate(collector):
        with torch.no_grad():
            # Bootstrap from the observation each transition reached (the terminal one where an episode ended),
            # not from the auto-reset observation that ("next", "observation") carries for the policy.
            bootstrap = batch.select("observation", *(("next", k) for k in ("reward", "done", "terminated")))
            bootstrap.set(("next", "observation"), batch.get(("next", "final_observation")))
            advantage(bootstrap)
            batch.set("advantage", bootstrap.get("advantage"))
            batch.set("value_target", bootstrap.get("value_target"))
        flat = batch.reshape(-1)
        for _ in range(epochs):
            for idx in torch.randperm(flat.numel(), device=flat.device).chunk(minibatches):
                losses = loss_fn(flat[idx])
                total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                optim.zero_grad()
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss_fn.parameters(), 1.0)
                optim.step()
        collector.update_policy_weights_()
        reward = batch.get(("next", "reward")).mean().item()
        history.append({"iteration": i, "mean_reward": reward, "loss": total.item()})
        print(f"iteration {i}: mean reward per step {reward:.3f}  loss {total.item():.3f}", flush=True)
    collector.shutdown()
    copies = brax_bridge.stats().copies - copies_before
    reward_after = _deterministic_reward(eval_env, actor, eval_steps)
    print(f"mean reward per step of the deterministic policy: {reward_before:.3f} before, {reward_after:.3f} after")
    return {
        "history": history,
        "copies": copies,
        "env": name,
        "eval_reward_before": reward_before,
        "eval_reward_after": reward_after,
    }


def _deterministic_reward(env: Any, actor: Any, steps: int) -> float:
    """Mean reward per step of the policy's mode over one rollout of every env from the same seeded reset."""
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    env.set_seed(0)
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(steps, actor, break_when_any_done=False)
    return rollout.get(("next", "reward")).mean().item()


if __name__ == "__main__":
    main()
