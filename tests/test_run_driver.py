"""The run driver both trainers share (``brax_core.training.run``), over a recording backend: the schedule of a whole
run and of a resumed one, the order of saving, callbacks, evaluation and reports, the episode means, and a failing
callback that has the run saved first. No framework is involved, so every rule is checked in milliseconds; the
trainers' own runs are tests/test_trainers.py."""

import types

import pytest

from brax_core.training.agents.ppo.config import PPOConfig
from brax_core.training.run import checkpoints
from brax_core.training.run.driver import RunDriver, training_metrics
from brax_core.training.run.schedule import plan_run

STEP = 100  # env steps per training step


class Recorder:
    """A backend that counts its training steps and records what the driver asks of it, in order."""

    def __init__(self, episodes=None):
        self.log, self.steps, self.skipped = [], 0, None
        self.episodes = list(episodes or [])

    def skip_evaluations(self, count):
        self.skipped = count

    def reset_envs(self, env_steps):
        self.log.append(("reset", env_steps))

    def train(self, num_steps):
        self.steps += num_steps
        self.log.append(("train", num_steps))

    def training_metrics(self):
        metrics = {"total_loss": float(self.steps)}
        if self.episodes:
            count, reward = self.episodes.pop(0)
            metrics.update({"episode_count": count, "episode_sum/reward": reward})
        return metrics

    def evaluate(self, training_metrics):
        self.log.append(("evaluate", self.steps))
        return {**training_metrics, "eval/episode_reward": float(self.steps)}

    def save(self, env_steps):
        self.log.append(("save", env_steps))

    def params(self):
        return {"steps": self.steps}


def _args(log, training_steps, progress_fn=None, save_path="ckpt", restored=None, **hyperparameters):
    """A trainer's checked arguments for a run of ``training_steps`` training steps (3 evaluations by default)."""
    def record_progress(step, metrics):
        log.append(("progress", step, "eval/episode_reward" in metrics))

    return types.SimpleNamespace(
        config=PPOConfig.from_flat({"num_timesteps": training_steps * STEP, "num_evals": 3, **hyperparameters}),
        progress_fn=progress_fn or record_progress,
        policy_params_fn=lambda step, make_policy, params: log.append(("params", step, params["steps"])),
        save_checkpoint_path=save_path,
        restore_checkpoint_path=restored,
    )


def _driver(backend, args, env_steps=0, **options):
    driver = RunDriver(
        backend, num_evals=args.config.run.num_evals, log_training_metrics=args.config.run.log_training_metrics,
        progress_fn=args.progress_fn, policy_params_fn=args.policy_params_fn,
        save_checkpoint_path=args.save_checkpoint_path, restore_checkpoint_path=args.restore_checkpoint_path,
        make_policy=None, env_steps=env_steps, **options,
    )
    driver.config = args.config  # what the tests plan the run from
    return driver


def _plan(driver):
    return plan_run(driver.config, driver.env_steps, STEP)


def _run(driver, **options):
    return driver.run(_plan(driver), **{"evaluate": True, **options})


def test_each_epoch_saves_before_the_callbacks_then_evaluates_and_reports():
    backend = Recorder()
    driver = _driver(backend, _args(backend.log, 4))
    metrics = _run(driver)
    assert backend.log == [
        ("evaluate", 0), ("progress", 0, True), ("params", 0, 0),  # before training, at the starting step
        ("train", 2), ("save", 200), ("params", 200, 2), ("evaluate", 2), ("progress", 200, True),
        ("train", 2), ("save", 400), ("params", 400, 4), ("evaluate", 4), ("progress", 400, True),
    ]  # fmt: skip
    assert driver.env_steps == 400 and metrics["eval/episode_reward"] == 4.0


def test_training_metrics_are_reported_at_every_call_and_resets_start_segments():
    backend = Recorder()
    args = _args(backend.log, 8, num_evals=2, num_resets_per_eval=2, log_training_metrics=True,
                 training_metrics_steps=2 * STEP)  # fmt: skip
    driver = _driver(backend, args)
    plan = _plan(driver)
    assert (plan.epochs, plan.segments_per_epoch, plan.calls_per_segment, plan.steps_per_call) == (1, 2, 2, 2)
    driver.run(plan, evaluate=True)
    trained = [entry for entry in backend.log if entry[0] in ("train", "reset", "save", "progress")]
    assert trained == [
        ("progress", 0, True),
        ("train", 2), ("progress", 200, False), ("train", 2), ("progress", 400, False),
        ("reset", 400), ("train", 2), ("progress", 600, False),
        ("train", 2), ("save", 800), ("progress", 800, False), ("progress", 800, True),
    ]  # fmt: skip


def test_a_backend_without_resets_is_refused_a_schedule_with_resets_before_training():
    class NoResets:
        """The recorder's operations, all but ``reset_envs``, as the gradient trainers' backends have them."""

        def __init__(self):
            self._recorder = Recorder()
            self.log = self._recorder.log

        def __getattr__(self, name):
            if name == "reset_envs":
                raise AttributeError(name)
            return getattr(self._recorder, name)

    backend = NoResets()
    args = _args(backend.log, 8, num_evals=2, num_resets_per_eval=2)
    driver = _driver(backend, args)
    with pytest.raises(TypeError, match="NoResets cannot reset its envs; its schedule must have no resets"):
        driver.run(_plan(driver), evaluate=True)
    assert not [entry for entry in backend.log if entry[0] == "train"]
    quiet = NoResets()
    driver = _driver(quiet, _args(quiet.log, 8, num_evals=2))
    driver.run(_plan(driver), evaluate=True)  # without resets it runs
    assert [entry for entry in quiet.log if entry[0] == "train"]


def test_a_resumed_run_continues_the_unbroken_runs_plan_and_evaluation_keys():
    backend = Recorder()
    interval = dict(log_training_metrics=True, training_metrics_steps=3 * STEP)
    plan = lambda env_steps, **more: _plan(_driver(backend, _args([], 12, **interval, **more), env_steps))  # noqa: E731
    unbroken, resumed = plan(0), plan(3 * STEP)
    assert resumed.steps_per_call == unbroken.steps_per_call == 3
    assert list(resumed.calls()) == list(unbroken.calls())[1:]
    at_evaluation = plan(6 * STEP)
    assert at_evaluation.evaluates_at_start(True) and at_evaluation.evaluations_before_start(True) == 1
    # Resumed from its own save path at an evaluation point: that step's checkpoint exists already.
    args = _args(backend.log, 12, save_path="ckpt", restored=checkpoints.step_directory("ckpt", 6 * STEP), **interval)
    driver = _driver(backend, args, env_steps=6 * STEP)
    _run(driver)
    assert backend.skipped == 1  # the unbroken run's first evaluation, at step 0
    assert backend.log[:2] == [("evaluate", 0), ("progress", 600, True)]  # evaluated again where it resumes
    assert ("save", 600) not in backend.log and driver.env_steps == 12 * STEP
    # Another batch size: the count lies between training steps, and the rest is planned as a run of its own.
    odd = _plan(_driver(backend, _args([], 12), 250))
    assert odd.calls_done == 0 and odd.epochs * odd.calls_per_epoch * odd.steps_per_call == 10


def test_a_failing_callback_has_the_run_saved_first_once_and_is_named():
    backend = Recorder()
    log = backend.log

    def progress_fn(step, metrics):
        if step == 100:
            raise RuntimeError("stop")

    interval = dict(log_training_metrics=True, training_metrics_steps=STEP)
    driver = _driver(backend, _args(log, 2, progress_fn=progress_fn, **interval))
    with pytest.raises(RuntimeError) as info:
        _run(driver)
    assert log == [("evaluate", 0), ("params", 0, 0), ("train", 1), ("save", 100)]
    note = " ".join(info.value.__notes__)
    assert "progress_fn" in note and f"saved first, at {checkpoints.step_directory('ckpt', 100)}" in note
    assert driver.save() == checkpoints.step_directory("ckpt", 100) and log[-1] == ("save", 100)  # saved once
    # Where saving needs every process, a callback failing on one says so instead.
    backend = Recorder()
    args = _args(backend.log, 2, progress_fn=progress_fn, save_path=None, **interval)
    driver = _driver(backend, args, save_before_failing_callback=False)
    with pytest.raises(RuntimeError) as info:
        _run(driver)
    assert "no checkpoint path was given" in " ".join(info.value.__notes__)
    assert not any(entry[0] == "save" for entry in backend.log)


def test_only_the_main_process_calls_back_and_evaluation_points_report_training_metrics_without_evaluation():
    backend = Recorder()
    _run(_driver(backend, _args(backend.log, 4), main=False), evaluate=False)
    assert [entry[0] for entry in backend.log] == ["train", "save", "train", "save"]
    backend = Recorder()
    driver = _driver(backend, _args(backend.log, 4))
    metrics = _run(driver, evaluate=False, report_training_at_evaluation_points=True)
    assert ("progress", 200, False) in backend.log and ("progress", 400, False) in backend.log
    assert metrics["training/total_loss"] == 4.0 and "eval/episode_reward" not in metrics


def test_episode_means_hold_until_an_episode_ends():
    last = {}
    first = training_metrics({"total_loss": 1.0, "episode_count": 0.0, "episode_sum/reward": 0.0}, 5.0, 2.0, last)
    assert first == {"training/total_loss": 1.0, "training/sps": 5.0, "training/walltime": 2.0,
                     "episode/reward": 0.0, "episode/count": 0.0}  # fmt: skip
    second = training_metrics({"total_loss": 1.0, "episode_count": 4.0, "episode_sum/reward": 10.0}, 5.0, 3.0, last)
    assert second["episode/reward"] == 2.5 and second["episode/count"] == 4.0
    third = training_metrics({"total_loss": 1.0, "episode_count": 0.0, "episode_sum/reward": 0.0}, 5.0, 4.0, last)
    assert third["episode/reward"] == 2.5 and third["episode/count"] == 0.0
    assert "episode/count" not in training_metrics({"total_loss": 1.0}, 5.0, 4.0, {})
