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
from brax_bridge_app import cli, configuration, hparams
from brax_core.training import networks
from brax_core.training.agents.ppo import config as schema
from brax_core.training.agents.ppo import networks as ppo_networks
from brax_core.training.agents.ppo import train as ppo_train
from brax_core.training.agents.ppo.config import SPECS, ConfigError, PPOConfig

JAX_PARAMETERS = inspect.signature(ppo_train.train).parameters
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


@pytest.mark.parametrize("field", dataclasses.fields(PPOConfig), ids=lambda f: f.name)
def test_defaults_are_the_jax_trainers(field):
    expected = _signature_default(field.name)
    if expected is inspect.Parameter.empty:
        assert field.default is dataclasses.MISSING  # num_timesteps: required, as in ppo.train
    else:
        assert field.default == expected and type(field.default) is type(expected)


def test_the_torch_trainers_signature_is_the_schema_with_its_own_arguments_among_the_fields():
    """torch_ppo.train declares no hyperparameter of its own: its signature is the schema's fields, in order and
    with their defaults, and it binds arguments as a written signature would (positionally too)."""
    fields = dataclasses.fields(PPOConfig)
    assert [name for name in TORCH_PARAMETERS if name in schema.BY_NAME] == [f.name for f in fields]
    for field in fields:
        default = TORCH_PARAMETERS[field.name].default
        assert default is inspect.Parameter.empty if field.default is dataclasses.MISSING else default == field.default
    assert list(TORCH_PARAMETERS)[:3] == ["environment", "num_timesteps", "episode_length"]
    bound = inspect.signature(torch_ppo.train).bind("fast", 10, None, 2)
    assert bound.arguments == {"environment": "fast", "num_timesteps": 10, "episode_length": None, "action_repeat": 2}
    with pytest.raises(TypeError, match="num_timesteps"):
        torch_ppo.train("fast")
    with pytest.raises(TypeError, match="no_such_argument"):
        torch_ppo.train("fast", 10, no_such_argument=1)


def test_the_torch_trainers_written_signature_is_the_generated_one():
    """torch_ppo.train's parameters are written out in its def, so editors and type checkers see them (no
    ``__signature__`` assigned at import), and they are ``arguments.SIGNATURE``'s: the schema's fields and torch_ppo's
    own arguments, names, order, defaults and annotations alike."""
    from torch_ppo import arguments

    assert "__signature__" not in vars(torch_ppo.train)
    written = inspect.signature(torch_ppo.train)
    assert list(written.parameters) == list(arguments.SIGNATURE.parameters)
    for name, parameter in arguments.SIGNATURE.parameters.items():
        mine = written.parameters[name]
        assert (mine.kind, mine.default, mine.annotation) == (parameter.kind, parameter.default, parameter.annotation)
    assert written.return_annotation == arguments.SIGNATURE.return_annotation
    code = torch_ppo.train.__code__
    assert code.co_argcount == len(arguments.SIGNATURE.parameters) and not code.co_flags & (0x04 | 0x08)  # no *, **


def test_num_timesteps_is_required_and_the_rest_defaults():
    with pytest.raises(TypeError, match="num_timesteps"):
        PPOConfig()
    config = PPOConfig(num_timesteps=10)
    assert config.to_dict() == {**schema.defaults(), "num_timesteps": 10}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_field_has_help_a_kind_and_its_trainers_take_it(spec):
    field = {f.name: f for f in dataclasses.fields(PPOConfig)}[spec.name]
    assert field.metadata["help"] == spec.help and len(spec.help) > 8
    assert spec.kind in ("int", "float", "bool", "sizes", "activation", "choice", "name")
    assert spec.trainers and set(spec.trainers) <= {"jax", "torch"}
    if "jax" in spec.trainers:  # the JAX trainer takes the network fields inside its network_factory
        assert spec.name in (NETWORK_PARAMETERS if spec.name in schema.NETWORK_FIELDS else JAX_PARAMETERS)
    if "torch" in spec.trainers:
        assert spec.name in TORCH_PARAMETERS


def _bad_value(spec):
    if spec.kind == "int":
        return spec.minimum - 1
    if spec.kind == "float":
        return spec.minimum if spec.min_open else spec.minimum - 1.0
    return {"bool": "yes", "sizes": (16, 0), "activation": "nope", "choice": "nope", "name": ""}[spec.kind]


ACCEPTED = {  # what each kind's message says it accepts, in keyword and in flag vocabulary
    "int": (r"(a positive|a non-negative) integer", r">= [01]"),
    "float": (r"(>|>=) 0\.0", r"(>|>=) 0"),
    "bool": ("True or False", "true or false"),
    "sizes": ("a sequence of positive integers", "one or more positive integers like 64,64"),
    "activation": ("a callable or one of relu, tanh", "one of: relu, tanh"),
    "choice": (r"one of '\w+', '\w+'", r"one of: \w+, \w+"),
    "name": ("a non-empty string", "a non-empty string"),
}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_bad_values_name_the_field_and_what_it_accepts(spec):
    value = _bad_value(spec)
    with pytest.raises(ConfigError) as info:
        PPOConfig(**{"num_timesteps": 10, spec.name: value})
    words, flag_words = ACCEPTED[spec.kind]
    assert info.value.fields == (spec.name,)
    assert str(info.value).startswith(f"{spec.name} must be ") and str(info.value).endswith(f", got {value!r}")
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
        PPOConfig(num_timesteps=10, **changes)


def test_cross_field_errors_name_every_field_involved():
    with pytest.raises(ConfigError) as info:
        PPOConfig(num_timesteps=10, num_envs=3, batch_size=4, num_minibatches=1)
    assert info.value.fields == ("batch_size", "num_minibatches", "num_envs")
    assert info.value.flag_message == (
        "--batch-size x --num-minibatches (4 x 1 = 4) must be divisible by --num-envs (3)"
    )


def test_values_are_normalised_and_the_config_is_frozen():
    config = PPOConfig(
        num_timesteps=np.int64(10), learning_rate=np.float32(0.5), normalize_observations=np.bool_(True),
        max_grad_norm=1, policy_hidden_layer_sizes=[np.int32(8), 8], activation="ReLU",
    )
    assert type(config.num_timesteps) is int and type(config.learning_rate) is float
    assert config.normalize_observations is True and config.max_grad_norm == 1.0
    assert config.policy_hidden_layer_sizes == (8, 8) and config.activation == "relu"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_envs = 4
    with pytest.raises(ConfigError, match="num_envs must be a positive integer"):
        config.replace(num_envs=0)
    assert PPOConfig(num_timesteps=1, activation=np.tanh).activation is np.tanh  # the torch trainer takes callables


@pytest.mark.parametrize("name", sorted(configuration.presets()))
def test_every_preset_validates(name):
    preset = configuration.presets()[name]
    config = PPOConfig.from_train_kwargs(preset)
    for key, value in preset.items():
        if key != "network_factory":
            assert getattr(config, key) == value
    for key, value in preset["network_factory"].keywords.items():
        assert getattr(config, key) == (tuple(value) if key.endswith("sizes") else value)


def test_train_kwargs_the_schema_cannot_hold_are_refused():
    with pytest.raises(ConfigError, match=r"PPOConfig has no fields \['wrap_env'\]"):
        PPOConfig.from_train_kwargs({"num_timesteps": 1, "wrap_env": False})
    factory = functools.partial(ppo_networks.make_ppo_networks, layer_norm=True)
    with pytest.raises(ConfigError, match=r"network_factory sets \['layer_norm'\]"):
        PPOConfig.from_train_kwargs({"num_timesteps": 1, "network_factory": factory})


def test_each_trainer_gets_the_fields_it_takes():
    config = PPOConfig(num_timesteps=10, policy_hidden_layer_sizes=(8,), activation="tanh")
    jax_kwargs = configuration.jax_kwargs(config)
    assert set(jax_kwargs) <= set(JAX_PARAMETERS) and "torch_compile" not in jax_kwargs
    assert jax_kwargs["network_factory"].keywords == {
        "policy_hidden_layer_sizes": (8,), "value_hidden_layer_sizes": (256,) * 5, "activation": "tanh",
        "num_quantiles": 32,
        "distribution_type": "tanh_normal", "noise_std_type": "scalar", "init_noise_std": 1.0,
        "state_dependent_std": False, "mean_clip_scale": None, "policy_obs_key": "state", "value_obs_key": "state",
    }
    torch_kwargs = configuration.torch_kwargs(config)
    assert set(torch_kwargs) <= set(TORCH_PARAMETERS) and torch_kwargs["policy_hidden_layer_sizes"] == (8,)
    assert {k: v for k, v in jax_kwargs.items() if k != "network_factory"} == {
        k: v for k, v in torch_kwargs.items() if k not in (*schema.NETWORK_FIELDS, "torch_compile")
    } | {"num_resets_per_eval": 0}


def test_the_command_line_has_a_flag_per_field_with_its_help():
    train = get_command(cli.app).commands["train"]
    options = {opt: param for param in train.params for opt in param.opts}
    for spec in SPECS:
        assert spec.flag in options, spec.flag  # seed: the command's own --seed
        if spec.command_line:
            assert options[spec.flag].help.startswith(hparams.flag_help(spec))
    result = CliRunner().invoke(cli.app, ["train", "--help"], env={"COLUMNS": "250"}, terminal_width=250)
    assert result.exit_code == 0
    missing = [spec.flag for spec in SPECS if spec.flag not in result.output]
    assert missing == []
    assert set(hparams.BY_NAME) == {spec.name for spec in SPECS} - {"seed"}


def test_choices_take_any_case_and_brax_enums_and_the_distributional_critic_is_one_setting():
    from brax.training.agents.ppo.optimizer import LRSchedule as BraxLRSchedule

    from brax_core.training.agents.ppo.optimizer import LRSchedule

    for value in ("adaptive_kl", "ADAPTIVE_KL", LRSchedule.ADAPTIVE_KL, BraxLRSchedule.ADAPTIVE_KL):
        assert PPOConfig(num_timesteps=1, learning_rate_schedule=value).learning_rate_schedule == "ADAPTIVE_KL"
    for value in ("NONE", "none", BraxLRSchedule.NONE, None):
        assert PPOConfig(num_timesteps=1, learning_rate_schedule=value).learning_rate_schedule is None
    assert PPOConfig(num_timesteps=1, normalize_observations_mode="EMA").normalize_observations_mode == "ema"
    # Brax sets the quantile critic in train and in make_ppo_networks; a preset may do either, not both differently.
    factory = functools.partial(ppo_networks.make_ppo_networks, use_distributional_critic=True, num_quantiles=8)
    config = PPOConfig.from_train_kwargs(
        {"num_timesteps": 1, "network_factory": factory, "clipping_epsilon_value": 1.0}
    )
    assert config.use_distributional_critic and config.num_quantiles == 8
    with pytest.raises(ConfigError, match="use_distributional_critic=False but network_factory sets"):
        PPOConfig.from_train_kwargs({"num_timesteps": 1, "network_factory": factory,
                                     "use_distributional_critic": False})
    with pytest.raises(ConfigError) as info:
        PPOConfig(num_timesteps=1, learning_rate_schedule_min_lr=0.1, learning_rate_schedule_max_lr=0.01)
    assert info.value.fields == ("learning_rate_schedule_min_lr", "learning_rate_schedule_max_lr")
