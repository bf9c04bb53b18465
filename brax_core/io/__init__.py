"""Model loading, images and the HTML viewer (``brax.io`` counterpart)."""

from brax_core import _quiet  # noqa: F401  (before any io module imports mujoco.mjx)
