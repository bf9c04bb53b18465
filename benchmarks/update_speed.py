"""torch_ppo's update alone on a CPU: a pass over the batch scanned in one compiled program against one compiled call
per minibatch step, side by side.

Each reading is a fresh process that builds torch_ppo's update for a preset's sizes (its networks, ``batch_size *
num_minibatches`` rows of ``unroll_length`` steps, the env's observation and action sizes) and times ``update(batch)``
on one fixed synthetic batch: the median of ``--repeats`` calls after a first (which compiles, or loads from
inductor's caches). The two ways alternate, ``--rounds`` times each; the table gives each way's median over rounds and
their ratio. torch runs with one thread, as torch_ppo trains.

    python benchmarks/update_speed.py --envs halfcheetah ant humanoid --rounds 3 --write
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from _results import add_write_option, replace_section

SECTION = "## The update's pass in one program"
WAYS = {"pass": True, "step": False}  # the way's name -> CompiledPPOUpdate's scan_passes


def measure(env: str, scan_passes: bool, repeats: int) -> dict[str, float]:
    """One reading in this process: seconds of the first update and the median of the next ``repeats``."""
    import torch
    from tensordict import TensorDict

    from brax_core.envs import get_environment
    from brax_core.training.agents.ppo import presets
    from torch_ppo import compiled_update, update
    from torch_ppo.distributed import DistributedContext
    from torch_ppo.networks import PPOModules
    from torch_ppo.trainer import _adam

    torch.set_num_threads(1)
    config = presets.PRESETS[env]
    algorithm, network = config.algorithm, config.network
    environment = get_environment(env)
    rows, steps = algorithm.batch_size * algorithm.num_minibatches, algorithm.unroll_length
    observation, action = environment.observation_size, environment.action_size
    torch.manual_seed(0)
    modules = PPOModules(
        observation,
        action,
        network.policy_hidden_layer_sizes,
        network.value_hidden_layer_sizes,
        network.activation,
        algorithm.normalize_observations,
    )
    optimizer = _adam(modules, algorithm.learning_rate, False, torch.device("cpu"))
    the_update = compiled_update.CompiledPPOUpdate(
        modules,
        update.LossModule(modules, update.loss_config(config)),
        optimizer,
        config,
        local_batch=algorithm.batch_size,
        generator=torch.Generator().manual_seed(0),
        dist=DistributedContext(),
        scan_passes=scan_passes,
    )
    flags = torch.zeros(rows, steps, 1, dtype=torch.bool)
    batch = TensorDict(
        {
            "observation": torch.randn(rows, steps, observation),
            "raw_action": torch.randn(rows, steps, action),
            "action_log_prob": -torch.rand(rows, steps),
            "next": {
                "final_observation": torch.randn(rows, steps, observation),
                "reward": torch.randn(rows, steps, 1),
                "truncated": flags,
                "terminated": flags.clone(),
            },
        },
        batch_size=[rows, steps],
    )
    started = time.perf_counter()
    the_update(batch)
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        the_update(batch)
        times.append(time.perf_counter() - started)
    minibatch_steps = algorithm.num_minibatches * algorithm.num_updates_per_batch
    return {"first_s": first, "update_s": statistics.median(times), "minibatch_steps": minibatch_steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["halfcheetah", "ant", "humanoid"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--one", nargs=2, metavar=("ENV", "WAY"), help=argparse.SUPPRESS)  # a reading's process
    add_write_option(parser)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], WAYS[args.one[1]], args.repeats)))
        return
    started, load = datetime.datetime.now(datetime.UTC), os.getloadavg()[0]
    readings: dict[tuple[str, str], list[dict[str, float]]] = {}
    for env in args.envs:
        for _ in range(args.rounds):
            for way in WAYS:
                out = subprocess.run(
                    [sys.executable, __file__, "--one", env, way, "--repeats", str(args.repeats)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                reading = json.loads(out.stdout.strip().splitlines()[-1])
                readings.setdefault((env, way), []).append(reading)
                print(env, way, reading, flush=True)
    code = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False)
    lines = [
        f"`python benchmarks/update_speed.py --envs {' '.join(args.envs)} --rounds {args.rounds}`; "
        f"{platform.machine()}, {os.cpu_count()}-core CPU, torch on cpu with one thread, no GPU; "
        f"{started:%Y-%m-%d %H:%M}-{datetime.datetime.now(datetime.UTC):%H:%M} UTC, load average {load:.2f} at the "
        f"start, nothing else running; code {code.stdout.strip() or 'unknown'}. Each reading a fresh process, the two "
        f"ways alternating; the update of one batch of the preset's size (median of {args.repeats} after a first), "
        "the median over rounds.",
        "",
        "| env (preset) | minibatch steps per update | one call per step (ms) | one call per pass (ms) | pass / step "
        "| per minibatch step, per pass (us) | first update, per step; per pass (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for env in args.envs:
        step, whole = readings[(env, "step")], readings[(env, "pass")]
        step_s = statistics.median(r["update_s"] for r in step)
        pass_s = statistics.median(r["update_s"] for r in whole)
        count = step[0]["minibatch_steps"]
        lines.append(
            f"| `{env}` | {count} | {step_s * 1000:.1f} | {pass_s * 1000:.1f} | {pass_s / step_s:.2f} "
            f"| {pass_s / count * 1e6:.0f} | {max(r['first_s'] for r in step):.0f}; "
            f"{max(r['first_s'] for r in whole):.0f} |"
        )
    body = "\n".join(lines)
    print(body)
    if args.write is not None:
        replace_section(args.write or None, SECTION, body, keep=("Reading",))


if __name__ == "__main__":
    main()
