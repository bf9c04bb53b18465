"""SHAC's configuration (``config.SHACConfig``); the trainer is ``torch_analytic.shac``."""
