"""PPO parity: the JAX trainer and torch_ppo on the same env, hyperparameters (the JAX preset) and seeds, in one run.

For every seed, both trainers run back to back (JAX, then torch) in this process; the figures are

* the evaluation reward at every evaluation point (the same env-step counts for both trainers),
* wall time from the ``train`` call to the first evaluation with reward >= the target (start-up included),
* training steps/s (the trainers' ``training/sps``, evaluation and start-up excluded) and end-to-end steps/s,
* the ratio torch / JAX of the time to target.

Usage:
  python benchmarks/ppo_parity.py [--env inverted_pendulum] [--seeds 0 1 2] [--target 950] [--torch-threads N]
                                  [--write benchmarks/RESULTS.md]

``--write`` replaces the ``## PPO parity`` section of the results file (creating the file if needed), leaving the
other sections alone.

``--throughput`` measures only training speed on the env's preset: each trainer trains ``--readings`` intervals of
``--interval`` training steps with no evaluation, reporting ``training/sps`` per interval; the first interval
(start-up and compilation) is dropped and the median of the rest is the steady-state steps/s. Trainers alternate
per seed, each run in a fresh process (no compile shared between runs but the persistent compile cache). The
runs are short, so the JAX trainer would pick its quick-compile LLVM level 0 (about 2.5x slower steps); the workers
set ``BRAX_CORE_CPU_OPT_LEVEL=1`` (unless it is set), the level of a full-length run and of the bridge's step:
  python benchmarks/ppo_parity.py --throughput --env halfcheetah --seeds 0 1 2 [--interval 2] [--readings 6]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

SECTION = "## PPO parity"


def _jax_run(env: str, preset: dict[str, Any], seed: int, target: float) -> dict[str, Any]:
    from brax_core.training.agents.ppo import train as jax_ppo

    return _timed(lambda progress: jax_ppo.train(env, seed=seed, progress_fn=progress, **preset), target)


def _torch_run(
    env: str, preset: dict[str, Any], net: dict[str, Any], seed: int, target: float, threads: int | None
) -> dict[str, Any]:
    import torch_ppo

    kwargs = {k: v for k, v in preset.items() if k != "network_factory"}
    if threads is not None:
        kwargs["num_threads"] = threads
    return _timed(lambda progress: torch_ppo.train(env, seed=seed, progress_fn=progress, **kwargs, **net), target)


def _timed(run: Any, target: float) -> dict[str, Any]:
    curve: list[tuple[int, float, float]] = []
    sps: list[float] = []
    start = time.perf_counter()

    def progress(step: int, metrics: dict[str, float]) -> None:
        if "eval/episode_reward" in metrics:
            curve.append((int(step), float(metrics["eval/episode_reward"]), time.perf_counter() - start))
        if metrics.get("training/sps"):
            sps.append(float(metrics["training/sps"]))

    run(progress)
    wall = time.perf_counter() - start
    reached = next(((s, t) for s, r, t in curve if r >= target), None)
    return {
        "curve": curve,
        "wall_s": wall,
        "steps_to_target": reached[0] if reached else None,
        "time_to_target_s": reached[1] if reached else None,
        "train_sps": statistics.median(sps) if sps else None,
        "end_to_end_sps": curve[-1][0] / wall if curve else None,
        "final_reward": curve[-1][1] if curve else None,
    }


def _fmt(x: Any, digits: int = 0) -> str:
    if x is None:
        return "not reached"
    return f"{x:,.{digits}f}" if isinstance(x, float) else f"{x:,}"


def _markdown(args: argparse.Namespace, preset: dict[str, Any], net: dict[str, Any], runs: dict, cmd: str) -> str:
    lines = [
        SECTION,
        "",
        f"`{cmd}` — one run, {args.when}; machine: {os.cpu_count()}-core CPU without a GPU, shared with other "
        f"jobs (python {platform.python_version()}, torch_ppo num_threads {args.torch_threads or 'default (1)'}).",
        f"Env `{args.env}`; both trainers use the JAX preset `PRESETS[{args.env!r}]` (networks {json.dumps(net)}),",
        "same seeds; JAX then torch per seed, back to back in one process. Time to target includes start-up "
        "(compilation) and evaluations.",
        "",
        f"| seed | trainer | steps to {args.target:g} | time to {args.target:g} (s) | train steps/s | "
        "end-to-end steps/s | final reward | wall (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for seed in args.seeds:
        for trainer in ("jax", "torch"):
            r = runs[seed][trainer]
            lines.append(
                f"| {seed} | {trainer} | {_fmt(r['steps_to_target'])} | {_fmt(r['time_to_target_s'], 1)} | "
                f"{_fmt(r['train_sps'])} | {_fmt(r['end_to_end_sps'])} | {_fmt(r['final_reward'], 1)} | "
                f"{_fmt(r['wall_s'], 1)} |"
            )
    ratios = [
        runs[s]["torch"]["time_to_target_s"] / runs[s]["jax"]["time_to_target_s"]
        for s in args.seeds
        if runs[s]["torch"]["time_to_target_s"] and runs[s]["jax"]["time_to_target_s"]
    ]
    lines += ["", "Reward at the evaluation points (env steps: JAX / torch):", ""]
    steps = [s for s, _, _ in runs[args.seeds[0]]["jax"]["curve"]]
    lines.append("| seed | " + " | ".join(f"{s:,}" for s in steps) + " |")
    lines.append("| --- |" + " --- |" * len(steps))
    for seed in args.seeds:
        jc = {s: r for s, r, _ in runs[seed]["jax"]["curve"]}
        tc = {s: r for s, r, _ in runs[seed]["torch"]["curve"]}
        cells = [f"{jc.get(s, float('nan')):.0f} / {tc.get(s, float('nan')):.0f}" for s in steps]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    if ratios:
        train_ratio = [runs[s]["torch"]["train_sps"] / runs[s]["jax"]["train_sps"] for s in args.seeds]
        lines += [
            "",
            f"**Ratio torch / JAX, time to reward {args.target:g}, cold start (first seed, both trainers compile "
            f"everything): {ratios[0]:.2f}; target <= 1.25.** Per seed: {', '.join(f'{r:.2f}' for r in ratios)}. "
            "Later seeds are not cold for torch: TorchEnvs of one configuration share their compiled step within "
            "a process, while the JAX trainer compiles its training function in every `train` call, so their "
            "ratios mostly measure JAX's compile time.",
            "",
            f"Steady-state training throughput, torch / JAX (`training/sps`): "
            f"{', '.join(f'{r:.2f}' for r in train_ratio)}. The JAX trainer runs a whole epoch (physics, policy, "
            "SGD) as one compiled call; torch_ppo calls the bridge's jitted step once per env step and runs the "
            "policy and SGD in torch, so per-step dispatch dominates on small CPU batches (128 envs here).",
        ]
    return "\n".join(lines) + "\n"


def _write_section(path: str, text: str) -> None:
    body = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    body = pattern.sub(lambda _: text + "\n", body) if pattern.search(body) else body.rstrip("\n") + "\n\n" + text
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(body)
    os.replace(tmp, path)


def _throughput_worker(args: argparse.Namespace, trainer: str, seed: str) -> None:
    """One run of one trainer (in its own process): prints its per-interval ``training/sps`` as JSON."""
    import brax_bridge  # noqa: F401  (first, so it configures JAX before its backend starts)
    from brax_core.training.agents.ppo import presets

    preset = dict(presets.PRESETS[args.env])
    steps = preset["batch_size"] * preset["num_minibatches"] * preset["unroll_length"] * preset.get("action_repeat", 1)
    every = steps * (args.interval or max(1, 8192 // steps))
    preset.update(
        num_timesteps=every * args.readings, num_evals=0, log_training_metrics=True, training_metrics_steps=every
    )
    sps: list[float] = []
    progress = lambda step, metrics: sps.append(float(metrics["training/sps"]))
    if trainer == "jax":
        from brax_core.training.agents.ppo import train as jax_ppo

        jax_ppo.train(args.env, seed=int(seed), progress_fn=progress, **preset)
    else:
        import torch_ppo

        kwargs = {k: v for k, v in preset.items() if k != "network_factory"}
        if args.torch_threads is not None:
            kwargs["num_threads"] = args.torch_threads
        torch_ppo.train(args.env, seed=int(seed), progress_fn=progress, **kwargs, **presets.network_kwargs(args.env))
    print("SPS " + json.dumps(sps), flush=True)


def _throughput(args: argparse.Namespace, argv: list[str] | None) -> None:
    import subprocess

    steady: dict[str, list[float]] = {"jax": [], "torch": []}
    passthrough = ["--env", args.env, "--readings", str(args.readings)]
    passthrough += ["--interval", str(args.interval)] if args.interval else []
    passthrough += ["--torch-threads", str(args.torch_threads)] if args.torch_threads is not None else []
    for seed in args.seeds:
        for trainer in ("jax", "torch"):
            cmd = [sys.executable, os.path.abspath(__file__), *passthrough, "--worker", trainer, str(seed)]
            env = {"BRAX_CORE_CPU_OPT_LEVEL": "1", **os.environ}
            out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            line = next((x for x in out.stdout.splitlines() if x.startswith("SPS ")), None)
            if out.returncode != 0 or line is None:
                raise SystemExit(f"{trainer} seed {seed} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
            readings = json.loads(line[4:])
            steady[trainer].append(statistics.median(readings[1:]))
            print(
                f"seed {seed} {trainer}: steady {steady[trainer][-1]:,.0f} steps/s, readings "
                f"{[round(x) for x in readings]}",
                flush=True,
            )
    jax_sps, torch_sps = statistics.median(steady["jax"]), statistics.median(steady["torch"])
    cmd = "python " + " ".join(["benchmarks/ppo_parity.py", *(argv if argv is not None else sys.argv[1:])])
    print(
        f"\n`{cmd}` ({args.when}): training steps/s after start-up on `PRESETS[{args.env!r}]`, median over seeds "
        f"{args.seeds}: JAX {jax_sps:,.0f}, torch {torch_sps:,.0f}; torch / JAX {torch_sps / jax_sps:.2f}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="inverted_pendulum")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target", type=float, default=950.0)
    parser.add_argument("--num-timesteps", type=int, default=None, help="override the preset's num_timesteps")
    parser.add_argument("--torch-threads", type=int, default=None, help="torch_ppo's num_threads (default: its own)")
    parser.add_argument("--write", default=None, help="results file whose PPO parity section to replace")
    parser.add_argument("--json", default=None, help="also dump the raw figures here")
    parser.add_argument("--from-json", default=None, help="re-render a previous run's figures (no training)")
    parser.add_argument("--command", default=None, help="with --from-json: the command that produced them")
    parser.add_argument("--when", default=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), help=argparse.SUPPRESS)
    parser.add_argument("--throughput", action="store_true", help="steady-state training steps/s only (see above)")
    parser.add_argument("--interval", type=int, default=None, help="--throughput: training steps per sps reading")
    parser.add_argument("--readings", type=int, default=6, help="--throughput: sps readings per run (first dropped)")
    parser.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        _throughput_worker(args, *args.worker)
        return
    if args.throughput:
        _throughput(args, argv)
        return

    import brax_bridge  # noqa: F401  (first, so it configures JAX before its backend starts)
    from brax_core.training.agents.ppo import presets

    preset = dict(presets.PRESETS[args.env])
    if args.num_timesteps is not None:
        preset["num_timesteps"] = args.num_timesteps
    net = presets.network_kwargs(args.env)
    runs: dict[int, dict[str, Any]] = {}
    if args.from_json:
        with open(args.from_json) as f:
            runs = {int(k): v for k, v in json.load(f).items()}
        args.seeds = sorted(runs)
    for seed in args.seeds if not args.from_json else []:
        runs[seed] = {}
        for trainer in ("jax", "torch"):
            if trainer == "jax":
                r = _jax_run(args.env, preset, seed, args.target)
            else:
                r = _torch_run(args.env, preset, net, seed, args.target, args.torch_threads)
            runs[seed][trainer] = r
            print(
                f"seed {seed} {trainer}: steps to target {r['steps_to_target']}, "
                f"time to target {r['time_to_target_s']}, train sps {r['train_sps']}, wall {r['wall_s']:.1f}s, "
                f"curve {[(s, round(x)) for s, x, _ in r['curve']]}",
                flush=True,
            )
    cmd = args.command or "python " + " ".join(
        ["benchmarks/ppo_parity.py", *(argv if argv is not None else sys.argv[1:])]
    )
    text = _markdown(args, preset, net, runs, cmd)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(k): v for k, v in runs.items()}, f, indent=1)
    if args.write:
        _write_section(args.write, text)


if __name__ == "__main__":
    main()
