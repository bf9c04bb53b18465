"""The torch gradient trainers' checkpoints: a run stopped after an epoch and resumed from its checkpoint ends with the
same networks as an unbroken run; other settings on resume, a changed file and another algorithm's checkpoint are
refused by name before anything compiles."""

import os

import jax
import jax.numpy as jnp
import pytest
import torch

from brax_core.envs import Env, State
from brax_core.training.run import checkpoints
from torch_analytic import apg, common, shac
from torch_training.checkpoint import STATE_FILE


class Drift(Env):
    """A point mass pushed by the action, paid for staying near the origin."""

    default_episode_length = 12

    def reset(self, rng: jax.Array) -> State:
        obs = jnp.concatenate([jax.random.uniform(rng, (2,), jnp.float32, -1.0, 1.0), jnp.zeros((2,), jnp.float32)])
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=obs, obs=obs, reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        velocity = 0.9 * state.obs[2:] + 0.3 * action
        position = state.obs[:2] + 0.1 * velocity
        obs = jnp.concatenate([position, velocity])
        return state.replace(pipeline_state=obs, obs=obs, reward=1.0 - jnp.sum(position**2))

    @property
    def observation_size(self) -> int:
        return 4

    @property
    def action_size(self) -> int:
        return 2


TRAINERS = {"apg": (apg, {"learning_rate": 3e-3}), "shac": (shac, {"critic_iterations": 2, "num_critic_batches": 2})}
# Three epochs of two updates of 4 envs x 4 steps; episodes of 12 steps, so resets happen inside the run.
RUN = {"episode_length": 12, "policy_updates": 6, "horizon_length": 4, "num_envs": 4, "num_evals": 4,
       "num_eval_envs": 4}


class Stop(Exception):
    pass


def _stop_after_first_epoch(epoch, metrics):
    if epoch == 1:
        raise Stop


@pytest.mark.parametrize("algo", ["apg", "shac"])
def test_a_resumed_run_ends_as_an_unbroken_one(tmp_path, algo):
    """Through the run driver every trainer shares: a checkpoint at each epoch's end before the callback sees it, a
    failing callback named with the checkpoint it left, and a resumed run that evaluates its epoch again and goes
    on to end with the unbroken run's networks and evaluation."""
    trainer, own = TRAINERS[algo]
    reported = []
    _, unbroken, metrics = trainer.train(Drift(), **RUN, **own, save_checkpoint_path=tmp_path / "whole",
                                         progress_fn=lambda epoch, m: reported.append(epoch))
    assert reported == [0, 1, 2, 3]
    assert [os.path.basename(p) for p in checkpoints.step_directories(tmp_path / "whole")] == [
        "000000000032", "000000000064", "000000000096"]
    with pytest.raises(Stop) as stopped:
        trainer.train(Drift(), **RUN, **own, save_checkpoint_path=tmp_path / "parts",
                      progress_fn=_stop_after_first_epoch)
    note = " ".join(getattr(stopped.value, "__notes__", []))
    assert "progress_fn" in note and "000000000032" in note, note
    assert checkpoints.latest_step(tmp_path / "parts") == 32
    reported.clear()
    _, resumed, resumed_metrics = trainer.train(Drift(), **RUN, **own, save_checkpoint_path=tmp_path / "parts",
                                                restore_checkpoint_path=tmp_path / "parts",
                                                progress_fn=lambda epoch, m: reported.append(epoch))
    assert reported == [1, 2, 3]
    assert checkpoints.latest_step(tmp_path / "parts") == 96
    for (name, a), (_, b) in zip(unbroken.state_dict().items(), resumed.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert resumed_metrics["eval/episode_reward"] == metrics["eval/episode_reward"]


def test_resuming_with_other_settings_or_from_a_changed_file_is_refused(tmp_path, monkeypatch):
    apg.train(Drift(), **{**RUN, "num_evals": 2, "policy_updates": 2}, save_checkpoint_path=tmp_path / "run")
    step_dir = checkpoints.resolve(tmp_path / "run")
    built = []
    monkeypatch.setattr(common, "TorchEnv", lambda *a, **k: built.append(a))  # nothing may be built before the checks
    with pytest.raises(ValueError, match=r"with other settings \(horizon_length: 4 in the checkpoint, 8 requested\)"):
        apg.train(Drift(), **{**RUN, "num_evals": 2, "policy_updates": 2, "horizon_length": 8},
                  restore_checkpoint_path=step_dir)
    with pytest.raises(ValueError, match="is of apg, not of shac: restore it with torch_analytic.apg.train"):
        shac.train(Drift(), **{**RUN, "num_evals": 2, "policy_updates": 2}, restore_checkpoint_path=step_dir)
    state_file = os.path.join(step_dir, STATE_FILE)
    data = bytearray(open(state_file, "rb").read())
    data[len(data) // 2] ^= 0x10
    open(state_file, "wb").write(bytes(data))
    with pytest.raises(checkpoints.CheckpointError, match="differs from what was saved") as error:
        apg.train(Drift(), **{**RUN, "num_evals": 2, "policy_updates": 2}, restore_checkpoint_path=step_dir)
    assert state_file in str(error.value) and not built
