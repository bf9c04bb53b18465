"""Parametric action distributions (``brax.training.distribution`` counterpart).

Two parametric distributions, as in Brax: ``NormalTanhDistribution`` (the default PPO policy, described below) and
``NormalDistribution``, an unsquashed normal whose parameters are a ``(loc, scale)`` pair (the policy network of
``distribution_type='normal'`` outputs the pair; actions are the normal samples themselves).

The tanh-normal policy is a normal distribution squashed by ``tanh``. A policy network outputs ``2 * action_size``
numbers: ``loc = out[..., :A]`` and ``scale = softplus(out[..., A:]) + min_std``. The network samples a *raw*
action ``u ~ Normal(loc, scale)``; the environment receives ``tanh(u)``. Log-probabilities are those of the
squashed action:

  log_prob(u) = sum_a [ log N(u_a; loc_a, scale_a) - log|d tanh(u_a)/du_a| ]
  log|d tanh(x)/dx| = 2 * (log 2 - x - softplus(-2x))    (a form that stays finite for large |x|)

The entropy of the squashed distribution has no closed form; like Brax it is estimated as the normal entropy
plus the log-det-Jacobian at one sample, summed over action dimensions.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import jax
import jax.numpy as jnp


class _NormalDistribution:
    """Normal distribution over each action dimension (``loc`` and ``scale`` broadcast together)."""

    def __init__(self, loc: jax.Array, scale: jax.Array):
        self.loc = loc
        self.scale = scale

    def sample(self, seed: jax.Array) -> jax.Array:
        return jax.random.normal(seed, shape=self.loc.shape, dtype=self.loc.dtype) * self.scale + self.loc

    def mode(self) -> jax.Array:
        return self.loc

    def log_prob(self, x: jax.Array) -> jax.Array:
        z = (x - self.loc) / self.scale
        return -0.5 * jnp.square(z) - jnp.log(self.scale) - 0.5 * math.log(2.0 * math.pi)

    def entropy(self) -> jax.Array:
        return 0.5 + 0.5 * math.log(2.0 * math.pi) + jnp.log(self.scale) * jnp.ones_like(self.loc)


class TanhBijector:
    """Tanh bijector."""

    def forward(self, x: jax.Array) -> jax.Array:
        return jnp.tanh(x)

    def inverse(self, y: jax.Array) -> jax.Array:
        return jnp.arctanh(y)

    def forward_log_det_jacobian(self, x: jax.Array) -> jax.Array:
        return 2.0 * (math.log(2.0) - x - jax.nn.softplus(-2.0 * x))


class ParametricDistribution(abc.ABC):
    """A distribution whose parameters come from a network, with an optional squashing postprocessor."""

    def __init__(
        self,
        param_size: int,
        postprocessor: TanhBijector | IdentityPostprocessor,
        event_ndims: int,
        reparametrizable: bool,
    ):
        self.param_size = param_size
        self.postprocessor = postprocessor
        self.event_ndims = event_ndims
        self.reparametrizable = reparametrizable

    @abc.abstractmethod
    def create_dist(self, parameters: Any) -> _NormalDistribution:
        """The distribution (before squashing) that ``parameters`` describe."""

    def _sum_event(self, x: jax.Array) -> jax.Array:
        if self.event_ndims == 0:
            return x
        return jnp.sum(x, axis=tuple(range(-self.event_ndims, 0)))

    def sample_no_postprocessing(self, parameters: jax.Array, seed: jax.Array) -> jax.Array:
        return self.create_dist(parameters).sample(seed=seed)

    def sample(self, parameters: jax.Array, seed: jax.Array) -> jax.Array:
        return self.postprocess(self.sample_no_postprocessing(parameters, seed))

    def postprocess(self, event: jax.Array) -> jax.Array:
        return self.postprocessor.forward(event)

    def inverse_postprocess(self, event: jax.Array) -> jax.Array:
        return self.postprocessor.inverse(event)

    def mode(self, parameters: jax.Array) -> jax.Array:
        return self.postprocess(self.create_dist(parameters).mode())

    def log_prob(self, parameters: jax.Array, actions: jax.Array) -> jax.Array:
        """Log-probability of the squashed action whose raw (pre-``tanh``) value is ``actions``."""
        dist = self.create_dist(parameters)
        log_probs = dist.log_prob(actions) - self.postprocessor.forward_log_det_jacobian(actions)
        return self._sum_event(log_probs)

    def entropy(self, parameters: jax.Array, seed: jax.Array) -> jax.Array:
        """One-sample estimate of the squashed distribution's entropy."""
        dist = self.create_dist(parameters)
        entropy = dist.entropy() + self.postprocessor.forward_log_det_jacobian(dist.sample(seed=seed))
        return self._sum_event(entropy)


class NormalTanhDistribution(ParametricDistribution):
    """Normal distribution followed by tanh."""

    def __init__(self, event_size: int, min_std: float = 0.001, var_scale: float = 1.0):
        super().__init__(param_size=2 * event_size, postprocessor=TanhBijector(), event_ndims=1, reparametrizable=True)
        self._min_std = min_std
        self._var_scale = var_scale

    def create_dist(self, parameters: jax.Array) -> _NormalDistribution:
        loc, scale = jnp.split(parameters, 2, axis=-1)
        scale = (jax.nn.softplus(scale) + self._min_std) * self._var_scale
        return _NormalDistribution(loc=loc, scale=scale)


class IdentityPostprocessor:
    """Leaves samples as they are (the normal policy's actions are its samples); its log-det-jacobian is 0."""

    def forward(self, x: jax.Array) -> jax.Array:
        return x

    def inverse(self, y: jax.Array) -> jax.Array:
        return y

    def forward_log_det_jacobian(self, x: jax.Array) -> jax.Array:
        return jnp.zeros_like(x)


class NormalDistribution(ParametricDistribution):
    """Normal distribution without squashing; its parameters are a ``(loc, scale)`` pair.

    ``param_size`` is ``event_size``: the size of the ``loc`` (and ``scale``) the policy network outputs.
    """

    def __init__(self, event_size: int):
        super().__init__(
            param_size=event_size, postprocessor=IdentityPostprocessor(), event_ndims=1, reparametrizable=True
        )

    def create_dist(self, parameters: tuple[jax.Array, jax.Array]) -> _NormalDistribution:
        loc, scale = parameters
        return _NormalDistribution(loc=loc, scale=scale)
