"""Keep optional-backend noise and cost out of every program that uses brax_core.

``mujoco.mjx`` tries to import NVIDIA Warp (and MuJoCo Warp, which it vendors) at import time and prints a
failure line to stdout when it is absent, which is the normal case on CPU. Importing it once here with stdout
redirected keeps that line out of the user's terminal.

Where Warp is installed (MuJoCo Playground's dependencies bring it) but JAX has no CUDA plugin, that import costs
about 1.2 s of every start-up (2.5 s against 1.3 s for brax_core's imports on a 2-core CPU) for nothing: MJX's
Warp implementation (``impl="warp"``) runs only on a CUDA device, which such a JAX cannot reach. There MJX is
imported as if Warp were absent, and Warp stays importable for the rest of the program. Where a JAX CUDA plugin is
installed, or Warp was imported before brax_core, MJX imports it as usual.
"""

import contextlib
import io
import logging
import os
import sys

from brax_core import _jax_install

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _import_mjx() -> None:
    hide_warp = "warp" not in sys.modules and not _jax_install.cuda_plugin_installed()
    if hide_warp:
        sys.modules["warp"] = None  # an import of it fails at once, as when it is not installed
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import mujoco.mjx  # noqa: F401
    finally:
        if hide_warp and sys.modules.get("warp", 0) is None:
            del sys.modules["warp"]


_import_mjx()
logging.getLogger("absl").setLevel(logging.ERROR)
