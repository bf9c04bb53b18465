"""torch_ppo: PPO in PyTorch on brax_core environments through brax_bridge, at parity with the JAX PPO."""

import brax_bridge  # noqa: F401  (first: it configures JAX/torch GPU memory sharing before JAX starts)
from torch_ppo.checkpoint import load_policy
from torch_ppo.train import train, train_from_config

__all__ = ["load_policy", "train", "train_from_config"]
