"""Where a torch SAC training step of the ``inverted_pendulum`` preset spends its time: the env step with the
replay-buffer insert, and one SGD step (the preset makes 32 per training step).

    python benchmarks/sac_step_profile.py
"""

import time
from collections.abc import Callable

import torch

from brax_bridge import TorchEnv
from brax_core.training.agents.sac import presets
from torch_sac.train import SACBackend, SACUpdate


def seconds_per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main() -> None:
    config = presets.PRESETS["inverted_pendulum"]
    env = TorchEnv("inverted_pendulum", config.env.num_envs, episode_length=1000, full_reset=False)
    update = SACUpdate(config, env.observation_size, env.action_size, env.device)
    backend = SACBackend(config, update, env, None, torch.Generator().manual_seed(0), None)
    backend.start()  # the preset's prefill
    seconds_per_call(backend.training_step, 5)  # first calls: compiles and allocations
    step = seconds_per_call(backend.training_step, 20)
    act = seconds_per_call(backend.act, 20)
    batch = backend.buffer.sample(config.algorithm.batch_size, backend.generator)
    noise = torch.randn(3, config.algorithm.batch_size, env.action_size)
    sgd = seconds_per_call(lambda: update.sgd_step(batch, noise), 200)
    updates = config.algorithm.grad_updates_per_step
    print(f"training step {step * 1e3:.1f} ms: env step + insert {act * 1e3:.1f} ms, one SGD step {sgd * 1e3:.2f} ms "
          f"(x{updates} = {sgd * updates * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
