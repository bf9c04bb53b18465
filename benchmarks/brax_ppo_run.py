"""Brax's own PPO (``brax.training.agents.ppo.train``) with one of ``presets.GPU_TRAIN_KWARGS``, written as a run
folder.

The folder has the layout ``brax-bridge train`` writes (``config.json``, ``metrics.jsonl``, ``summary.json`` once the
run ends), with trainer ``brax``, so ``benchmarks/gpu_curves.py`` draws Brax's curve beside brax_core's and
torch_ppo's for the same recipe. Brax's default networks are the recipe's (policy 4 x 32, value 5 x 256, swish).
The env is Brax's own with ``--backend`` (default ``generalized``, whose definitions ``brax_core``'s ant and
halfcheetah follow; ``mjx`` simulates with MuJoCo MJX and the solver settings ``brax_core``'s models carry), or,
with ``--brax-core-env``, ``brax_core``'s env of that name, which Brax's training wrappers take as they are. Times
are seconds from the start of this process, as in ``brax-bridge train``.

Needs Brax 0.14.2 importable (``.whl/`` carries its wheel; ``benchmarks/gpu_setup.sh`` installs it on a GPU
machine). Brax 0.14.2 calls ``jax.device_put_replicated``, which newer JAX releases dropped; this script supplies it
for the run.

  python benchmarks/brax_ppo_run.py --env ant --out gpu_out/runs/ant-brax [--seed 0] [--num-timesteps N]

A run stopped by SIGINT keeps its metrics (one line per evaluation) and has no summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time

STARTED = time.time()
# The run shares the GPU with others: JAX's default preallocation of 75 % of its memory would starve them.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def main(argv: list[str] | None = None) -> None:
    from brax_core.training.agents.ppo import presets

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, choices=sorted(presets.GPU_TRAIN_KWARGS), help="env and its GPU recipe")
    parser.add_argument("--out", required=True, help="run folder to write (must not exist)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-timesteps", type=int, default=None, help="override the recipe's env steps")
    parser.add_argument(
        "--backend",
        default=None,
        choices=("generalized", "mjx", "positional", "spring"),
        help="Brax's physics pipeline for its env (default: generalized)",
    )
    parser.add_argument(
        "--brax-core-env",
        action="store_true",
        help="train on brax_core's env of that name instead of Brax's own (takes no --backend)",
    )
    args = parser.parse_args(argv)
    if os.path.exists(args.out):
        parser.error(f"--out {args.out} exists; give a new folder")
    if args.brax_core_env and args.backend is not None:
        parser.error("--backend picks Brax's physics for Brax's env; brax_core's env (--brax-core-env) is MJX only")
    if args.num_timesteps is not None and args.num_timesteps < 1:
        parser.error(f"--num-timesteps must be >= 1, got {args.num_timesteps}")
    backend = None if args.brax_core_env else args.backend or "generalized"

    hyperparameters = {k: v for k, v in presets.GPU_TRAIN_KWARGS[args.env].items() if k != "network_factory"}
    if args.num_timesteps is not None:
        hyperparameters["num_timesteps"] = args.num_timesteps

    import jax
    from _brax_compat import supply_device_put_replicated  # benchmarks/ is first on sys.path

    supply_device_put_replicated()
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    os.makedirs(args.out)
    config = {
        "env": args.env,
        "trainer": "brax",
        "seed": args.seed,
        "preset": f"{args.env}-gpu",
        "env_from": "brax_core" if args.brax_core_env else "brax",
        "backend": backend,
        "hyperparameters": hyperparameters,
        "devices": [str(d) for d in jax.devices()],
    }
    with open(os.path.join(args.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)

    rows: list[dict] = []

    def progress(step: int, metrics: dict) -> None:
        row = {"step": int(step), "time_s": round(time.time() - STARTED, 3)}
        row.update({k: float(v) for k, v in metrics.items()})
        rows.append(row)
        with open(os.path.join(args.out, "metrics.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"{row['time_s']:7.1f} s  {row['step']:>11,} env steps  eval reward "
            f"{row.get('eval/episode_reward', float('nan')):,.1f}",
            flush=True,
        )

    if args.brax_core_env:
        from brax_core import envs as brax_core_envs

        env = brax_core_envs.get_environment(args.env)
    else:
        env = envs.get_environment(args.env, backend=backend)
    ppo.train(environment=env, seed=args.seed, progress_fn=progress, **hyperparameters)
    rewards = [r["eval/episode_reward"] for r in rows if "eval/episode_reward" in r]
    summary = {
        "env": args.env,
        "trainer": "brax",
        "seed": args.seed,
        "status": "completed",
        "env_steps": rows[-1]["step"],
        "final_reward": rewards[-1],
        "best_reward": max(rewards),
        "wall_s": round(time.time() - STARTED, 3),
        "first_report_s": rows[0]["time_s"],
        "trainer_sps": rows[-1].get("training/sps"),
    }
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
