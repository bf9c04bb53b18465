"""How long a ``brax-bridge`` command takes to exit once its work is done, with and without freezing the garbage
collector's objects first (``gc.freeze``, what ``brax_bridge_app.cli.main`` does on its way out).

Each sample is a fresh process running one command through the CLI's Typer app, alternately ``freeze`` (the
console script's ``main``) and ``plain`` (the app called directly, as before). The process prints a timestamp when
the command returns, and the parent notes when the process has ended: the difference is the exit. Made for a CPU;
not part of ``make test``.

    python benchmarks/exit_time.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

# A tiny training run on `fast`: what a command leaves alive is the imported frameworks plus one run's objects.
TINY_TRAIN = ["train", "--env", "fast", "--num-timesteps", "400", "--num-envs", "4", "--batch-size", "4",
              "--num-minibatches", "2", "--unroll-length", "5", "--num-evals", "2", "--num-eval-envs", "4",
              "--episode-length", "20"]

_CHILD = """
import sys, time
from brax_bridge_app import cli
variant = sys.argv[1]
sys.argv = ["brax-bridge", *sys.argv[2:]]
try:
    cli.main() if variant == "freeze" else cli.app()
finally:
    print("returned", time.time(), flush=True)
"""


def _one(variant: str, out: str) -> dict[str, float]:
    start = time.time()
    done = subprocess.run([sys.executable, "-c", _CHILD, variant, *TINY_TRAIN, "--out", out],
                          capture_output=True, text=True, timeout=600)
    end = time.time()
    assert done.returncode == 0, done.stderr[-2000:]
    returned = float(done.stdout.strip().splitlines()[-1].split()[1])
    return {"process_s": end - start, "exit_s": end - returned}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    samples: dict[str, list[dict[str, float]]] = {"plain": [], "freeze": []}
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            for variant in samples:
                samples[variant].append(_one(variant, f"{folder}/{variant}{repeat}"))
    summary = {
        variant: {key: round(statistics.median(s[key] for s in runs), 2) for key in ("process_s", "exit_s")}
        for variant, runs in samples.items()
    }
    print(json.dumps({"command": "brax-bridge " + " ".join(TINY_TRAIN), "repeats": args.repeats,
                      "median": summary, "samples": samples}, indent=1))


if __name__ == "__main__":
    main()
