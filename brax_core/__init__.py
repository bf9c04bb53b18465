"""brax_core: JAX physics environments on MuJoCo MJX and a native JAX PPO, with Brax's API."""

from brax_core import _quiet  # noqa: F401  (must run before mujoco.mjx is imported anywhere)

__version__ = "0.1.0"
