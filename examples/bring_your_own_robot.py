"""Bring your own robot: MuJoCo models of your own as brax_core envs, trained by both trainers and driven from
TorchRL and Gymnasium code.

1. ``Cart``, written here: MJCF text loaded with ``mjcf.loads``, with its own reward, termination and reset.
   brax_core's JAX PPO trains it.
2. ``Arm3``, from ``my_robot.py``: MJCF loaded from a file path. torch_ppo trains it with domain randomisation
   (each env's joint damping drawn by ``randomize_damping``) and a network of your own: ``residual_networks``, a
   LayerNorm/ELU residual policy and value module given as ``network_factory``; ``torch_ppo.load_policy`` rebuilds
   the trained policy from its checkpoint with the same factory.
3. The reloaded torch policy acting on one ``TorchEnv`` of ``Arm3`` from TorchRL code (``BraxBridgeEnv``), then from
   Gymnasium code (``VectorEnv``): the physics stays in JAX, the libraries see torch tensors.
4. The command line takes the same file: the commands are printed, and ``--cli`` runs them.

  python examples/bring_your_own_robot.py
  python examples/bring_your_own_robot.py --tiny          # seconds: tiny sizes, checks that everything runs
  python examples/bring_your_own_robot.py --tiny --cli    # and the command line too
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
from typing import Any

import jax
import jax.numpy as jnp
import torch
from torch import nn

import brax_bridge
import torch_ppo
from brax_bridge import TorchEnv
from brax_core.envs import PipelineEnv, State
from brax_core.extras import install_line
from brax_core.io import mjcf
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as ppo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import my_robot  # noqa: E402  (beside this file)

CART_XML = """
<mujoco model="cart">
  <option timestep="0.02"/>
  <worldbody>
    <geom name="rail" type="capsule" fromto="-1 0 0 1 0 0" size="0.01" contype="0" conaffinity="0"/>
    <site name="goal" pos="0.3 0 0.05" size="0.03" rgba="0.9 0.2 0.2 1"/>
    <body name="cart">
      <joint name="slider" type="slide" axis="1 0 0" damping="0.1"/>
      <geom type="box" size="0.05 0.03 0.03" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="slider" gear="5" ctrllimited="true" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""


class Cart(PipelineEnv):
    """A cart on a 2 m rail that must stop at the goal marker (0.3 m right of the middle).

    Observation: position minus the goal's, velocity. Reward: minus the distance to the goal, minus a tenth of the
    speed. Termination: the cart runs off either end of the rail. Reset: anywhere within 0.5 m of the middle, at a
    speed within 0.1 m/s.
    """

    default_episode_length = 100

    def __init__(self, **kwargs: Any):
        super().__init__(mjcf.loads(CART_XML), n_frames=2, **kwargs)
        self._goal = float(self.mj_model.site("goal").pos[0])  # read from the model, so the XML decides it

    def reset(self, rng: jax.Array) -> State:
        rng_q, rng_qd = jax.random.split(rng)
        qpos = jax.random.uniform(rng_q, (1,), jnp.float32, -0.5, 0.5)
        qvel = jax.random.uniform(rng_qd, (1,), jnp.float32, -0.1, 0.1)
        pipeline_state = self.pipeline_init(qpos, qvel)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state, self._obs(pipeline_state), zero, zero)

    def step(self, state: State, action: jax.Array) -> State:
        pipeline_state = self.pipeline_step(state.pipeline_state, action)
        obs = self._obs(pipeline_state)
        reward = -jnp.abs(obs[0]) - 0.1 * jnp.abs(obs[1])
        done = (jnp.abs(pipeline_state.qpos[0]) > 1.0).astype(jnp.float32)
        return self.end_if_diverged(state.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, done=done))

    def _obs(self, pipeline_state: Any) -> jax.Array:
        return jnp.stack([pipeline_state.qpos[0] - self._goal, pipeline_state.qvel[0]])


def train_cart_with_jax(tiny: bool) -> list[tuple[int, float]]:
    """brax_core's PPO (Brax's ``ppo.train``) on ``Cart``; returns (env steps, evaluation reward) per report."""
    small = functools.partial(ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=(8,),
                              value_hidden_layer_sizes=(8,))
    sizes = dict(num_timesteps=320, num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5, num_evals=2,
                 num_eval_envs=8, episode_length=20, network_factory=small) if tiny else dict(
        num_timesteps=300_000, num_envs=128, batch_size=256, num_minibatches=8, unroll_length=20, num_evals=6,
        num_eval_envs=128, episode_length=100)
    reports: list[tuple[int, float]] = []
    ppo.train(Cart(), learning_rate=3e-4, entropy_cost=1e-3, discounting=0.97, normalize_observations=True,
              progress_fn=lambda step, metrics: reports.append((step, float(metrics["eval/episode_reward"]))),
              **sizes)
    print(f"Cart, JAX PPO: evaluation reward {reports[0][1]:.1f} -> {reports[-1][1]:.1f}")
    return reports


class ResidualBlock(nn.Module):
    """``x + Linear(ELU(LayerNorm(x)))``: a pre-norm residual block."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.linear(nn.functional.elu(self.norm(x)))


def residual_mlp(in_size: int, out_size: int, width: int, blocks: int) -> nn.Module:
    """Linear in, ``blocks`` residual blocks, LayerNorm and ELU, linear out."""
    return nn.Sequential(
        nn.Linear(in_size, width),
        *(ResidualBlock(width) for _ in range(blocks)),
        nn.LayerNorm(width),
        nn.ELU(),
        nn.Linear(width, out_size),
    )


def residual_networks(
    observation_size: int, action_size: int, width: int = 64, blocks: int = 2
) -> tuple[nn.Module, nn.Module]:
    """A ``network_factory`` for torch_ppo: the policy gives ``2 * action_size`` numbers per observation (the mean of
    each action, then its scale before the softplus), the value one."""
    policy = residual_mlp(observation_size, 2 * action_size, width, blocks)
    return policy, residual_mlp(observation_size, 1, width, blocks)


def tiny_residual_networks(observation_size: int, action_size: int) -> tuple[nn.Module, nn.Module]:
    return residual_networks(observation_size, action_size, width=8, blocks=1)


def train_arm_with_torch(tiny: bool, checkpoints: str) -> tuple[list[tuple[int, float]], Any, Any]:
    """torch_ppo on ``Arm3`` with each training env's joint damping randomised and the residual networks, saved to
    ``checkpoints``; returns the reports, the trained deterministic policy (``policy(obs) -> (action, extras)`` on
    torch tensors) and the same policy rebuilt from the checkpoint by ``torch_ppo.load_policy``."""
    factory = tiny_residual_networks if tiny else residual_networks
    sizes = dict(num_timesteps=320, num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5, num_evals=2,
                 num_eval_envs=8, episode_length=20) if tiny else dict(
        num_timesteps=1_000_000, num_envs=128, batch_size=256, num_minibatches=8, unroll_length=20, num_evals=6,
        num_eval_envs=128, episode_length=100)
    reports: list[tuple[int, float]] = []
    make_policy, params, _ = torch_ppo.train(
        my_robot.Arm3(), learning_rate=1e-3, entropy_cost=1e-3, discounting=0.97, normalize_observations=True,
        randomization_fn=my_robot.randomize_damping, network_factory=factory, save_checkpoint_path=checkpoints,
        progress_fn=lambda step, metrics: reports.append((step, float(metrics["eval/episode_reward"]))), **sizes)
    print(f"Arm3, torch PPO with randomised damping and residual networks: evaluation reward {reports[0][1]:.1f} -> "
          f"{reports[-1][1]:.1f}")
    reloaded = torch_ppo.load_policy(checkpoints, network_factory=factory)  # the newest checkpoint
    return reports, make_policy(params, deterministic=True), reloaded


def drive_from_torchrl_and_gymnasium(policy: Any, num_envs: int, steps: int) -> dict[str, Any]:
    """``policy`` on one ``TorchEnv`` of ``Arm3`` (one compiled step), under TorchRL's and then Gymnasium's API."""
    bridge = TorchEnv(my_robot.Arm3(), num_envs, episode_length=steps, seed=1)
    act = lambda obs: policy(obs)[0]  # noqa: E731  (the action; extras are for training)
    found: dict[str, Any] = {}
    try:
        from tensordict.nn import TensorDictModule

        from brax_bridge.torchrl import BraxBridgeEnv

        actor = TensorDictModule(act, in_keys=["observation"], out_keys=["action"])
        with torch.inference_mode():
            rollout = BraxBridgeEnv(bridge).rollout(steps, actor, break_when_any_done=False)
        found["torchrl_steps"] = tuple(rollout.batch_size)
        found["torchrl_return"] = float(rollout.get(("next", "reward")).sum(-1).mean())
    except ImportError:  # the torchrl extra is not installed
        print(f"TorchRL is not installed: {install_line('torchrl')}")
    try:
        from brax_bridge.gymnasium import VectorEnv

        env = VectorEnv(bridge, array="torch")
        obs, _ = env.reset(seed=0)
        total = torch.zeros(num_envs, device=bridge.device)
        with torch.inference_mode():
            for _ in range(steps):
                obs, reward, terminated, truncated, _ = env.step(act(obs))
                total += reward
        found["gymnasium_observation"] = tuple(obs.shape)
        found["gymnasium_return"] = float(total.mean())
    except ImportError:
        print(f"Gymnasium is not installed: {install_line('gymnasium')}")
    print(f"Arm3 through the bridge: {found}")
    return found


def command_lines(tiny: bool) -> list[list[str]]:
    """``brax-bridge`` on ``Arm3`` by file path: train with each trainer, then evaluate."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = f"{os.path.join(here, 'my_robot.py')}:Arm3"
    tiny_flags = ["--num-timesteps", "320", "--num-envs", "8", "--batch-size", "8", "--num-minibatches", "2",
                  "--unroll-length", "5", "--num-evals", "2", "--num-eval-envs", "8", "--episode-length", "20",
                  "--policy-hidden-layer-sizes", "8", "--value-hidden-layer-sizes", "8"] if tiny else []
    out = os.path.join("runs", "arm3")
    return [
        ["brax-bridge", "train", "--env", env, "--trainer", "jax", "--out", f"{out}-jax", *tiny_flags],
        ["brax-bridge", "train", "--env", env, "--trainer", "torch", "--out", f"{out}-torch", *tiny_flags],
        ["brax-bridge", "eval", f"{out}-torch", "--episodes", "4"],
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: seconds, to check that everything runs")
    parser.add_argument("--cli", action="store_true", help="also run the brax-bridge commands (in runs/)")
    args = parser.parse_args(argv)
    cart_reports = train_cart_with_jax(args.tiny)
    with tempfile.TemporaryDirectory() as checkpoints:
        arm_reports, policy, reloaded = train_arm_with_torch(args.tiny, checkpoints)
    observations = torch.randn(16, 15, device=brax_bridge.default_device())  # where torch_ppo trained
    result: dict[str, Any] = {
        "cart_reports": cart_reports,
        "arm_reports": arm_reports,
        "reloaded_actions_match": torch.equal(policy(observations)[0], reloaded(observations)[0]),
        "bridge": drive_from_torchrl_and_gymnasium(reloaded, num_envs=4, steps=5 if args.tiny else 100),
    }
    commands = command_lines(args.tiny)
    result["cli"] = []
    for command in commands:
        print(" ".join(command))
        if args.cli:
            # The installed `brax-bridge` is `python -m brax_bridge_app.cli`.
            done = subprocess.run([sys.executable, "-m", "brax_bridge_app.cli", *command[1:]], check=False)
            result["cli"].append(done.returncode)
    return result


if __name__ == "__main__":
    main()
