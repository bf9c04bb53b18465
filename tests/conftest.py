"""Test-session set-up: quiet logs and a persistent XLA compile cache.

Identical computations (the same env step compiled by several tests or examples) are compiled once per
machine instead of once per test, which keeps the suite inside its time budget on two cores.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Test runs are short, so compiling is most of their cost: XLA's lowest CPU optimisation level compiles about
# twice as fast. Set here for direct jax.jit calls and for the trainers' and the bridge's own compile options;
# subprocess tests inherit both.
os.environ.setdefault("BRAX_CORE_CPU_OPT_LEVEL", "0")
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()

import jax  # noqa: E402

_CACHE = os.environ.get("BRAX_BRIDGE_JAX_CACHE", "~/.cache/brax_bridge/jax")
jax.config.update("jax_compilation_cache_dir", os.path.expanduser(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
