"""torch_ppo data parallelism: two CPU processes (gloo) launched by torchrun end with identical parameters.

Run as a script (by torchrun), this file is the worker: it trains the `fast` env with a tiny configuration and
saves its rank's parameters.
"""

import os
import subprocess
import sys

import torch

STEP = 1280  # env steps per training step, over both processes
CONFIG = dict(
    episode_length=60,
    num_envs=32,  # 16 per process
    batch_size=32,  # 16 rows of every minibatch per process
    num_minibatches=4,
    unroll_length=10,
    num_updates_per_batch=2,
    learning_rate=3e-3,
    entropy_cost=1e-3,
    discounting=0.95,
    normalize_observations=True,
    policy_hidden_layer_sizes=(8,),
    value_hidden_layer_sizes=(8,),
    num_evals=0,
    log_training_metrics=True,
)


def _worker(out_dir: str) -> None:
    import torch.distributed as dist

    import torch_ppo

    reports = []
    _, params, metrics = torch_ppo.train(
        "fast", num_timesteps=2 * STEP, progress_fn=lambda s, m: reports.append(s), **CONFIG
    )
    rank = int(os.environ["RANK"])
    assert not dist.is_initialized()  # train() created the group and tore it down
    torch.save(
        {"params": params._asdict(), "reports": reports, "metrics": metrics},
        os.path.join(out_dir, f"rank{rank}.pt"),
    )


def test_two_processes_end_with_identical_parameters(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", __file__, str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    # Only rank 0 reports progress.
    assert ranks[0]["reports"] == [STEP, 2 * STEP] and ranks[1]["reports"] == []
    for part in ("normalizer_params", "policy_params", "value_params"):
        a, b = ranks[0]["params"][part], ranks[1]["params"][part]
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=f"{part}/{key}")
    # The normaliser saw both processes' observations: 2 training steps of 1280 env steps.
    assert float(ranks[0]["params"]["normalizer_params"]["count"]) == 2 * STEP
    # Each env runs 40 steps per training step, so all 32 episodes (both processes') end in the second.
    assert ranks[0]["metrics"]["episode/count"] == 32.0 and ranks[0]["metrics"]["episode/length"] == 60.0


if __name__ == "__main__":
    _worker(sys.argv[1])
