"""Tasks the gradient benchmarks train on that are a registered env with other arguments, for the command line's
``--env benchmarks/gradient_tasks.py:NAME``."""

from __future__ import annotations

from typing import Any

from brax_core.envs.inverted_pendulum import InvertedPendulum


def inverted_pendulum_upright(**kwargs: Any) -> InvertedPendulum:
    """``inverted_pendulum`` paid ``cos(pole angle) - 0.01 * action²`` a step (``reward="upright"``): a dense reward
    whose action gradient is not zero, where the default reward's (1 a step while alive) is."""
    return InvertedPendulum(reward="upright", **kwargs)
