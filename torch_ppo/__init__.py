"""torch_ppo: PPO in PyTorch on brax_core environments through brax_bridge, at parity with the JAX PPO."""

from torch_ppo.train import train

__all__ = ["train"]
