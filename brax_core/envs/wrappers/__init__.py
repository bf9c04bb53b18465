"""Environment wrappers."""
