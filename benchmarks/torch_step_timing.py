"""torch_ppo's training step in its two parts, timed apart: collection (``TorchPPOBackend.collect``: the actor and the
bridge's env steps for one batch of unrolls) and the update (``TorchPPOBackend.update``: every minibatch step of SGD on
that batch), on an env's preset, in milliseconds per training step (the median over ``--repetitions``).

The update is compiled or eager as ``torch_compile=None`` chooses for the preset's ``num_timesteps`` (a full-length
run's choice); torch uses one thread, as ``torch_ppo.train`` does by default on a CPU. Three training steps run
first (compiling). A checkout on ``PYTHONPATH`` is timed as it is, so two checkouts compare side by side:

  PYTHONPATH=<checkout> python benchmarks/torch_step_timing.py --env halfcheetah --repetitions 30 --label after

Prints one JSON line: env, label, the update's class, ``collect_ms``, ``update_ms`` and every update's time.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import time

import torch

import torch_ppo
from brax_core.training.agents.ppo.presets import TRAIN_KWARGS
from torch_ppo import arguments, distributed

try:
    from torch_ppo.trainer import TorchPPOBackend as Run
except ImportError:  # a checkout from before the run's class had this name
    from torch_ppo.trainer import Trainer as Run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="halfcheetah", choices=sorted(TRAIN_KWARGS))
    parser.add_argument("--repetitions", type=int, default=30)
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    preset = dict(TRAIN_KWARGS[args.env])
    network = dict(preset.pop("network_factory").keywords)
    defaults = {name: p.default for name, p in inspect.signature(torch_ppo.train).parameters.items()}
    given = {**defaults, **preset, **network, "environment": args.env, "num_evals": 0}
    device = torch.device("cpu")
    torch.set_num_threads(1)
    dist = distributed.setup(device)
    run = Run(arguments.parse(given, device, dist.world_size), dist)
    run.build_envs()
    for _ in range(3):
        run.update(run.collect())
    collect_ms, update_ms = [], []
    for _ in range(args.repetitions):
        start = time.perf_counter()
        batch = run.collect()
        collected = time.perf_counter()
        run.update(batch)
        updated = time.perf_counter()
        collect_ms.append((collected - start) * 1e3)
        update_ms.append((updated - collected) * 1e3)
    print(json.dumps({
        "env": args.env,
        "label": args.label,
        "update": type(run.update).__name__,
        "collect_ms": round(statistics.median(collect_ms), 1),
        "update_ms": round(statistics.median(update_ms), 1),
        "update_each_ms": [round(x, 1) for x in update_ms],
    }))


if __name__ == "__main__":
    main()
