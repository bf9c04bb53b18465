"""torch_training: what every torch trainer of this library shares (torch_ppo, torch_analytic): the observation
normaliser, layers, the bridge evaluator, the device rule, gradient norms and the checkpoint's files."""

import brax_bridge  # noqa: F401  (first: it configures JAX/torch GPU memory sharing before JAX starts)
