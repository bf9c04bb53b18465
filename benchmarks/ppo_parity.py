"""PPO parity: the JAX trainer and torch_ppo on the same env, hyperparameters (the JAX preset) and seeds, in one run.

Every run is a fresh process. For every seed the trainers alternate (JAX, then torch), each run twice: *cold*,
with an empty persistent compile cache (everything compiles), then *warm*, with the cache the cold run filled (a
second run of the same configuration). The figures are

* the evaluation reward at every evaluation point (the same env-step counts for both trainers),
* wall time from the ``train`` call to the first evaluation with reward >= the target (start-up included),
* start-up: from the ``train`` call to its first report (the evaluation before training),
* training steps/s (the trainers' ``training/sps``, evaluation and start-up excluded) and end-to-end steps/s,
* the ratios torch / JAX of the time to target (cold and warm) and of training steps/s,
* the machine's 1-minute load average before and after each run.

Usage:
  python benchmarks/ppo_parity.py [--env inverted_pendulum] [--seeds 0 1 2] [--target 950] [--torch-threads N]
                                  [--set num_envs=1024 batch_size=256 ...] [--write]

``--set`` overrides preset values for both trainers (Python literals). ``--write`` replaces the section of
``benchmarks/results/training-speed.md`` this configuration writes (``## PPO parity``, or ``## PPO parity, 1024
envs`` for ``--set num_envs=1024``), leaving the other sections alone.

``--throughput`` measures only training speed on the env's preset: each trainer trains ``--readings`` intervals of
``--interval`` training steps with no evaluation, reporting ``training/sps`` per interval; the first interval
(start-up and compilation) is dropped and the median of the rest is the steady-state steps/s. Trainers alternate
per seed, each run in a fresh process (no compile shared between runs but the persistent compile cache). The
runs are short, so the JAX trainer would pick its quick-compile LLVM level 0 (steps several times slower); the workers
set ``BRAX_CORE_CPU_OPT_LEVEL=1`` (unless it is set), the level of a full-length run and of the bridge's step, and
torch_ppo's update is compiled or eager as in a full-length run (``torch_compile`` as ``torch_compile=None`` would
choose for the preset's ``num_timesteps``; ``--set torch_compile=False`` forces it):
  python benchmarks/ppo_parity.py --throughput --env halfcheetah --seeds 0 1 2 [--interval 2] [--readings 6]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

from _results import add_write_option, replace_section  # benchmarks/ is the script's directory, first on sys.path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

SECTION = "## PPO parity"
CACHE_VAR = "BRAX_BRIDGE_JAX_CACHE"  # brax_core.compile's switch for the persistent compile cache


# --set keys only torch_ppo takes (the JAX trainer's signature has no such argument).
TORCH_ONLY = ("torch_compile",)


def _preset(env: str, overrides: dict[str, Any], gpu: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JAX preset (``GPU_PRESETS``' with ``gpu``) with the overrides, and torch_ppo's extra keyword arguments:
    its network's (torch_ppo takes them flat) and the torch-only overrides."""
    from brax_core.training.agents.ppo import presets

    chosen = (presets.GPU_TRAIN_KWARGS if gpu else presets.TRAIN_KWARGS)[env]
    preset = {**chosen, **{k: v for k, v in overrides.items() if k not in TORCH_ONLY}}
    network = dict(chosen["network_factory"].keywords)
    return preset, {**network, **{k: v for k, v in overrides.items() if k in TORCH_ONLY}}


def _run_worker(args: argparse.Namespace, trainer: str, seed: int) -> None:
    """One training run (in its own process): prints its figures as JSON on a line starting with ``RUN``."""
    import brax_bridge  # noqa: F401  (first, so it configures JAX before its backend starts)

    preset, net = _preset(args.env, args.overrides)
    if trainer == "jax":
        from brax_core.training.agents.ppo import train as jax_ppo

        result = _timed(lambda progress: jax_ppo.train(args.env, seed=seed, progress_fn=progress, **preset), args)
    else:
        import torch_ppo

        kwargs = {k: v for k, v in preset.items() if k != "network_factory"}
        if args.torch_threads is not None:
            kwargs["num_threads"] = args.torch_threads
        result = _timed(
            lambda progress: torch_ppo.train(args.env, seed=seed, progress_fn=progress, **kwargs, **net), args
        )
    print("RUN " + json.dumps(result), flush=True)


def _timed(run: Any, args: argparse.Namespace) -> dict[str, Any]:
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
    reached = next(((s, t) for s, r, t in curve if r >= args.target), None)
    return {
        "curve": curve,
        "wall_s": wall,
        "startup_s": curve[0][2] if curve else None,
        "steps_to_target": reached[0] if reached else None,
        "time_to_target_s": reached[1] if reached else None,
        "train_sps": statistics.median(sps) if sps else None,
        "end_to_end_sps": curve[-1][0] / wall if curve else None,
        "final_reward": curve[-1][1] if curve else None,
    }


def _spawn(args: argparse.Namespace, trainer: str, seed: int, cache: str) -> dict[str, Any]:
    """Runs one worker process with the compile cache in ``cache``; adds the load average around it."""
    import subprocess

    cmd = [sys.executable, os.path.abspath(__file__), "--env", args.env, "--target", str(args.target)]
    cmd += ["--set", *args.set] if args.set else []
    cmd += ["--torch-threads", str(args.torch_threads)] if args.torch_threads is not None else []
    cmd += ["--run-worker", trainer, str(seed)]
    load_before = os.getloadavg()[0]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, CACHE_VAR: cache})
    line = next((x for x in out.stdout.splitlines() if x.startswith("RUN ")), None)
    if out.returncode != 0 or line is None:
        raise SystemExit(f"{trainer} seed {seed} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return {**json.loads(line[4:]), "load": [load_before, os.getloadavg()[0]]}


def _fmt(x: Any, digits: int = 0) -> str:
    if x is None:
        return "not reached"
    return f"{x:,.{digits}f}" if isinstance(x, float) else f"{x:,}"


def _section(args: argparse.Namespace) -> str:
    return SECTION + (f", {args.overrides['num_envs']} envs" if "num_envs" in args.overrides else "")


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if len(present) == len(values) and present else None


def _markdown(args: argparse.Namespace, preset: dict[str, Any], net: dict[str, Any], runs: dict, cmd: str) -> str:
    loads = [x for seed in runs.values() for t in seed.values() for r in t.values() for x in r["load"]]
    sizes = {k: preset[k] for k in ("num_envs", "batch_size", "num_minibatches", "unroll_length", "num_timesteps")}
    lines = [
        _section(args),
        "",
        f"`{cmd}` — one invocation, {args.when}; machine: {os.cpu_count()}-core CPU without a GPU, 1-minute load "
        f"average {min(loads):.1f}-{max(loads):.1f} around the runs (python {platform.python_version()}, torch_ppo "
        f"num_threads {args.torch_threads or 'default (1)'}).",
        f"Env `{args.env}`; both trainers use the JAX preset `PRESETS[{args.env!r}]`"
        + (f" with {json.dumps(args.overrides)}" if args.overrides else "")
        + f" ({json.dumps(sizes)}; networks {json.dumps(net)}), same seeds. Every run is a fresh process; per seed "
        "JAX then torch, each first *cold* (empty persistent compile cache) then *warm* (the cache its cold run "
        "wrote). Time to target counts from the `train` call and includes start-up (compilation) and evaluations; "
        "start-up is the `train` call to its first report.",
        "",
        f"| seed | trainer | steps to {args.target:g} | time to {args.target:g}, cold (s) | time to {args.target:g}, "
        "warm (s) | start-up cold / warm (s) | train steps/s | end-to-end steps/s | final reward | wall, cold (s) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for seed in sorted(runs):
        for trainer in ("jax", "torch"):
            cold, warm = runs[seed][trainer]["cold"], runs[seed][trainer]["warm"]
            lines.append(
                f"| {seed} | {trainer} | {_fmt(cold['steps_to_target'])} | {_fmt(cold['time_to_target_s'], 1)} | "
                f"{_fmt(warm['time_to_target_s'], 1)} | {_fmt(cold['startup_s'], 1)} / {_fmt(warm['startup_s'], 1)} | "
                f"{_fmt(cold['train_sps'])} | {_fmt(cold['end_to_end_sps'])} | {_fmt(cold['final_reward'], 1)} | "
                f"{_fmt(cold['wall_s'], 1)} |"
            )

    def ratio(key: str, phase: str) -> float | None:
        torch_v = _median([runs[s]["torch"][phase][key] for s in runs])
        jax_v = _median([runs[s]["jax"][phase][key] for s in runs])
        return torch_v / jax_v if torch_v and jax_v else None

    lines += ["", "Reward at the evaluation points (env steps: JAX / torch, cold runs):", ""]
    first = runs[min(runs)]["jax"]["cold"]["curve"]
    steps = [s for s, _, _ in first]
    lines.append("| seed | " + " | ".join(f"{s:,}" for s in steps) + " |")
    lines.append("| --- |" + " --- |" * len(steps))
    for seed in sorted(runs):
        jc = {s: r for s, r, _ in runs[seed]["jax"]["cold"]["curve"]}
        tc = {s: r for s, r, _ in runs[seed]["torch"]["cold"]["curve"]}
        cells = [f"{jc.get(s, float('nan')):.0f} / {tc.get(s, float('nan')):.0f}" for s in steps]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    medians = {
        "time to target, cold": ratio("time_to_target_s", "cold"),
        "time to target, warm": ratio("time_to_target_s", "warm"),
        "training steps/s": ratio("train_sps", "cold"),
    }
    lines += [
        "",
        f"**Medians over {len(runs)} seed(s), torch / JAX:** "
        + "; ".join(
            f"{k} {_fmt(v, 2) if v is not None else 'n/a (not reached in every run)'}" for k, v in medians.items()
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _throughput_worker(args: argparse.Namespace, trainer: str, seed: str) -> None:
    """One run of one trainer (in its own process): prints its per-interval ``training/sps`` as JSON."""
    import brax_bridge  # noqa: F401  (first, so it configures JAX before its backend starts)

    preset, torch_extra = _preset(args.env, args.overrides, args.gpu_preset)
    steps = preset["batch_size"] * preset["num_minibatches"] * preset["unroll_length"] * preset.get("action_repeat", 1)
    every = steps * (args.interval or max(1, 8192 // steps))
    if trainer == "torch-bridge":
        torch_extra["collection"] = "bridge"
    if trainer == "torch-eager":
        torch_extra["torch_compile"] = False
    elif "torch_compile" not in torch_extra:
        # torch_ppo's update as a full-length run of the preset chooses it (torch_compile=None decides by length).
        try:
            from torch_ppo.compiled_update import run_minibatch_steps, use_compiled_update
        except ImportError:  # a checkout from before the compiled update
            pass
        else:
            from brax_core.training.agents.ppo.config import PPOConfig

            full_run = run_minibatch_steps(PPOConfig.from_train_kwargs(preset), steps)
            # The presets' observations are flat; the device as torch_ppo's default would choose it.
            import brax_bridge

            device = brax_bridge.default_device()
            torch_extra["torch_compile"] = use_compiled_update(None, 1, full_run, device)
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
        torch_ppo.train(args.env, seed=int(seed), progress_fn=progress, **kwargs, **torch_extra)
    print("SPS " + json.dumps(sps), flush=True)


def _throughput(args: argparse.Namespace, argv: list[str] | None) -> None:
    import subprocess

    trainers = ("jax", "torch", *["torch-bridge"] * args.with_bridge, *["torch-eager"] * args.with_eager)
    steady: dict[str, list[float]] = {trainer: [] for trainer in trainers}
    all_readings: dict[str, list[list[float]]] = {}
    passthrough = ["--env", args.env, "--readings", str(args.readings)]
    passthrough += ["--gpu-preset"] if args.gpu_preset else []
    passthrough += ["--interval", str(args.interval)] if args.interval else []
    passthrough += ["--torch-threads", str(args.torch_threads)] if args.torch_threads is not None else []
    passthrough += ["--set", *(f"{k}={v!r}" for k, v in args.overrides.items())] if args.overrides else []
    for seed in args.seeds:
        for trainer in trainers:
            cmd = [sys.executable, os.path.abspath(__file__), *passthrough, "--worker", trainer, str(seed)]
            env = {"BRAX_CORE_CPU_OPT_LEVEL": "1", **os.environ}
            out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            line = next((x for x in out.stdout.splitlines() if x.startswith("SPS ")), None)
            if out.returncode != 0 or line is None:
                raise SystemExit(f"{trainer} seed {seed} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
            readings = json.loads(line[4:])
            all_readings.setdefault(trainer, []).append(readings)
            steady[trainer].append(statistics.median(readings[1:]))
            print(
                f"seed {seed} {trainer}: steady {steady[trainer][-1]:,.0f} steps/s, readings "
                f"{[round(x) for x in readings]}, 1-minute load average after {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    medians = {trainer: statistics.median(values) for trainer, values in steady.items()}
    jax_sps, torch_sps = medians["jax"], medians["torch"]
    cmd = "python " + " ".join(["benchmarks/ppo_parity.py", *(argv if argv is not None else sys.argv[1:])])
    eager = "".join(
        f"; {name} {medians[key]:,.0f} ({medians[key] / jax_sps:.2f} of JAX)"
        for key, name in (("torch-bridge", "torch collecting through the bridge"), ("torch-eager", "torch eager"))
        if key in medians
    )
    print(
        f"\n`{cmd}` ({args.when}): training steps/s after start-up on "
        f"`{'GPU_PRESETS' if args.gpu_preset else 'PRESETS'}[{args.env!r}]`, median over seeds "
        f"{args.seeds}: JAX {jax_sps:,.0f}, torch {torch_sps:,.0f}; torch / JAX {torch_sps / jax_sps:.2f}{eager}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"command": cmd, "when": args.when, "env": args.env, "steady": steady, "medians": medians,
                 "readings": all_readings},
                f,
            )


def _literal(text: str) -> tuple[str, Any]:
    import ast

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set takes key=value pairs, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise argparse.ArgumentTypeError(f"--set {key}: {value!r} is not a Python literal") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="inverted_pendulum")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target", type=float, default=950.0)
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="override preset values")
    parser.add_argument("--torch-threads", type=int, default=None, help="torch_ppo's num_threads (default: its own)")
    add_write_option(parser)
    parser.add_argument("--json", default=None, help="also dump the raw figures here")
    parser.add_argument("--from-json", default=None, help="re-render a previous run's figures (no training)")
    parser.add_argument("--command", default=None, help="with --from-json: the command that produced them")
    parser.add_argument("--when", default=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), help=argparse.SUPPRESS)
    parser.add_argument("--throughput", action="store_true", help="steady-state training steps/s only (see above)")
    parser.add_argument("--interval", type=int, default=None, help="--throughput: training steps per sps reading")
    parser.add_argument("--readings", type=int, default=6, help="--throughput: sps readings per run (first dropped)")
    parser.add_argument(
        "--with-eager",
        action="store_true",
        help="--throughput: also torch_ppo with its eager update (torch_compile=False), as a third trainer",
    )
    parser.add_argument(
        "--with-bridge",
        action="store_true",
        help="--throughput: also torch_ppo collecting step by step through the bridge (collection='bridge')",
    )
    parser.add_argument(
        "--gpu-preset",
        action="store_true",
        help="--throughput: the env's GPU_PRESETS recipe (run with JAX_PLATFORMS=cuda so that both trainers use it)",
    )
    parser.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--run-worker", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.overrides = dict(_literal(x) for x in args.set)
    if args.worker is not None:
        _throughput_worker(args, *args.worker)
        return
    if args.run_worker is not None:
        _run_worker(args, args.run_worker[0], int(args.run_worker[1]))
        return
    if args.throughput:
        _throughput(args, argv)
        return

    import tempfile

    preset, net = _preset(args.env, args.overrides)
    runs: dict[int, dict[str, Any]] = {}
    if args.from_json:
        with open(args.from_json) as f:
            runs = {int(k): v for k, v in json.load(f).items()}
    for seed in args.seeds if not args.from_json else []:
        runs[seed] = {}
        for trainer in ("jax", "torch"):
            with tempfile.TemporaryDirectory(prefix="ppo_parity_cache_") as cache:
                runs[seed][trainer] = {phase: _spawn(args, trainer, seed, cache) for phase in ("cold", "warm")}
            for phase, r in runs[seed][trainer].items():
                print(
                    f"seed {seed} {trainer} {phase}: steps to target {r['steps_to_target']}, time to target "
                    f"{r['time_to_target_s']}, start-up {r['startup_s']}, train sps {r['train_sps']}, wall "
                    f"{r['wall_s']:.1f}s, load {r['load']}, curve {[(s, round(x)) for s, x, _ in r['curve']]}",
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
    if args.write is not None:
        heading = _section(args)
        replace_section(args.write, heading, text.removeprefix(heading), keep=("Reading",))


if __name__ == "__main__":
    main()
