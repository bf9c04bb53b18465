"""Running Brax 0.14.2's own PPO on this project's newer JAX (``brax_ppo_run.py``, ``vs_brax.py --brax-on-ours``)."""

from __future__ import annotations


def supply_device_put_replicated() -> None:
    """Brax 0.14.2's PPO calls ``jax.device_put_replicated``, which newer JAX releases dropped; this puts back a
    stand-in (one stacked copy per device, on the first device) when it is missing."""
    import jax

    if hasattr(jax, "device_put_replicated"):
        return

    def device_put_replicated(tree, devices):
        stack = lambda leaf: jax.device_put(jax.numpy.stack([leaf] * len(devices)), devices[0])  # noqa: E731
        return jax.tree_util.tree_map(stack, tree)

    jax.device_put_replicated = device_put_replicated
