"""The checkpoint directory both trainers share: completed checkpoints are found by their step names, and a step
directory without a manifest (a save cut short before its last file) is never taken for a checkpoint."""

import json

import pytest

from brax_core.training.agents.ppo import checkpoint as jax_checkpoint
from brax_core.training.run import checkpoints
from torch_ppo import checkpoint as torch_checkpoint


def _completed(path, steps: int, trainer: str = "torch_ppo"):
    step_dir = path / f"{steps:012d}"
    step_dir.mkdir()
    (step_dir / "config.json").write_text("{}")
    checkpoints.write_manifest(str(step_dir), trainer, steps, ["config.json"])
    return step_dir


def test_latest_step_and_resolve_take_the_newest_completed_step_directory(tmp_path):
    assert jax_checkpoint.latest_step is torch_checkpoint.latest_step is checkpoints.latest_step
    assert checkpoints.latest_step(tmp_path / "absent") is None
    assert checkpoints.latest_step(tmp_path) is None
    for steps in (2560, 12800, 1280):
        _completed(tmp_path, steps)
    (tmp_path / "99999.orbax-checkpoint-tmp-1").mkdir()  # an unfinished write of orbax
    (tmp_path / f".tmp_{99999:012d}_x.part").mkdir()  # and of torch_ppo
    (tmp_path / "50000").write_text("")  # a file, not a step directory
    cut_short = tmp_path / f"{25600:012d}"  # renamed into place, killed before its manifest
    (cut_short / "config").mkdir(parents=True)
    assert checkpoints.latest_step(tmp_path) == 12800
    assert checkpoints.resolve(tmp_path) == str(tmp_path / f"{12800:012d}")
    assert checkpoints.step_directories(tmp_path) == [str(tmp_path / f"{s:012d}") for s in (1280, 2560, 12800)]
    # A step named with other digits (str(step)) is the same step.
    assert checkpoints.resolve(tmp_path / "1280") == str(tmp_path / f"{1280:012d}")
    assert json.loads((tmp_path / f"{1280:012d}" / checkpoints.MANIFEST).read_text())["env_steps"] == 1280


def test_a_step_directory_without_a_manifest_or_a_file_is_refused_by_name(tmp_path):
    cut_short = tmp_path / f"{25600:012d}"
    (cut_short / "state").mkdir(parents=True)
    with pytest.raises(checkpoints.CheckpointError, match=r"incomplete: it has no manifest.json, .*cut short") as e:
        checkpoints.resolve(cut_short)
    assert str(cut_short) in str(e.value)
    with pytest.raises(checkpoints.CheckpointError, match="incomplete: it has no manifest.json"):
        checkpoints.verify_files(str(cut_short), "state")
    a_file = tmp_path / f"checkpoint_{25600:015d}.pt"
    a_file.write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"it is a file; a checkpoint is a step directory"):
        checkpoints.resolve(a_file)
    with pytest.raises(FileNotFoundError, match="holds no completed checkpoint"):
        checkpoints.resolve(tmp_path)
