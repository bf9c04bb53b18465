"""System identification by gradient: recover halfcheetah's link masses and joint damping from its trajectories.

1. The "true" system: the model's seven link masses and six joint dampings, each scaled by a random factor.
2. Record trajectories of it: random actions from random start states; at each step the physics state the next
   step starts from (``qpos``, ``qvel`` and the solver's warm start) and the observation reached.
3. Identify: start from the nominal model, with each mass and damping written as its nominal value times
   ``exp(theta)``. Each Adam step puts a batch of recorded states into the envs (``set_physics``), steps them
   ``--horizon`` steps with the recorded actions on the model ``set_system`` sets from ``theta``, and takes the
   mean squared error of the predicted observations against the recorded ones (each dimension scaled by its spread
   in the records). ``loss.backward()`` reaches ``theta`` through every step's VJP (``TorchEnv(differentiable=True)``).
   Short horizons keep the gradient well conditioned: over long ones the error compounds through the contacts.
4. Report the relative errors of the recovered parameters against the truth, before and after, and the wall time.

One ``TorchEnv`` does both: its steps without gradients (recording) and with them (identifying) run the programs
compiled for the same layout of fields (shared masses and damping), so new values never recompile anything.

  python examples/system_identification.py            # 32 envs, 200 Adam steps
  python examples/system_identification.py --tiny     # 40 steps on 8 envs, for the test suite
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from brax_bridge import TorchEnv

# The recorded physics a rollout starts from: positions, velocities and the constraint solver's warm start
# (halfcheetah's solver runs one Newton iteration from it, so the step depends on it).
STATE_FIELDS = ("qpos", "qvel", "qacc_warmstart")


def record(env: TorchEnv, steps: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """``steps`` steps of every env with random actions: the states each step started from ``[steps, N, ...]``,
    the actions and the observations reached."""
    env.reset(seed=int(torch.randint(0, 2**31 - 1, (), generator=generator)))
    states: dict[str, list[torch.Tensor]] = {name: [] for name in STATE_FIELDS}
    actions, observations = [], []
    with torch.no_grad():
        for _ in range(steps):
            physics = env.physics
            for name in STATE_FIELDS:
                states[name].append(physics[name])
            action = torch.rand(env.num_envs, env.action_size, generator=generator) * 2 - 1
            actions.append(action)
            observations.append(env.step(action)["next", "observation"].clone())
    return {**{name: torch.stack(v) for name, v in states.items()}, "action": torch.stack(actions),
            "observation": torch.stack(observations)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="40 Adam steps on 8 envs, compiled fast")
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--iterations", type=int, default=None, help="Adam steps")
    parser.add_argument("--record-steps", type=int, default=None, help="recorded steps per env")
    parser.add_argument("--horizon", type=int, default=None, help="steps of each predicted rollout")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    num_envs = args.num_envs or (8 if args.tiny else 32)
    iterations = args.iterations or (40 if args.tiny else 200)
    record_steps = args.record_steps or (24 if args.tiny else 100)
    horizon = args.horizon or (2 if args.tiny else 4)
    lr = args.lr or (0.05 if args.tiny else 0.03)
    start = time.perf_counter()

    # The time limit never ends a recorded or predicted rollout (an auto-reset would replace the state mid-way).
    env = TorchEnv("halfcheetah", num_envs=num_envs, differentiable=True, episode_length=10**6, seed=args.seed,
                   cpu_opt_level=0 if args.tiny else None)
    nominal = env.system
    mass0, damping0 = nominal["body_mass"], nominal["dof_damping"]
    links, joints = slice(1, None), slice(3, None)  # the world body has no mass; the root's dofs no damping
    generator = torch.Generator().manual_seed(args.seed)
    true_mass_scale = torch.empty(mass0[links].shape).uniform_(0.7, 1.4, generator=generator)
    true_damping_scale = torch.empty(damping0[joints].shape).uniform_(0.5, 2.0, generator=generator)

    def system(mass_log_scale: torch.Tensor, damping_log_scale: torch.Tensor) -> dict[str, torch.Tensor]:
        mass = torch.cat([mass0[:1], mass0[links] * mass_log_scale.exp()])
        damping = torch.cat([damping0[:3], damping0[joints] * damping_log_scale.exp()])
        return {"body_mass": mass, "dof_damping": damping}

    env.set_system(**system(true_mass_scale.log(), true_damping_scale.log()))
    data = record(env, record_steps, generator)
    spread = data["observation"].flatten(0, 1).std(0) + 1e-3

    theta_mass = torch.zeros_like(true_mass_scale, requires_grad=True)
    theta_damping = torch.zeros_like(true_damping_scale, requires_grad=True)
    optimizer = torch.optim.Adam([theta_mass, theta_damping], lr=lr)

    def errors() -> dict[str, float]:
        with torch.no_grad():
            mass_error = (theta_mass.exp() / true_mass_scale - 1).abs().mean().item()
            damping_error = (theta_damping.exp() / true_damping_scale - 1).abs().mean().item()
        return {"mass": mass_error, "damping": damping_error}

    before = errors()
    envs = torch.arange(num_envs)
    history = []
    for iteration in range(iterations):
        t0 = torch.randint(0, record_steps - horizon + 1, (num_envs,), generator=generator)
        env.set_system(**system(theta_mass, theta_damping))
        env.set_physics({name: data[name][t0, envs] for name in STATE_FIELDS})
        loss = torch.zeros(())
        for k in range(horizon):
            predicted = env.step(data["action"][t0 + k, envs])["next", "observation"]
            loss = loss + (((predicted - data["observation"][t0 + k, envs]) / spread) ** 2).mean() / horizon
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        env.detach()
        history.append(loss.item())
        if iteration % max(1, iterations // 10) == 0 or iteration == iterations - 1:
            now = errors()
            print(f"step {iteration:4d}  loss {history[-1]:.5f}  mass error {now['mass']:.3f}  "
                  f"damping error {now['damping']:.3f}", flush=True)
    after = errors()
    wall = time.perf_counter() - start
    print(f"mean relative error of the masses {before['mass']:.3f} -> {after['mass']:.3f}, of the damping "
          f"{before['damping']:.3f} -> {after['damping']:.3f} ({wall:.0f} s, compiling included)")
    return {"before": before, "after": after, "history": history, "wall_s": wall,
            "mass_scale": theta_mass.detach().exp(), "true_mass_scale": true_mass_scale,
            "damping_scale": theta_damping.detach().exp(), "true_damping_scale": true_damping_scale}


if __name__ == "__main__":
    main()
