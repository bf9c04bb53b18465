"""Programs kept on disk: a second run of a configuration skips tracing and computes exactly what tracing would."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from brax_bridge import env as bridge_env
from brax_bridge import programs as bridge_programs
from brax_core import program_cache


def _counting(traces):
    def fn(x, y):
        traces.append(1)
        return {"sum": x + y, "scaled": (x * 2.0, y.sum())}

    return fn


def _args():
    return (jnp.arange(6, dtype=jnp.float32).reshape(2, 3), jnp.ones((2, 3), jnp.float32))


def test_a_stored_program_is_used_without_tracing(cache_dir):
    traces = []
    first, from_disk = program_cache.cached(_counting(traces), jax.jit, _args(), {"name": "add"}, "cpu")
    assert not from_disk and len(traces) == 1 and len(os.listdir(cache_dir)) == 1
    expected = first(*_args())
    again, from_disk = program_cache.cached(_counting(traces), jax.jit, _args(), {"name": "add"}, "cpu")
    result = again(*_args())
    assert from_disk and len(traces) == 1  # loaded and run: fn was not traced again
    assert jax.tree.structure(result) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(result), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_key_follows_description_and_arguments(cache_dir):
    args = _args()
    base = program_cache.key({"name": "add"}, args, "cpu")
    assert base == program_cache.key({"name": "add"}, args, "cpu")
    assert base != program_cache.key({"name": "add", "num_envs": 2}, args, "cpu")
    assert base != program_cache.key({"name": "add"}, (args[0], args[1][:1]), "cpu")
    assert base != program_cache.key({"name": "add"}, (args[0], args[1].astype(jnp.int32)), "cpu")
    assert base != program_cache.key({"name": "add"}, args, "gpu")
    # The code of every package the program runs is part of the key (the bridge's files for TorchEnv's programs).
    assert base != program_cache.key({"name": "add"}, args, "cpu", ("brax_core", "brax_bridge"))


def test_a_description_that_is_not_plain_data_is_not_cached(cache_dir):
    traces = []
    assert program_cache.key({"reward_fn": lambda s: s}, _args(), "cpu") is None
    for _ in range(2):
        jitted, from_disk = program_cache.cached(_counting(traces), jax.jit, _args(), {"fn": print}, "cpu")
        jitted(*_args())
        assert not from_disk
    assert len(traces) == 2 and not cache_dir.exists()


def test_the_environment_variable_turns_it_off(cache_dir, monkeypatch):
    monkeypatch.setenv(program_cache.ENV_VAR, "0")
    assert program_cache.folder() is None
    jitted, from_disk = program_cache.cached(_counting([]), jax.jit, _args(), {"name": "add"}, "cpu")
    assert not from_disk and not cache_dir.exists()
    np.testing.assert_array_equal(jitted(*_args())["sum"], _args()[0] + 1.0)


def test_a_bad_setting_is_named(monkeypatch):
    monkeypatch.setenv(program_cache.ENV_VAR, "off")
    with pytest.raises(ValueError, match="BRAX_BRIDGE_PROGRAM_CACHE must be 0 .* or 1 .*'off'"):
        program_cache.folder()


def test_off_with_the_compile_cache():
    saved = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        assert program_cache.folder() is None
    finally:
        jax.config.update("jax_compilation_cache_dir", saved)


def test_an_unreadable_file_is_traced_again(cache_dir, monkeypatch):
    monkeypatch.setattr(program_cache, "_warned", False)
    traces = []
    program_cache.cached(_counting(traces), jax.jit, _args(), {"name": "add"}, "cpu")
    (path,) = cache_dir.iterdir()
    path.write_bytes(b"not a program")
    with pytest.warns(RuntimeWarning, match="could not load the stored program"):
        jitted, from_disk = program_cache.cached(_counting(traces), jax.jit, _args(), {"name": "add"}, "cpu")
    assert not from_disk and len(traces) == 2
    np.testing.assert_array_equal(jitted(*_args())["sum"], _args()[0] + 1.0)


def test_a_cache_that_cannot_serialise_traces_and_says_why_once(cache_dir, monkeypatch, recwarn):
    # What a JAX without flatbuffers does: jax.export raises ImportError on serialize and deserialize.
    def missing(*args, **kwargs):
        raise ImportError("Please install 'flatbuffers' in order to use Exported serialization")

    monkeypatch.setattr(program_cache, "_warned", False)
    monkeypatch.setattr(jax.export.Exported, "serialize", missing)
    traces = []
    for name in ("add", "also add"):  # two programs: the second fails the same way and says nothing more
        jitted, from_disk = program_cache.cached(_counting(traces), jax.jit, _args(), {"name": name}, "cpu")
        assert not from_disk
        np.testing.assert_array_equal(jitted(*_args())["sum"], _args()[0] + 1.0)
    assert len(traces) == 2 and not list(cache_dir.glob("*.jaxexport"))
    messages = [str(w.message) for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "flatbuffers" in messages[0] and program_cache.ENV_VAR in messages[0] and "traced" in messages[0]


def test_a_stored_program_that_cannot_be_loaded_is_traced(cache_dir, monkeypatch):
    traces = []
    program_cache.cached(_counting(traces), jax.jit, _args(), {"name": "add"}, "cpu")
    monkeypatch.setattr(program_cache, "_warned", False)
    monkeypatch.setattr(jax.export, "deserialize", lambda *a: (_ for _ in ()).throw(ImportError("no flatbuffers")))
    with pytest.warns(RuntimeWarning, match="no flatbuffers"):
        jitted, from_disk = program_cache.cached(_counting(traces), jax.jit, _args(), {"name": "add"}, "cpu")
    assert not from_disk and len(traces) == 2
    np.testing.assert_array_equal(jitted(*_args())["scaled"][1], np.float32(6.0))


def test_torch_env_steps_where_flatbuffers_is_missing(tmp_path):
    # The first thing a user runs, in a process that cannot import flatbuffers (jax.export's serialiser).
    script = (
        "import sys, warnings; sys.modules['flatbuffers'] = None\n"
        "import torch\n"
        "from brax_bridge import TorchEnv\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    env = TorchEnv('fast', 4)\n"
        "    env.reset(); td = env.step(torch.zeros(4, env.action_size))\n"
        "notes = [str(w.message) for w in caught if 'program cache' in str(w.message)]\n"
        "assert len(notes) == 1 and 'flatbuffers' in notes[0], notes\n"
        "print('reward', td['next', 'reward'].shape)\n"
    )
    env = dict(os.environ, BRAX_BRIDGE_JAX_CACHE=str(tmp_path / "jax"), BRAX_BRIDGE_PROGRAM_CACHE="1")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "reward torch.Size([4, 1])" in result.stdout


def _rollout(env, steps=5):
    out = [env.reset()["observation"].clone()]
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        action = torch.rand((env.num_envs, env.action_size), generator=generator) * 2 - 1
        step = env.step(action)
        out += [step["next", "observation"].clone(), step["next", "reward"].clone(), step["next", "done"].clone()]
    return out


@pytest.mark.parametrize("name", ["fast", pytest.param("inverted_pendulum", marks=pytest.mark.slow)])
def test_torch_env_loads_its_programs_in_a_later_run(cache_dir, monkeypatch, name):
    """A TorchEnv of a configuration seen before (a fresh process has none in memory) runs the stored programs,
    bit for bit what tracing gives."""
    monkeypatch.setattr(bridge_programs, "_COMPILED", {})
    first = bridge_env.TorchEnv(name, num_envs=4, seed=3)
    expected = _rollout(first)
    assert len(os.listdir(cache_dir)) == 2  # reset and step

    monkeypatch.setattr(bridge_programs, "_COMPILED", {})  # as in a new process
    exported = []
    monkeypatch.setattr(program_cache, "_export", lambda *a: exported.append(a) or pytest.fail("traced again"))
    second = bridge_env.TorchEnv(name, num_envs=4, seed=3)
    got = _rollout(second)
    assert not exported and second.num_compiles == 1
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)

    monkeypatch.setattr(bridge_programs, "_COMPILED", {})
    monkeypatch.setenv(program_cache.ENV_VAR, "0")  # traced as without the cache: the same numbers
    for a, b in zip(_rollout(bridge_env.TorchEnv(name, num_envs=4, seed=3)), expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_torch_env_with_user_code_is_not_stored(cache_dir, monkeypatch):
    monkeypatch.setattr(bridge_programs, "_COMPILED", {})
    env = bridge_env.TorchEnv("fast", num_envs=4, reward_fn=lambda state, action: state.reward * 2.0)
    env.reset()
    assert not cache_dir.exists()


def test_user_registered_env_is_not_stored(cache_dir, monkeypatch):
    from brax_core import envs
    from brax_core.envs.fast import Fast

    class MyFast(Fast):  # a user's class: its code is not part of the key
        pass

    monkeypatch.setattr(bridge_programs, "_COMPILED", {})
    monkeypatch.setitem(envs._envs, "my_fast_for_cache_test", MyFast)
    bridge_env.TorchEnv("my_fast_for_cache_test", num_envs=4).reset()
    assert not cache_dir.exists()


@pytest.mark.parametrize(
    "name",
    [
        "fast",
        "inverted_pendulum",
        "inverted_double_pendulum",
        "reacher",
        "halfcheetah",
        "hopper",
        "walker2d",
        "ant",
        "humanoid",
    ],
)
def test_every_env_is_described(name):
    """Each registered env (as the bridge wraps it) has a description, and changing a setting changes it."""
    from brax_core import envs
    from brax_core.envs.wrappers import training

    env = envs.get_environment(name)
    described = program_cache.describe(training.wrap(env, 1000, 1))
    assert described == program_cache.describe(training.wrap(envs.get_environment(name), 1000, 1))
    assert described != program_cache.describe(training.wrap(env, 999, 1))
    env.__dict__["_a_setting"] = 2.0
    assert described != program_cache.describe(training.wrap(env, 1000, 1))


def test_describe_refuses_code_outside_the_key():
    import functools

    def mine(x):
        return x

    for value in (mine, functools.partial(mine, 1), jax.jit(mine), {"fn": mine}, object()):
        with pytest.raises(TypeError):
            program_cache.describe(value)
    assert program_cache.describe(np.arange(3)) != program_cache.describe(np.arange(1, 4))


_DESCRIBE_ACTIVATIONS = (
    "import functools, json\n"
    "from brax_core import program_cache\n"
    "from brax_core.training.agents.ppo.config import ACTIVATIONS\n"
    "from brax_core.training.networks import validate_activation\n"
    "import jax\n"
    "named = {name: validate_activation(name) for name in ACTIVATIONS}\n"
    "named['elu_alpha_2'] = functools.partial(jax.nn.elu, alpha=2.0)\n"
    "print(json.dumps({name: program_cache.describe(fn) for name, fn in named.items()}, sort_keys=True))\n"
)


def test_activations_are_described_apart_and_alike_in_a_fresh_interpreter():
    """The key of a program holds its network's activation: two activations must not share a key (one would run the
    other's program), and a later process must compute the same description (or it would never find the program)."""
    import functools
    import json

    from brax_core.training.agents.ppo.config import ACTIVATIONS
    from brax_core.training.networks import validate_activation

    # The names both trainers know (a user's registered activation is not described: its code is outside the key).
    named = {name: validate_activation(name) for name in ACTIVATIONS}
    named["elu_alpha_2"] = functools.partial(jax.nn.elu, alpha=2.0)
    here = {name: json.loads(json.dumps(program_cache.describe(fn))) for name, fn in named.items()}
    # Names for one function object (flax's swish is jax's silu) describe alike; every other pair apart.
    for a, b in ((a, b) for a in named for b in named if a < b):
        assert (here[a] == here[b]) is (named[a] is named[b]), (a, b)
    result = subprocess.run(
        [sys.executable, "-c", _DESCRIBE_ACTIVATIONS], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == here


def test_jax_ppo_loads_its_programs_in_a_later_run(cache_dir, monkeypatch):
    """The JAX trainer's reset, training and evaluation programs: stored by a first run, run from disk by a second
    (nothing traced again), with the same parameters and evaluation bit for bit."""
    import functools

    from brax_core import envs
    from brax_core.training.agents.ppo import networks as ppo_networks
    from brax_core.training.agents.ppo import train as ppo_train

    kwargs = dict(
        num_timesteps=400,
        episode_length=20,
        num_envs=8,
        batch_size=8,
        num_minibatches=2,
        unroll_length=5,
        num_evals=2,
        num_eval_envs=4,
        seed=1,
        network_factory=functools.partial(
            ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,)
        ),
    )
    _, first_params, first_metrics = ppo_train.train(envs.get_environment("fast"), **kwargs)
    assert len(os.listdir(cache_dir)) == 3  # reset, training, evaluation

    monkeypatch.setattr(program_cache, "_export", lambda *a: pytest.fail("traced again"))
    _, params, metrics = ppo_train.train(envs.get_environment("fast"), **kwargs)
    for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(first_params), strict=True):
        np.testing.assert_array_equal(got, want)
    assert metrics["eval/episode_reward"] == first_metrics["eval/episode_reward"]

    monkeypatch.undo()
    ppo_train.train(envs.get_environment("fast"), **{**kwargs, "unroll_length": 4})
    assert len(os.listdir(cache_dir)) == 6  # another configuration: its own programs

    # Another seed runs the same programs (its keys are arguments), with the numbers tracing gives for that seed.
    _, other_seed, _ = ppo_train.train(envs.get_environment("fast"), **{**kwargs, "seed": 2})
    assert len(os.listdir(cache_dir)) == 6

    # Traced as without the cache: the same numbers.
    monkeypatch.setenv(program_cache.ENV_VAR, "0")
    _, traced_params, _ = ppo_train.train(envs.get_environment("fast"), **kwargs)
    for got, want in zip(jax.tree.leaves(traced_params), jax.tree.leaves(first_params), strict=True):
        np.testing.assert_array_equal(got, want)
    _, traced_other_seed, _ = ppo_train.train(envs.get_environment("fast"), **{**kwargs, "seed": 2})
    for got, want in zip(jax.tree.leaves(traced_other_seed), jax.tree.leaves(other_seed), strict=True):
        np.testing.assert_array_equal(got, want)
    pairs = zip(jax.tree.leaves(other_seed), jax.tree.leaves(first_params), strict=True)
    assert any(not np.array_equal(a, b) for a, b in pairs)  # the seed did change the run


def test_jax_apg_loads_its_programs_in_a_later_run(cache_dir, monkeypatch):
    """The JAX APG's first-state, epoch and evaluation programs: stored by a first run, run from disk by a second
    (nothing traced again), with the same parameters and evaluation bit for bit, and the same as traced."""
    from brax_core import envs
    from brax_core.training.agents.apg import train as apg_train

    kwargs = dict(episode_length=20, policy_updates=4, horizon_length=4, num_envs=4, num_evals=3, num_eval_envs=4,
                  seed=1, learning_rate=1e-3)
    _, first_params, first_metrics = apg_train.train(envs.get_environment("fast"), **kwargs)
    assert len(os.listdir(cache_dir)) == 3  # first state, epoch, evaluation

    monkeypatch.setattr(program_cache, "_export", lambda *a: pytest.fail("traced again"))
    _, params, metrics = apg_train.train(envs.get_environment("fast"), **kwargs)
    for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(first_params), strict=True):
        np.testing.assert_array_equal(got, want)
    assert metrics["eval/episode_reward"] == first_metrics["eval/episode_reward"]

    monkeypatch.undo()
    monkeypatch.setenv(program_cache.ENV_VAR, "0")
    _, traced_params, traced_metrics = apg_train.train(envs.get_environment("fast"), **kwargs)
    for got, want in zip(jax.tree.leaves(traced_params), jax.tree.leaves(first_params), strict=True):
        np.testing.assert_array_equal(got, want)
    assert traced_metrics["eval/episode_reward"] == first_metrics["eval/episode_reward"]


@pytest.mark.parametrize(("version", "expected"), [("cuda 13000", "cuda"), ("rocm 6.4", "rocm")])
def test_gpu_programs_are_exported_for_the_gpu_runtime_they_lower_on(monkeypatch, version, expected):
    # A GPU device's platform is "gpu", but jax.export only accepts the runtime's name ("cuda" or "rocm").
    class FakeClient:
        platform_version = version

    class FakeGpu:
        client = FakeClient()

    real_devices = jax.devices
    monkeypatch.setattr(jax, "devices", lambda backend=None: [FakeGpu()] if backend == "gpu" else real_devices(backend))
    assert program_cache._lowering_platform("gpu") == expected
    assert program_cache._lowering_platform("cpu") == "cpu"
