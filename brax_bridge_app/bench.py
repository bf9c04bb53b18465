"""``brax-bridge bench``: runs the repository's benchmark scripts at one size and prints their rows as tables.

The scripts live in the repository's ``benchmarks/`` folder, which is not installed with the package: the
command runs from a source checkout (found next to the package, or under the working directory). Each script
that exposes ``run(...) -> list[dict]`` is called with the arguments of the chosen size that its signature names
(``envs``, ``batch_sizes``, ``steps``, ...). Scripts that are missing, or need arguments this size does not
provide, are reported and skipped; the others still run.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

# Arguments by size; a script receives the ones its run() accepts.
SIZES: dict[str, dict[str, Any]] = {
    "small": {"envs": ["fast", "inverted_pendulum"], "batch_sizes": [64, 256], "steps": 20, "num_timesteps": 20_000,
              "seeds": [0], "size": "small"},
    "medium": {"envs": ["inverted_pendulum", "halfcheetah"], "batch_sizes": [256, 1024], "steps": 100,
               "num_timesteps": 500_000, "seeds": [0], "size": "medium"},
    "large": {"envs": ["inverted_pendulum", "halfcheetah", "ant", "humanoid"], "batch_sizes": [1024, 4096],
              "steps": 200, "num_timesteps": 2_000_000, "seeds": [0, 1, 2], "size": "large"},
}
SCRIPTS = ("env_throughput", "bridge_overhead", "ppo_jax", "ppo_parity")


class BenchmarksNotFound(RuntimeError):
    """No ``benchmarks/`` folder where the command looks; the message says where to run it from."""


def search_roots() -> list[str]:
    """Where ``benchmarks/`` may be: the checkout the package was imported from, then the working directory."""
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # <checkout>/brax_bridge_app/bench.py
    return list(dict.fromkeys([checkout, os.getcwd()]))


def benchmarks_dir() -> str:
    """``benchmarks/`` of the source checkout; raises ``BenchmarksNotFound`` naming the folders searched."""
    candidates = [os.path.join(root, "benchmarks") for root in search_roots()]
    for path in candidates:
        if os.path.isdir(path):
            return path
    raise BenchmarksNotFound(
        "`brax-bridge bench` runs the scripts in the repository's benchmarks/ folder, which is not installed with "
        f"the package, and none was found (looked for {' and '.join(candidates)}). Run it from the root of a "
        "brax-bridge source checkout (git clone, then `pip install -e .` or the Makefile)."
    )


def load_script(directory: str, name: str) -> Any | None:
    """Imports ``benchmarks/<name>.py`` by path (``benchmarks`` need not be a package)."""
    path = os.path.join(directory, f"{name}.py")
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location(f"_brax_bridge_bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def arguments_for(run: Any, size: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The size's arguments ``run`` accepts, or ``(None, missing)`` when it needs ones the size lacks."""
    params = inspect.signature(run).parameters
    given = SIZES[size]
    kwargs = {k: v for k, v in given.items() if k in params}
    missing = [
        name for name, p in params.items()
        if p.default is inspect.Parameter.empty and name not in kwargs
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    return (None, missing) if missing else (kwargs, [])


def table(title: str, rows: Sequence[Mapping[str, Any]]) -> Table:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    out = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for column in columns:
        numeric = any(isinstance(row.get(column), (int, float)) for row in rows)
        out.add_column(str(column), justify="right" if numeric else "left")
    for row in rows:
        out.add_row(*(_fmt(row.get(column)) for column in columns))
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def run_all(size: str, console: Console, scripts: Sequence[str] = SCRIPTS) -> dict[str, Any]:
    """Runs every available script; returns ``{script: rows | {"skipped": reason}}``.

    Raises ``BenchmarksNotFound`` outside a source checkout.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}; got {size!r}")
    directory = benchmarks_dir()
    results: dict[str, Any] = {}
    for name in scripts:
        module = load_script(directory, name)
        run = getattr(module, "run", None) if module is not None else None
        if run is None:
            reason = "not present" if module is None else "has no run() function"
            console.print(f"[dim]{name}: {reason}, skipped[/]")
            results[name] = {"skipped": reason}
            continue
        kwargs, missing = arguments_for(run, size)
        if kwargs is None:
            reason = f"run() needs {missing}, which size {size!r} does not provide"
            console.print(f"[yellow]{name}: {reason}; skipped[/]")
            results[name] = {"skipped": reason}
            continue
        console.print(f"running {name} ({size}) ...")
        start = time.perf_counter()
        rows = list(run(**kwargs))
        console.print(table(f"{name} ({size}, {time.perf_counter() - start:.1f} s)", rows))
        results[name] = rows
    return results
