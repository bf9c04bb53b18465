"""Where one torch_ppo training step's time goes on a GPU: collection (policy, JAX step, the bridge, idle) and the
update (its kernels, launches, idle), measured from outside with the trainer's own objects.

For one env's ``GPU_PRESETS`` recipe, in one process, after two warm-up training steps (compiling):

* ``collect`` and ``update``: median wall seconds of each over ``--repeats`` training steps, synchronised around each;
* collection split by subtraction, the same number of env steps each: ``env only`` (``TorchEnv.step`` with one
  preallocated action, no policy), ``policy only`` (the policy and its sampling on one observation, no env), and the
  same env's fused JAX rollout (``lax.scan`` of the training env's step with random actions, no torch), whose
  difference from ``env only`` is the bridge's per-step cost (dispatch, DLPack views, checks);
* one training step under ``torch.profiler`` (CUDA kernels of both frameworks: CUPTI sees the whole process): per
  phase, the GPU's busy time (union of kernel intervals) against the phase's wall time, the number of kernels, and
  the kernels taking the most time. The Chrome trace is written beside the JSON (``--trace``).

    JAX_PLATFORMS=cuda python benchmarks/gpu_step_profile.py --env ant --torch-compile true --json out.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from typing import Any

import torch

import brax_bridge  # noqa: F401  (before JAX's backend starts: memory sharing)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _trainer(env: str, torch_compile: bool | None, overrides: dict[str, Any]) -> Any:
    from brax_core.training.agents.ppo import presets
    from torch_ppo import arguments, distributed
    from torch_ppo.train import DEFAULTS
    from torch_ppo.trainer import TorchPPOBackend
    from torch_training.device import resolve_device

    preset = {k: v for k, v in presets.GPU_TRAIN_KWARGS[env].items() if k != "network_factory"}
    network = dict(presets.GPU_TRAIN_KWARGS[env]["network_factory"].keywords)
    preset.update(num_evals=0, log_training_metrics=True, **overrides)
    given = {**DEFAULTS, "environment": env, **preset, **network, "torch_compile": torch_compile}
    device = resolve_device(None, env)
    dist = distributed.setup(device)
    trainer = TorchPPOBackend(arguments.parse(given, device, dist.world_size), dist)
    trainer.build_envs()
    return trainer


def _timed(fn: Any) -> float:
    _sync()
    start = time.perf_counter()
    fn()
    _sync()
    return time.perf_counter() - start


def _fused_seconds(env_name: str, num_envs: int, episode_length: int, steps: int) -> float:
    import jax

    from brax_core import envs
    from brax_core.envs import training

    env = training.wrap(envs.get_environment(env_name), episode_length=episode_length)
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), num_envs))

    @jax.jit
    def rollout(state, key):
        def body(s, k):
            return env.step(s, jax.random.uniform(k, (num_envs, env.action_size), minval=-1.0, maxval=1.0)), ()

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    jax.block_until_ready(rollout(state, jax.random.PRNGKey(1)))
    best = float("inf")
    for seed in range(3):
        start = time.perf_counter()
        jax.block_until_ready(rollout(state, jax.random.PRNGKey(2 + seed)))
        best = min(best, time.perf_counter() - start)
    return best


def _busy(intervals: list[tuple[float, float]]) -> float:
    """The union's length of ``(start, end)`` intervals."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def _kernel_summary(trace: dict, phases: dict[str, tuple[float, float]], top: int) -> dict[str, Any]:
    kernels = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel" and "dur" in e]
    out = {}
    for phase, (start, end) in phases.items():
        inside = [e for e in kernels if start <= e["ts"] <= end]
        per_name: dict[str, list[float]] = {}
        for e in inside:
            per_name.setdefault(e["name"][:90], []).append(e["dur"])
        busiest = sorted(per_name.items(), key=lambda kv: -sum(kv[1]))[:top]
        out[phase] = {
            "wall_us": end - start,
            "gpu_busy_us": _busy([(e["ts"], e["ts"] + e["dur"]) for e in inside]),
            "kernels": len(inside),
            "top": [{"name": n, "count": len(d), "total_us": sum(d)} for n, d in busiest],
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ant")
    parser.add_argument("--torch-compile", choices=("true", "false"), default="true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument(
        "--compile-mode",
        default=None,
        help="torch.compile's mode for the compiled update (for example reduce-overhead: inductor's CUDA graphs)",
    )
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="override recipe values (literals)")
    parser.add_argument("--json", required=True)
    parser.add_argument("--trace", default=None, help="the profiled step's Chrome trace (.json.gz)")
    args = parser.parse_args(argv)

    import ast

    from torch_ppo import update

    if args.compile_mode is not None:
        from torch_ppo import compiled_update

        default_options = compiled_update.compile_options
        compiled_update.compile_options = lambda device: {**default_options(device), "mode": args.compile_mode}
    overrides = {k: ast.literal_eval(v) for k, _, v in (x.partition("=") for x in args.set)}
    trainer = _trainer(args.env, args.torch_compile == "true", overrides)
    config = trainer.config
    result: dict[str, Any] = {
        "env": args.env,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "update": type(trainer.update).__name__,
        "compile_mode": args.compile_mode,
        "num_envs": trainer.local_envs,
        "env_steps_per_training_step": trainer.steps_per_training_step,
    }
    start = time.perf_counter()
    for _ in range(2):
        trainer.update(trainer.collect())
    _sync()
    result["warm_up_s"] = time.perf_counter() - start

    collect_s, update_s = [], []
    for _ in range(args.repeats):
        box: dict[str, Any] = {}
        collect_s.append(_timed(lambda box=box: box.update(rollout=trainer.collect())))
        update_s.append(_timed(lambda box=box: trainer.update(box["rollout"])))
    result["collect_s"], result["update_s"] = statistics.median(collect_s), statistics.median(update_s)

    # Collection's parts, the same env steps as one training step's collection.
    env, steps = trainer.env, trainer.num_unrolls * config.algorithm.unroll_length
    action = torch.zeros(env.num_envs, env.action_size, device=env.device)

    def env_only() -> None:
        with torch.inference_mode():
            for _ in range(steps):
                env.step(action)

    obs = trainer.obs
    sampler = trainer.actor.module[-1]

    def policy_only() -> None:
        with torch.inference_mode():
            for _ in range(steps):
                sampler.sample(*trainer.modules.policy(obs))

    result["env_only_s"] = statistics.median(_timed(env_only) for _ in range(args.repeats))
    result["policy_only_s"] = statistics.median(_timed(policy_only) for _ in range(args.repeats))
    result["fused_rollout_s"] = _fused_seconds(args.env, env.num_envs, config.env.episode_length, steps)
    trainer.reset_envs(0)

    # One profiled training step, each phase synchronised at its end so that its kernels fall inside its window.
    from torch.profiler import ProfilerActivity, profile

    marks: dict[str, tuple[float, float]] = {}
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        for phase in ("collect", "update"):
            with torch.profiler.record_function(f"phase:{phase}"):
                if phase == "collect":
                    rollout = trainer.collect()
                else:
                    trainer.update(rollout)
                _sync()
    path = (args.trace or args.json + ".trace.json.gz").removesuffix(".gz")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    for e in trace.get("traceEvents", []):
        if str(e.get("name", "")).startswith("phase:") and e.get("cat") == "user_annotation":
            marks[e["name"][6:]] = (e["ts"], e["ts"] + e["dur"])
    result["profile"] = _kernel_summary(trace, marks, args.top)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as out:
        out.write(f.read())
    os.remove(path)
    algorithm = config.algorithm
    result["minibatch_steps_per_training_step"] = algorithm.num_minibatches * algorithm.num_updates_per_batch
    result["metric_names"] = list(update.METRIC_NAMES)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    brief = {k: v for k, v in result.items() if k != "profile"}
    print(json.dumps(brief), flush=True)
    for phase, summary in result["profile"].items():
        print(
            f"{phase}: wall {summary['wall_us'] / 1e3:.1f} ms, GPU busy {summary['gpu_busy_us'] / 1e3:.1f} ms, "
            f"{summary['kernels']} kernels",
            flush=True,
        )
        for k in summary["top"]:
            print(f"   {k['total_us'] / 1e3:8.2f} ms {k['count']:6d}x {k['name']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
