"""Every env, under every wrapper stack the trainers build, returns a state of one fixed structure.

Scans over env steps (action repeat, unrolls, evaluation) need the state a step returns to have exactly the
pytree structure, shapes and dtypes of the state it was given: metrics and info keys included. These checks trace
(``jax.eval_shape``) and never compile.
"""

import functools

import jax
import jax.numpy as jnp
import pytest

from brax_core import envs
from brax_core.envs import State
from brax_core.envs.base import PipelineEnv
from brax_core.envs.wrappers import training as wrappers

NUM_ENVS = 2
EPISODE_LENGTH = 5


def _randomize_friction(sys, rng):
    """A vmapped randomisation of one field, as users write them for Brax."""

    @jax.vmap
    def one(key):
        return sys.geom_friction.at[:, 0].set(jax.random.uniform(key, sys.geom_friction[:, 0].shape, minval=0.5))

    friction = one(rng)
    in_axes = jax.tree.map(lambda _: None, sys).tree_replace({"geom_friction": 0})
    return sys.tree_replace({"geom_friction": friction}), in_axes


def _stacks(env):
    """The wrapper stacks of training and evaluation, with and without auto-reset and randomisation."""
    keys = jax.random.split(jax.random.PRNGKey(1), NUM_ENVS)
    randomize = None
    if isinstance(env, PipelineEnv):
        randomize = functools.partial(_randomize_friction, rng=keys)
    return {
        # Brax's evaluation on the training stack: randomised, action repeat, fresh-state auto-reset.
        "eval(train, repeat 2, randomised)": wrappers.EvalWrapper(
            wrappers.wrap(env, EPISODE_LENGTH, action_repeat=2, randomization_fn=randomize)
        ),
        # The trainers' evaluation env: no auto-reset.
        "eval(episode, repeat 2)": wrappers.EvalWrapper(
            wrappers.VmapWrapper(wrappers.EpisodeWrapper(env, EPISODE_LENGTH, action_repeat=2))
        ),
        # Training with Brax's first-state auto-reset.
        "train(first-state reset)": wrappers.wrap(env, EPISODE_LENGTH, action_repeat=1, full_reset=False),
    }


def _signature(state: State) -> list[tuple]:
    leaves = jax.tree_util.tree_flatten_with_path(state)[0]
    return [(jax.tree_util.keystr(path), x.shape, x.dtype, x.weak_type) for path, x in leaves]


# What an env adds to the state (its metrics and info) is checked for every env under the stack holding every
# wrapper; the other stacks differ only in wrappers, so one pipeline env and one plain env cover them.
EVERY_STACK = ("inverted_pendulum", "fast")


@pytest.mark.parametrize("name", envs.registered_names())
def test_step_returns_the_structure_reset_returns(name):
    env = envs.get_environment(name)
    keys = jax.random.split(jax.random.PRNGKey(0), NUM_ENVS)
    action = jax.ShapeDtypeStruct((NUM_ENVS, env.action_size), jnp.float32)
    stacks = _stacks(env)
    if name not in EVERY_STACK:
        stacks = dict(list(stacks.items())[:1])
    for label, stack in stacks.items():
        first = jax.eval_shape(stack.reset, keys)
        after = jax.eval_shape(stack.step, first, action)
        assert _signature(after) == _signature(first), label
        assert not any(leaf.weak_type for leaf in jax.tree.leaves(after)), label
        assert "reward" in first.metrics or not label.startswith("eval"), label


class _StepOnlyMetric(envs.Env):
    """An env whose step reports a metric its reset does not: a scan cannot carry it."""

    def reset(self, rng):
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=None, obs=jnp.zeros(2), reward=zero, done=zero, metrics={})

    def step(self, state, action):
        return state.replace(metrics={"speed": jnp.ones((), jnp.float32)})

    @property
    def action_size(self):
        return 1


class _FreshMetricsDict(_StepOnlyMetric):
    """An env whose step returns a new metrics dict (dropping keys that wrappers added), with the same keys
    as its reset."""

    def reset(self, rng):
        return super().reset(rng).replace(metrics={"speed": jnp.zeros((), jnp.float32)})


def test_a_step_only_metric_is_named_and_a_fresh_metrics_dict_keeps_wrapper_metrics():
    keys = jax.random.split(jax.random.PRNGKey(0), NUM_ENVS)
    action = jnp.zeros((NUM_ENVS, 1))
    stack = wrappers.EvalWrapper(wrappers.wrap(_StepOnlyMetric(), EPISODE_LENGTH))
    with pytest.raises(ValueError, match=r"_StepOnlyMetric.step returns metrics \['speed'\] that its reset does not"):
        stack.step(stack.reset(keys), action)

    stack = wrappers.EvalWrapper(wrappers.wrap(_FreshMetricsDict(), EPISODE_LENGTH))
    state = stack.step(stack.reset(keys), action)
    assert set(state.metrics) == {"speed", "reward"}
    assert float(state.info["eval_metrics"].episode_metrics["speed"][0]) == 1.0
