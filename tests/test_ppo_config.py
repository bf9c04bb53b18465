"""The hyperparameter schema (``PPOConfig``): Brax's defaults, a help text and a range per field, one message style
per vocabulary, presets that validate, and the command line and both trainers agreeing with it."""

import dataclasses
import functools
import inspect
import re

import numpy as np
import pytest
from typer.main import get_command
from typer.testing import CliRunner

import torch_ppo
from brax_bridge_app import algorithms, cli, configuration, hparams
from brax_core.training import networks
from brax_core.training.agents.ppo import config as schema
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import presets as ppo_presets
from brax_core.training.agents.ppo import train as ppo_train
from brax_core.training.agents.ppo.config import SPECS, ConfigError, PPOConfig, RunConfig

JAX_PARAMETERS = inspect.signature(ppo_train.train).parameters
# The command line's own settings, held by the config and given to no trainer's keyword signature.
SETTINGS = {"name": "--env", "trainer": "--trainer", "device": "--device", "preset": "--preset"}


def _config(**values) -> PPOConfig:
    return PPOConfig.from_flat(values)


def _field(name: str) -> dataclasses.Field:
    section = schema.SECTIONS[schema.SECTION_OF[name]]
    return {f.name: f for f in dataclasses.fields(section)}[name]
TORCH_PARAMETERS = inspect.signature(torch_ppo.train).parameters
NETWORK_PARAMETERS = inspect.signature(ppo_networks.make_ppo_networks).parameters


def _signature_default(name: str):
    if name in JAX_PARAMETERS:
        return JAX_PARAMETERS[name].default
    if name in schema.NETWORK_FIELDS:
        default = NETWORK_PARAMETERS[name].default
        if callable(default):  # the activation: the name that stands for that function
            return next(key for key, fn in networks.ACTIVATIONS.items() if fn is default and key in schema.ACTIVATIONS)
        return tuple(default) if isinstance(default, list | tuple) else default
    return TORCH_PARAMETERS[name].default  # torch-only fields


@pytest.mark.parametrize("name", schema.KEYWORD_FIELDS)
def test_defaults_are_the_jax_trainers(name):
    field = _field(name)
    expected = _signature_default(field.name)
    if expected is inspect.Parameter.empty:
        assert field.default is dataclasses.MISSING  # num_timesteps: required, as in ppo.train
    else:
        assert field.default == expected and type(field.default) is type(expected)


def test_the_torch_trainers_signature_holds_every_keyword_field_with_its_default():
    """torch_ppo.train declares no hyperparameter of its own: its keywords include every config field the JAX
    trainer's take, with the same defaults, and it binds arguments as a written signature would (positionally too)."""
    for name in schema.KEYWORD_FIELDS:
        default = TORCH_PARAMETERS[name].default
        field = _field(name)
        assert default is inspect.Parameter.empty if field.default is dataclasses.MISSING else default == field.default
    assert list(TORCH_PARAMETERS)[:3] == ["environment", "num_timesteps", "episode_length"]
    bound = inspect.signature(torch_ppo.train).bind("fast", 10, None, 2)
    assert bound.arguments == {"environment": "fast", "num_timesteps": 10, "episode_length": None, "action_repeat": 2}
    with pytest.raises(TypeError, match="num_timesteps"):
        torch_ppo.train("fast")
    with pytest.raises(TypeError, match="no_such_argument"):
        torch_ppo.train("fast", 10, no_such_argument=1)


def test_the_torch_trainers_signature_is_written_out():
    """torch_ppo.train's parameters are written in its def, so editors and type checkers see them: no
    ``__signature__`` assigned at import, no ``*args``/``**kwargs``, and an annotation on every parameter."""
    assert "__signature__" not in vars(torch_ppo.train)
    code = torch_ppo.train.__code__
    assert code.co_argcount == len(TORCH_PARAMETERS) and not code.co_flags & (0x04 | 0x08)
    assert all(p.annotation is not inspect.Parameter.empty for p in TORCH_PARAMETERS.values())


def test_num_timesteps_is_required_and_the_rest_defaults():
    with pytest.raises(TypeError, match="run"):
        PPOConfig()
    with pytest.raises(TypeError, match="num_timesteps"):
        RunConfig()
    with pytest.raises(ConfigError, match="num_timesteps is required"):
        PPOConfig.from_flat({"num_envs": 4})
    config = PPOConfig(run=RunConfig(num_timesteps=10))
    assert config.flat() == {**schema.defaults(), "num_timesteps": 10}
    assert list(config.flat()) == [spec.name for spec in SPECS]


def test_sections_by_concern_round_trip_through_json():
    """Each field sits in one section; the JSON form is the sections, read back equal; replace and from_flat place
    a field by its name; a field in the wrong section, an unknown section or key is refused by name."""
    assert list(schema.SECTIONS) == ["env", "algorithm", "network", "run"]
    assert {schema.SECTION_OF[n] for n in ("num_envs", "episode_length")} == {"env"}
    assert {schema.SECTION_OF[n] for n in ("learning_rate", "batch_size", "gae_lambda")} == {"algorithm"}
    assert {schema.SECTION_OF[n] for n in ("policy_hidden_layer_sizes", "activation")} == {"network"}
    assert {schema.SECTION_OF[n] for n in ("num_timesteps", "seed", "trainer", "device")} == {"run"}
    config = _config(num_timesteps=50, num_envs=8, learning_rate=3e-4, policy_hidden_layer_sizes=(16, 16),
                     name="fast", trainer="torch", device="cuda:1")
    assert config.env.num_envs == 8 and config.algorithm.learning_rate == 3e-4 and config.run.device == "cuda:1"
    data = config.to_json()
    assert list(data) == list(schema.SECTIONS) and data["network"]["policy_hidden_layer_sizes"] == [16, 16]
    assert PPOConfig.from_json(data) == config
    changed = config.replace(seed=3, batch_size=64)
    assert changed.run.seed == 3 and changed.algorithm.batch_size == 64 and changed.env == config.env
    assert config.replace(device="auto").run.device is None
    with pytest.raises(ConfigError, match=r"env has no field 'learning_rate' \(it belongs in algorithm\)"):
        PPOConfig.from_json({"env": {"learning_rate": 1.0}, "run": {"num_timesteps": 1}})
    with pytest.raises(ConfigError, match=r"no sections \['hyperparameters'\]"):
        PPOConfig.from_json({"hyperparameters": {}, "run": {"num_timesteps": 1}})
    with pytest.raises(ConfigError, match=r"run has no field 'num_timestep' \(did you mean 'num_timesteps'\?\)"):
        PPOConfig.from_json({"run": {"num_timestep": 1}})
    with pytest.raises(ConfigError, match=r"PPOConfig has no fields \['no_such'\]"):
        config.replace(no_such=1)
    with pytest.raises(ConfigError, match="activation=.* is a callable, which JSON cannot hold"):
        config.replace(activation=np.tanh).to_json()
    with pytest.raises(TypeError, match="PPOConfig's env must be a EnvConfig, got dict"):
        PPOConfig(run=RunConfig(num_timesteps=1), env={"num_envs": 2})


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_field_has_help_a_kind_and_its_trainers_take_it(spec):
    field = _field(spec.name)
    assert field.metadata["help"] == spec.help and len(spec.help) > 8
    assert spec.kind in ("int", "float", "bool", "sizes", "activation", "choice", "name", "device")
    assert spec.trainers and set(spec.trainers) <= {"jax", "torch"}
    if spec.name in SETTINGS:  # the command line's settings: its own flags, no trainer keyword
        assert not spec.command_line and spec.name not in JAX_PARAMETERS and spec.optional
        return
    if "jax" in spec.trainers:  # the JAX trainer takes the network fields inside its network_factory
        assert spec.name in (NETWORK_PARAMETERS if spec.name in schema.NETWORK_FIELDS else JAX_PARAMETERS)
    if "torch" in spec.trainers:
        assert spec.name in TORCH_PARAMETERS


def _bad_value(spec):
    if spec.kind == "int":
        return spec.minimum - 1
    if spec.kind == "float":
        return spec.minimum if spec.min_open else spec.minimum - 1.0
    return {"bool": "yes", "sizes": (16, 0), "activation": "nope", "choice": "nope", "name": "", "device": "tpu"}[
        spec.kind
    ]


ACCEPTED = {  # what each kind's message says it accepts, in keyword and in flag vocabulary
    "int": (r"(a positive|a non-negative) integer", r">= [01]"),
    "float": (r"(>|>=) 0\.0", r"(>|>=) 0"),
    "bool": ("True or False", "true or false"),
    "sizes": ("a sequence of positive integers", "one or more positive integers like 64,64"),
    "activation": ("a callable or one of relu, tanh", "one of: relu, tanh"),
    "choice": (r"one of '\w+', '\w+'", r"one of: \w+, \w+"),
    "name": ("a non-empty string", "a non-empty string"),
    "device": ("'auto', 'cpu', 'cuda' or 'cuda:<index>'", "auto, cpu, cuda or cuda:<index>"),
}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_bad_values_name_the_field_and_what_it_accepts(spec):
    value = _bad_value(spec)
    with pytest.raises(ConfigError) as info:
        _config(**{"num_timesteps": 10, spec.name: value})
    words, flag_words = ACCEPTED[spec.kind]
    assert info.value.fields == (spec.name,)
    # the field by its place: section and name
    assert str(info.value).startswith(f"{spec.section}.{spec.name} must be ")
    assert str(info.value).endswith(f", got {value!r}")
    assert info.value.flag_message.startswith(f"{spec.flag} must be ")
    assert info.value.flag_message.endswith(f"; got {value!r}")
    assert re.search(words, str(info.value)), str(info.value)
    assert re.search(flag_words, info.value.flag_message), info.value.flag_message


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(num_envs=2.5), "num_envs must be a positive integer, got 2.5"),
        (dict(num_envs=True), "num_envs must be a positive integer, got True"),
        (dict(discounting=1.5), "discounting must be <= 1.0, got 1.5"),
        (dict(learning_rate=float("nan")), "learning_rate must be a finite number, got nan"),
        (dict(episode_length=0), "episode_length must be a positive integer, got 0"),
        (dict(num_envs=24), r"batch_size \* num_minibatches \(32 \* 16 = 512\) must be divisible by num_envs \(24\)"),
        (dict(batch_size=1 << 20, num_minibatches=1 << 10, unroll_length=8), "keep it below 2\\*\\*32"),
    ],
)
def test_messages(changes, message):
    with pytest.raises(ValueError, match=message):
        _config(num_timesteps=10, **changes)


def test_cross_field_errors_name_every_field_involved():
    with pytest.raises(ConfigError) as info:
        _config(num_timesteps=10, num_envs=3, batch_size=4, num_minibatches=1)
    assert info.value.fields == ("batch_size", "num_minibatches", "num_envs")
    assert info.value.flag_message == (
        "--batch-size x --num-minibatches (4 x 1 = 4) must be divisible by --num-envs (3)"
    )


def test_values_are_normalised_and_the_config_is_frozen():
    config = _config(
        num_timesteps=np.int64(10), learning_rate=np.float32(0.5), normalize_observations=np.bool_(True),
        max_grad_norm=1, policy_hidden_layer_sizes=[np.int32(8), 8], activation="ReLU", device="CUDA",
    )
    assert type(config.run.num_timesteps) is int and type(config.algorithm.learning_rate) is float
    assert config.algorithm.normalize_observations is True and config.algorithm.max_grad_norm == 1.0
    assert config.network.policy_hidden_layer_sizes == (8, 8) and config.network.activation == "relu"
    assert config.run.device == "cuda"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.env.num_envs = 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.env = None
    with pytest.raises(ConfigError, match="num_envs must be a positive integer"):
        config.replace(num_envs=0)
    # The torch trainer takes callables.
    assert _config(num_timesteps=1, activation=np.tanh).network.activation is np.tanh


@pytest.mark.parametrize("name", sorted(configuration.presets()))
def test_every_preset_validates(name):
    """Each preset is a PPOConfig holding every value of its Brax keywords; the command line's presets are the
    fields those keywords set."""
    gpu = name.endswith("-gpu")
    env = name.removesuffix("-gpu")
    kwargs = (ppo_presets.GPU_TRAIN_KWARGS if gpu else ppo_presets.TRAIN_KWARGS)[env]
    instance = (ppo_presets.GPU_PRESETS if gpu else ppo_presets.PRESETS)[env]
    assert isinstance(instance, PPOConfig) and instance == PPOConfig.from_train_kwargs(kwargs)
    fields = instance.flat()
    for key, value in kwargs.items():
        if key != "network_factory":
            assert fields[key] == value
    for key, value in kwargs["network_factory"].keywords.items():
        assert fields[key] == (tuple(value) if key.endswith("sizes") else value)
    assert configuration.presets()[name] == {key: fields[key] for key in configuration.presets()[name]}


def test_train_kwargs_the_schema_cannot_hold_are_refused():
    with pytest.raises(ConfigError, match=r"PPOConfig has no fields \['wrap_env'\]"):
        PPOConfig.from_train_kwargs({"num_timesteps": 1, "wrap_env": False})
    factory = functools.partial(ppo_networks.make_ppo_networks, layer_norm=True)
    with pytest.raises(ConfigError, match=r"network_factory sets \['layer_norm'\]"):
        PPOConfig.from_train_kwargs({"num_timesteps": 1, "network_factory": factory})


def test_brax_keywords_become_one_config_with_the_network_fields_of_its_factory():
    """The JAX trainer's keyword face: every keyword lands in its section, a ``make_ppo_networks`` partial's
    keywords in ``network``; a factory with other arguments keeps its own networks and ``network`` its defaults."""
    from brax_core.training.agents.ppo import arguments

    given = {name: parameter.default for name, parameter in JAX_PARAMETERS.items()}
    factory = functools.partial(ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=(8,), activation="tanh")
    given.update(environment="fast", num_timesteps=10, num_envs=4, learning_rate=3e-3, network_factory=factory)
    config = arguments.config_of_keywords(given)
    assert config.env.num_envs == 4 and config.algorithm.learning_rate == 3e-3 and config.run.num_timesteps == 10
    assert config.network.policy_hidden_layer_sizes == (8,) and config.network.activation == "tanh"
    custom = functools.partial(ppo_networks.make_ppo_networks, layer_norm=True, policy_hidden_layer_sizes=(8,))
    assert arguments.config_of_keywords({**given, "network_factory": custom}).network == schema.NetworkConfig()


def test_the_command_line_has_a_flag_per_field_with_its_help():
    train = get_command(cli.app).commands["train"]
    options = {opt: param for param in train.params for opt in param.opts}
    flags = {spec.name: SETTINGS.get(spec.name, spec.flag) for spec in SPECS}
    for spec in SPECS:
        assert flags[spec.name] in options, flags[spec.name]  # seed, env, trainer, device, preset: the command's own
        if spec.command_line:
            assert options[spec.flag].help.startswith(hparams.flag_help(spec))
    result = CliRunner().invoke(cli.app, ["train", "--help"], env={"COLUMNS": "250"}, terminal_width=250)
    assert result.exit_code == 0
    missing = [flag for flag in flags.values() if flag not in result.output]
    assert missing == []
    # one flag per field name of every algorithm's configuration, PPO's among them
    every = {spec.name for config in algorithms.CONFIGS.values() for spec in config.specs()}
    assert set(hparams.BY_NAME) == every - {"seed", *SETTINGS} and {spec.name for spec in SPECS} <= every


def test_choices_take_any_case_and_brax_enums_and_the_distributional_critic_is_one_setting():
    from brax.training.agents.ppo.optimizer import LRSchedule as BraxLRSchedule

    from brax_core.training.agents.ppo.optimizer import LRSchedule

    for value in ("adaptive_kl", "ADAPTIVE_KL", LRSchedule.ADAPTIVE_KL, BraxLRSchedule.ADAPTIVE_KL):
        assert _config(num_timesteps=1, learning_rate_schedule=value).algorithm.learning_rate_schedule == "ADAPTIVE_KL"
    for value in ("NONE", "none", BraxLRSchedule.NONE, None):
        assert _config(num_timesteps=1, learning_rate_schedule=value).algorithm.learning_rate_schedule is None
    mode = _config(num_timesteps=1, normalize_observations_mode="EMA").algorithm.normalize_observations_mode
    assert mode == "ema"
    # Brax sets the quantile critic in train and in make_ppo_networks; a preset may do either, not both differently.
    factory = functools.partial(ppo_networks.make_ppo_networks, use_distributional_critic=True, num_quantiles=8)
    config = PPOConfig.from_train_kwargs(
        {"num_timesteps": 1, "network_factory": factory, "clipping_epsilon_value": 1.0}
    )
    assert config.algorithm.use_distributional_critic and config.network.num_quantiles == 8
    with pytest.raises(ConfigError, match="use_distributional_critic=False but network_factory sets"):
        PPOConfig.from_train_kwargs({"num_timesteps": 1, "network_factory": factory,
                                     "use_distributional_critic": False})
    with pytest.raises(ConfigError) as info:
        _config(num_timesteps=1, learning_rate_schedule_min_lr=0.1, learning_rate_schedule_max_lr=0.01)
    assert info.value.fields == ("learning_rate_schedule_min_lr", "learning_rate_schedule_max_lr")
