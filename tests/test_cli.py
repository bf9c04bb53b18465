"""The brax-bridge command line, run in-process at tiny sizes; every file it writes is opened and checked."""

import json
import logging
import os
import re
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest
import torch
from cli_runner import TINY, invoke
from cli_runner import error_text as _error_text
from PIL import Image

from brax_bridge_app import (
    algorithms,
    bench,
    configuration,
    envinfo,
    hparams,
    plots,
    report,
    rundir,
    runs,
    runtime,
    stats,
    trainers,
)
from brax_core import envs
from brax_core.io import image
from brax_core.training.agents.ppo import checkpoint as jax_checkpoint


def test_envs_table_without_compiling_physics(caplog):
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles():
        result = invoke("envs", "fast", "inverted_pendulum")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in result.output.splitlines() if line.count("│") == 7}
    assert rows["fast"] == ["2", "1", "100", "0.02", "yes"]
    assert rows["inverted_pendulum"] == ["4", "1", "1000", "0.04", "yes"]
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling")]
    assert not [m for m in compiled if "reset" in m or "step" in m], compiled  # sizes come from eval_shape only


def test_the_command_leaves_its_objects_to_reference_counting_at_exit():
    """``brax-bridge``'s ``main`` freezes the garbage collector's objects on its way out (also when the command
    ends by ``SystemExit``, as Typer's do), so that leaving the interpreter does not walk every object of JAX, torch
    and MuJoCo with the collector: benchmarks/exit_time.py."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count()))\n"
            "sys.argv = ['brax-bridge', 'envs', 'fast']\n"
            "from brax_bridge_app.cli import main\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fast" in done.stdout
    assert int(done.stdout.split()[-1]) > 10_000, done.stdout[-500:]  # the frameworks' objects, not a handful


LOOPING_ENV = """
import jax
import jax.numpy as jnp
from brax_core.envs import Env, State


class Looping(Env):
    def reset(self, rng):
        obs = jnp.zeros(2, jnp.float32)
        return State(pipeline_state=obs, obs=obs, reward=jnp.zeros(()), done=jnp.zeros(()))

    def step(self, state, action):
        # a loop whose length depends on the state: JAX has no reverse pass for it
        obs = jax.lax.while_loop(lambda x: x[0] < 1.0, lambda x: x + 0.5 + action, state.obs)
        return state.replace(pipeline_state=obs, obs=obs, reward=jnp.sum(obs))

    @property
    def observation_size(self):
        return 2

    @property
    def action_size(self):
        return 2
"""


def test_envs_says_which_envs_differentiate_and_why_one_does_not(tmp_path, monkeypatch):
    (tmp_path / "looping.py").write_text(LOOPING_ENV)
    monkeypatch.chdir(tmp_path)
    result = invoke("envs", "reacher", "looping.py:Looping")
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line.split("│")[-2].strip()
            for line in result.output.splitlines() if line.count("│") == 7}
    assert rows["reacher"] == "yes" and list(rows.values())[-1] == "no"
    text = " ".join(result.output.split())
    assert "Looping: APG and SHAC cannot train it" in text and "while_loop" in text


def test_envs_lists_every_registered_env(monkeypatch):
    described = []
    monkeypatch.setattr(envinfo, "describe", lambda name: described.append(name) or envinfo.EnvInfo(name, 3, 2, 7, 0.5))
    result = invoke("envs")
    assert result.exit_code == 0 and described == envs.registered_names()
    assert invoke("envs", "nope").exit_code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--env", "nope"], "--env must be one of: .*inverted_pendulum"),
        (["train"], "--env is required"),
        (["train", "--env", "fast", "--trainer", "tf"], "--trainer must be one of: jax, torch"),
        (["train", "--env", "fast", "--num-envs", "0"], "--num-envs must be >= 1; got 0"),
        (["train", "--env", "fast", "--learning-rate", "0"], "--learning-rate must be > 0"),
        (["train", "--env", "fast", "--discounting", "1.5"], "--discounting must be <= 1"),
        (["train", "--env", "fast", "--policy-hidden-layer-sizes", "32,x"], "--policy-hidden-layer-sizes must be"),
        (["train", "--env", "fast", "--activation", "foo"], "--activation must be one of: relu"),
        (["train", "--env", "fast", "--preset", "nope"], "--preset must be one of"),
        (["train", "--env", "fast", "--num-envs", "3", "--batch-size", "4", "--num-minibatches", "1"],
         r"--batch-size x --num-minibatches \(4 x 1 = 4\) must be divisible by --num-envs \(3\)"),
        (["train", "--env", "fast", "--device", "tpu"], "--device must be one of auto, cpu, cuda, cuda:N"),
        (["eval", "/tmp", "--device", "cuda:x"], "--device must be one of auto, cpu, cuda, cuda:N"),
        (["train", "--resume", "/no/such/run"], "--resume: run folder /no/such/run does not exist"),
        (["train", "--resume", "/no/such/run", "--out", "x"], "leave out --out, --seed, --device and --config"),
        (["compare", "--env", "fast", "--seeds", "0,a"], "--seeds must be comma-separated integers"),
        (["compare", "--env", "fast", "--trainers", "jax,jax"], "--trainers must list distinct names"),
        (["eval", "/no/such/run"], "RUN_DIR: run folder /no/such/run does not exist"),
        (["eval", "/tmp", "--episodes", "0"], "--episodes must be >= 1; got 0"),
        (["bench", "--size", "huge"], "--size must be one of: small, medium, large"),
        (["bench", "--out", "r.json"], "--out: bench writes its results to a file, named with --json FILE"),
        (["train", "--env", "fast", "--max-to-keep", "0"], "--max-to-keep must be an integer >= 1 or all; got '0'"),
        (["compare", "--env", "fast", "--max-to-keep", "x"], "--max-to-keep must be an integer >= 1 or all; got 'x'"),
    ],
)
def test_bad_flags_are_named_before_anything_runs(args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert re.search(message, _error_text(result)), result.output


def test_help_everywhere():
    for command in ([], ["envs"], ["train"], ["compare"], ["eval"], ["bench"]):
        result = invoke(*command, "--help")
        assert result.exit_code == 0 and "Usage" in result.output
    assert "--num-minibatches" in invoke("train", "--help").output


def test_hyperparameters_resolve_default_preset_flag():
    """Flags, a preset and the command line's defaults resolve into one PPOConfig with the command's settings."""
    config = configuration.resolve("fast", None, {"num_envs": 8, "batch_size": 8, "num_minibatches": 2},
                                   trainer="torch", seed=3, device="auto")
    assert config.env.num_envs == 8 and config.env.episode_length == 100  # the env's own episode length
    assert (config.env.name, config.run.trainer, config.run.seed, config.run.device) == ("fast", "torch", 3, None)
    assert config.algorithm.max_grad_norm is None
    assert "fast" in configuration.presets() and config.run.preset == "fast"  # the env's own preset by default
    config = configuration.resolve("fast", None, {"max_grad_norm": 0.0, "num_envs": 1})
    assert config.algorithm.max_grad_norm is None  # 0 documents "no clipping"
    assert configuration.resolve("fast", None, {"max_to_keep": "all"}).run.max_to_keep is None  # every one kept
    assert configuration.resolve("fast", None, {"max_to_keep": "2"}).run.max_to_keep == 2
    assert hparams.parse_sizes("64, 64") == (64, 64)


def test_gpu_presets_are_brax_recipes_and_flags_still_override_them():
    resolved = configuration.resolve("ant", "ant-gpu", {"num_timesteps": 1000}).flat()
    assert resolved["preset"] == "ant-gpu" and resolved["num_timesteps"] == 1000
    assert (resolved["num_envs"], resolved["batch_size"], resolved["unroll_length"]) == (4096, 2048, 5)
    assert (resolved["reward_scaling"], resolved["entropy_cost"], resolved["clipping_epsilon"]) == (10.0, 1e-2, 0.3)
    assert resolved["policy_hidden_layer_sizes"] == (32,) * 4 and resolved["value_hidden_layer_sizes"] == (256,) * 5
    cpu = configuration.resolve("ant", None, {})
    assert cpu.env.num_envs == 128  # without --preset the env's own (CPU) preset still applies
    humanoid = configuration.resolve("humanoid", "humanoid-gpu", {})
    cheetah = configuration.resolve("halfcheetah", "halfcheetah-gpu", {})
    assert (humanoid.algorithm.unroll_length, humanoid.algorithm.reward_scaling) == (10, 0.1)
    assert cheetah.algorithm.discounting == 0.95
    with pytest.raises(hparams.HParamError, match="halfcheetah-gpu"):
        configuration.resolve("ant", "hopper-gpu", {})


def _rows(n: int, trainer_offset: float = 0.0) -> list[dict]:
    return [{"step": 1000 * i, "time_s": 2.0 + i, rundir.EVAL_REWARD: 10.0 * i + trainer_offset,
             rundir.EVAL_REWARD_STD: 1.0, rundir.TRAIN_SPS: 500.0} for i in range(n)]


def test_plots_and_report_files(tmp_path):
    curve = plots.learning_curve(_rows(5), str(tmp_path / "curve.png"), title="t")
    with Image.open(curve) as image:
        assert image.size == (640, 400)
    figure = plots.compare([("jax seed 0", _rows(5)), ("torch seed 0", _rows(4, 1.0))], str(tmp_path / "c.png"))
    with Image.open(figure) as image:
        assert image.size == (1100, 420)
    spec = configuration.RunSpec(configuration.resolve("fast", None, {"num_envs": 4}, trainer="jax"))
    jax_summary = runs.summarize(spec, _rows(5), "completed", 9.0)
    assert jax_summary["final_reward"] == 40.0 and jax_summary["env_steps"] == 4000
    assert jax_summary["first_report_s"] == 3.0 and jax_summary["steps_per_s"] == pytest.approx(1000.0)
    torch_summary = dict(jax_summary, trainer="torch", final_reward=31.0)
    result = stats.comparison([jax_summary, torch_summary], [_rows(5), _rows(4, 1.0)], ["jax", "torch"])
    text = report.markdown("fast", [jax_summary, torch_summary], result, spec.config.to_json(), "test box",
                           "brax-bridge compare")
    table = [line for line in text.splitlines() if line.startswith("| jax") or line.startswith("| torch")]
    # one run each: its final reward is the IQM, with no interval
    assert table[0].split("|")[3].strip() == "40.0" and table[1].split("|")[3].strip() == "31.0"
    assert "| env | num_envs | 4 |" in text and "| algorithm | learning_rate | 0.003 |" in text


def test_metrics_log_round_trip(tmp_path):
    log = rundir.MetricsLog(str(tmp_path))
    log.append({"step": 1, "time_s": 0.5, "x": float("nan")})
    log.append({"step": 2, "time_s": 1.0, "eval/episode_reward": 3.0})
    rows = rundir.read_metrics(str(tmp_path))
    assert rows[0]["x"] is None and rundir.reward_of(rows[1]) == 3.0  # NaN stored as null: valid JSON
    for line in (tmp_path / rundir.METRICS).read_text().splitlines():
        json.loads(line)


# ---- training commands (the real trainers, at a tiny size on the `fast` env) ----

def test_a_new_run_in_a_used_folder_removes_what_described_the_earlier_policy(tmp_path):
    run_dir = tmp_path / "run"
    assert invoke("train", "--env", "fast", "--trainer", "torch", "--out", str(run_dir), *TINY).exit_code == 0
    assert invoke("eval", str(run_dir), "--episodes", "2").exit_code == 0
    assert (run_dir / rundir.EVAL).exists()
    result = invoke("train", "--env", "fast", "--trainer", "jax", "--out", str(run_dir), *TINY)
    assert result.exit_code == 0, result.output
    assert "removed the earlier run's eval.json" in " ".join(result.output.split())
    assert not (run_dir / rundir.EVAL).exists()  # it measured the torch policy, which is gone
    assert json.loads((run_dir / rundir.SUMMARY).read_text())["trainer"] == "jax"


@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_a_run_without_evaluations_reports_its_env_steps_and_speed(tmp_path, trainer):
    tiny = [*TINY]
    tiny[tiny.index("--num-evals") + 1] = "0"
    result = invoke("train", "--env", "fast", "--trainer", trainer, "--out", str(tmp_path), *tiny)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / rundir.SUMMARY).read_text())
    assert summary["status"] == "completed" and summary["final_reward"] is None  # nothing was evaluated
    assert summary["env_steps"] == summary["checkpoint_step"] >= 800
    assert summary["steps_per_s"] > 0 and 0 < summary["first_report_s"] <= summary["wall_s"]


def test_ctrl_c_leaves_a_resumable_checkpoint(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    original = rundir.MetricsLog.append

    def append_then_ctrl_c(self, row):
        original(self, row)
        if row["step"] > 0:  # like a user pressing Ctrl-C after the first evaluation of a trained policy
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(rundir.MetricsLog, "append", append_then_ctrl_c)
    result = invoke("train", "--env", "fast", "--trainer", "torch", "--out", str(run_dir), *TINY)
    monkeypatch.setattr(rundir.MetricsLog, "append", original)
    assert result.exit_code == 130, result.output  # 128 + SIGINT: `train ... && next-step` stops there
    assert "resume with: brax-bridge train --resume" in result.output
    summary = json.loads((run_dir / rundir.SUMMARY).read_text())
    assert summary["status"] == "interrupted" and 0 < summary["checkpoint_step"] < 800
    logged = rundir.read_metrics(str(run_dir))
    assert logged[-1]["step"] == summary["checkpoint_step"]  # log and checkpoint end together

    assert invoke("train", "--resume", str(run_dir), "--num-envs", "4").exit_code == 2  # fixed by the checkpoint
    result = invoke("train", "--resume", str(run_dir))
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / rundir.SUMMARY).read_text())
    assert summary["status"] == "completed" and summary["env_steps"] >= 800
    steps = [r["step"] for r in rundir.read_metrics(str(run_dir))]
    assert steps == sorted(set(steps)) and steps[-1] >= 800
    assert len(json.loads((run_dir / rundir.CONFIG).read_text())["resumed"]) == 1


def test_ctrl_c_between_evaluations_resumes_to_the_unbroken_runs_reports(tmp_path, monkeypatch):
    """JAX trainer, training metrics every 2 training steps (160 env steps): Ctrl-C at the first of them saves a
    checkpoint there, mid-epoch, and the resumed run reports exactly what an unbroken run reports."""
    run_dir = tmp_path / "run"
    original = rundir.MetricsLog.append

    def append_then_ctrl_c(self, row):
        original(self, row)
        if row["step"] > 0:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(rundir.MetricsLog, "append", append_then_ctrl_c)
    every = ["--log-training-metrics", "--training-metrics-steps", "160"]
    result = invoke("train", "--env", "fast", "--trainer", "jax", "--out", str(run_dir), *TINY, *every)
    monkeypatch.setattr(rundir.MetricsLog, "append", original)
    assert result.exit_code == 130, result.output
    summary = json.loads((run_dir / rundir.SUMMARY).read_text())
    assert summary["status"] == "interrupted" and summary["checkpoint_step"] == 160
    assert invoke("train", "--resume", str(run_dir), "--learning-rate", "0.01").exit_code == 2
    result = invoke("train", "--resume", str(run_dir))
    assert result.exit_code == 0, result.output
    rows = rundir.read_metrics(str(run_dir))
    # 12 training steps (800 env steps rounded up to whole calls) in 2 epochs of 3 calls: evaluations at 0, 480,
    # 960 and a training report after every call, as in an unbroken run.
    points = [(r["step"], rundir.EVAL_REWARD in r) for r in rows]
    assert points == [(0, True), (160, False), (320, False), (480, False), (480, True), (640, False), (800, False),
                      (960, False), (960, True)]  # fmt: skip
    assert jax_checkpoint.latest_step(str(run_dir / rundir.CHECKPOINT)) == 960
    # A deliberate change on resume: allowed with --allow-changes (the run is complete, so nothing trains).
    result = invoke("train", "--resume", str(run_dir), "--learning-rate", "0.01", "--allow-changes")
    assert result.exit_code == 0, result.output
    assert json.loads((run_dir / rundir.CONFIG).read_text())["algorithm"]["learning_rate"] == 0.01


def test_eval_render_writes_viewer_and_video(tmp_path, monkeypatch):
    """An untrained (num_timesteps=0) inverted_pendulum policy: the HTML viewer and the GIF show its episode."""
    run_dir = tmp_path / "pendulum"
    args = ["train", "--env", "inverted_pendulum", "--num-timesteps", "0", "--out", str(run_dir), "--episode-length",
            "8", "--num-envs", "8", "--batch-size", "8", "--num-minibatches", "2", "--policy-hidden-layer-sizes", "8",
            "--value-hidden-layer-sizes", "8"]
    assert invoke(*args).exit_code == 0
    result = invoke(*args)  # the same command again replaces the earlier run (as `make run` twice must)
    assert result.exit_code == 0 and "replacing the earlier run" in result.output, result.output
    result = invoke("eval", str(run_dir), "--episodes", "2", "--render", "--video", "gif")
    assert result.exit_code == 0, result.output
    data = json.loads((run_dir / "eval.json").read_text())
    length = int(data["returns"][0])  # reward 1 per step while the pole is up
    page = (run_dir / "episode.html").read_text()
    payload = json.loads(re.search(r'type="application/json">(.*?)</script>', page, re.S).group(1))
    assert payload["frames"] == length + 1 and payload["dt"] == pytest.approx(0.04)  # first state + each step
    if image.backend_available() is None:  # the viewer above is checked; the video needs OpenGL
        assert data["render"]["video"] is None and "no video" in result.output
        pytest.skip("no headless OpenGL backend (EGL or OSMesa) on this machine: the GIF cannot be drawn")
    with Image.open(data["render"]["video"]) as gif:
        assert gif.n_frames == payload["frames"]
        first = np.asarray(gif.convert("RGB"))
        gif.seek(gif.n_frames - 1)
        assert first.max() > 0 and not np.array_equal(first, np.asarray(gif.convert("RGB")))  # frames that differ


def test_bench_runs_each_script_with_its_arguments_and_skips_the_rest(tmp_path, monkeypatch):
    (tmp_path / "env_throughput.py").write_text(
        "def run(envs, batch_sizes, steps):\n"
        "    return [{'env': e, 'batch': b, 'steps': steps} for e in envs for b in batch_sizes]\n"
    )
    (tmp_path / "ppo_jax.py").write_text("def run(needs_this):\n    raise AssertionError('must not run')\n")
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: str(tmp_path))
    out = tmp_path / "bench.json"
    result = invoke("bench", "--size", "small", "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())["results"]
    small = bench.SIZES["small"]
    assert data["env_throughput"] == [{"env": e, "batch": b, "steps": small["steps"]}
                                      for e in small["envs"] for b in small["batch_sizes"]]
    assert "needs_this" in data["ppo_jax"]["skipped"] and data["ppo_parity"] == {"skipped": "not present"}
    assert "env_throughput (small" in result.output


def test_bench_outside_a_source_checkout_says_where_to_run_it(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "search_roots", lambda: [str(tmp_path)])
    out = tmp_path / "bench.json"
    result = invoke("bench", "--size", "small", "--json", str(out))
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "not installed with the package" in text and "root of a brax-bridge source checkout" in text
    assert str(tmp_path / "benchmarks") in text.replace(" ", "")  # the folder it looked for (wrapping removed)
    assert not out.exists()  # nothing pretends to be a result


def test_bench_finds_the_checkout_it_was_imported_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the working directory has no benchmarks/
    assert bench.benchmarks_dir() == os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks")


def test_auto_device_follows_jax_even_when_torch_sees_a_gpu(monkeypatch, capsys):
    # The usual PyTorch install: CUDA torch, CPU-only JAX. The physics decides, so the run stays on the CPU.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.default_device() == "cpu"
    note = capsys.readouterr().err
    assert "JAX runs on the CPU, so torch does too" in note and 'pip install ".[cuda]"' in note
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.default_device() == "cpu" and capsys.readouterr().err == ""


class _FakeGpu:
    """A device JAX would report on a GPU machine; anything that tried to compute on it would fail."""

    platform = "gpu"
    device_kind = "Fake GPU"
    id = 0
    local_hardware_id = 0
    process_index = 0

    def __init__(self, client):
        self.client = client  # the runtime's description, which orbax reads off the first device


def _pretend_a_gpu(monkeypatch):
    """JAX and torch both report a CUDA GPU on this machine, which has none."""
    real_devices = jax.devices
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    gpu = _FakeGpu(real_devices("cpu")[0].client)
    monkeypatch.setattr(jax, "devices", lambda backend=None: real_devices("cpu") if backend == "cpu" else [gpu])


def test_device_cpu_runs_both_trainers_on_the_cpu_where_a_gpu_is_reported(tmp_path, monkeypatch):
    from brax_bridge_app import trainers
    from brax_core.training.agents.ppo import train as ppo_train

    _pretend_a_gpu(monkeypatch)
    assert runtime.place("auto").torch_device == "cuda:0"  # what auto would pick here
    jax_devices, torch_devices = [], []
    choose = ppo_train.training_devices
    monkeypatch.setattr(ppo_train, "training_devices", lambda *a: jax_devices.append(choose(*a)) or jax_devices[-1])
    train_torch = trainers.torch_ppo.train_from_config
    monkeypatch.setattr(
        trainers.torch_ppo, "train_from_config",
        lambda config, *a, **kw: torch_devices.append(config.run.device) or train_torch(config, *a, **kw),
    )
    for trainer in ("jax", "torch"):
        run_dir = tmp_path / trainer
        result = invoke("train", "--env", "fast", "--trainer", trainer, "--out", str(run_dir), "--device", "cpu", *TINY)
        assert result.exit_code == 0, result.output
        assert json.loads((run_dir / "config.json").read_text())["run"]["device"] == "cpu"
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    assert [[d.platform for d in chosen] for chosen in jax_devices] == [["cpu"]]
    assert torch_devices == ["cpu"]
    assert "JAX and torch on cpu, a GPU present, unused" in runtime.machine(runtime.place("cpu"))


def test_device_cuda_without_jax_cuda_names_the_gpu_install(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    real_devices = jax.devices

    def no_cuda_plugin(backend=None):
        if backend == "gpu":
            raise RuntimeError("Unknown backend gpu")
        return real_devices(backend)

    monkeypatch.setattr(jax, "devices", no_cuda_plugin)
    for command in (["train", "--env", "fast"], ["compare", "--env", "fast"]):
        result = invoke(*command, "--device", "cuda")
        assert result.exit_code == 2, result.output
        text = _error_text(result)
        assert "--device cuda: JAX has no CUDA backend" in text and 'pip install ".[cuda]"' in text


def test_device_cuda_with_cpu_torch_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = invoke("train", "--env", "fast", "--device", "cuda:1")
    assert result.exit_code == 2
    assert "--device cuda:1: this torch is a CPU build" in _error_text(result)


def test_device_index_beyond_the_gpus_is_refused(monkeypatch):
    _pretend_a_gpu(monkeypatch)
    with pytest.raises(ValueError, match=r"--device cuda:3: JAX sees 1 and torch 1 CUDA device\(s\); use cuda:0 to"):
        runtime.place("cuda:3")


def test_jax_trainer_follows_jax_default_device():
    from brax_core.training.agents.ppo import train as ppo_train

    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        assert ppo_train.training_devices(None) == [cpu]
    with jax.default_device("cpu"):
        assert ppo_train.training_devices(None) == jax.devices("cpu")


def test_a_run_on_jaxs_own_default_device_compiles_nothing_twice():
    """A default device is part of every jitted function's cache key: on JAX's own default the command line sets
    none, so a TorchEnv stepped inside a run's placement and outside it (a library caller in the same process)
    steps on one compiled program; elsewhere the placement sets it."""
    from brax_bridge import TorchEnv

    env = TorchEnv("fast", 2, episode_length=4)
    env.reset()
    with runtime.placed(runtime.place("cpu")):
        assert jax.config.jax_default_device is None
        env.step(torch.zeros(2, env.action_size))
    env.step(torch.zeros(2, env.action_size))
    assert env.num_compiles == 1


def test_a_placement_off_jaxs_default_device_sets_it(monkeypatch):
    _pretend_a_gpu(monkeypatch)
    with runtime.placed(runtime.place("cpu")) as placement:
        assert jax.config.jax_default_device == placement.jax_device == jax.devices("cpu")[0]


def test_every_algorithm_has_its_trainers_and_an_unknown_one_is_named():
    expected = [(algo, trainer) for algo in algorithms.ALGOS for trainer in hparams.TRAINERS
                if trainer in algorithms.TRAINERS_OF[algo]]
    assert sorted(trainers.TRAINERS) == sorted(expected)
    assert all((t.algo, t.name) == key for key, t in trainers.TRAINERS.items())
    with pytest.raises(hparams.HParamError, match="--trainer must be one of jax, torch with --algo ppo; got 'tf'"):
        trainers.get("ppo", "tf")
    with pytest.raises(hparams.HParamError, match="--trainer must be one of torch with --algo shac; got 'jax'"):
        trainers.get("shac", "jax")
