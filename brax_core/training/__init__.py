"""Training algorithms and their building blocks (``brax.training`` counterpart)."""
