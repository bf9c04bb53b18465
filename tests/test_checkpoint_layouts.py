"""The checkpoint directory both trainers share: its newest checkpoint is found by name whatever layout wrote it, and
checkpoints written by earlier versions of both trainers still load, rebuild their policy and resume the run they
were saved from (``tests/data/old_checkpoints``: torch_ppo's former ``checkpoint_<steps>.pt`` files and the JAX
trainer's orbax step directory, each the end of a two-step run on ``fast``)."""

import functools
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import torch_ppo
from brax_core.training.agents.ppo import checkpoint as jax_checkpoint
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as ppo
from brax_core.training.run import checkpoints
from torch_ppo import checkpoint as torch_checkpoint

OLD = Path(__file__).parent / "data" / "old_checkpoints"
# The run the checkpoints come from (see tests/data/old_checkpoints/README.md): 32 env steps per training step.
COMMON = dict(num_envs=4, batch_size=4, num_minibatches=2, unroll_length=4, episode_length=20, num_evals=0,
              learning_rate=3e-3, normalize_observations=True, seed=1)  # fmt: skip
SIZES = dict(policy_hidden_layer_sizes=(4,), value_hidden_layer_sizes=(4,))
SAVED_AT = 64
# Across machines float rounding may differ in the last bits; a resume that lost any part of the saved state (the
# optimiser moments, the RNG stream, the envs' state) ends far outside this.
TOLERANCE = dict(rtol=1e-5, atol=1e-6)


def test_latest_step_reads_the_newest_completed_checkpoint_name_of_either_layout(tmp_path):
    assert jax_checkpoint.latest_step is torch_checkpoint.latest_step is checkpoints.latest_step
    assert checkpoints.latest_step(tmp_path / "absent") is None
    assert checkpoints.latest_step(tmp_path) is None
    for steps in (2560, 12800, 1280):
        (tmp_path / f"{steps:012d}").mkdir()
    (tmp_path / "99999.orbax-checkpoint-tmp-1").mkdir()  # an unfinished write of orbax
    (tmp_path / f".tmp_{99999:012d}_x.part").mkdir()  # and of torch_ppo
    (tmp_path / "50000").write_text("")  # a file, not a step directory
    assert checkpoints.latest_step(tmp_path) == 12800
    # torch_ppo's earlier layout: a file per step, compared with the step directories by its step count.
    (tmp_path / f"checkpoint_{25600:015d}.pt").write_bytes(b"")
    (tmp_path / ".tmp_checkpoint_000000000099999.pt.part").write_bytes(b"")  # an unfinished write
    assert checkpoints.latest_step(tmp_path) == 25600
    assert checkpoints.resolve(tmp_path) == str(tmp_path / f"checkpoint_{25600:015d}.pt")
    # A step named with other digits (str(step)) is the same step.
    assert checkpoints.resolve(tmp_path / "1280") == str(tmp_path / f"{1280:012d}")


@pytest.fixture
def old_torch(tmp_path):
    copy = tmp_path / "torch_ppo"
    shutil.copytree(OLD / "torch_ppo", copy)
    return copy


@pytest.fixture
def old_jax(tmp_path):
    copy = tmp_path / "jax"
    shutil.copytree(OLD / "jax", copy)
    return copy


def test_an_old_torch_ppo_checkpoint_file_loads_and_resumes_its_run(old_torch):
    state = torch_checkpoint.load(old_torch)
    assert state["env_steps"] == SAVED_AT and state["path"].endswith(f"checkpoint_{SAVED_AT:015d}.pt")
    assert torch_checkpoint.latest_step(old_torch) == SAVED_AT
    obs = torch.randn(5, 2, generator=torch.Generator().manual_seed(1))
    make_policy, _, _ = torch_ppo.train("fast", num_timesteps=0, **COMMON, **SIZES)
    _, restored, metrics = torch_ppo.train(
        "fast", num_timesteps=SAVED_AT, restore_checkpoint_path=old_torch, **COMMON, **SIZES
    )
    assert metrics == {}
    loaded, _ = torch_checkpoint.load_policy(old_torch)(obs)
    torch.testing.assert_close(loaded, make_policy(restored, deterministic=True)(obs)[0], rtol=0, atol=0)

    _, straight, _ = torch_ppo.train("fast", num_timesteps=2 * SAVED_AT, **COMMON, **SIZES)
    _, resumed, _ = torch_ppo.train(
        "fast",
        num_timesteps=2 * SAVED_AT,
        restore_checkpoint_path=old_torch,
        save_checkpoint_path=old_torch,
        **COMMON,
        **SIZES,
    )
    for part_straight, part_resumed in zip(straight, resumed, strict=True):
        for name in part_straight:
            torch.testing.assert_close(part_resumed[name], part_straight[name], **TOLERANCE, msg=name)
    # The resumed run saved into the same folder; its checkpoint is the newest, whatever layout each has.
    assert torch_checkpoint.latest_step(old_torch) == 2 * SAVED_AT
    assert torch_checkpoint.load(old_torch)["env_steps"] == 2 * SAVED_AT


def test_an_old_jax_checkpoint_loads_and_resumes_its_run(old_jax):
    factory = functools.partial(ppo_networks.make_ppo_networks, **SIZES)
    assert jax_checkpoint.latest_step(old_jax) == SAVED_AT
    assert jax_checkpoint.load_config(old_jax)["env_steps"] == SAVED_AT
    params = jax_checkpoint.load_params(old_jax)
    obs = jax.random.normal(jax.random.PRNGKey(2), (5, 2))
    make_policy, _, _ = ppo.train("fast", num_timesteps=0, network_factory=factory, **COMMON)
    expected, _ = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(0))
    loaded, _ = jax_checkpoint.load_policy(old_jax)(obs, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(loaded, expected)

    _, straight, _ = ppo.train("fast", num_timesteps=2 * SAVED_AT, network_factory=factory, **COMMON)
    _, resumed, _ = ppo.train(
        "fast",
        num_timesteps=2 * SAVED_AT,
        restore_checkpoint_path=old_jax,
        save_checkpoint_path=old_jax,
        network_factory=factory,
        **COMMON,
    )
    for a, b in zip(jax.tree.leaves(straight), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), **TOLERANCE)
    assert jax_checkpoint.latest_step(old_jax) == 2 * SAVED_AT
    assert float(jnp.asarray(jax_checkpoint.load_params(old_jax).normalizer_params.count)) == 2 * SAVED_AT
