"""Keep optional-backend noise out of the user's terminal.

``mujoco.mjx`` tries to import NVIDIA Warp at import time and prints a failure line to stdout
when it is absent, which is the normal case on CPU. Importing it once here with stdout
redirected keeps that line out of every program that uses brax_core.
"""

import contextlib
import io
import logging
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

with contextlib.redirect_stdout(io.StringIO()):
    import mujoco.mjx  # noqa: F401

logging.getLogger("absl").setLevel(logging.ERROR)
