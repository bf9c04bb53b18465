"""Single-file PPO in the CleanRL style on ``brax_bridge.gymnasium.VectorEnv`` (continuous actions).

Usage:
  python examples/gymnasium_vector_ppo.py --tiny           # a few seconds on the `fast` env
  python examples/gymnasium_vector_ppo.py --env inverted_pendulum --num-envs 256 --iterations 60

The env returns torch tensors (``array="torch"``), so the rollout never leaves torch; auto-reset is Gymnasium's
next-step mode, where the step after an episode's end carries no transition: its reward is 0 and it is masked out
of GAE and the loss, exactly as CleanRL treats next-step resets. Gaussian policy, actions clipped to [-1, 1].
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from brax_bridge.gymnasium import VectorEnv


def _mlp(n_in: int, n_out: int, hidden: int, out_std: float) -> torch.nn.Sequential:
    net = torch.nn.Sequential(torch.nn.Linear(n_in, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, hidden),
                              torch.nn.Tanh(), torch.nn.Linear(hidden, n_out))
    torch.nn.init.orthogonal_(net[-1].weight, out_std)
    torch.nn.init.zeros_(net[-1].bias)
    return net


class Agent(torch.nn.Module):
    def __init__(self, obs_size: int, act_size: int, hidden: int):
        super().__init__()
        self.critic = _mlp(obs_size, 1, hidden, 1.0)
        self.actor_mean = _mlp(obs_size, act_size, hidden, 0.01)
        self.actor_logstd = torch.nn.Parameter(torch.full((act_size,), -0.5))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        mean = self.actor_mean(obs)
        dist = torch.distributions.Normal(mean, self.actor_logstd.exp().expand_as(mean))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.value(obs)


@torch.no_grad()
def deterministic_reward(env: VectorEnv, agent: Agent, steps: int, seed: int) -> float:
    """Mean reward per step of the policy's mean action over ``steps`` steps from the starts ``seed`` draws."""
    obs, _ = env.reset(seed=seed)
    total = torch.zeros(env.num_envs, device=env.bridge.device)
    for _ in range(steps):
        obs, reward, *_ = env.step(agent.actor_mean(obs).clamp(-1.0, 1.0))
        total += reward
    return float(total.mean()) / steps


@torch.no_grad()
def episode_return(env: VectorEnv, agent: Agent, max_steps: int, seed: int) -> float:
    """Mean return of each env's first episode under the policy's mean action (what a reward threshold means)."""
    obs, _ = env.reset(seed=seed)
    total = torch.zeros(env.num_envs, device=env.bridge.device)
    running = torch.ones(env.num_envs, dtype=torch.bool, device=env.bridge.device)
    for _ in range(max_steps):
        obs, reward, term, trunc, _ = env.step(agent.actor_mean(obs).clamp(-1.0, 1.0))
        total += reward * running
        running &= ~(term | trunc)
        if not running.any():
            break
    return float(total.mean())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few seconds on the `fast` env")
    parser.add_argument("--env", default=None, help="environment name (default inverted_pendulum; tiny: fast)")
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    name = args.env or ("fast" if args.tiny else "inverted_pendulum")
    num_envs = args.num_envs or (16 if args.tiny else 256)
    iterations = args.iterations or (30 if args.tiny else 60)
    steps, epochs, minibatches = (16, 4, 4) if args.tiny else (32, 4, 8)
    hidden = 32 if args.tiny else 64
    episode_length = 20 if args.tiny else None
    gamma, lam, clip, lr = 0.97, 0.95, 0.2, (3e-3 if args.tiny else 3e-4)
    torch.manual_seed(args.seed)

    env = VectorEnv(name, num_envs, episode_length=episode_length, seed=args.seed, array="torch")
    eval_env = VectorEnv(name, 64, episode_length=episode_length, seed=args.seed + 1, array="torch")
    eval_steps = episode_length or 1000
    obs_size, act_size = env.single_observation_space.shape[0], env.single_action_space.shape[0]
    device = env.bridge.device  # where the physics runs (brax_bridge.default_device()): the network goes there too
    agent = Agent(obs_size, act_size, hidden).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
    reward_before = deterministic_reward(eval_env, agent, eval_steps, seed=123)
    return_before = episode_return(eval_env, agent, eval_steps, seed=123)

    buf_obs = torch.zeros(steps, num_envs, obs_size, device=device)
    buf_act = torch.zeros(steps, num_envs, act_size, device=device)
    buf_logp, buf_rew, buf_val = (torch.zeros(steps, num_envs, device=device) for _ in range(3))
    buf_done, buf_valid = (torch.zeros(steps, num_envs, device=device) for _ in range(2))

    obs, _ = env.reset(seed=args.seed)
    # next-step mode: the call after an episode ends only resets; that step is no transition of the policy's
    after_end = torch.zeros(num_envs, dtype=torch.bool, device=device)
    history, start = [], time.perf_counter()
    for iteration in range(iterations):
        for t in range(steps):
            with torch.no_grad():
                action, logp, _, value = agent.act(obs)
            buf_obs[t], buf_act[t], buf_logp[t], buf_val[t] = obs, action, logp, value
            buf_valid[t] = (~after_end).float()
            obs, reward, term, trunc, _ = env.step(action.clamp(-1.0, 1.0))
            with torch.no_grad():
                # a truncated episode would have gone on: bootstrap from the value of the observation it reached
                reward = reward + gamma * agent.value(obs) * trunc.float()
            buf_rew[t] = reward
            after_end = term | trunc
            buf_done[t] = after_end.float()

        with torch.no_grad():
            advantages = torch.zeros(steps, num_envs, device=device)
            last, next_value = torch.zeros(num_envs, device=device), agent.value(obs)
            for t in reversed(range(steps)):
                nonterminal = 1.0 - buf_done[t]
                delta = buf_rew[t] + gamma * next_value * nonterminal - buf_val[t]
                last = delta + gamma * lam * nonterminal * last
                # a reset-only step passes nothing back: the episode before it ended at the step before
                last = last * buf_valid[t]
                advantages[t] = last
                next_value = buf_val[t]
            returns = advantages + buf_val

        valid = buf_valid.flatten().bool()
        b_obs, b_act = buf_obs.flatten(0, 1)[valid], buf_act.flatten(0, 1)[valid]
        b_logp, b_adv, b_ret = buf_logp.flatten()[valid], advantages.flatten()[valid], returns.flatten()[valid]
        size = b_obs.shape[0]
        for _ in range(epochs):
            for idx in torch.randperm(size, device=device).chunk(minibatches):
                _, logp, entropy, value = agent.act(b_obs[idx], b_act[idx])
                ratio = (logp - b_logp[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
                value_loss = 0.5 * (value - b_ret[idx]).pow(2).mean()
                loss = policy_loss + 0.5 * value_loss - 1e-3 * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
        history.append({"iteration": iteration, "mean_reward": float(buf_rew.sum() / buf_valid.sum())})

    seconds = time.perf_counter() - start
    reward_after = deterministic_reward(eval_env, agent, eval_steps, seed=123)
    return_after = episode_return(eval_env, agent, eval_steps, seed=123)
    result = {
        "env": name,
        "history": history,
        "eval_reward_before": reward_before,
        "eval_reward_after": reward_after,
        "eval_return_before": return_before,
        "eval_return_after": return_after,
        "seconds": seconds,
    }
    print(f"{name}: deterministic reward per step {reward_before:.3f} -> {reward_after:.3f}, "
          f"episode return {return_before:.1f} -> {return_after:.1f} ({iterations} iterations, {seconds:.1f} s)")
    return result


if __name__ == "__main__":
    main()
