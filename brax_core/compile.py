"""XLA compile options shared by every compiled entry point (trainers, the bridge, evaluation).

On a CPU, compiling MJX dominates short runs. LLVM's optimisation level trades compile time for step speed: level 0
compiles sooner than level 1 but steps slower (benchmarks/results/startup.md, "Compile options"). So level 0 pays
off only for runs that are short next to the physics' cost, and a model with contacts
costs far more per step: ``auto_level_for_run`` makes that choice for the JAX PPO and, with the
break-even of a physics step compiled alone, for torch_ppo's training env (``brax_bridge.TorchEnv``'s
``cpu_opt_level``); torch_ppo's evaluation compiles at the JAX trainer's level for the run.
``BRAX_CORE_CPU_OPT_LEVEL`` chooses for every compile: ``0``-``3``, ``default`` (XLA's own), or ``auto``
(unset: the caller's choice for its run length). Accelerators always use XLA's defaults.

Level 0 also turns off XLA's CPU fusion emitters (``xla_cpu_use_fusion_emitters``): at level 0 that shortens the
compile without slowing the step. At level 1 they are left on: without them the programs compile sooner, but the step
speeds up on some models and slows down on others; a few models compile pathologically slowly with them (both in
benchmarks/results/startup.md, "Compile options"). ``BRAX_CORE_CPU_FUSION_EMITTERS`` chooses: ``auto``
(unset: off at level 0 only), ``on`` or ``off`` at every level. Where a jaxlib has no such option
(``cpu_fusion_emitters_option`` asks), the level is the only option set.

Compiled programs are also kept in JAX's persistent compilation cache, so a second run of the same configuration
skips XLA (see ``enable_persistent_cache``; ``BRAX_BRIDGE_JAX_CACHE`` moves or disables it), and traced programs in
``brax_core.program_cache``, so that it skips tracing as well.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
from collections.abc import Iterable
from typing import Any

from brax_core import _jax_install

ENV_VAR = "BRAX_CORE_CPU_OPT_LEVEL"
_LEVELS = ("0", "1", "2", "3")
EMITTERS_ENV_VAR = "BRAX_CORE_CPU_FUSION_EMITTERS"
_EMITTER_SETTINGS = ("auto", "on", "off")
CACHE_ENV_VAR = "BRAX_BRIDGE_JAX_CACHE"
# Compiles shorter than this are not written: loading them would save little and they would crowd the folder.
_CACHE_MIN_COMPILE_SECONDS = 0.5
# Up to this many env steps a run compiles at level 0 (``auto_level_for_run``). Contacts lower the bar: their steps
# cost so much more that level 1 repays its longer compile sooner (benchmarks/results/startup.md, "Compile
# options").
_QUICK_COMPILE_STEPS = 1_000_000
_QUICK_COMPILE_STEPS_WITH_CONTACTS = 100_000
# The same choice for a physics step compiled alone (the bridge's step, which torch_ppo drives): its compile is a
# fraction of a whole training program's, so level 1 repays it after fewer env steps (break-even points in
# benchmarks/results/startup.md, "Compile options").
_QUICK_STEP_COMPILE_STEPS = 250_000
_QUICK_STEP_COMPILE_STEPS_WITH_CONTACTS = 50_000
# The same choice for a program differentiated through the physics (the JAX APG's epoch): level 0 runs its reverse
# pass 3.5x slower than level 1 where a forward program loses little, so level 1 repays its compile after far
# fewer env steps (benchmarks/results/startup.md, "Compile options, differentiated programs").
_QUICK_GRADIENT_STEPS = 200_000
_QUICK_GRADIENT_STEPS_WITH_CONTACTS = 50_000


def default_cache_dir() -> str:
    """The per-user cache folder: ``$XDG_CACHE_HOME/brax_bridge/jax``, else ``~/.cache/brax_bridge/jax``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "brax_bridge", "jax")


def enable_persistent_cache() -> str | None:
    """Points JAX's persistent compilation cache at a per-user folder; returns the folder in use (None: off).

    Runs when ``brax_core.envs`` is imported, so the trainers and the bridge start warm by default. Precedence:
    ``BRAX_BRIDGE_JAX_CACHE`` set to a folder wins; set to the empty string it leaves JAX's settings alone (the
    cache stays off unless JAX's own ``jax_compilation_cache_dir`` is set); unset, a folder the program already gave
    JAX (``jax.config.update("jax_compilation_cache_dir", ...)`` or ``JAX_COMPILATION_CACHE_DIR``) is kept, and
    otherwise the default folder is used. Takes effect for compiles that start after it.
    """
    import jax  # here, not at module level: the hyperparameter schema imports this module without JAX

    chosen = os.environ.get(CACHE_ENV_VAR)
    current = jax.config.jax_compilation_cache_dir
    if chosen == "" or (chosen is None and current):
        return current or None
    folder = os.path.abspath(os.path.expanduser(chosen or default_cache_dir()))
    if folder != current:
        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", _CACHE_MIN_COMPILE_SECONDS)
    return folder


def cpu_opt_level_setting() -> str:
    """The validated value of ``BRAX_CORE_CPU_OPT_LEVEL`` (``auto`` when unset)."""
    level = os.environ.get(ENV_VAR, "auto").strip()
    if level not in ("auto", "default", *_LEVELS):
        raise ValueError(f"{ENV_VAR} must be one of auto, default, 0, 1, 2, 3; got {level!r}")
    return level


def cpu_fusion_emitters_setting() -> str:
    """The validated value of ``BRAX_CORE_CPU_FUSION_EMITTERS`` (``auto`` when unset)."""
    setting = os.environ.get(EMITTERS_ENV_VAR, "auto").strip().lower()
    if setting not in _EMITTER_SETTINGS:
        raise ValueError(f"{EMITTERS_ENV_VAR} must be one of {', '.join(_EMITTER_SETTINGS)}; got {setting!r}")
    return setting


def compiler_options(platform: str, auto_level: int | None = 1) -> dict[str, Any] | None:
    """``jax.jit(..., compiler_options=...)`` for a compile on ``platform``.

    Args:
      platform: the JAX platform the computation runs on (``device.platform``).
      auto_level: the LLVM level to use when the user set nothing; ``None`` keeps XLA's default.
    """
    if platform != "cpu":
        return None
    level = cpu_opt_level_setting()
    if level == "default" or (level == "auto" and auto_level is None):
        return None
    chosen = int(auto_level if level == "auto" else level)
    options: dict[str, Any] = {"xla_backend_optimization_level": chosen}
    emitters = cpu_fusion_emitters_setting()
    if emitters == "auto":
        emitters = "off" if chosen == 0 else None  # None: XLA's default (on)
    if emitters is not None and cpu_fusion_emitters_option():
        options["xla_cpu_use_fusion_emitters"] = emitters == "on"
    return options


@functools.cache
def cpu_fusion_emitters_option() -> bool:
    """Whether this jaxlib's CPU compiler takes ``xla_cpu_use_fusion_emitters`` (jaxlib 0.11 refuses it: "No such
    compile option"). Every jaxlib before 0.11 has it; a later one is asked by compiling a one-op program on the CPU
    with it, once per process."""
    import jax
    import jax.numpy as jnp

    if _jax_install.jaxlib_version() < (0, 11):
        return True
    cpu = jax.devices("cpu")[0]
    arg = jax.ShapeDtypeStruct((1,), jnp.float32, sharding=jax.sharding.SingleDeviceSharding(cpu))
    try:
        jax.jit(lambda x: x + 1).lower(arg).compile(compiler_options={"xla_cpu_use_fusion_emitters": False})
    except Exception as error:  # jax.errors.JaxRuntimeError, INVALID_ARGUMENT
        if "No such compile option" in str(error):
            return False
        raise
    return True


def reset_compiler_options(platform: str) -> dict[str, Any] | None:
    """``compiler_options`` for an env's batched reset: LLVM level 0 unless the user chose a level. A reset runs once
    per batch of episodes, not per step, so its compile time is what counts (level 0 compiles it in a fraction of
    level 1's time: benchmarks/results/startup.md, "Compile options")."""
    return compiler_options(platform, auto_level=0)


def compile_side_by_side(lowered: Iterable[Any]) -> list[Any]:
    """Compiles lowered programs (``jax.stages.Lowered``) on a thread pool, each as soon as ``lowered`` yields it;
    XLA compiles without Python's interpreter lock, so on a multi-core CPU they take about as long as the slowest,
    and given a generator that lowers them one by one, the first ones compile while the next ones are traced.

    Lower them one after the other on the calling thread (a list, or a generator consumed here): traced on several
    threads at once, the programs' persistent-cache keys changed from run to run, and a second run of the same
    configuration compiled again.
    """
    with concurrent.futures.ThreadPoolExecutor() as pool:
        futures = [pool.submit(program.compile) for program in lowered]
        return [future.result() for future in futures]


def possible_contact_pairs(mj_model: Any) -> int:
    """How many geom pairs MuJoCo's collision detection may test in ``mj_model`` (a ``mujoco.MjModel``).

    Counts the explicit ``<pair>`` elements and every pair of geoms whose ``contype``/``conaffinity`` bits match,
    on different welded bodies and, unless the model turns parent filtering off, not parent and child. Zero means
    the physics never computes a contact (the pendulums, reacher); ``<exclude>`` elements are not subtracted, so the
    count is an upper bound.
    """
    import mujoco
    import numpy as np

    weld = np.asarray(mj_model.body_weldid)[np.asarray(mj_model.geom_bodyid)]
    parent = np.asarray(mj_model.body_weldid)[np.asarray(mj_model.body_parentid)[weld]]
    contype = np.asarray(mj_model.geom_contype)
    conaffinity = np.asarray(mj_model.geom_conaffinity)
    first, second = np.triu_indices(mj_model.ngeom, k=1)
    bits = (contype[first] & conaffinity[second]) | (contype[second] & conaffinity[first])
    candidate = (bits != 0) & (weld[first] != weld[second])
    if not mj_model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT:
        related = (weld[first] == parent[second]) | (weld[second] == parent[first])
        candidate &= ~(related & (weld[first] != 0) & (weld[second] != 0))
    return int(candidate.sum()) + int(mj_model.npair)


def auto_level_for_run(
    env_steps_to_run: int, mj_model: Any = None, step_only: bool = False, differentiated: bool = False
) -> int:
    """The LLVM level for a run of ``env_steps_to_run`` env steps on ``mj_model`` (``None``: no physics model):
    0 while compiling would dominate the run, else 1 (see the module's measurements). ``step_only``: the program is
    the env's step alone (the bridge's), not a trainer's whole program, so level 1 repays its compile sooner.
    ``differentiated``: a trainer's program that runs the physics' reverse pass, which level 0 slows the most."""
    has_contacts = mj_model is not None and possible_contact_pairs(mj_model) > 0
    if differentiated:
        quick_steps = _QUICK_GRADIENT_STEPS_WITH_CONTACTS if has_contacts else _QUICK_GRADIENT_STEPS
    elif step_only:
        quick_steps = _QUICK_STEP_COMPILE_STEPS_WITH_CONTACTS if has_contacts else _QUICK_STEP_COMPILE_STEPS
    else:
        quick_steps = _QUICK_COMPILE_STEPS_WITH_CONTACTS if has_contacts else _QUICK_COMPILE_STEPS
    return 0 if env_steps_to_run <= quick_steps else 1
