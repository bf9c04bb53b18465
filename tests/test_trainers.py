"""What both trainers do alike, through the run driver and checkpoint directory they share, tested once against each:
a run stopped mid-epoch resumes to the unbroken run's report points, step count and parameters; a resume with another
configuration lists every difference unless allowed; corrupt checkpoints and observations of another size are named;
Brax's further options train.

Every run is the tiny ``fast`` configuration of tests/test_ppo_train.py and tests/test_torch_ppo_train.py.
"""

import functools
import os
import shutil
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import torch_ppo
from brax_core.envs.fast import Fast
from brax_core.training.agents.ppo import checkpoint as jax_checkpoint
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import presets
from brax_core.training.agents.ppo import train as ppo
from brax_core.training.run import checkpoints
from torch_ppo import checkpoint as torch_checkpoint
from torch_ppo.params import TorchPPOParams

STEP = 1280  # 4 minibatches of 32 unrolls of 10 steps
TINY = {k: v for k, v in presets.TRAIN_KWARGS["fast"].items()
        if k not in ("num_timesteps", "num_evals", "num_eval_envs")}
TINY.pop("network_factory")
NETS = presets.network_kwargs("fast")
# 12 training steps in two epochs (evaluations at 0, 6 and 12), reports every 3 steps.
INTERVAL = dict(TINY, num_evals=3, num_eval_envs=16, log_training_metrics=True, training_metrics_steps=3 * STEP)
# Where a resumed run must land: the JAX trainer within float32 reassociation, torch_ppo bit for bit on the CPU.
RTOL, ATOL = {"jax": 1e-5, "torch": 0.0}, {"jax": 1e-6, "torch": 0.0}


def _train(trainer: str, network: dict | None = None, **kwargs):
    """``trainer``'s ``train`` on ``fast`` with the tiny networks (``network`` overrides their options)."""
    nets = {**NETS, **(network or {})}
    if trainer == "jax":
        return ppo.train("fast", network_factory=functools.partial(ppo_networks.make_ppo_networks, **nets), **kwargs)
    return torch_ppo.train("fast", **nets, **kwargs)


def _leaves(params) -> list[np.ndarray]:
    if isinstance(params, TorchPPOParams):
        return [v.numpy() for part in params for _, v in sorted(part.items())]
    return [np.asarray(x) for x in jax.tree.leaves(params)]


def _assert_params_close(a, b, rtol: float = 0.0, atol: float = 0.0) -> None:
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol)


class _Interrupt(Exception):
    pass


@pytest.fixture(scope="module", params=["jax", "torch"])
def interrupted(request, tmp_path_factory):
    """An unbroken run, and the same run stopped by its progress_fn mid-epoch (3 of 6 steps) then resumed."""
    trainer = request.param
    ckpt = tmp_path_factory.mktemp(f"interrupted_{trainer}") / "ckpt"
    runs = {"straight": [], "broken": [], "resumed": []}
    record = lambda name: lambda step, metrics: runs[name].append((step, "eval/episode_reward" in metrics, metrics))
    _, straight, _ = _train(trainer, num_timesteps=12 * STEP, progress_fn=record("straight"), **INTERVAL)

    def stop_at_3(step, metrics):
        record("broken")(step, metrics)
        if step == 3 * STEP:
            raise _Interrupt("Ctrl-C")

    with pytest.raises(_Interrupt) as info:
        _train(trainer, num_timesteps=12 * STEP, save_checkpoint_path=ckpt, progress_fn=stop_at_3, **INTERVAL)
    _, resumed, _ = _train(
        trainer,
        num_timesteps=12 * STEP,
        save_checkpoint_path=ckpt,
        restore_checkpoint_path=ckpt,
        progress_fn=record("resumed"),
        **INTERVAL,
    )
    return dict(trainer=trainer, ckpt=ckpt, error=info.value, params=straight, resumed_params=resumed, **runs)


def _only(trainer: str):
    return pytest.mark.parametrize("interrupted", [trainer], indirect=True)


def test_a_run_stopped_mid_epoch_resumes_to_the_unbroken_runs_steps_evaluations_and_parameters(interrupted):
    trainer = interrupted["trainer"]
    # The failing callback cost nothing: the run was saved at its step first, and the error says so.
    assert "progress_fn" in " ".join(interrupted["error"].__notes__)
    assert os.path.basename(checkpoints.step_directories(interrupted["ckpt"])[0]) == f"{3 * STEP:012d}"
    points = lambda reports: [(step, is_eval) for step, is_eval, _ in reports]
    straight = points(interrupted["straight"])
    assert straight == [(0, True), (3 * STEP, False), (6 * STEP, False), (6 * STEP, True), (9 * STEP, False),
                        (12 * STEP, False), (12 * STEP, True)]  # fmt: skip
    # Same report points, same final step count (the remainder is not planned anew, so nothing overshoots).
    assert points(interrupted["broken"]) + points(interrupted["resumed"]) == straight
    assert checkpoints.latest_step(interrupted["ckpt"]) == 12 * STEP
    # The same batches and updates, and the same evaluation keys, after the resume.
    for (_, _, a), (_, _, b) in zip(interrupted["straight"][-5:], interrupted["resumed"], strict=True):
        for key in ("eval/episode_reward", "training/total_loss"):
            if key in a:
                np.testing.assert_allclose(b[key], a[key], rtol=RTOL[trainer])
    _assert_params_close(interrupted["params"], interrupted["resumed_params"], RTOL[trainer], ATOL[trainer])


def test_resuming_with_another_configuration_lists_every_difference_unless_allowed(interrupted, caplog):
    trainer, ckpt = interrupted["trainer"], interrupted["ckpt"]
    other = {**INTERVAL, "learning_rate": 1e-3, "normalize_observations": False}
    start = time.time()
    with pytest.raises(ValueError) as info:
        _train(trainer, {"activation": "tanh"}, num_timesteps=13 * STEP, restore_checkpoint_path=ckpt, **other)
    message = str(info.value)
    for field in ("learning_rate", "normalize_observations", "activation"):
        assert field in message
    assert "allow_config_changes" in message and str(12 * STEP) in message
    assert time.time() - start < 5.0  # refused before anything compiled
    with pytest.raises(ValueError, match="normalize_observations"):
        _train(trainer, num_timesteps=0, restore_checkpoint_path=ckpt, allow_config_changes=["learning_rate"], **other)
    with pytest.raises(TypeError, match="allow_config_changes must be True, False or a sequence of field names"):
        _train(trainer, num_timesteps=0, restore_checkpoint_path=ckpt, allow_config_changes=3, **INTERVAL)
    # A deliberate change of the learning rate is allowed by name (and logged).
    changed = {**INTERVAL, "learning_rate": 1e-3}
    _, params, _ = _train(
        trainer, num_timesteps=0, restore_checkpoint_path=ckpt, allow_config_changes=("learning_rate",), **changed
    )
    _assert_params_close(params, interrupted["resumed_params"])  # restored as saved, exactly
    assert "learning_rate changed from 0.003 to 0.001" in caplog.text
    # Other hidden layer sizes: no allowance can make the saved parameters fit, so it is refused up front.
    with pytest.raises(ValueError, match=r"networks of other shapes \(policy_hidden_layer_sizes .*cannot change"):
        _train(
            trainer,
            {"policy_hidden_layer_sizes": (64,)},
            num_timesteps=0,
            restore_checkpoint_path=ckpt,
            allow_config_changes=True,
            **INTERVAL,
        )


@_only("jax")
def test_checksums_catch_a_flipped_bit_in_a_jax_checkpoint_and_name_the_file(interrupted, tmp_path, capfd):
    step_dir = tmp_path / "step"
    shutil.copytree(jax_checkpoint.resolve(interrupted["ckpt"]), step_dir)
    params = jax_checkpoint.load_params(step_dir)
    kernel = np.asarray(params.policy_params["params"]["hidden_0"]["kernel"])
    # Flip one bit of the kernel's bytes wherever orbax stored them.
    flipped = []
    for root, _, files in os.walk(step_dir / "params"):
        for name in files:
            path = os.path.join(root, name)
            data = bytearray(open(path, "rb").read())
            if kernel.tobytes() in data:
                data[data.index(kernel.tobytes()) + 5] ^= 0x08
                with open(path, "wb") as f:
                    f.write(bytes(data))
                flipped.append(path)
    assert flipped, "the kernel's bytes are stored as they are"
    with pytest.raises(jax_checkpoint.CheckpointError, match="differs from what was saved") as info:
        jax_checkpoint.load_policy(step_dir)
    assert any(path in str(info.value) for path in flipped)  # found before orbax reads the file
    assert "Event loop is closed" not in capfd.readouterr().err
    with pytest.raises(jax_checkpoint.CheckpointError):
        _train("jax", num_timesteps=13 * STEP, restore_checkpoint_path=step_dir, **INTERVAL)
    # Without the manifest (a save cut short before writing it) the directory is not taken for a checkpoint.
    os.remove(step_dir / checkpoints.MANIFEST)
    with pytest.raises(FileNotFoundError, match="holds no completed checkpoint") as info:
        jax_checkpoint.load_params(step_dir)
    assert str(step_dir) in str(info.value)


@_only("torch")
def test_checksums_catch_a_flipped_bit_in_torch_ppo_tensor_data(interrupted, tmp_path):
    step_dir = torch_checkpoint.resolve(interrupted["ckpt"])
    file = os.path.join(step_dir, torch_checkpoint.STATE_FILE)
    weight = torch_checkpoint.load(step_dir)["modules"]["policy.mlp.hidden_0.weight"]
    data = bytearray(open(file, "rb").read())
    data[data.index(weight.numpy().tobytes()) + 6] ^= 0x10
    copied = tmp_path / os.path.basename(step_dir)
    shutil.copytree(step_dir, copied)
    flipped = copied / torch_checkpoint.STATE_FILE
    flipped.write_bytes(bytes(data))
    with pytest.raises(torch_checkpoint.CheckpointError, match="corrupt") as e:
        torch_checkpoint.load_policy(copied)
    assert str(flipped) in str(e.value)  # found by the file's digest, before torch reads it


def _foreign_params(trainer: str):
    """Parameters of the tiny networks for 4 observations, where ``fast`` has 2."""
    if trainer == "jax":
        network = functools.partial(ppo_networks.make_ppo_networks, **NETS)(4, 1)
        return jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax_checkpoint.abstract_params(network, 4))
    _, params, _ = _train(trainer, num_timesteps=0, **TINY)
    return TorchPPOParams({**params[0], "mean": torch.zeros(4)}, params[1], params[2])


def test_observation_size_mismatches_are_named(interrupted):
    trainer = interrupted["trainer"]
    if trainer == "jax":
        policy = jax_checkpoint.load_policy(interrupted["ckpt"])
        act = lambda size: policy(jnp.zeros((3, size)), jax.random.PRNGKey(0))  # noqa: E731
    else:
        policy = torch_checkpoint.load_policy(interrupted["ckpt"])
        act = lambda size: policy(torch.zeros(3, size))  # noqa: E731
    assert act(2)[0].shape == (3, 1)
    with pytest.raises(ValueError, match=r"takes observations of size 2 .*got shape \(3, 4\)"):
        act(4)
    with pytest.raises(ValueError, match=r"eval_env has observation_size .* training environment's is 2"):
        _train(trainer, num_timesteps=STEP, eval_env=Fast(obs_mode="dict_state"), num_evals=2, **TINY)
    with pytest.raises(ValueError, match=r"restore_params were trained on observations of shape \(4,\).*\(2,\)"):
        _train(trainer, num_timesteps=0, restore_params=_foreign_params(trainer), **TINY)


@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_callbacks_with_the_wrong_signature_fail_before_anything_runs(trainer):
    start = time.time()
    with pytest.raises(TypeError, match=r"progress_fn must accept 2 positional arguments \(num_steps, metrics\)"):
        _train(trainer, num_timesteps=STEP, progress_fn=lambda step: None, **TINY)
    with pytest.raises(TypeError, match=r"policy_params_fn must accept 3 positional arguments"):
        _train(trainer, num_timesteps=STEP, policy_params_fn=lambda step, params: None, **TINY)
    assert time.time() - start < 5.0


@pytest.mark.parametrize("trainer", ["jax", "torch"])
def test_brax_train_options_train_tiny_runs(trainer):
    """Each of Brax 0.14.2's further options trains (tiny networks, two training steps): ADAPTIVE_KL with the EMA
    normaliser frozen after its first batch and the clipped value loss; the quantile critic."""
    nets = dict(policy_hidden_layer_sizes=(4,), value_hidden_layer_sizes=(4,))
    small = dict(num_envs=4, batch_size=4, num_minibatches=2, unroll_length=4, episode_length=50, num_evals=1,
                 num_eval_envs=4, log_training_metrics=True)  # fmt: skip
    reports = []
    _, params, _ = _train(
        trainer,
        nets,
        num_timesteps=64,
        progress_fn=lambda step, m: reports.append(m),
        learning_rate=1e-3,
        learning_rate_schedule="ADAPTIVE_KL",
        learning_rate_schedule_max_lr=1.2e-3,
        normalize_observations=True,
        normalize_observations_mode="ema",
        normalize_observations_std_eps=1e-2,
        normalize_until_count=40,
        clipping_epsilon_value=0.2,
        use_pmap_on_reset=False,
        **small,
    )
    # 32 observations per training step: the second batch would take the count to 64 > 40, so it stays at 32.
    count = params.normalizer_params["count"] if trainer == "torch" else params.normalizer_params.count
    assert float(count) == 32.0
    # The KL of a barely moving policy is below desired_kl / 2: the rate rises to the maximum.
    assert reports[-1]["training/learning_rate"] == pytest.approx(1.2e-3)
    assert 0.0 < reports[-1]["training/kl_mean"] < 0.005
    _, params, _ = _train(
        trainer,
        {**nets, "num_quantiles": 3},
        num_timesteps=64,
        use_distributional_critic=True,
        clipping_epsilon_value=1.0,
        **small,
    )
    if trainer == "jax":
        assert params.value_params["params"]["hidden_1"]["kernel"].shape == (4, 3)
    else:
        assert params.value_params["hidden_1.weight"].shape == (3, 4)
