"""brax-bridge compare: every (trainer, seed) run in a process of its own, in interleaved order; compare.json's
statistics (IQM, 95 % bootstrap intervals, probability of improvement) checked against the runs they summarise;
the report, the figure; Ctrl-C passed on to the running run; a run whose process dies reported as failed."""

import datetime
import json
import os
import re
import signal
import subprocess
import threading
import time
import types

import jax
import numpy as np
import pytest
from cli_runner import TINY, invoke
from PIL import Image
from scipy import stats as scipy_stats

from brax_bridge_app import cli, comparison, plots, rundir, stats
from brax_core.training.agents.ppo import checkpoint as jax_checkpoint
from torch_ppo import checkpoint as torch_checkpoint

SEEDS = [0, 1, 2, 3]
THRESHOLD = 0.1  # `fast` pays the position reached, 0 to 0.616 over 20 steps
RUN_KEYS = {"seed", "final_reward", "best_reward", "wall_s", "steps_to_threshold", "seconds_to_threshold",
            "steps_per_s"}


# Eight runs, each a fresh process that imports JAX, torch and MJX (about 20 s each on a 2-core CPU): the tests that
# read this comparison are slow; the default suite checks the processes with the two-run test below and the
# statistics on given runs.
@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    result = invoke("compare", "--env", "fast", "--out", str(out), "--seeds", "0,1,2,3", "--device", "cpu",
                    "--threshold", str(THRESHOLD), *TINY)
    assert result.exit_code == 0, result.output
    return out, result.output, json.loads((out / "compare.json").read_text())


@pytest.mark.slow
def test_every_run_in_a_process_of_its_own_in_interleaved_order(compared):
    out, _, data = compared
    runs = data["runs"]
    order = [(run["trainer"], run["seed"]) for run in runs]
    assert order == [("jax", 0), ("torch", 0), ("torch", 1), ("jax", 1), ("jax", 2), ("torch", 2), ("torch", 3),
                     ("jax", 3)]
    pids = [run["pid"] for run in runs]
    assert len(set(pids)) == 8 and os.getpid() not in pids  # eight processes, none of them this one
    started = [datetime.datetime.fromisoformat(run["started_at"]) for run in runs]
    assert started == sorted(started) and len(set(started)) == 8
    for run in runs:
        summary = json.loads((out / f"{run['trainer']}-seed{run['seed']}" / rundir.SUMMARY).read_text())
        assert summary == run and summary["status"] == "completed"
        config = json.loads((out / f"{run['trainer']}-seed{run['seed']}" / rundir.CONFIG).read_text())
        assert config["run"]["device"] == "cpu"
        # every run's config is the one compare.json records as shared, with the run's trainer and seed
        unset = {"trainer": None, "seed": None}
        assert {**config["run"], **unset} == {**data["config"]["run"], **unset}
        assert {s: config[s] for s in ("env", "algorithm", "network")} == {
            s: data["config"][s] for s in ("env", "algorithm", "network")}


def test_the_main_job_at_a_tiny_size_writes_its_report_figure_and_runs(tmp_path):
    """`make run`'s path (compare, both trainers) with two seeds each and a few thousand env steps per run."""
    result = invoke("compare", "--env", "fast", "--out", str(tmp_path), "--seeds", "0,1", "--device", "cpu",
                    "--threshold", str(THRESHOLD), *TINY)
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "compare.json").read_text())
    runs = data["runs"]
    assert [(run["trainer"], run["seed"]) for run in runs] == [("jax", 0), ("torch", 0), ("torch", 1), ("jax", 1)]
    assert all(run["status"] == "completed" and run["compile_cache"] == "empty" for run in runs)
    for trainer in ("jax", "torch"):
        finals = sorted(run["final_reward"] for run in runs if run["trainer"] == trainer)
        iqm = data["trainers"][trainer]["final_reward"]["iqm"]
        assert iqm == pytest.approx(sum(finals) / 2)  # two runs: their mean is the middle half
        assert (tmp_path / f"{trainer}-seed0" / rundir.SUMMARY).is_file()
    text = (tmp_path / "report.md").read_text()
    assert sum(bool(re.match(r"\| \d \| (jax|torch) \| \d \| completed \|", line)) for line in text.splitlines()) == 4
    assert "**Verdict:** Not resolved by the seeds given: 2 jax and 2 torch completed runs" in text
    with Image.open(tmp_path / "compare.png") as figure:
        assert figure.size == (1100, 420)
        pixels = np.asarray(figure.convert("RGB"))
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10  # curves and bands drawn, not a blank canvas


def _iqm_by_hand(values: list[float]) -> float:
    middle = sorted(values)[1:3]  # four runs: the middle two
    return sum(middle) / 2


@pytest.mark.slow
def test_compare_json_iqm_is_that_of_its_runs_final_rewards_with_the_interval_holding_it(compared):
    _, _, data = compared
    assert set(data["trainers"]) == {"jax", "torch"}
    for trainer, entry in data["trainers"].items():
        assert set(entry) == {"runs", "final_reward", "seconds_to_threshold", "steps_per_s"}
        finals = [run["final_reward"] for run in data["runs"] if run["trainer"] == trainer]
        assert [run["seed"] for run in entry["runs"]] == SEEDS
        assert [run["final_reward"] for run in entry["runs"]] == finals
        assert all(set(run) == RUN_KEYS for run in entry["runs"])
        final = entry["final_reward"]
        assert set(final) == {"iqm", "mean", "median", "ci95"}
        assert final["iqm"] == pytest.approx(_iqm_by_hand(finals), rel=1e-12)
        assert final["mean"] == pytest.approx(np.mean(finals)) and final["median"] == pytest.approx(np.median(finals))
        low, high = final["ci95"]
        assert min(finals) <= low <= final["iqm"] <= high <= max(finals)
        speeds = [run["steps_per_s"] for run in entry["runs"]]
        assert entry["steps_per_s"]["iqm"] == pytest.approx(_iqm_by_hand(speeds), rel=1e-12)
    improvement = data["probability_of_improvement"]
    assert set(improvement) == {"metric", "torch_over_jax", "ci95"} and improvement["metric"] == "final_reward"
    jax_finals = [r["final_reward"] for r in data["trainers"]["jax"]["runs"]]
    torch_finals = [r["final_reward"] for r in data["trainers"]["torch"]["runs"]]
    pairs = [(t > j) + 0.5 * (t == j) for t in torch_finals for j in jax_finals]
    assert improvement["torch_over_jax"] == pytest.approx(sum(pairs) / len(pairs))
    low, high = improvement["ci95"]
    assert 0 <= low <= improvement["torch_over_jax"] <= high <= 1


@pytest.mark.slow
def test_the_threshold_times_each_runs_first_evaluation_reaching_it(compared):
    out, _, data = compared
    for trainer, entry in data["trainers"].items():
        for run in entry["runs"]:
            rows = rundir.read_metrics(str(out / f"{trainer}-seed{run['seed']}"))
            reaching = [r for r in rows if r[rundir.EVAL_REWARD] >= THRESHOLD]
            first = reaching[0] if reaching else {"step": None, "time_s": None}
            assert (run["steps_to_threshold"], run["seconds_to_threshold"]) == (first["step"], first["time_s"])
        reached = [run["seconds_to_threshold"] for run in entry["runs"] if run["seconds_to_threshold"] is not None]
        aggregate = entry["seconds_to_threshold"]
        assert aggregate is None if not reached else aggregate["mean"] == pytest.approx(np.mean(reached))


@pytest.mark.slow
def test_report_shows_the_iqm_with_its_interval_and_a_verdict(compared):
    out, output, data = compared
    text = (out / "report.md").read_text()
    # Four seeds per trainer: fewer than a verdict needs, which the report says instead of guessing.
    assert "**Verdict:** Not resolved by the seeds given: 4 jax and 4 torch completed runs, fewer than the 5" in text
    assert "4 seed(s) per trainer: fewer than the 5 a verdict needs" in text and "note: 4 seed(s)" in output
    final = data["trainers"]["jax"]["final_reward"]
    shown = f"{final['iqm']:,.1f} [{final['ci95'][0]:,.1f}, {final['ci95'][1]:,.1f}]"
    jax_row = next(line for line in text.splitlines() if line.startswith("| jax |"))
    assert jax_row.split("|")[2].strip() == "4 of 4" and jax_row.split("|")[3].strip() == shown
    assert sum(bool(re.match(r"\| \d \| (jax|torch) \| \d \| completed \|", line)) for line in text.splitlines()) == 8
    assert "| num_envs | 8 |" in text and "Not resolved by the seeds given" in output
    with Image.open(out / "compare.png") as image:
        assert image.size == (1100, 420)


@pytest.mark.slow
def test_runs_of_a_comparison_match_and_their_checkpoints_load(compared):
    out, _, _ = compared
    jax_config = json.loads((out / "jax-seed3" / rundir.CONFIG).read_text())
    torch_config = json.loads((out / "torch-seed3" / rundir.CONFIG).read_text())
    assert {**jax_config["run"], "trainer": "-"} == {**torch_config["run"], "trainer": "-"}  # matched settings
    assert all(jax_config[s] == torch_config[s] for s in ("env", "algorithm", "network"))
    assert (jax_config["run"]["trainer"], torch_config["run"]["trainer"], jax_config["run"]["seed"]) == (
        "jax", "torch", 3)
    for trainer in ("jax", "torch"):
        rows = rundir.read_metrics(str(out / f"{trainer}-seed3"))
        assert len(rows) == 3 and rows[-1]["step"] >= 800 and all(rundir.EVAL_REWARD in r for r in rows)
    policy = jax_checkpoint.load_policy(str(out / "jax-seed3" / rundir.CHECKPOINT))
    action, _ = policy(jax.numpy.zeros((2, 2)), jax.random.PRNGKey(0))
    assert action.shape == (2, 1)
    assert torch_checkpoint.load(str(out / "torch-seed3" / rundir.CHECKPOINT))["env_steps"] >= 800
    for trainer in ("jax", "torch"):
        result = invoke("eval", str(out / f"{trainer}-seed3"), "--episodes", "3")
        assert result.exit_code == 0, result.output
        data = json.loads((out / f"{trainer}-seed3" / "eval.json").read_text())
        assert len(data["returns"]) == 3 and data["mean_length"] == 20.0
        # fast pays the position reached: from 0 (never pushing) to 0.616 (pushing all 20 steps)
        assert 0.0 <= data["mean_return"] <= 0.62
    assert "no MuJoCo model" in invoke("eval", str(out / "jax-seed3"), "--episodes", "1", "--render").output


def _after_first_report(run_dir, action) -> threading.Thread:
    def wait_then_act():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not rundir.read_metrics(str(run_dir)):
            time.sleep(0.02)
        action()

    thread = threading.Thread(target=wait_then_act, daemon=True)
    thread.start()
    return thread


def test_a_dead_run_is_reported_failed_then_ctrl_c_reaches_the_next_run_and_ends_the_comparison(tmp_path,
                                                                                                  monkeypatch):
    """One comparison, two events (each run costs a process start): the first run's process is killed as it starts,
    as the kernel's out-of-memory killer would; the comparison goes on, and a Ctrl-C during the second run stops
    that run at its next report, with a checkpoint, and starts no third."""
    started = []

    class KillFirst(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.env_given = kwargs["env"]
            if not started:
                self.kill()
            started.append(self)

    # The comparison's processes only: the standard library starts its own (`platform` runs `uname` the first
    # time a process asks for the machine), which must not count as runs.
    monkeypatch.setattr(comparison, "subprocess", types.SimpleNamespace(Popen=KillFirst))
    second = tmp_path / "torch-seed1"
    _after_first_report(second, lambda: os.kill(os.getpid(), signal.SIGINT))  # as a Ctrl-C in the terminal
    longer = [*TINY]
    longer[longer.index("--num-timesteps") + 1] = "8000"  # still training when the Ctrl-C arrives
    result = invoke("compare", "--env", "fast", "--out", str(tmp_path), "--trainers", "torch", "--seeds", "0,1,2",
                    *longer)
    assert result.exit_code == 130, result.output  # 128 + SIGINT, as for train
    data = json.loads((tmp_path / "compare.json").read_text())
    failed, stopped = data["runs"]
    assert failed["status"] == "failed" and failed["pid"] == started[0].pid
    assert failed["error"] == "the run's process was ended by SIGKILL before writing its summary"
    assert json.loads((tmp_path / "torch-seed0" / rundir.SUMMARY).read_text()) == failed
    summary = json.loads((second / rundir.SUMMARY).read_text())
    assert summary == stopped and summary["status"] == "interrupted" and summary["pid"] == started[1].pid
    assert 0 < summary["checkpoint_step"] < 8000  # stopped at its next report, with a checkpoint to resume
    assert len(started) == 2 and not (tmp_path / "torch-seed2").exists()  # no third run started
    assert data["trainers"]["torch"]["runs"] == [] and data["probability_of_improvement"] is None
    text = (tmp_path / "report.md").read_text()
    assert "| 1 | torch | 0 | failed: the run's process was ended by SIGKILL" in text
    assert "| 2 | torch | 1 | interrupted |" in text and "**Verdict:** No verdict" in text
    assert "comparison stopped early" in result.output
    # Each run compiled from an empty cache of its own (JAX's, inductor's, Triton's), removed once it ended.
    variables = ("BRAX_BRIDGE_JAX_CACHE", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    folders = [[run.env_given[name] for name in variables] for run in started]
    assert len({folder for run in folders for folder in run}) == 6
    assert not any(os.path.exists(os.path.dirname(folder)) for run in folders for folder in run)
    assert data["compile_cache"] == "empty" and failed["compile_cache"] == stopped["compile_cache"] == "empty"
    assert "Every run started from an empty compile cache of its own" in text


def test_the_default_seeds_give_a_verdict_its_runs():
    assert len(cli.DEFAULT_SEEDS.split(",")) == cli.MIN_SEEDS == stats.MIN_SEEDS == 5
    assert comparison.interleaved(["jax", "torch"], [5, 6, 7]) == [("jax", 5), ("torch", 5), ("torch", 6),
                                                                   ("jax", 6), ("jax", 7), ("torch", 7)]


def _summaries(finals: dict[str, list[float]]) -> list[dict]:
    return [{"trainer": trainer, "seed": seed, "status": "completed", "final_reward": value, "best_reward": value,
             "wall_s": 1.0, "steps_per_s": 100.0} for trainer, values in finals.items() for seed, value in
            enumerate(values)]


def test_the_verdict_is_given_only_where_the_interval_resolves_it():
    rows = lambda summaries: [[] for _ in summaries]  # noqa: E731
    apart = _summaries({"jax": [1, 2, 3, 4, 5], "torch": [11, 12, 13, 14, 15]})
    result = stats.comparison(apart, rows(apart), ["jax", "torch"])
    assert result["probability_of_improvement"]["torch_over_jax"] == 1.0
    assert stats.verdict(result).startswith("torch ends with the higher final reward: P(torch > jax) = 1.00")
    reverse = _summaries({"jax": [11, 12, 13, 14, 15], "torch": [1, 2, 3, 4, 5]})
    assert stats.verdict(stats.comparison(reverse, rows(reverse), ["jax", "torch"])).startswith("jax ends with")
    mixed = _summaries({"jax": [1, 5, 3, 7, 9], "torch": [2, 4, 6, 8, 10]})
    result = stats.comparison(mixed, rows(mixed), ["jax", "torch"])
    low, high = result["probability_of_improvement"]["ci95"]
    assert low < 0.5 < high and "Not resolved by the seeds given" in stats.verdict(result)
    assert result["trainers"]["jax"]["seconds_to_threshold"] is None  # no --threshold
    tied = _summaries({"jax": [1000] * 5, "torch": [1000] * 5})  # every run of inverted_pendulum at its maximum
    assert stats.verdict(stats.comparison(tied, rows(tied), ["jax", "torch"])).startswith(
        "No difference: every run of both trainers ends at the same final reward (P(torch > jax) = 0.50, 95 % CI "
        "[0.50, 0.50]")
    few = _summaries({"jax": [1, 2, 3], "torch": [11, 12, 13]})
    assert "fewer than the 5 per trainer" in stats.verdict(stats.comparison(few, rows(few), ["jax", "torch"]))


def test_the_statistics_of_given_runs_match_an_independent_computation():
    """compare.json's statistics from the runs' summaries and metrics: the IQM is the mean of the middle half of the
    completed runs (a failed run left out), the interval holds it, the probability counts the pairs."""
    jax_finals = [4.0, 1.0, 9.0, 2.0, 7.0, 3.0, 100.0, 5.0]  # one outlying seed, which the IQM leaves out
    torch_finals = [6.0, 8.0, 5.5, 7.5, 6.5, 9.5, 8.5, 0.0]
    summaries = _summaries({"jax": jax_finals, "torch": torch_finals})
    summaries.append({**summaries[0], "seed": 8, "status": "failed", "final_reward": None})
    rows = [[{"step": 100 * i, "time_s": 0.5 * i, rundir.EVAL_REWARD: s["final_reward"] * i / 2} for i in range(3)]
            if s["final_reward"] is not None else [] for s in summaries]
    result = stats.comparison(summaries, rows, ["jax", "torch"], threshold=4.0)
    for trainer, finals in (("jax", jax_finals), ("torch", torch_finals)):
        entry = result["trainers"][trainer]
        assert [run["seed"] for run in entry["runs"]] == list(range(8))  # the failed run is not counted
        middle_half = sorted(finals)[2:6]
        final = entry["final_reward"]
        assert final["iqm"] == pytest.approx(sum(middle_half) / 4, rel=1e-12)
        assert final["iqm"] == pytest.approx(scipy_stats.trim_mean(finals, 0.25), rel=1e-12)
        assert final["mean"] == pytest.approx(np.mean(finals)) and final["median"] == pytest.approx(np.median(finals))
        low, high = final["ci95"]
        assert min(finals) <= low < final["iqm"] < high <= max(finals)
        # Each run first reaches reward 4 at its last report (reward = final) or its middle one (final / 2 >= 4).
        for run in entry["runs"]:
            expected = (None, None) if run["final_reward"] < 4 else (100, 0.5) if run["final_reward"] >= 8 else (
                200, 1.0)
            assert (run["steps_to_threshold"], run["seconds_to_threshold"]) == expected
    assert result["trainers"]["jax"]["final_reward"]["iqm"] == pytest.approx(4.75)  # (3 + 4 + 5 + 7) / 4
    pairs = [(t > j) + 0.5 * (t == j) for t in torch_finals for j in jax_finals]
    improvement = result["probability_of_improvement"]
    assert improvement["torch_over_jax"] == pytest.approx(sum(pairs) / 64)
    assert improvement["ci95"][0] <= improvement["torch_over_jax"] <= improvement["ci95"][1]


def test_the_iqm_curve_has_its_band_against_env_steps_and_wall_time(tmp_path):
    runs = [[{"step": 100 * i, "time_s": seed + i, rundir.EVAL_REWARD: float(seed * i)} for i in range(3)]
            for seed in range(5)]
    runs[4] = runs[4][:2]  # stopped before its last report: the four runs that made it still give a band
    by_steps, by_time = stats.curve(runs, "step"), stats.curve(runs, "time_s")
    assert by_steps["x"].tolist() == [0, 100, 200]
    assert by_time["x"].tolist() == [2.0, 3.0, 3.5]  # the median time the runs reached each step
    assert by_steps["iqm"].tolist() == pytest.approx([0.0, 2.0, 3.0])  # step 200: seeds 0-3, middle two 2 and 4
    assert np.all(by_steps["low"] <= by_steps["iqm"]) and np.all(by_steps["iqm"] <= by_steps["high"])
    assert by_steps["high"][1] > by_steps["low"][1]
    figure = plots.compare_iqm({"jax": runs, "torch": runs[:1]}, str(tmp_path / "compare.png"), title="t")
    with Image.open(figure) as image:
        assert image.size == (1100, 420)
    single = stats.curve(runs[:1], "step")  # one run: its curve, no band
    assert single["iqm"].tolist() == [0.0, 0.0, 0.0] and np.isnan(single["low"]).all()
