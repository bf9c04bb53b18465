"""Learning curves: every environment's preset trained by both trainers, next to a random policy.

Each (env, trainer, seed) trains in a fresh process with its preset (``brax_core.training.agents.ppo.presets``), so
start-up (imports, compiling) is part of its wall time. MuJoCo Playground tasks (``playground:<task>``) train with
Playground's own ``brax_ppo_config(task)`` scaled for a CPU (``presets.PLAYGROUND_CPU``) instead of a preset. A run
stops at its ``num_timesteps`` or at the first evaluation after ``--minutes`` of wall time, whichever comes first.
The figures per env:

* the evaluation reward at every evaluation point, against env steps and against wall time (a PNG per env in
  ``--out``: the median over seeds with the min-max band, JAX and torch);
* the final reward, env steps and wall time to the env's threshold (``THRESHOLDS``), training steps/s;
* the episode reward of a uniformly random policy over the same evaluation episodes, for reference;
* in each run's JSON (``losses``), the loss terms its trainer reports with every evaluation (``LOSS_METRICS``),
  to compare the two trainers' updates over a run.

Usage:
  python benchmarks/learning.py [--envs ant humanoid] [--trainers jax torch] [--seeds 0 1 2] [--minutes 10]
                                [--out benchmarks/learning] [--write]

``--out`` receives each run's JSON (``<env>_<trainer>_<seed>.json``, the raw output, not kept in git) and
``results.json``, every run so far, from which the table and the figures are drawn (``--report-only`` redraws them).
``--write`` replaces the ``## Learning`` section of its results page (``benchmarks/results/learning.md``), leaving
the other sections alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

from _results import (  # benchmarks/ is the script's directory, first on sys.path
    add_write_option,
    first_reaching,
    replace_section,
)

os.environ.setdefault("JAX_PLATFORMS", "cpu")

SECTION = "## Learning"
# Eval episode reward that counts as solved (pendulums: near their maxima of 1000 and ~9350) or as clearly
# learnt (the others: well above a random policy; see the random-policy column).
THRESHOLDS = {
    "fast": 65.0,  # of at most 68.7 (pushing every step of a 100-step episode)
    "inverted_pendulum": 950.0,
    "inverted_double_pendulum": 9000.0,
    "reacher": -10.0,
    "halfcheetah": 1000.0,
    "hopper": 1000.0,
    "walker2d": 1000.0,
    "ant": 1000.0,
    "humanoid": 1000.0,
    # MuJoCo Playground tasks, trained with Playground's own config scaled to a 2-core CPU (presets.PLAYGROUND_CPU): a
    # random policy gets about 50 and 4 (random-policy column); Playground's paper (arXiv:2502.08844) reports
    # about 800 and 850 for its Brax PPO after 60M env steps on a GPU.
    "playground:CartpoleSwingup": 140.0,
    "playground:CheetahRun": 90.0,
}
LOSS_METRICS = ("training/policy_loss", "training/v_loss", "training/entropy_loss", "training/approx_kl")
# Playground tasks: their env steps on a 2-core CPU (the rest of the scaling is ``presets.PLAYGROUND_CPU``).
PLAYGROUND_CPU_STEPS = 1_228_800


def hyperparameters(env: str, trainer: str) -> dict[str, Any]:
    """``train`` keyword arguments of ``env``'s run: its preset, or Playground's config scaled for a CPU."""
    from brax_core.training.agents.ppo import presets

    if env.startswith("playground:"):
        from mujoco_playground.config import dm_control_suite_params

        config = presets.from_playground(dm_control_suite_params.brax_ppo_config(env.split(":", 1)[1]))
        return {**config, **presets.PLAYGROUND_CPU, "num_timesteps": PLAYGROUND_CPU_STEPS}
    preset = dict(presets.TRAIN_KWARGS[env])
    if trainer == "torch":
        preset.pop("network_factory")
        preset.update(presets.network_kwargs(env))
    return preset


class _TimeUp(Exception):
    """Raised from the progress callback once the wall-time budget is spent."""


def run_one(env: str, trainer: str, seed: int, minutes: float) -> dict[str, Any]:
    """Trains one run in this process and returns its curve."""
    hparams = hyperparameters(env, trainer)
    curve: list[tuple[int, float, float]] = []
    losses: list[dict[str, float]] = []
    sps: list[float] = []
    start = time.perf_counter()

    def progress(step: int, metrics: dict[str, float]) -> None:
        if "eval/episode_reward" in metrics:
            curve.append((int(step), float(metrics["eval/episode_reward"]), time.perf_counter() - start))
            # The loss terms the trainer reports with each evaluation, to compare the two trainers' updates.
            losses.append({"step": int(step)} | {k: float(metrics[k]) for k in LOSS_METRICS if k in metrics})
        if metrics.get("training/sps"):
            sps.append(float(metrics["training/sps"]))
        if time.perf_counter() - start > minutes * 60:
            raise _TimeUp

    try:
        if trainer == "jax":
            from brax_core.training.agents.ppo import train as ppo

            ppo.train(env, seed=seed, progress_fn=progress, **hparams)
        else:
            import torch_ppo

            torch_ppo.train(env, seed=seed, progress_fn=progress, **hparams)
        stopped = "num_timesteps"
    except _TimeUp:
        stopped = f"{minutes:g} min"
    return {
        "env": env,
        "trainer": trainer,
        "seed": seed,
        "curve": curve,
        "losses": losses,
        "train_sps": statistics.median(sps) if sps else None,
        "wall_s": time.perf_counter() - start,
        "stopped_at": stopped,
    }


def random_policy_reward(env_name: str, episodes: int = 64, seed: int = 0) -> float:
    """Mean episode reward of uniform random actions in [-1, 1], episodes as the trainers evaluate them."""
    import jax

    from brax_core import envs
    from brax_core.envs.wrappers import training as wrappers
    from brax_core.training import acting

    preset = hyperparameters(env_name, "jax")
    env = envs.get_environment(env_name)
    repeat = preset.get("action_repeat", 1)
    episode_length = preset["episode_length"]
    wrapped = wrappers.EvalWrapper(
        wrappers.VmapWrapper(wrappers.EpisodeWrapper(env, episode_length, action_repeat=repeat))
    )

    def policy(obs, key):
        return jax.random.uniform(key, (episodes, env.action_size), minval=-1.0, maxval=1.0), {}

    run = jax.jit(lambda key: acting.evaluation_rollout(wrapped, policy, key, episodes, -(-episode_length // repeat)))
    state = run(jax.random.PRNGKey(seed))
    return float(state.info["eval_metrics"].episode_metrics["reward"].mean())


# ------------------------------------------------------------------------------------------------ reporting


def _file_name(env: str) -> str:
    return env.replace(":", "_")


def plot(env: str, runs: list[dict[str, Any]], random_reward: float, out: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax_steps, ax_wall) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for trainer, color in (("jax", "tab:blue"), ("torch", "tab:orange")):
        mine = [r for r in runs if r["trainer"] == trainer and r["curve"]]
        if not mine:
            continue
        length = min(len(r["curve"]) for r in mine)
        steps = np.array([p[0] for p in mine[0]["curve"][:length]])
        rewards = np.array([[p[1] for p in r["curve"][:length]] for r in mine])
        label = f"{trainer} ({len(mine)} seed{'s' if len(mine) > 1 else ''})"
        ax_steps.plot(steps, np.median(rewards, axis=0), color=color, label=label)
        ax_steps.fill_between(steps, rewards.min(axis=0), rewards.max(axis=0), color=color, alpha=0.2)
        for r in mine:
            ax_wall.plot([p[2] for p in r["curve"]], [p[1] for p in r["curve"]], color=color, alpha=0.8)
    for ax in (ax_steps, ax_wall):
        ax.axhline(random_reward, color="gray", linestyle=":", label="random policy")
        ax.axhline(THRESHOLDS[env], color="green", linestyle="--", linewidth=0.8, label="threshold")
        ax.grid(alpha=0.3)
    ax_steps.set_xlabel("env steps")
    ax_wall.set_xlabel("wall time (s, start-up included)")
    ax_steps.set_ylabel("eval episode reward")
    ax_steps.legend(loc="best", fontsize=8)
    recipe = "Playground's config, scaled for a CPU" if env.startswith("playground:") else "PPO preset"
    fig.suptitle(f"{env}: {recipe}, JAX (brax_core) and torch (torch_ppo)")
    fig.tight_layout()
    path = os.path.join(out, f"{_file_name(env)}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def table(results: dict[str, Any]) -> str:
    lines = [
        "| env | trainer | seeds | final reward (median) | best reward (median) | threshold | steps to threshold | "
        "time to threshold (s) | "
        "env steps run | budget (min) | train steps/s | random policy |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for env, entry in results.items():
        for trainer in ("jax", "torch"):
            runs = [r for r in entry["runs"] if r["trainer"] == trainer and r["curve"]]
            if not runs:
                continue
            finals = [r["curve"][-1][1] for r in runs]
            bests = [max(point[1] for point in r["curve"]) for r in runs]
            reached = [first_reaching(r["curve"], THRESHOLDS[env]) for r in runs]
            hits = [x for x in reached if x is not None]
            steps = f"{statistics.median(h[0] for h in hits):,.0f} ({len(hits)}/{len(runs)})" if hits else "not reached"
            wall = f"{statistics.median(h[1] for h in hits):.0f}" if hits else "-"
            sps = [r["train_sps"] for r in runs if r["train_sps"]]
            sps_text = f"{statistics.median(sps):,.0f}" if sps else "-"
            run_steps = statistics.median(r["curve"][-1][0] for r in runs)
            budget = "/".join(f"{m:g}" for m in sorted({r["minutes"] for r in runs}))
            lines.append(
                f"| {env} | {trainer} | {len(runs)} | {statistics.median(finals):,.1f} | "
                f"{statistics.median(bests):,.1f} | {THRESHOLDS[env]:,.0f} | "
                f"{steps} | {wall} | {run_steps:,.0f} | {budget} | {sps_text} | "
                f"{entry['random_reward']:,.1f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(THRESHOLDS))
    parser.add_argument("--trainers", nargs="+", default=["jax", "torch"], choices=["jax", "torch"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-time budget per run")
    parser.add_argument("--out", default="benchmarks/learning")
    add_write_option(parser)
    parser.add_argument(
        "--report-only", action="store_true", help="train nothing: table and figures from --out's results.json"
    )
    parser.add_argument("--worker", nargs=4, metavar=("ENV", "TRAINER", "SEED", "JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.envs) - set(THRESHOLDS))
    if unknown:
        parser.error(f"--envs: unknown {unknown}; choose from {sorted(THRESHOLDS)}")

    if args.worker:
        env, trainer, seed, out = args.worker
        with open(out, "w") as f:
            json.dump(run_one(env, trainer, int(seed), args.minutes), f)
        return

    os.makedirs(args.out, exist_ok=True)
    results_path = os.path.join(args.out, "results.json")
    results: dict[str, Any] = json.load(open(results_path)) if os.path.exists(results_path) else {}
    for env in [] if args.report_only else args.envs:
        command = " ".join(["python benchmarks/learning.py", *(argv if argv is not None else sys.argv[1:])])
        # runs of other seeds from earlier invocations are kept; a rerun of the same (trainer, seed) replaces its own
        earlier = results.get(env, {}).get("runs", [])
        kept = [r for r in earlier if not (r["seed"] in args.seeds and r["trainer"] in args.trainers)]
        commands = [*results.get(env, {}).get("commands", []), command]
        entry = {"random_reward": random_policy_reward(env), "runs": kept, "commands": commands}
        for seed in args.seeds:
            for trainer in args.trainers:
                out = os.path.join(args.out, f"{_file_name(env)}_{trainer}_{seed}.json")
                load = os.getloadavg()[0]
                cmd = [
                    sys.executable,
                    __file__,
                    "--worker",
                    env,
                    trainer,
                    str(seed),
                    out,
                    "--minutes",
                    str(args.minutes),
                ]
                subprocess.run(cmd, check=True)
                run = json.load(open(out))
                run["load_before"] = load
                run["load_after"] = os.getloadavg()[0]
                run["minutes"] = args.minutes
                entry["runs"].append(run)
                last = run["curve"][-1] if run["curve"] else None
                print(f"{env} {trainer} seed {seed}: last eval {last}, wall {run['wall_s']:.0f} s", flush=True)
        results[env] = entry
        plot(env, entry["runs"], entry["random_reward"], args.out)
        with open(results_path, "w") as f:
            json.dump(results, f, indent=1)

    for env, entry in results.items():
        plot(env, entry["runs"], entry["random_reward"], args.out)
    loads = [r[k] for e in results.values() for r in e["runs"] for k in ("load_before", "load_after")]
    if not loads:
        raise SystemExit(f"no runs in {results_path}: train some first (without --report-only)")
    commands = list(dict.fromkeys(c for e in results.values() for c in e["commands"]))
    body = (
        "Commands (one process per run, one run at a time):\n\n" + "".join(f"- `{c}`\n" for c in commands) + "\n"
        f"Machine: {platform.machine()} CPU, {os.cpu_count()} cores, no GPU; 1-minute load average "
        f"{min(loads):.1f}-{max(loads):.1f} during the runs. Each run starts a fresh process (start-up included) "
        "and stops at its step budget (the preset's, or `PLAYGROUND_CPU_STEPS` for Playground tasks) or at the first "
        "evaluation after the wall-time budget. Curves: "
        f"`{args.out}/<env>.png`.\n\n" + table(results)
    )
    print(body)
    if args.write is not None:
        replace_section(args.write, SECTION, body, keep=("Read with:",), keep_before_table=True)


if __name__ == "__main__":
    main()
