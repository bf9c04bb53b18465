"""Start-up with and without the persistent compile cache: how soon each entry point is ready to train.

Each measurement is a fresh process. Per entry point (JAX PPO, torch_ppo, the bridge's ``TorchEnv``) it runs once
with the caches off, then ``--repeats`` times, alternating, each of two settings from an empty cache folder (cold:
traces, compiles and writes) and once more with what that run wrote (warm): XLA's compile cache alone
(``BRAX_BRIDGE_PROGRAM_CACHE=0``), and XLA's cache with ``brax_core.program_cache``'s traced programs (the default).
Times are seconds:

- ``import``: the entry point's imports (JAX, MuJoCo MJX, torch, tensordict: the same in every run);
- ``ready``: from the call until the first training step is done: the trainer's report after one training step,
  less that report's own evaluation time (``eval/epoch_eval_time``), so the evaluation before training is
  included; for ``TorchEnv``, construction, ``reset`` and one ``step``.

The trainers use the env's preset sizes (``inverted_pendulum`` by default) for exactly one training step.

    python benchmarks/warm_start.py --env inverted_pendulum --repeats 2 --out benchmarks/warm_start.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_START = time.perf_counter()
ENTRY_POINTS = ("jax", "torch", "torchenv")


def _trainer_kwargs(env_name: str) -> tuple[dict, dict]:
    """One training step at the preset's sizes, with an evaluation before and after it."""
    from brax_core.training.agents.ppo import presets

    preset = dict(presets.TRAIN_KWARGS[env_name])
    network_factory = preset.pop("network_factory")
    one_step = preset["batch_size"] * preset["num_minibatches"] * preset["unroll_length"]
    common = {**preset, "num_timesteps": one_step, "num_evals": 2, "seed": 0}
    return {**common, "network_factory": network_factory}, {**common, **network_factory.keywords}


def child(entry_point: str, env_name: str) -> dict[str, float]:
    """Runs in the measured process: times its own imports and the call until the first training step."""
    marks: dict[str, float] = {}
    reports: list[tuple[float, float]] = []

    def progress(step: int, metrics: dict) -> None:
        reports.append((time.perf_counter(), float(metrics.get("eval/epoch_eval_time", 0.0))))

    if entry_point == "torchenv":
        import torch

        from brax_bridge import TorchEnv

        marks["import"] = time.perf_counter() - _START
        called = time.perf_counter()
        env = TorchEnv(env_name, num_envs=128)
        tensordict = env.reset()
        tensordict["action"] = torch.zeros(env.batch_size + (env.action_size,))
        env.step(tensordict)
        marks["ready"] = time.perf_counter() - called
        return marks
    if entry_point == "jax":
        from brax_core import envs
        from brax_core.training.agents.ppo import train as ppo

        marks["import"] = time.perf_counter() - _START
        kwargs = _trainer_kwargs(env_name)[0]
        called = time.perf_counter()
        ppo.train(envs.get_environment(env_name), progress_fn=progress, **kwargs)
    else:
        import torch_ppo

        marks["import"] = time.perf_counter() - _START
        kwargs = _trainer_kwargs(env_name)[1]
        called = time.perf_counter()
        torch_ppo.train(env_name, progress_fn=progress, **kwargs)
    after_step, eval_seconds = reports[1]  # reports[0] is the evaluation before training
    marks["ready"] = after_step - eval_seconds - called
    return marks


def _measure(entry_point: str, env_name: str, cache: str, programs: bool = True) -> dict[str, float]:
    env = {**os.environ, "BRAX_BRIDGE_JAX_CACHE": cache, "BRAX_BRIDGE_PROGRAM_CACHE": "1" if programs else "0"}
    cmd = [sys.executable, __file__, "--child", entry_point, "--env", env_name]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{entry_point} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="inverted_pendulum")
    parser.add_argument("--repeats", type=int, default=2, help="warm runs per entry point (median reported)")
    parser.add_argument("--entry-points", nargs="+", choices=ENTRY_POINTS, default=list(ENTRY_POINTS))
    parser.add_argument("--out", default=None, help="JSON file for the results")
    parser.add_argument("--child", choices=ENTRY_POINTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.env)))
        return
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")

    rows = []
    for entry_point in args.entry_points:
        load_before = os.getloadavg()[0]
        off = _measure(entry_point, args.env, "")
        runs: dict[str, list[dict[str, float]]] = {}
        # Alternating the two settings, each repeat from an empty cache: "xla" keeps only XLA's compiled programs
        # (BRAX_BRIDGE_PROGRAM_CACHE=0), "programs" the traced programs as well (the default).
        for _ in range(args.repeats):
            for name, programs in (("xla", False), ("programs", True)):
                with tempfile.TemporaryDirectory(prefix="warm_start_") as cache:
                    cold = _measure(entry_point, args.env, cache, programs)
                    warm = _measure(entry_point, args.env, cache, programs)
                runs.setdefault(f"{name}_cold", []).append(cold)
                runs.setdefault(f"{name}_warm", []).append(warm)
        row = {
            "entry_point": entry_point,
            "import_s": statistics.median(m["import"] for m in [off, *sum(runs.values(), [])]),
            "ready_cache_off_s": off["ready"],
            **{f"ready_{name}_s": statistics.median(m["ready"] for m in marks) for name, marks in runs.items()},
            **{f"ready_{name}_runs_s": [m["ready"] for m in marks] for name, marks in runs.items()},
            "load_1min": [load_before, os.getloadavg()[0]],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)

    print(f"\nenv {args.env}; seconds from the call to the first training step; medians of {args.repeats}")
    print(
        "| entry point | imports | cache off | XLA cache: empty | XLA cache: warm | XLA + program cache: empty | "
        "XLA + program cache: warm | load (1 min) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for row in rows:
        load = "-".join(f"{x:.1f}" for x in row["load_1min"])
        print(
            f"| {row['entry_point']} | {row['import_s']:.1f} | {row['ready_cache_off_s']:.1f} | "
            f"{row['ready_xla_cold_s']:.1f} | {row['ready_xla_warm_s']:.1f} | {row['ready_programs_cold_s']:.1f} | "
            f"{row['ready_programs_warm_s']:.1f} | {load} |"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"env": args.env, "repeats": args.repeats, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
