"""Proximal policy optimisation (``brax.training.agents.ppo`` counterpart)."""
