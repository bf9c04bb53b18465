"""brax_core: JAX physics environments on MuJoCo MJX and a native JAX PPO, with Brax's API."""

# No imports here: `import brax_core.training.agents.ppo.config` (the hyperparameter schema, read by the command
# line's --help) must not load JAX or MuJoCo. The modules that import mujoco import `_quiet` before it.

__version__ = "0.1.0"
