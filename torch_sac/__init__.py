"""Soft Actor-Critic in PyTorch on the bridge, with the JAX SAC's semantics and configuration (``SACConfig``):
``torch_sac.train`` / ``train_from_config``, its networks (``SACActor``, ``TwinQ``), losses and replay buffer on the
env's device; ``load_policy`` rebuilds a policy from a checkpoint."""

import brax_bridge  # noqa: F401  (first: it configures JAX/torch GPU memory sharing before JAX starts)
from torch_sac import losses
from torch_sac.checkpoint import load_policy
from torch_sac.networks import SACActor, TwinQ
from torch_sac.replay_buffer import ReplayBuffer
from torch_sac.train import train, train_from_config

__all__ = ["ReplayBuffer", "SACActor", "TwinQ", "load_policy", "losses", "train", "train_from_config"]
