"""Brax's own training tests, run against brax_core with nothing changed but the import prefix.

Downloads the ``brax`` wheel (default 0.14.2, no dependencies, kept in ``--cache``), takes its test modules of the
agents brax_core has (PPO's ``brax/training/agents/ppo/{train,losses,checkpoint}_test.py``, ARS's and ES's
``agents/{ars,es}/train_test.py``, SAC's ``agents/sac/{train,checkpoint}_test.py``) and of
``brax/training/{types,replay_buffers}_test.py``, rewrites ``brax.`` / ``from brax import`` to
``brax_core``, and runs them with pytest in a scratch folder. Nothing else in the files is touched, so a failure is
a porting gap (or one of the differences the README lists, such as ``sys.link`` of Brax's own physics).

Not part of ``make test``: the pixel tests alone take about 15 minutes on a 2-core CPU (measured with
``BRAX_CORE_CPU_OPT_LEVEL=0``, which compiles about twice as fast; see ``brax_core/compile.py``).

    python benchmarks/brax_ported_tests.py                    # every module
    python benchmarks/brax_ported_tests.py --modules ars es types
    python benchmarks/brax_ported_tests.py -k "not Pixels"    # extra arguments go to pytest
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import zipfile

# Name -> the test module's path in the wheel.
MODULES = {
    "train": "brax/training/agents/ppo/train_test.py",
    "losses": "brax/training/agents/ppo/losses_test.py",
    "checkpoint": "brax/training/agents/ppo/checkpoint_test.py",
    "ars": "brax/training/agents/ars/train_test.py",
    "es": "brax/training/agents/es/train_test.py",
    "types": "brax/training/types_test.py",
    "sac": "brax/training/agents/sac/train_test.py",
    "sac_checkpoint": "brax/training/agents/sac/checkpoint_test.py",
    "replay_buffers": "brax/training/replay_buffers_test.py",
}
_PREFIX = re.compile(r"^(\s*)(from|import)\s+brax(?=[.\s])", re.MULTILINE)


def port(source: str) -> str:
    """The test module with its imports pointed at brax_core (``from brax.x`` and ``from brax import``)."""
    return _PREFIX.sub(lambda m: f"{m.group(1)}{m.group(2)} brax_core", source)


def wheel(version: str, cache: str) -> str:
    """The path of the brax wheel, downloaded once into ``cache``."""
    found = glob.glob(os.path.join(cache, f"brax-{version}-*.whl"))
    if not found:
        os.makedirs(cache, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", f"brax=={version}", "--no-deps", "-d", cache, "-q"]
        subprocess.run(cmd, check=True)
        found = glob.glob(os.path.join(cache, f"brax-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no brax {version} wheel in {cache} after pip download")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.14.2", help="brax release whose tests to run")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/brax_bridge/brax_wheels"))
    parser.add_argument("--modules", nargs="+", choices=MODULES, default=list(MODULES))
    args, pytest_args = parser.parse_known_args()

    with zipfile.ZipFile(wheel(args.version, args.cache)) as archive, tempfile.TemporaryDirectory() as scratch:
        files = []
        for module in args.modules:
            name = MODULES[module]
            target = os.path.join(scratch, f"brax_{module}_test.py")
            with open(target, "w") as f:
                f.write(port(archive.read(name).decode()))
            files.append(target)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", scratch, *files]
        raise SystemExit(subprocess.run([*cmd, *pytest_args], cwd=scratch, check=False).returncode)


if __name__ == "__main__":
    main()
