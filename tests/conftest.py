"""Test-session set-up: quiet logs and a persistent XLA compile cache.

Identical computations (the same env step compiled by several tests or examples) are compiled once per
machine instead of once per test, which keeps the suite inside its time budget on two cores.
"""

import atexit
import gc
import os

import pytest
from session_once import once_per_session

from brax_core import _jax_install  # reads package metadata only: JAX must not be imported before the set-up below


def _cuda_for_both() -> bool:
    """Whether torch sees a CUDA GPU and JAX has its CUDA plugin (CUDA torch beside CPU-only JAX is common)."""
    import torch

    return torch.cuda.is_available() and _jax_install.cuda_plugin_installed()


_GPU = _cuda_for_both()
# The suite's JAX work runs on the CPU everywhere, so CI and a GPU machine run the same numerics and sizes. On a
# machine with a CUDA GPU, JAX also starts its CUDA backend, second in priority: the default device stays the CPU
# while the tests marked ``gpu`` place their arrays, envs and trainers on the GPU explicitly.
os.environ.setdefault("JAX_PLATFORMS", "cpu,cuda" if _GPU else "cpu")
# Every xdist worker is a JAX process: without this each would take 75% of the GPU's memory when its backend starts.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Test runs are short, so compiling is most of their cost: XLA's lowest CPU optimisation level compiles about
# twice as fast, and without the CPU fusion emitters a third faster again (see brax_core/compile.py). Set here for
# direct jax.jit calls and for the trainers' and the bridge's own compile options; subprocess tests inherit both.
os.environ.setdefault("BRAX_CORE_CPU_OPT_LEVEL", "0")

# jaxlib 0.11 dropped the fusion-emitters flag, and XLA aborts the process on a flag it does not know.
_XLA_TEST_FLAGS = ("--xla_backend_optimization_level=0",) + (
    ("--xla_cpu_use_fusion_emitters=false",) if _jax_install.jaxlib_version() < (0, 11) else ()
)
for _flag in _XLA_TEST_FLAGS:
    if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()

import jax  # noqa: E402

# At exit the interpreter runs the garbage collector over everything still alive: in a process that loaded JAX,
# torch and MuJoCo that is seconds per process (a worker after hundreds of tests, every subprocess that imports this
# file). Moving those objects to the collector's permanent generation lets reference counting free them alone.
atexit.register(gc.freeze)


# A pytest worker's heap grows to millions of objects (JAX, torch and MuJoCo, their caches, what module fixtures
# keep), and each full collection walks all of it: up to seconds each, 43-54 s of each worker's time over the
# suite. After every test one collection frees the cycles that test left, then the survivors move to the permanent
# generation, which later collections skip; so a collection costs what the running test created, and the counts of
# live objects that the memory tests take stay cheap in a worker. Inside a test a full collection waits for ten
# times Python's usual count, since the test's end collects anyway. The price: a cycle that outlives its test (a
# module fixture's) is never collected once frozen; reference counting still frees everything else, and the
# workers' peak memory stays a few GB.
def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()
    generation0, generation1, _ = gc.get_threshold()
    gc.set_threshold(generation0, generation1, 100)


def pytest_runtest_logfinish(nodeid, location):
    gc.collect()
    gc.freeze()


_CACHE = os.environ.get("BRAX_BRIDGE_JAX_CACHE", "~/.cache/brax_bridge/jax")
jax.config.update("jax_compilation_cache_dir", os.path.expanduser(_CACHE))
# Lower than the library's 0.5 s: the suite compiles about 350 programs of 0.1-0.5 s (small helpers, tiny test
# networks), some 90 s of its workers' time compiled again on every run below that bar; reading one back takes
# milliseconds.
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# Files whose tests compile the most (whole trainers, gradients through MJX). Running them first lets the two
# xdist workers (``make test`` uses ``-n 2 --dist worksteal``) finish together on the many short tests after them,
# instead of one worker idling while the other compiles a trainer at the end.
_HEAVY_FIRST = ("test_every_env_trains.py", "test_bridge_differentiable.py", "test_ppo_examples.py")


def pytest_collection_modifyitems(config, items):
    if not _GPU:
        skip = pytest.mark.skip(reason="needs a CUDA GPU seen by torch and by JAX's CUDA plugin")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)

    def rank(item):
        # First of all the modules whose tests share one subprocess per session (tests/session_once.py): at the head
        # of the queue xdist hands the first worker, their tests run there one after the other, and the other worker
        # never waits on the subprocess instead of running tests.
        if getattr(getattr(item, "module", None), "once_per_session", None) is once_per_session:
            return -1
        name = item.path.name
        return _HEAVY_FIRST.index(name) if name in _HEAVY_FIRST else len(_HEAVY_FIRST)

    items.sort(key=rank)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """JAX's compile cache (and so the program cache) in a fresh folder for one test; yields the programs folder."""
    from brax_core import program_cache

    saved = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "jax"))
    monkeypatch.delenv(program_cache.ENV_VAR, raising=False)
    yield tmp_path / "jax" / "programs"
    jax.config.update("jax_compilation_cache_dir", saved)
