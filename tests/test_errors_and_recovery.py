"""Errors and recovery at the bridge, env and command-line boundaries: every misuse gets an error of our own that
names the argument and what was expected, and every documented recovery (snapshots, readable old states, torn
logs, stale temporary files) does what it says. Mostly the ``fast`` env, which compiles in milliseconds."""

import json
import os
import re
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from brax_bridge import TorchEnv, convert
from brax_bridge_app import cli, rundir
from brax_core import envs
from brax_core.envs.fast import Fast
from torch_ppo import checkpoint as torch_checkpoint

N = 4


def _fast(**kwargs) -> TorchEnv:
    kwargs.setdefault("episode_length", 50)
    env = TorchEnv("fast", num_envs=N, **kwargs)
    env.reset()
    return env


# --- TorchEnv.physics and set_physics --------------------------------------------------------------------------


def test_physics_is_a_snapshot_that_cannot_touch_the_simulation():
    edited, reference = _fast(seed=2), _fast(seed=2)
    physics = edited.physics
    qpos_then = physics["qpos"].clone()
    physics["qpos"].fill_(123.0)
    physics["qvel"].fill_(-7.0)
    action = torch.full((N, 1), 0.5)
    assert torch.equal(edited.step(action)["next", "observation"], reference.step(action)["next", "observation"])
    edited.step(action), reference.step(action)
    assert torch.equal(edited.physics["qpos"], reference.physics["qpos"])
    assert not torch.equal(edited.physics["qpos"], qpos_then)  # a snapshot taken earlier stays as it was


def test_set_physics_is_where_the_next_step_starts():
    env = _fast(seed=1)
    env.step(torch.full((N, 1), 0.7))
    qpos = torch.linspace(-0.5, 0.5, N)[:, None]
    env.set_physics(qpos=qpos, qvel=torch.zeros(N, 1))
    obs = env.step(torch.zeros(N, 1))["next", "observation"]
    # fast's step from rest with no force: the velocity stays 0 and the position is the one set
    assert torch.allclose(obs, torch.cat([qpos, torch.zeros(N, 1)], -1))
    snapshot = env.physics
    snapshot["qpos"].zero_()
    env.set_physics(snapshot)  # an edited snapshot goes back in whole
    assert torch.equal(env.physics["qpos"], torch.zeros(N, 1))
    with pytest.raises(ValueError, match=r"set_physics: qpos must have shape \(4, 1\) and dtype torch.float32"):
        env.set_physics(qpos=torch.zeros(N, 2))
    with pytest.raises(KeyError, match=r"no physics field 'xpos'; fields are \['qpos', 'qvel'\]"):
        env.set_physics(xpos=torch.zeros(N, 1))
    with pytest.raises(ValueError, match="at least one field"):
        env.set_physics()


# --- conversions ------------------------------------------------------------------------------------------------


def test_allow_cast_refuses_integers_that_would_wrap():
    fits = torch.tensor([-(2**31), 0, 2**31 - 1], dtype=torch.int64)
    assert np.array_equal(np.asarray(convert.torch_to_jax(fits, allow_cast=True)), fits.numpy())
    with pytest.raises(ValueError, match=r"allow_cast=True cannot narrow tensor \(torch.int64, values in "
                                         r"\[0, 1099511627776\]\) to torch.int32"):
        convert.torch_to_jax({"steps": torch.tensor([0, 2**40], dtype=torch.int64)}, allow_cast=True)


def test_sparse_tensors_and_typed_keys_get_clear_errors():
    with pytest.raises(TypeError, match="layout torch.sparse_coo; the bridge converts dense"):
        convert.torch_to_jax(torch.eye(3).to_sparse())
    key = jax.random.key(0)
    with pytest.raises(TypeError, match=r"typed PRNG key array .*jax.random.key_data"):
        convert.jax_to_torch({"key": key})
    assert convert.jax_to_torch(jax.random.key_data(key)).dtype == torch.uint32


# --- TorchEnv.state, threads, wrapped envs -----------------------------------------------------------------------


def test_a_state_read_before_steps_stays_readable():
    env, reference = _fast(seed=4), _fast(seed=4)
    state = env.state
    obs_then = env.physics["qpos"].numpy().copy()
    action = torch.full((N, 1), 0.3)
    for _ in range(3):
        out = env.step(action)["next", "observation"]
        assert torch.equal(out, reference.step(action)["next", "observation"])  # the copy changes no result
    assert np.array_equal(np.asarray(state.pipeline_state.qpos), obs_then)  # not "Array has been deleted"


def test_two_threads_stepping_one_env_raise_instead_of_corrupting_it():
    env = _fast()
    inside, release = threading.Event(), threading.Event()
    to_jax = env._action_to_jax

    def slow_to_jax(action):  # holds the first thread inside step until the second has tried
        inside.set()
        release.wait(10)
        return to_jax(action)

    env._action_to_jax = slow_to_jax
    results = []
    first = threading.Thread(target=lambda: results.append(env.step(torch.zeros(N, 1))))
    first.start()
    assert inside.wait(10)
    errors = []

    def second():
        try:
            env.step(torch.zeros(N, 1))
        except RuntimeError as err:
            errors.append(str(err))

    thread = threading.Thread(target=second)
    thread.start()
    thread.join(10)
    release.set()
    first.join(10)
    assert len(errors) == 1 and "another thread is inside step" in errors[0] and "not thread-safe" in errors[0]
    assert len(results) == 1 and results[0]["next", "observation"].isfinite().all()
    env._action_to_jax = to_jax
    env.step(torch.zeros(N, 1))  # the lock was released: the env goes on


def test_an_env_already_wrapped_for_training_is_refused():
    wrapped = envs.training.wrap(Fast(), episode_length=10)
    with pytest.raises(ValueError, match=r"env is already wrapped for training \(AutoResetWrapper"):
        TorchEnv(wrapped, num_envs=2)


def test_bad_actions_to_an_unwrapped_env_step_fail_clearly():
    env = Fast()
    state = env.reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"action has shape \(2,\); expected shape \(1\)"):
        env.step(state, jnp.zeros(2))
    with pytest.raises(TypeError, match="action has dtype int32; expected a floating dtype"):
        env.step(state, jnp.zeros(1, jnp.int32))
    with pytest.raises(TypeError, match=r"action must be an array of shape \(\.\.\., 1\), got list"):
        env.step(state, [0.0])
    assert env.step(state, jnp.zeros(1)).obs.shape == (2,)  # a good action still steps


def test_randomization_fn_returning_only_sys_is_named():
    with pytest.raises(TypeError, match=r"randomization_fn must return \(batched_sys, in_axes\).*returned Model"):
        TorchEnv("inverted_pendulum", num_envs=2, randomization_fn=lambda sys, rng: sys)


# --- run folders and checkpoints ---------------------------------------------------------------------------------


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = {"env": {"name": "fast"}, "run": {"trainer": "torch", "num_timesteps": 1000}}
    (run_dir / rundir.CONFIG).write_text(json.dumps(config))
    result = CliRunner().invoke(cli.app, ["train", "--resume", str(run_dir)])
    assert result.exit_code == 2
    text = re.sub(r"[\s│╭╮╰╯─]+", " ", result.output)  # click boxes and wraps the message
    assert "--resume: cannot resume:" in text and "holds no checkpoint" in text and "Traceback" not in text


def test_a_torn_last_metrics_line_is_dropped_and_other_bad_lines_raise(tmp_path):
    good = [{"step": 1, "time_s": 0.5}, {"step": 2, "time_s": 1.0}]
    path = tmp_path / rundir.METRICS
    path.write_text("".join(json.dumps(r) + "\n" for r in good) + '{"step": 3, "ti')
    assert rundir.read_metrics(str(tmp_path)) == good
    log = rundir.MetricsLog(str(tmp_path))
    log.rewrite(rundir.read_metrics(str(tmp_path)))  # what a resume does: the file is whole again
    log.append({"step": 3, "time_s": 1.5})
    assert [r["step"] for r in rundir.read_metrics(str(tmp_path))] == [1, 2, 3]
    path.write_text(json.dumps(good[0]) + "\n{broken\n" + json.dumps(good[1]) + "\n")
    with pytest.raises(rundir.RunDirError, match="line 2 is not valid JSON"):
        rundir.read_metrics(str(tmp_path))


def test_save_removes_stale_temporaries_of_killed_saves_only(tmp_path):
    stale, live = tmp_path / ".tmp_killed.part", tmp_path / ".tmp_writing.part"
    stale.write_bytes(b"half a checkpoint")
    live.write_bytes(b"being written")
    old = time.time() - 2 * torch_checkpoint.STALE_TMP_S
    os.utime(stale, (old, old))
    path = torch_checkpoint.save(tmp_path, {"env_steps": 10, "config": {"env": "fast"}})
    assert os.path.isfile(os.path.join(path, torch_checkpoint.STATE_FILE)) and not stale.exists() and live.exists()
