"""Training agents."""
