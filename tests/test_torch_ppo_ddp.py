"""torch_ppo data parallelism over two CPU processes (gloo) launched by torchrun.

Run as a script (by torchrun), this file is the worker: it trains the `fast` env with a tiny configuration and saves
its rank's parameters, then runs one training update on its half of a fixed batch and saves the result with its
env's first observations.
"""

import faulthandler
import gc
import inspect
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from rollouts import synthetic_batch
from session_once import once_per_session
from tensordict import TensorDict

WORKER_TIMEOUT_S = 240  # each rank's limit; about 35 s alone, 50 s beside two busy processes
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

# The update-level comparison: inverted_pendulum, whose resets are random (so each rank's seed shows in its first
# observations); only its reset is compiled, the batch is synthetic.
UPDATE_ENV = "inverted_pendulum"
OBS, ACT = 4, 1
WORLD = 2
UPDATE_CONFIG = dict(
    CONFIG,
    normalize_advantage=False,  # see test_one_update_over_two_processes_equals_one_process
    max_grad_norm=0.5,  # clipping sees the averaged gradient: part of what is compared
    log_training_metrics=False,
)
ROWS = UPDATE_CONFIG["batch_size"] * UPDATE_CONFIG["num_minibatches"]  # rows of one training step's batch
LOCAL_ROWS = ROWS // WORLD
T = UPDATE_CONFIG["unroll_length"]


def _batch() -> TensorDict:
    """A training step's batch ``[ROWS, T]`` with the keys the collector stores (synthetic, fixed by a seed)."""
    return synthetic_batch(ROWS, T, OBS, ACT, seed=123, end_probability=0.05)


def _draws() -> tuple[list[list[torch.Tensor]], list[torch.Tensor]]:
    """Per SGD pass, each rank's row order of its half of the batch; per minibatch, the global entropy noise."""
    g = torch.Generator().manual_seed(7)
    orders = [[torch.randperm(LOCAL_ROWS, generator=g) for _ in range(WORLD)] for _ in range(2)]
    noise = [torch.randn(T, UPDATE_CONFIG["batch_size"], ACT, generator=g) for _ in range(2 * 4)]
    return orders, noise


def _global_order(local: list[torch.Tensor]) -> torch.Tensor:
    """The one-process row order with the same minibatches: minibatch i is rank 0's minibatch i followed by rank
    1's (rank r holds global rows ``r * LOCAL_ROWS ...``)."""
    m = UPDATE_CONFIG["num_minibatches"]
    parts = [(order + r * LOCAL_ROWS).reshape(m, -1) for r, order in enumerate(local)]
    return torch.cat(parts, dim=1).reshape(-1)


def _trainer(rank: int | None, torch_compile: bool = False):
    """A torch_ppo trainer with UPDATE_CONFIG (``rank`` None: one process), its SGD draws fixed by ``_draws``."""
    import torch_ppo
    from torch_ppo import arguments, distributed
    from torch_ppo.trainer import TorchPPOBackend

    defaults = {
        name: p.default
        for name, p in inspect.signature(torch_ppo.train).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    kw = {**defaults, "environment": UPDATE_ENV, "num_timesteps": STEP, **UPDATE_CONFIG, "torch_compile": torch_compile}
    device = torch.device("cpu")
    ctx = distributed.setup(device)
    assert ctx.world_size == (1 if rank is None else WORLD)
    trainer = TorchPPOBackend(arguments.parse(kw, device, ctx.world_size), ctx)
    orders, noise = _draws()
    passes, minibatches = iter(orders), iter(noise)
    batch = UPDATE_CONFIG["batch_size"] // WORLD

    def order(rows):
        local = next(passes)
        return _global_order(local) if rank is None else local[rank]

    def entropy_noise(shape):
        full = next(minibatches)
        return full if rank is None else full[:, rank * batch : (rank + 1) * batch]

    trainer.update.minibatch_order, trainer.update.entropy_noise = order, entropy_noise
    return trainer


def _state(trainer) -> dict:
    return {
        "modules": {k: v.detach().clone() for k, v in trainer.modules.state_dict().items()},
        "normalizer": {
            k: v.detach().clone() for k, v in trainer.modules.state_dict().items() if k.startswith("normalizer")
        },
    }


def _worker(out_dir: str, mode: str = "") -> None:
    import torch.distributed as dist

    import torch_ppo  # turns on the persistent compile cache (conftest does not run in a worker)

    # A rank stuck in a collective prints every thread's stack and exits, so a hang fails with its place named.
    faulthandler.dump_traceback_later(WORKER_TIMEOUT_S, exit=True)

    rank = int(os.environ["RANK"])
    if mode == "compiled":  # only the update, with the compiled minibatch step (torch_ppo.compiled_update)
        dist.init_process_group("gloo")
        trainer = _trainer(rank, torch_compile=True)
        trainer.build_envs()
        trainer.update(_batch()[rank * LOCAL_ROWS : (rank + 1) * LOCAL_ROWS])
        assert trainer.update._compiled_once and not trainer.update._eager
        torch.save(_state(trainer), os.path.join(out_dir, f"compiled_update{rank}.pt"))
        del trainer
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()
        return

    reports = []
    gc.disable()  # what train() leaves behind is not hidden by a collection
    _, params, metrics = torch_ppo.train(
        "fast", num_timesteps=2 * STEP, progress_fn=lambda s, m: reports.append(s), **CONFIG
    )
    assert not dist.is_initialized()  # train() created the group and tore it down
    # and released its DistributedDataParallel first: one freed later by the garbage collector would destroy the
    # group's last reference with the interpreter lock held, while gloo's worker threads may be waiting for it.
    lingering = sum(isinstance(o, torch.nn.parallel.DistributedDataParallel) for o in gc.get_objects())
    gc.enable()

    # From here on a group of our own, which every train() below joins. A file store: torchrun's store still holds
    # the first group's addresses, which a second group on it would read.
    store = "file://" + os.path.join(out_dir, "store")
    dist.init_process_group("gloo", init_method=store, rank=rank, world_size=WORLD, timeout=timedelta(seconds=120))

    # The same run interrupted after its first training step (a checkpoint) and resumed. Rank 0 writes slowly, as
    # on a loaded machine, and in a caller's group nothing lines the ranks up between two train() calls: only
    # train()'s own barrier after the save keeps rank 1 from resuming before the file exists.
    from torch_ppo import checkpoint

    ckpt = os.path.join(out_dir, "ckpt")
    save = checkpoint.save
    checkpoint.save = lambda *a, **k: (time.sleep(3), save(*a, **k))[1]
    torch_ppo.train("fast", num_timesteps=STEP, save_checkpoint_path=ckpt, **CONFIG)
    checkpoint.save = save
    _, resumed, _ = torch_ppo.train("fast", num_timesteps=2 * STEP, restore_checkpoint_path=ckpt, **CONFIG)

    # A network of the user's own (network_factory): DDP wraps the factory's modules as it wraps torch_ppo's own.
    from test_torch_ppo_network_factory import residual_networks

    initial = []

    def factory(observation_size: int, action_size: int):
        policy, value = residual_networks(observation_size, action_size)
        initial.append({k: v.detach().clone() for k, v in policy.state_dict().items()})
        return policy, value

    own_networks = {k: v for k, v in CONFIG.items() if not k.endswith("_hidden_layer_sizes")}
    _, custom, _ = torch_ppo.train("fast", num_timesteps=STEP, network_factory=factory, **own_networks)
    torch.save(
        {
            "params": params._asdict(),
            "reports": reports,
            "metrics": metrics,
            "resumed": resumed._asdict(),
            "lingering": lingering,
            "custom": custom._asdict(),
            "custom_initial": initial[0],
        },
        os.path.join(out_dir, f"rank{rank}.pt"),
    )

    # One update on this rank's half of the batch.
    trainer = _trainer(rank)
    trainer.build_envs()  # resets this rank's env with its seed
    first_obs = trainer.obs.clone()
    trainer.update(_batch()[rank * LOCAL_ROWS : (rank + 1) * LOCAL_ROWS])
    torch.save(
        {**_state(trainer), "first_obs": first_obs, "env_seed": trainer.env_seed},
        os.path.join(out_dir, f"update{rank}.pt"),
    )
    # The group's last reference goes with destroy_process_group, not with this trainer's DDP (see above).
    del trainer
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def _torchrun(out, *mode: str):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", __file__, str(out)]
    cmd += list(mode)
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S + 60)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"torchrun did not finish: {(e.stderr or b'')[-6000:].decode(errors='replace')}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """The folder the two ranks wrote their results to; torchrun launched once per test session."""
    return Path(once_per_session(tmp_path_factory, "ddp", lambda folder: str(_torchrun(folder))))


def test_two_processes_end_with_identical_parameters(ranks):
    ranks = [torch.load(ranks / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert ranks[0]["lingering"] == ranks[1]["lingering"] == 0
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


def test_a_users_own_networks_train_in_step_on_both_ranks(ranks):
    r0, r1 = (torch.load(ranks / f"rank{r}.pt", weights_only=False) for r in range(2))
    assert list(r0["custom"]["policy_params"]) == list(r0["custom_initial"])  # the factory's modules, as built
    for part in ("policy_params", "value_params", "normalizer_params"):
        for key, value in r0["custom"][part].items():
            torch.testing.assert_close(value, r1["custom"][part][key], rtol=0, atol=0, msg=f"{part}.{key}")
    # Trained: the policy moved from rank 0's initial weights (which DDP gave rank 1 as well).
    moved = [k for k, v in r0["custom_initial"].items() if not torch.equal(v, r0["custom"]["policy_params"][k])]
    assert len(moved) >= len(r0["custom_initial"]) // 2, moved


def test_checkpoints_hold_every_ranks_envs_and_resume_exactly(ranks):
    from torch_ppo import checkpoint

    state = checkpoint.load(ranks / "ckpt")
    envs = state["env_states"]
    assert len(envs) == WORLD
    assert any(not torch.equal(a, b) for a, b in zip(envs[0]["leaves"], envs[1]["leaves"], strict=True))
    for r in (0, 1):
        rank = torch.load(ranks / f"rank{r}.pt", weights_only=False)
        for part in ("normalizer_params", "policy_params", "value_params"):
            for key, value in rank["params"][part].items():
                # Every rank continued its own envs from the checkpoint: the unbroken run's parameters exactly.
                torch.testing.assert_close(rank["resumed"][part][key], value, rtol=0, atol=0, msg=f"{r}/{part}/{key}")


def test_one_update_over_two_processes_equals_one_process(ranks):
    """One training update (normaliser, then 2 passes of 4 minibatches of Adam with gradient clipping) over two
    processes gives the parameters and normaliser of the same update in one process over the whole batch.

    Compared at the level of the update, not of whole ``torch_ppo.train`` runs: each rank steps its own envs
    with its own seed (``seed + 7919 * rank``, checked below), so a run over two processes collects other data
    than a run in one, by construction. Here both sides get one fixed batch: each rank holds half of its rows,
    and the SGD draws are fixed so that every minibatch of the one-process update is the union of the ranks'
    minibatches (rank 0's rows, then rank 1's) with the same entropy noise. Both start from the seed's initial
    weights. Advantage normalisation is off: it uses each rank's own minibatch statistics, as the JAX trainer
    does per device, so it is not the one-process computation by design.
    """
    ddp = [torch.load(ranks / f"update{r}.pt", weights_only=False) for r in (0, 1)]
    single = _trainer(None)
    before = {k: v.detach().clone() for k, v in single.modules.state_dict().items()}
    single.update(_batch())
    ref = _state(single)
    assert float(ref["normalizer"]["normalizer.count"]) == ROWS * T  # really folded in the whole batch
    for key, value in ref["modules"].items():
        for r in (0, 1):
            torch.testing.assert_close(ddp[r]["modules"][key], value, rtol=1e-5, atol=1e-6, msg=f"rank {r}: {key}")
        if ".mlp." in key:  # the update moved every weight, so the match is not trivial
            assert not torch.equal(value, before[key]), key


@pytest.mark.slow
def test_the_compiled_update_over_two_processes_equals_the_eager_update_in_one(tmp_path):
    """As above with the compiled minibatch step on both ranks: its gradients are averaged over the processes (one
    all-reduce between the compiled gradient and Adam programs) and clipped after averaging, as DDP's are."""
    _torchrun(tmp_path, "compiled")
    ddp = [torch.load(tmp_path / f"compiled_update{r}.pt", weights_only=False) for r in (0, 1)]
    single = _trainer(None)
    single.update(_batch())
    for key, value in _state(single)["modules"].items():
        for r in (0, 1):
            torch.testing.assert_close(ddp[r]["modules"][key], value, rtol=1e-5, atol=1e-5, msg=f"rank {r}: {key}")


def test_each_rank_steps_its_own_envs(ranks):
    ddp = [torch.load(ranks / f"update{r}.pt", weights_only=False) for r in (0, 1)]
    assert ddp[0]["env_seed"] != ddp[1]["env_seed"]
    a, b = ddp[0]["first_obs"], ddp[1]["first_obs"]
    assert a.shape == b.shape == (UPDATE_CONFIG["num_envs"] // WORLD, OBS)
    # Random resets from different seeds: no env of one rank starts where the same env of the other does.
    assert not torch.isclose(a, b).all(dim=-1).any()
    # and the envs within a rank differ too (one key per env, not one state copied)
    assert torch.unique(a, dim=0).shape[0] == a.shape[0]


if __name__ == "__main__":
    _worker(*sys.argv[1:])
    gc.freeze()  # spares each rank's exit the collector's walk over JAX's and torch's objects (seconds)
