"""How much code a reader faces: lines of Python per package at git commits, side by side.

    python benchmarks/code_size.py d28fbd5 HEAD            # two commits of this repository
    python benchmarks/code_size.py d28fbd5 HEAD --write    # also rewrites its section of its results page
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from _results import replace_section

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Package sizes"
PACKAGES = ("brax_core", "brax_bridge", "torch_training", "torch_ppo", "torch_analytic", "torch_sac", "brax_bridge_app")
# Every trainer's checkpoint modules, named as at each commit (the files present there are counted).
CHECKPOINTS = (
    "brax_core/training/run/checkpoints.py",
    "brax_core/training/checkpoint.py",
    "brax_core/training/agents/ppo/checkpoint.py",
    "brax_core/training/agents/ppo/checkpoint_config.py",
    "brax_core/training/agents/apg/checkpoint.py",
    "brax_core/training/agents/sac/checkpoint.py",
    "torch_training/checkpoint.py",
    "torch_ppo/checkpoint.py",
    "torch_analytic/checkpoint.py",
    "torch_sac/checkpoint.py",
)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def lines_at(commit: str, paths: list[str]) -> int:
    """Lines of the files ``paths`` at ``commit`` (files absent there count 0)."""
    if not paths:
        return 0
    present = set(_git("ls-tree", "-r", "--name-only", commit, "--", *paths).split())
    return sum(_git("show", f"{commit}:{path}").count("\n") for path in sorted(present))


def package_files(commit: str, package: str) -> list[str]:
    return [p for p in _git("ls-tree", "-r", "--name-only", commit, "--", package).split() if p.endswith(".py")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    names = {c: _git("rev-parse", "--short", c).strip() for c in args.commits}
    header = "| package | " + " | ".join(f"`{names[c]}`" for c in args.commits) + " |"
    rows = [header, "| --- |" + " ---: |" * len(args.commits)]
    totals = dict.fromkeys(args.commits, 0)
    for package in PACKAGES:
        counts = [lines_at(c, package_files(c, package)) for c in args.commits]
        for c, n in zip(args.commits, counts, strict=True):
            totals[c] += n
        rows.append(f"| `{package}/` | " + " | ".join(f"{n:,}" for n in counts) + " |")
    rows.append(f"| all {len(PACKAGES)} packages | " + " | ".join(f"{totals[c]:,}" for c in args.commits) + " |")
    checkpoint = [lines_at(c, list(CHECKPOINTS)) for c in args.commits]
    rows.append("| of which checkpoint modules | " + " | ".join(f"{n:,}" for n in checkpoint) + " |")
    command = "python benchmarks/code_size.py " + " ".join(args.commits)
    body = "\n".join([f"`{command}`: lines of Python (`.py` files, every line) per package at each commit.", "", *rows])
    print(body)
    if args.write:
        replace_section(None, SECTION, body, keep=("Reading",))


if __name__ == "__main__":
    main()
