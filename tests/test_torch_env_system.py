"""``TorchEnv.system`` / ``set_system``: the model's fields read and set from torch.

Checked here: the fields MuJoCo derives from the masses (``mj_setConst``) are recomputed as MuJoCo computes them;
a mass set from torch steps exactly as a model compiled with that mass; per-env values give each env the run its
own shared value gives; new values never recompile; the values persist across resets and through ``state_dict``;
the gradient with respect to a field equals finite differences; bad input is refused before anything changes; and
the system-identification example recovers the parameters it is given.
"""

from __future__ import annotations

import copy
import importlib.util
import pathlib

import jax
import mujoco
import numpy as np
import pytest
import torch

from brax_bridge import TorchEnv
from brax_bridge.system import FIELDS, derived, with_fields
from brax_core import envs

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _set_const(mj_model: mujoco.MjModel) -> mujoco.MjModel:
    model = copy.deepcopy(mj_model)
    mujoco.mj_setConst(model, mujoco.MjData(model))
    return model


@pytest.mark.parametrize("name", ["hopper", "ant"])  # slide/hinge joints; a free joint
def test_derived_fields_are_mujocos_set_const(name: str) -> None:
    env = envs.get_environment(name)
    rng = np.random.default_rng(0)
    changed = copy.deepcopy(env.mj_model)
    changed.body_mass[1:] *= rng.uniform(0.5, 2.0, changed.nbody - 1)
    changed.dof_armature[:] += rng.uniform(0.0, 0.2, changed.nv)
    expected = _set_const(changed)

    values = {"body_mass": jax.numpy.asarray(changed.body_mass, env.sys.body_mass.dtype),
              "dof_armature": jax.numpy.asarray(changed.dof_armature, env.sys.dof_armature.dtype)}
    got = derived(with_fields(env.sys, values), values)
    np.testing.assert_allclose(got["body_subtreemass"], expected.body_subtreemass, rtol=1e-5)
    np.testing.assert_allclose(got["body_invweight0"], expected.body_invweight0, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["dof_invweight0"], expected.dof_invweight0, rtol=1e-4, atol=1e-6)
    # The change moved them: a stale value would fail the comparisons above.
    assert not np.allclose(expected.dof_invweight0, env.mj_model.dof_invweight0, rtol=1e-3)


def _rollout(env: TorchEnv, steps: int, seed: int = 3) -> torch.Tensor:
    env.reset(seed=seed)
    actions = torch.Generator().manual_seed(seed)
    observations = []
    for _ in range(steps):
        action = torch.rand(env.num_envs, env.action_size, generator=actions) * 2 - 1
        observations.append(env.step(action)["next", "observation"].clone())
    return torch.stack(observations)


def test_a_mass_set_from_torch_steps_as_a_model_compiled_with_it() -> None:
    """Hopper lands on its foot: the contact's softness reads the inverse weights the heavier links change."""
    scale = torch.tensor([1.0, 1.6, 0.7, 1.3, 0.8])
    env = TorchEnv("hopper", num_envs=2, episode_length=1000, cpu_opt_level=0)
    mass = env.system["body_mass"] * scale
    env.set_system(body_mass=mass)
    set_from_torch = _rollout(env, 40)

    compiled_with_it = envs.get_environment("hopper")
    model = copy.deepcopy(compiled_with_it.mj_model)
    model.body_mass[:] = mass.numpy()
    model = _set_const(model)
    sys = compiled_with_it.sys
    compiled_with_it.sys = sys.replace(**{
        field: jax.numpy.asarray(getattr(model, field), getattr(sys, field).dtype)
        for field in ("body_mass", "body_subtreemass", "body_invweight0", "dof_invweight0")
    })
    reference = _rollout(TorchEnv(compiled_with_it, num_envs=2, episode_length=1000, cpu_opt_level=0), 40)
    nominal = _rollout(TorchEnv("hopper", num_envs=2, episode_length=1000, cpu_opt_level=0), 40)

    torch.testing.assert_close(set_from_torch, reference, rtol=1e-4, atol=1e-4)
    assert (set_from_torch - nominal).abs().max() > 1e-2


def test_per_env_values_give_each_env_its_own_run_and_never_recompile() -> None:
    env = TorchEnv("inverted_pendulum", num_envs=2, episode_length=1000, cpu_opt_level=0)
    nominal = env.system["gravity"]
    weak = nominal * 0.25
    env.set_system(gravity=torch.stack([nominal, weak]))
    assert env.system["gravity"].shape == (2, 3)
    per_env = _rollout(env, 30)
    compiles = env.num_compiles

    env.set_system(gravity=torch.stack([weak, nominal]))  # new values, same layout
    swapped = _rollout(env, 30)
    assert env.num_compiles == compiles

    env.set_system(gravity=weak)  # shared
    shared_weak = _rollout(env, 30)
    env.set_system(gravity=None)  # the model's own value
    own = _rollout(env, 30)
    torch.testing.assert_close(env.system["gravity"], nominal)

    torch.testing.assert_close(per_env[:, 0], own[:, 0])
    torch.testing.assert_close(per_env[:, 1], shared_weak[:, 1])
    torch.testing.assert_close(swapped[:, 0], shared_weak[:, 0])
    torch.testing.assert_close(swapped[:, 1], own[:, 1])
    assert (per_env[:, 1] - own[:, 1]).abs().max() > 1e-3


def test_the_values_persist_across_resets_and_through_state_dict() -> None:
    env = TorchEnv("inverted_pendulum", num_envs=2, episode_length=1000, cpu_opt_level=0)
    damping = env.system["dof_damping"] + 0.5
    env.set_system(dof_damping=damping)
    first = _rollout(env, 10)
    again = _rollout(env, 10)  # _rollout resets first
    torch.testing.assert_close(first, again)
    state = env.state_dict()
    assert set(key for key in state if key.startswith("system.")) == {"system.dof_damping"}

    restored = TorchEnv("inverted_pendulum", num_envs=2, episode_length=1000, cpu_opt_level=0)
    restored.reset(seed=0)
    restored.load_state_dict(state)
    torch.testing.assert_close(restored.system["dof_damping"], damping)
    torch.testing.assert_close(_rollout(restored, 10), first)


def test_the_gradient_of_a_field_equals_finite_differences() -> None:
    """f = sum of observations over K steps, as a function of the pole's and cart's masses."""
    k = 4
    env = TorchEnv("inverted_pendulum", num_envs=2, differentiable=True, episode_length=1000, cpu_opt_level=0)
    mass0 = env.system["body_mass"]
    actions = torch.rand(k, 2, env.action_size, generator=torch.Generator().manual_seed(0)) - 0.5

    def f(mass: torch.Tensor) -> torch.Tensor:
        env.reset(seed=1)
        env.set_system(body_mass=mass)
        total = torch.zeros(())
        for step in range(k):
            total = total + env.step(actions[step].clone())["next", "observation"].sum()
        return total

    mass = mass0.clone().requires_grad_(True)
    f(mass).backward()
    env.detach()
    assert mass.grad is not None and mass.grad[1:].abs().max() > 0
    direction = torch.zeros_like(mass0)
    direction[1:] = torch.tensor([0.6, -0.8])
    analytic = float((mass.grad * direction).sum())
    with torch.no_grad():
        agree = []
        for step_size in (1e-2, 3e-3):
            central = (f(mass0 + step_size * direction) - f(mass0 - step_size * direction)) / (2 * step_size)
            agree.append(abs(float(central) - analytic) <= 2e-2 * abs(analytic) + 1e-4)
    assert any(agree), (analytic, agree)


def test_bad_input_is_refused_before_anything_changes() -> None:
    env = TorchEnv("inverted_pendulum", num_envs=2, episode_length=1000, cpu_opt_level=0)
    before = env.system
    compiles = env.num_compiles  # the programs are shared by every env of this configuration in the process
    mass = before["body_mass"]
    with pytest.raises(ValueError, match=r"no system field \['body_mas'\]; the fields are"):
        env.set_system(body_mas=mass)
    with pytest.raises(TypeError, match="body_mass has dtype torch.float64; expected torch.float32"):
        env.set_system(body_mass=mass.double())
    with pytest.raises(ValueError, match=r"body_mass has shape \(2,\); expected \(3,\).*or \(2, 3\)"):
        env.set_system(body_mass=mass[:2])
    with pytest.raises(TypeError, match="body_mass must be a torch.Tensor"):
        env.set_system(body_mass=mass.numpy())
    with pytest.raises(ValueError, match="requires grad, but gradients reach system fields only with differentiable"):
        env.set_system(body_mass=mass.clone().requires_grad_(True))
    with pytest.raises(ValueError, match="no system field"):  # one bad field refuses the good one beside it
        env.set_system(dof_damping=before["dof_damping"] + 1, friction=mass)
    for name in FIELDS:
        torch.testing.assert_close(env.system[name], before[name])
    assert env.num_compiles == compiles


def test_an_env_without_brax_core_wrappers_refuses_set_system() -> None:
    from brax_core.envs.wrappers import training

    env = TorchEnv(
        "inverted_pendulum", num_envs=2, cpu_opt_level=0,
        wrap_env_fn=lambda env, **kw: training.wrap(env, episode_length=1000),
    )
    with pytest.raises(ValueError, match="custom wrap_env_fn"):
        env.set_system(gravity=torch.zeros(3))


def test_the_system_identification_example_recovers_the_parameters() -> None:
    spec = importlib.util.spec_from_file_location("system_identification", ROOT / "examples/system_identification.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--tiny"])
    assert sum(result["history"][-5:]) / 5 < result["history"][0] / 2
    assert result["after"]["mass"] < result["before"]["mass"]
    assert result["after"]["damping"] < result["before"]["damping"]
