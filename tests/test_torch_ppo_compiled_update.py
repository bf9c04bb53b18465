"""torch_ppo's compiled minibatch step (``torch_ppo.compiled_update``) against the eager one.

Each comparison trains one training step from the same seed both ways: the same envs, the same draws, so the
collected batch is the same and only the update's code differs. The compiled step fuses the arithmetic, so the
parameters agree to float32 rounding, not bit for bit.
"""

import inspect
import logging

import pytest
import torch

import torch_ppo
from brax_core.training.agents.ppo import presets
from torch_ppo import arguments, compiled_update, distributed, update
from torch_ppo.trainer import TorchPPOBackend

# The `fast` preset with its networks, two SGD passes and no evaluation.
_NOT_SIZES = ("num_timesteps", "num_eval_envs", "network_factory")
TINY = {
    **{k: v for k, v in presets.TRAIN_KWARGS["fast"].items() if k not in _NOT_SIZES},
    **presets.network_kwargs("fast"),
    "num_updates_per_batch": 2,
    "num_evals": 0,
    "log_training_metrics": True,
}
STEP = TINY["batch_size"] * TINY["num_minibatches"] * TINY["unroll_length"]  # env steps of one training step


def _trainer(torch_compile, **overrides) -> TorchPPOBackend:
    defaults = {
        name: p.default
        for name, p in inspect.signature(torch_ppo.train).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    kw = {**defaults, "environment": "fast", "num_timesteps": STEP, **TINY, "torch_compile": torch_compile}
    kw.update(overrides)
    device = torch.device("cpu")
    trainer = TorchPPOBackend(arguments.parse(kw, device, 1), distributed.DistributedContext())
    trainer.build_envs()
    return trainer


def _one_training_step(trainer: TorchPPOBackend) -> dict[str, float]:
    trainer.train(1)
    return trainer.training_metrics()


def _assert_same_update(eager: TorchPPOBackend, compiled: TorchPPOBackend, eager_metrics, compiled_metrics,
                        atol=1e-5) -> None:
    before = _trainer(False).modules.state_dict()  # the seed's initial weights
    for key, value in eager.modules.state_dict().items():
        torch.testing.assert_close(compiled.modules.state_dict()[key], value, rtol=0, atol=atol, msg=key)
        if ".mlp." in key:  # SGD moved every weight, so agreeing is not trivial
            assert not torch.equal(value, before[key]), key
    # Adam's state has the same layout and values: a checkpoint of either continues in the other.
    eager_state, compiled_state = eager.update.optimizer.state_dict(), compiled.update.optimizer.state_dict()
    assert eager_state["param_groups"][0]["params"] == compiled_state["param_groups"][0]["params"]
    for index, state in eager_state["state"].items():
        assert state.keys() == compiled_state["state"][index].keys()
        for name, value in state.items():
            torch.testing.assert_close(compiled_state["state"][index][name], value, rtol=1e-5, atol=atol)
    assert eager_metrics.keys() == compiled_metrics.keys()
    for name, value in eager_metrics.items():
        expected = value if isinstance(value, str) else pytest.approx(value, rel=1e-4, abs=1e-6)
        assert compiled_metrics[name] == expected, name


# The learning-rate rule inside the compiled step, with clipping and the clipped value loss: the configuration the
# default suite compiles (its programs come from inductor's caches after a first run).
ADAPTIVE_KL_CLIPPED = dict(
    learning_rate_schedule="ADAPTIVE_KL", desired_kl=0.01, max_grad_norm=0.5, clipping_epsilon_value=0.2
)


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({}, id="constant-rate", marks=pytest.mark.slow),
        pytest.param(ADAPTIVE_KL_CLIPPED, id="adaptive-kl-clipped"),
    ],
)
def test_the_compiled_step_gives_the_eager_steps_parameters(overrides):
    eager, compiled = _trainer(False, **overrides), _trainer(True, **overrides)
    assert type(eager.update) is update.PPOUpdate
    assert isinstance(compiled.update, compiled_update.CompiledPPOUpdate)
    _assert_same_update(eager, compiled, _one_training_step(eager), _one_training_step(compiled))
    assert compiled.update._compiled_once and not compiled.update._eager
    if "learning_rate_schedule" in overrides:  # the rule moved the tensor rate, the same way in both
        lr = compiled.update.optimizer.param_groups[0]["lr"]
        assert float(lr) != TINY["learning_rate"]
        assert float(lr) == pytest.approx(float(eager.update.optimizer.param_groups[0]["lr"]), rel=1e-6)


def test_on_a_cpu_each_pass_over_the_batch_is_one_program_call():
    """A pass's minibatch steps run as one scanned program: one call per pass, not one per minibatch step."""
    trainer = _trainer(True, **ADAPTIVE_KL_CLIPPED)
    assert trainer.update.scan_passes and not hasattr(trainer.update, "_step_program")
    calls = []
    program = trainer.update._pass_program
    trainer.update._pass_program = lambda *args: calls.append(args[5][0].shape) or program(*args)
    metrics = _one_training_step(trainer)
    # one call per pass, each over every minibatch of the batch
    assert len(calls) == TINY["num_updates_per_batch"]
    assert all(shape[0] == TINY["num_minibatches"] for shape in calls)
    assert trainer.update.metric_count == 0  # read: the means were over every minibatch step
    steps = trainer.update.optimizer.state_dict()["state"][0]["step"]
    assert float(steps) == TINY["num_updates_per_batch"] * TINY["num_minibatches"]
    assert all(torch.isfinite(torch.tensor(value)) for value in metrics.values() if not isinstance(value, str))


def test_the_automatic_choice_compiles_long_runs_on_flat_observations_only():
    use = compiled_update.use_compiled_update
    enough = compiled_update.AUTO_MIN_MINIBATCH_STEPS
    assert use(None, 17, enough) and not use(None, 17, enough - 1)
    # On a CUDA GPU the compiled step repays its compiling sooner (nothing runs on the device here).
    on_gpu = compiled_update.AUTO_MIN_MINIBATCH_STEPS_CUDA
    assert on_gpu < enough and use(None, 17, on_gpu, "cuda") and not use(None, 17, on_gpu - 1, "cuda:1")
    assert not use(None, 17, on_gpu, "cpu") and not use(None, {"state": 17}, enough, "cuda")
    assert not use(None, {"state": 17, "privileged_state": 30}, 10 * enough)
    assert use(True, 17, 1) and not use(False, 17, 10 * enough)
    with pytest.raises(ValueError, match=r"torch_compile=True .*\['privileged_state', 'state'\].*torch_compile=False"):
        use(True, {"state": 17, "privileged_state": 30}, 1)
    # A short run (this one: 8 minibatch steps) takes the eager step without compiling anything.
    assert type(_trainer(None).update) is update.PPOUpdate


def _failing_program(*args, **kwargs):
    raise RuntimeError("no C++ compiler found")


def _make_programs_fail(update: compiled_update.CompiledPPOUpdate) -> None:
    """The update's programs (a pass's on a CPU, else a step's) fail as a machine without a C++ compiler makes them."""
    update._pass_program = update._step_program = _failing_program


def test_a_step_that_cannot_compile_falls_back_to_eager_when_chosen_automatically(monkeypatch, caplog):
    monkeypatch.setattr(compiled_update, "AUTO_MIN_MINIBATCH_STEPS", 1)
    automatic = _trainer(None)
    assert isinstance(automatic.update, compiled_update.CompiledPPOUpdate)
    _make_programs_fail(automatic.update)
    with caplog.at_level(logging.WARNING):
        metrics = _one_training_step(automatic)
    assert automatic.update._eager
    assert "compiling the minibatch step failed (RuntimeError: no C++ compiler found)" in caplog.text
    assert "torch_compile=False" in caplog.text
    # the run went on with the eager step: exactly the eager run
    eager = _trainer(False)
    _assert_same_update(eager, automatic, _one_training_step(eager), metrics, atol=0.0)


def test_a_step_that_cannot_compile_fails_when_compiling_was_asked_for():
    requested = _trainer(True)
    _make_programs_fail(requested.update)
    with pytest.raises(RuntimeError, match="no C.. compiler found"):
        _one_training_step(requested)


def _record_inductor_programs(monkeypatch) -> list[tuple[bool, str]]:
    """Every program inductor hands back from now on, as (built with the C++ wrapper, its generated wrapper code):
    ``post_compile`` runs on each program whether freshly compiled or loaded from inductor's caches."""
    from torch._inductor import output_code

    seen = []
    post_compile = output_code.CompiledFxGraph.post_compile

    def recording(self, *args, **kwargs):
        seen.append((bool(self.fx_kwargs.get("cpp_wrapper")), self.source_code))
        return post_compile(self, *args, **kwargs)

    monkeypatch.setattr(output_code.CompiledFxGraph, "post_compile", recording)
    return seen


def test_on_a_cpu_the_step_is_compiled_with_the_cpp_wrapper(monkeypatch):
    """Inductor builds the update's programs with its C++ wrapper on a CPU: the generated code calls the kernels
    from a C++ entry point instead of a generated Python function."""
    seen = _record_inductor_programs(monkeypatch)
    trainer = _trainer(True, **ADAPTIVE_KL_CLIPPED)
    _one_training_step(trainer)
    assert trainer.update._compiled_once and not trainer.update._eager
    assert seen, "no program was compiled"
    for cpp_wrapper, code in seen:
        assert cpp_wrapper and "inductor_entry" in code


@pytest.mark.gpu
def test_on_a_cuda_gpu_the_update_options_keep_inductors_python_wrapper(monkeypatch):
    """On a CUDA GPU the update's compile options build programs without the C++ wrapper (inductor's default there,
    where the kernels are Triton's)."""
    seen = _record_inductor_programs(monkeypatch)
    device = torch.device("cuda", 0)
    program = torch.compile(lambda x, y: (x * y).sin().sum(), **compiled_update.compile_options(device))
    x = torch.randn(64, device=device)
    torch.testing.assert_close(program(x, x), (x * x).sin().sum())
    assert seen and not any(cpp_wrapper or "inductor_entry" in code for cpp_wrapper, code in seen)
