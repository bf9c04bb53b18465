"""Every algorithm on one configuration system: ``APGConfig`` (both APG trainers) and ``SHACConfig`` built like
``PPOConfig`` (sections, checked on construction, ``from_flat``/``replace``/``to_json``/``from_json``, errors naming
field and section); each trainer's ``train_from_config``; Brax's keyword signatures as translations onto the config;
presets as config instances; the JAX APG's checkpoints and ``load_policy``; ``torch_analytic.load_policy``."""

import importlib
import inspect
import os

import jax
import numpy as np
import pytest
import torch
from test_torch_analytic_checkpoint import Drift  # smooth: every update changes the policy

import torch_analytic
from brax_core.training.agents.apg import checkpoint as apg_checkpoint
from brax_core.training.agents.apg import presets as apg_presets
from brax_core.training.agents.apg import train as jax_apg
from brax_core.training.agents.apg.config import APGConfig
from brax_core.training.agents.ppo import presets as ppo_presets
from brax_core.training.agents.ppo.config import PPOConfig
from brax_core.training.agents.sac import presets as sac_presets
from brax_core.training.agents.sac import train as jax_sac
from brax_core.training.agents.sac.config import SACConfig
from brax_core.training.agents.shac import presets as shac_presets
from brax_core.training.agents.shac.config import SHACConfig
from brax_core.training.config import ConfigError
from brax_core.training.run import checkpoints
from torch_analytic import apg as torch_apg
from torch_analytic import shac

CONFIGS = [PPOConfig, APGConfig, SHACConfig, SACConfig]
# `fast` at a few hundred env steps: 4 envs x 4 steps an update.
TINY = dict(num_envs=4, horizon_length=4, num_eval_envs=4, episode_length=20, num_evals=3)


@pytest.mark.parametrize("config_type", CONFIGS)
def test_every_configuration_is_built_and_read_back_the_same_way(config_type):
    config = config_type.from_flat({"num_timesteps": 4096, "num_envs": 8, "seed": 3})
    assert list(config.to_json()) == ["env", "algorithm", "network", "run"]
    assert config_type.from_json(config.to_json()) == config
    assert config.replace(seed=5).run.seed == 5 and config.run.seed == 3  # frozen: a copy
    assert config.flat()["num_envs"] == 8 and config.env.num_envs == 8
    with pytest.raises(ConfigError, match=r"^env\.num_envs must be a positive integer, got 0$") as error:
        config.replace(num_envs=0)
    assert error.value.flag_message == "--num-envs must be >= 1; got 0" and error.value.fields == ("num_envs",)
    with pytest.raises(ConfigError, match=rf"{config_type.__name__} has no fields \['no_such'\]"):
        config_type.from_flat({"num_timesteps": 1, "no_such": 1})
    stray = {**config.to_json(), "algorithm": {**config.to_json()["algorithm"], "num_envs": 2}}
    with pytest.raises(ConfigError, match=r"algorithm has no field 'num_envs' \(it belongs in env\)"):
        config_type.from_json(stray)
    with pytest.raises(ConfigError, match="num_timesteps is required"):
        config_type.from_flat({"num_envs": 8})


def test_the_gradient_configurations_share_names_with_ppo_where_the_concept_is_one():
    ppo, apg, shac_fields, _ = (set(c.by_name()) for c in CONFIGS)
    for name in ("max_grad_norm", "policy_hidden_layer_sizes", "num_timesteps", "normalize_observations"):
        assert name in apg and name in shac_fields
    assert {"discounting", "value_hidden_layer_sizes", "reward_scaling", "learning_rate_schedule"} <= shac_fields & ppo
    for config in CONFIGS:  # a name is one field in one section everywhere
        for spec in config.specs():
            for other in CONFIGS:
                if spec.name in other.by_name():
                    assert other.by_name()[spec.name].section == spec.section, spec.name


def test_brax_keywords_translate_onto_the_apg_config():
    config = APGConfig.from_train_kwargs(dict(policy_updates=10, max_gradient_norm=1.0, hidden_layer_sizes=(8,),
                                              **TINY))
    assert config.policy_updates == 10 and config.run.num_timesteps == 10 * 4 * 4
    assert config.algorithm.max_grad_norm == 1.0 and config.network.policy_hidden_layer_sizes == (8,)
    with pytest.raises(ConfigError, match=r"max_gradient_norm must be > 0.0, got 0"):
        APGConfig.from_train_kwargs(dict(policy_updates=10, max_gradient_norm=0))
    # num_evals=0 means what it means to Brax (one epoch, evaluated after it) for both trainers alike.
    assert APGConfig.from_train_kwargs(dict(policy_updates=2, num_evals=0)).num_epochs == 1


def test_presets_are_config_instances_of_their_algorithm():
    for table, config_type in ((ppo_presets.PRESETS, PPOConfig), (ppo_presets.GPU_PRESETS, PPOConfig),
                               (apg_presets.PRESETS, APGConfig), (shac_presets.PRESETS, SHACConfig),
                               (sac_presets.PRESETS, SACConfig)):
        assert table and all(isinstance(config, config_type) for config in table.values())
    for module in (apg_presets, shac_presets, sac_presets):
        for name, fields in module.PRESET_FIELDS.items():
            assert {k: module.PRESETS[name].flat()[k] for k in fields} == fields


@pytest.mark.parametrize("train_from_config", [jax_apg.train_from_config, torch_apg.train_from_config,
                                               shac.train_from_config, jax_sac.train_from_config])
def test_train_from_config_refuses_another_config_and_config_fields_as_options(train_from_config):
    config_type = {shac.train_from_config: SHACConfig, jax_sac.train_from_config: SACConfig}.get(train_from_config,
                                                                                                APGConfig)
    with pytest.raises(TypeError, match=f"config must be an? {config_type.__name__}, got PPOConfig"):
        train_from_config(PPOConfig.from_flat({"num_timesteps": 10}), "fast")
    sizes = {k: v for k, v in TINY.items() if k in config_type.by_name()}
    config = config_type.from_flat({"num_timesteps": 64, **sizes})
    with pytest.raises(TypeError, match=r"unknown options \['num_envs'\] \(num_envs: set in config, e\.g\. "
                                        r"config\.replace\(num_envs=\.\.\.\)\)"):
        train_from_config(config, "fast", num_envs=8)


class _Captured(Exception):
    pass


@pytest.mark.parametrize("module_name", ["brax_core.training.agents.ppo.train", "torch_ppo.train"])
def test_the_ppo_signatures_hand_on_every_argument_and_their_defaults_are_the_configs(module_name, monkeypatch):
    module = importlib.import_module(module_name)
    parameters = inspect.signature(module.train).parameters
    defaults = {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}
    # The config fields' defaults are PPOConfig's; the rest are the run options' stated defaults.
    config_defaults = PPOConfig.defaults()
    assert {k: v for k, v in defaults.items() if k in config_defaults} == {
        k: config_defaults[k] for k in defaults if k in config_defaults}
    assert {k: defaults[k] for k in module.RUN_OPTIONS} == dict(module.RUN_OPTIONS)
    if hasattr(module, "DEFAULTS"):
        assert defaults == module.DEFAULTS
    # Each argument reaches the checks as itself, under its own name.
    given = {name: object() for name in parameters}
    seen = {}

    def capture(keywords, *args, **kwargs):
        seen.update(keywords)
        raise _Captured

    target = (module.arguments, "validated") if module_name.startswith("brax_core") else (module, "_train")
    monkeypatch.setattr(*target, capture)
    with pytest.raises(_Captured):
        module.train(**given)
    assert set(seen) == set(parameters) and all(seen[name] is given[name] for name in parameters)


def test_the_jax_apg_saves_resumes_exactly_and_loads_its_policy_from_a_checkpoint(tmp_path):
    config = APGConfig.from_flat({"num_timesteps": 8 * 16, "learning_rate": 3e-3, "seed": 1, **TINY})
    reports = []
    _, params, _ = jax_apg.train_from_config(config, Drift(), save_checkpoint_path=tmp_path / "run",
                                             progress_fn=lambda epoch, metrics: reports.append(epoch))
    assert reports == [0, 1, 2] and [os.path.basename(d) for d in checkpoints.step_directories(tmp_path / "run")] == [
        "000000000064", "000000000128"]
    # Resumed from the first epoch's checkpoint, the run ends with the same parameters.
    first = checkpoints.step_directory(tmp_path / "run", 64)
    _, resumed, _ = jax_apg.train_from_config(config, Drift(), restore_checkpoint_path=first)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # A larger num_timesteps trains on from the last checkpoint; other settings are refused by name.
    longer = []
    jax_apg.train_from_config(config.replace(num_timesteps=8 * 32), Drift(), restore_checkpoint_path=tmp_path / "run",
                              save_checkpoint_path=tmp_path / "run", progress_fn=lambda e, m: longer.append(e))
    assert checkpoints.latest_step(tmp_path / "run") == 256
    with pytest.raises(ValueError, match=r"with other settings \(learning_rate: 0\.003 in the checkpoint, 0\.1 "):
        jax_apg.train_from_config(config.replace(learning_rate=0.1), Drift(), restore_checkpoint_path=first)
    # The policy, rebuilt from the checkpoint alone, acts as the trained parameters do.
    policy = apg_checkpoint.load_policy(first)
    observation = jax.random.normal(jax.random.PRNGKey(0), (5, Drift().observation_size))
    action, extras = policy(observation, jax.random.PRNGKey(1))
    assert action.shape == (5, 2) and extras == {}
    loaded = apg_checkpoint.load_params(first)
    # the first epoch's parameters, not the last's: the second epoch changed them
    assert len(loaded) == 2 and not all(
        np.array_equal(a, b) for a, b in zip(jax.tree.leaves(loaded[1]), jax.tree.leaves(params[1]), strict=True))
    from brax_core.training.agents.apg.networks import make_inference_fn

    network = apg_checkpoint.networks_from_config(apg_checkpoint.read_config(first, "apg"), None)
    expected, _ = make_inference_fn(network)(loaded, deterministic=True)(observation, jax.random.PRNGKey(1))
    np.testing.assert_allclose(np.asarray(action), np.asarray(expected), rtol=1e-6)
    from brax_core.training.agents.ppo import checkpoint as ppo_checkpoint

    with pytest.raises(checkpoints.CheckpointError, match="is of APG, not PPO: load it with "
                                                          "brax_core.training.agents.apg.checkpoint"):
        ppo_checkpoint.load_policy(first)


@pytest.mark.parametrize("module", [torch_apg, shac])
def test_torch_analytic_load_policy_rebuilds_the_trained_policy(tmp_path, module):
    config_type = SHACConfig if module is shac else APGConfig
    config = config_type.from_flat({"num_timesteps": 64 * 2, **TINY, "num_evals": 2})
    make_policy, policy, _ = module.train_from_config(config, Drift(), save_checkpoint_path=tmp_path / "run")
    loaded = torch_analytic.load_policy(tmp_path / "run")
    observation = torch.randn(6, policy.observation_size)
    action, extras = loaded(observation)
    assert extras == {} and action.shape == (6, policy.action_size)
    torch.testing.assert_close(action, make_policy(policy, deterministic=True)(observation))
    with pytest.raises(ValueError, match="observation"):
        loaded(torch.randn(6, policy.observation_size + 1))
