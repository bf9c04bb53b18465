"""Analytic policy gradients: backpropagate a torch loss through the JAX physics with ``differentiable=True``.

Every ``TorchEnv.step`` is a ``torch.autograd.Function`` whose backward is ``jax.vjp`` of the same jitted step,
so ``loss.backward()`` flows from rewards and observations through MuJoCo MJX back to the policy's weights.
``inverted_pendulum``'s own reward is a constant 1 per step, which has no gradient, so the objective is a
smooth ``reward_fn`` computed inside the jitted step: keep the pole upright and the cart centred, with a small
action cost. The policy is a small torch MLP; each iteration rolls out ``--horizon`` steps from the same
start states and takes one Adam step on the negated objective (truncated backpropagation through time).

The tiny run uses ``PointMass`` below instead, a damped point mass in plain JAX that compiles in milliseconds
(the registered ``fast`` env only checks whether an action is positive, so no gradient reaches the policy through it).

  python examples/differentiable_simulation.py              # inverted_pendulum
  python examples/differentiable_simulation.py --tiny       # a few iterations on PointMass
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import jax.numpy as jnp
import torch

from brax_bridge import TorchEnv
from brax_core.envs import Env, State


class PointMass(Env):
    """A damped point mass on a line, paid ``1 - |position|`` per step; starts uniformly in ``[-1, 1]`` at rest.

    Observation ``[position, velocity]``; the action in ``[-1, 1]`` accelerates it. Every step is smooth in the
    action, so gradients flow from each reward back to all earlier actions.
    """

    default_episode_length = 100

    def reset(self, rng: jax.Array) -> State:
        obs = jnp.concatenate([jax.random.uniform(rng, (1,), jnp.float32, -1.0, 1.0), jnp.zeros((1,), jnp.float32)])
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=obs, obs=obs, reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        position, velocity = state.obs[0], state.obs[1]
        velocity = 0.9 * velocity + 0.5 * jnp.clip(action[0], -1.0, 1.0)
        position = position + 0.05 * velocity
        obs = jnp.stack([position, velocity])
        return state.replace(pipeline_state=obs, obs=obs, reward=1.0 - jnp.abs(position))

    @property
    def action_size(self) -> int:
        return 1


def upright_reward(state, action):
    """Smooth per-step reward for the cart-pole: pole angle and cart offset of the observation reached."""
    reached = state.info["final_obs"]
    return 1.0 - reached[:, 1] ** 2 - 0.1 * reached[:, 0] ** 2 - 1e-3 * jnp.sum(action**2, axis=-1)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few iterations on the PointMass env")
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--horizon", type=int, default=None)
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    args = parser.parse_args(argv)

    if args.tiny:
        env = TorchEnv(PointMass(), num_envs=args.num_envs or 4, differentiable=True, seed=0)
        iterations, horizon, lr = args.iterations or 6, args.horizon or 8, args.lr or 0.05
    else:
        env = TorchEnv("inverted_pendulum", num_envs=args.num_envs or 64, differentiable=True, seed=0,
                       reward_fn=upright_reward)
        iterations, horizon, lr = args.iterations or 30, args.horizon or 30, args.lr or 3e-3
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(env.observation_size, 32), torch.nn.Tanh(),
                                 torch.nn.Linear(32, env.action_size), torch.nn.Tanh()).to(env.device)
    high = env.action_high
    optim = torch.optim.Adam(policy.parameters(), lr=lr)

    history = []
    for i in range(iterations):
        obs = env.reset(seed=0)["observation"]  # the same start states: progress is comparable across iterations
        total = torch.zeros((), device=env.device)
        for _ in range(horizon):
            nxt = env.step(policy(obs) * high)["next"]
            total = total + nxt["reward"].mean()
            obs = nxt["observation"]
        objective = total / horizon
        optim.zero_grad()
        (-objective).backward()
        optim.step()
        env.detach()
        history.append(objective.item())
        print(f"iteration {i}: mean reward per step {history[-1]:.4f}", flush=True)
    return {"history": history, "env": type(env.unwrapped_env).__name__}


if __name__ == "__main__":
    main()
