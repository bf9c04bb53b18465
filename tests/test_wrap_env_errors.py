"""The two wrapping slips of a ported training script, refused before any env is built or traced: the JAX trainer
given an unwrapped env with ``wrap_env=False`` or an already wrapped one with ``wrap_env=True``, and torch_ppo (which
always wraps) given an already wrapped env or the JAX trainer's ``wrap_env``."""

import pytest

import torch_ppo
from brax_core.envs import training
from brax_core.envs.fast import Fast
from brax_core.training.agents.ppo import programs
from brax_core.training.agents.ppo import train as ppo
from torch_ppo import environments as torch_environments

TINY = dict(num_timesteps=1280, num_envs=32, batch_size=32, num_minibatches=4, unroll_length=10, num_evals=0)
WRAPPED = r"already wrapped for training \(AutoResetWrapper around VmapWrapper around EpisodeWrapper around Fast\)"


class _EnvsBuilt(Exception):
    """Raised where a trainer starts building its envs: the arguments passed every check."""


@pytest.fixture
def stop_at_the_envs(monkeypatch):
    def built(*args, **kwargs):
        raise _EnvsBuilt

    monkeypatch.setattr(programs, "make_training_env", built)
    monkeypatch.setattr(torch_environments, "make_env", built)


def test_wrap_env_false_with_an_env_never_wrapped_says_what_to_pass(stop_at_the_envs):
    with pytest.raises(ValueError, match=(
        r"wrap_env=False trains on environment as it is, which must be batched and auto-resetting, but environment "
        r"is a single Fast env that brax_core.envs.training.wrap never wrapped: pass wrap_env=True \(the default\)"
    )):
        ppo.train(Fast(), wrap_env=False, **TINY)
    with pytest.raises(ValueError, match=r"wrap_env=False trains on eval_env as it is.*eval_env is a single Fast"):
        ppo.train(training.wrap(Fast(), episode_length=10), wrap_env=False, eval_env=Fast(), **TINY)
    with pytest.raises(_EnvsBuilt):  # wrapped as wrap_env=False expects: accepted
        ppo.train(training.wrap(Fast(), episode_length=10), wrap_env=False, **TINY)


@pytest.mark.parametrize("wrap_env", [True, training.wrap], ids=["True", "callable"])
def test_wrap_env_with_an_env_wrapped_already_says_what_to_pass(stop_at_the_envs, wrap_env):
    given = "True" if wrap_env is True else "a wrapper callable"
    with pytest.raises(ValueError, match=(
        rf"wrap_env={given} wraps environment for training, but environment is {WRAPPED}: pass wrap_env=False to "
        rf"train on it as it is, or pass the env before wrapping \(environment.unwrapped: the Fast env\)"
    )):
        ppo.train(training.wrap(Fast(), episode_length=10), wrap_env=wrap_env, **TINY)
    with pytest.raises(ValueError, match=rf"wraps eval_env for training, but eval_env is {WRAPPED}"):
        ppo.train(Fast(), wrap_env=wrap_env, eval_env=training.wrap(Fast(), episode_length=10), **TINY)


def test_torch_ppo_refuses_an_env_wrapped_already_and_the_jax_trainers_wrap_env(stop_at_the_envs):
    wrapped = training.wrap(Fast(), episode_length=10)
    with pytest.raises(ValueError, match=(
        rf"environment is {WRAPPED}; torch_ppo.train wraps its envs itself .* and takes no wrap_env=False as the "
        r"JAX trainer does: pass the env before wrapping \(environment.unwrapped: the Fast env\)"
    )):
        torch_ppo.train(wrapped, **TINY)
    with pytest.raises(ValueError, match=rf"eval_env is {WRAPPED}; torch_ppo.train wraps its envs itself"):
        torch_ppo.train(Fast(), eval_env=wrapped, **TINY)
    with pytest.raises(TypeError, match=r"torch_ppo.train takes no wrap_env \(got wrap_env=False\): it wraps"):
        torch_ppo.train(wrapped, wrap_env=False, **TINY)
    with pytest.raises(_EnvsBuilt):
        torch_ppo.train(Fast(), **TINY)
