"""Evolution strategies (``brax.training.agents.es`` counterpart)."""
