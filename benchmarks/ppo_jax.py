"""Wall time and env steps for brax_core's JAX PPO to reach an evaluation reward on ``inverted_pendulum``.

Each configuration runs in a fresh subprocess with an empty compile cache (a cold start, as a user's first run),
one after the other in one invocation, so the figures are comparable with each other:

  python benchmarks/ppo_jax.py                       # preset at CPU opt levels 1 (default) and 0
  python benchmarks/ppo_jax.py --write               # also replace its section of benchmarks/results/

Reported per run: start-up (from calling ``train`` to the first evaluation: tracing and compiling), wall time
and env steps until the first evaluation reward >= the target, and training throughput once compiled.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from _results import replace_section  # benchmarks/ is the script's directory, first on sys.path

SECTION = "## JAX PPO"
# Brax runs beside brax_core only in its own virtualenv (Brax 0.14.2's PPO fails at start on jax 0.10), which
# benchmarks/vs_brax.py builds; this table points there.
BRAX_REFERENCE = (
    "Brax 0.14.2's own PPO against this one, side by side in alternating fresh processes (Brax in a virtualenv "
    "with jax 0.7.2): `benchmarks/vs_brax.py`, section [Against Brax's PPO](against-brax.md#against-braxs-ppo)."
)

CHILD = r"""
import json, os, sys, time
import jax
jax.config.update("jax_compilation_cache_dir", os.environ["BENCH_CACHE"])
from brax_core.training.agents.ppo import presets, train as ppo
target = float(sys.argv[1]); env_name = sys.argv[2]
config = dict(presets.TRAIN_KWARGS[env_name])
reports = []
start = time.time()
def progress(step, metrics):
    reports.append({"step": step, "t": time.time() - start, "reward": metrics.get("eval/episode_reward"),
                    "sps": metrics.get("training/sps")})
    if metrics.get("eval/episode_reward", 0.0) >= target and os.environ.get("BENCH_STOP") == "1":
        raise KeyboardInterrupt
try:
    ppo.train(env_name, progress_fn=progress, **config)
except KeyboardInterrupt:
    pass
def describe(v):
    return repr(dict(v.keywords)) if hasattr(v, "keywords") else repr(v)  # a network_factory partial: its kwargs
print("RESULT" + json.dumps({"reports": reports, "config": {k: describe(v) for k, v in config.items()}}))
"""


def run_one(env_name: str, target: float, opt_level: str) -> dict:
    env = dict(os.environ, BRAX_CORE_CPU_OPT_LEVEL=opt_level, JAX_PLATFORMS="cpu", BENCH_STOP="1")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as cache:
        env["BENCH_CACHE"] = cache
        t = time.time()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(target), env_name], env=env, capture_output=True, text=True, check=False
        )
        process_wall = time.time() - t
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    result = json.loads([x for x in proc.stdout.splitlines() if x.startswith("RESULT")][-1][len("RESULT") :])
    reports = result["reports"]
    hit = next((r for r in reports if (r["reward"] or 0.0) >= target), None)
    training_sps = [r["sps"] for r in reports[2:] if r["sps"]]  # past the epoch that includes compiling
    return {
        "opt_level": opt_level,
        "startup_s": reports[0]["t"],
        "time_to_target_s": hit["t"] if hit else None,
        "steps_to_target": hit["step"] if hit else None,
        "process_wall_s": process_wall,
        "training_sps": sorted(training_sps)[len(training_sps) // 2] if training_sps else None,
        "final_reward": reports[-1]["reward"],
        "config": result["config"],
        "load": [load_before, os.getloadavg()[0]],
    }


def markdown(env_name: str, target: float, runs: list[dict], command: str) -> str:
    loads = [x for r in runs for x in r["load"]]
    lines = [
        SECTION,
        "",
        f"`{env_name}` to evaluation reward >= {target:g}, brax_core PPO with `presets.TRAIN_KWARGS['{env_name}']`, "
        "cold start (empty compile cache) in a fresh process per row, rows run one after the other in one "
        f"invocation on a {os.cpu_count()}-core CPU without a GPU ({platform.processor() or platform.machine()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); 1-minute load average {min(loads):.1f}-"
        f"{max(loads):.1f} around the runs.",
        "",
        f"Command: `{command}`",
        "",
        "| XLA CPU opt level | start-up to first eval (s) | wall to target (s) | env steps to target | "
        "training env steps/s | final eval reward |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        fmt = lambda v, spec: "not reached" if v is None else format(v, spec)  # noqa: E731
        lines.append(
            f"| {r['opt_level']} | {r['startup_s']:.1f} | {fmt(r['time_to_target_s'], '.1f')} | "
            f"{fmt(r['steps_to_target'], ',d')} | {fmt(r['training_sps'], ',.0f')} | {r['final_reward']:.1f} |"
        )
    base = runs[0]
    for r in runs[1:]:
        if base["time_to_target_s"] and r["time_to_target_s"]:
            lines.append("")
            lines.append(
                f"Opt level {r['opt_level']} / opt level {base['opt_level']} wall time to target: "
                f"{r['time_to_target_s'] / base['time_to_target_s']:.2f}."
            )
    lines += [
        "",
        "Hyperparameters: " + ", ".join(f"{k}={v}" for k, v in base["config"].items()) + ".",
        "",
        BRAX_REFERENCE,
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="inverted_pendulum")
    parser.add_argument("--target", type=float, default=950.0)
    parser.add_argument("--opt-levels", default="1,0", help="comma-separated XLA CPU opt levels (first is the base)")
    parser.add_argument("--write", action="store_true", help="replace this benchmark's section of its results page")
    args = parser.parse_args(argv)
    runs = []
    for level in args.opt_levels.split(","):
        run = run_one(args.env, args.target, level)
        print(json.dumps({k: v for k, v in run.items() if k != "config"}), flush=True)
        runs.append(run)
    command = "python benchmarks/ppo_jax.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(args.env, args.target, runs, command.strip())
    print(text)
    if args.write:
        print(f"wrote {SECTION!r} to {replace_section(None, SECTION, text.removeprefix(SECTION))}")
    return runs


if __name__ == "__main__":
    main()
