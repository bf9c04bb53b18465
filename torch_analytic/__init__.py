"""Trainers that follow the analytic gradient of the return through MuJoCo MJX's physics, in PyTorch through
the bridge's differentiable ``TorchEnv``: ``torch_analytic.apg`` (Brax's analytic policy gradient, with the JAX
APG's semantics and configuration, ``APGConfig``) and ``torch_analytic.shac`` (Short-Horizon Actor-Critic: the
analytic gradient over short windows, each closed by a learned value; ``SHACConfig``). ``load_policy`` rebuilds a
policy from a checkpoint of either."""

import brax_bridge  # noqa: F401  (first: it configures JAX/torch GPU memory sharing before JAX starts)
from torch_analytic import apg, shac
from torch_analytic.checkpoint import load_policy

__all__ = ["apg", "load_policy", "shac"]
