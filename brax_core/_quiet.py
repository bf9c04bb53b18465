"""Keep optional-backend noise out of every program that uses brax_core.

``mujoco.mjx`` tries to import NVIDIA Warp (and MuJoCo Warp, which it vendors) at import time and prints a
failure line to stdout when it is absent, which is the normal case without MuJoCo Playground. Importing it once
here with stdout redirected keeps that line out of the user's terminal. Where Warp is installed (MuJoCo Playground's
dependencies bring it) MJX imports it as usual, also without a GPU: Warp runs MJX's Warp implementation
(``impl="warp"``, the default of many Playground configs) on the CPU too, so hiding it would make those tasks fail
to load in any program that imported brax_core first.
"""

import contextlib
import io
import logging
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _import_mjx() -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        import mujoco.mjx  # noqa: F401


_import_mjx()
logging.getLogger("absl").setLevel(logging.ERROR)
