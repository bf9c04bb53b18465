"""Augmented Random Search (``brax.training.agents.ars`` counterpart)."""
