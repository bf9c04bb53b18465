"""``fast``: Brax's trivial unit-test task, a point that is paid for how far right it has got (no physics engine).

* Observation: ``[position, velocity]`` (``obs_mode='ndarray'``), or a dict (see ``obs_mode`` below).
* Action (1): in ``[-1, 1]``; any positive action adds ``dt`` to the velocity, any other action leaves it.
* Dynamics: ``velocity += dt * (action > 0)``, then ``position += dt * velocity`` (``dt`` 0.02).
* Reward: the position reached. Pushing every step is optimal: ``dt² · t(t+1)/2`` at step ``t``, so a
  100-step episode returns at most 68.7 (128 steps: 143.1); a policy pushing at random half the time gets about
  half of that.
* Termination: none (episodes end by the time limit); a step whose action is not finite ends the episode, as the
  physics envs end one whose state stops being finite.
* Reset: position and velocity 0 (deterministic: the key is unused).
* Defaults: ``episode_length`` 100.

Observation modes (``obs_mode``), as Brax's: ``'ndarray'`` (the array above), ``'dict_state'`` (``{'state'}``),
``'dict_pixels'`` (``{'pixels/view_0', 'pixels/view_1'}``, each ``(4, 4, 3)`` float32), ``'dict_pixels_state'``
(both) and ``'dict_latent_state'`` (``'state'`` plus ``'latent_pixels/view_0'`` and ``'latent_pixels/view_1'``,
12 each). The image and latent views are zeros, as in Brax: they test the plumbing of vision networks, not
perception. ``asymmetric_obs=True`` adds ``'privileged_state'`` (4 zeros) for an asymmetric critic, except in
``'dict_pixels'``, which holds the views only; it needs a dict mode.

Differences from Brax 0.14's ``fast``: none in observations, reward, termination or reset. Brax silently accepts
any keyword argument; this one refuses unknown ones and bad values (``ValueError`` naming them), refuses actions of
the wrong shape, and ends the episode on a non-finite action (Brax treats NaN as not pushing). ``pixel_obs``, which
Brax's own vision test passes and ignores, is accepted and must agree with ``obs_mode``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from brax_core.base import Transform
from brax_core.envs.base import BRAX_BACKENDS, Env, State


class ObservationMode(enum.Enum):
    """The observation layouts ``fast`` offers (Brax's names and values)."""

    NDARRAY = "ndarray"
    DICT_STATE = "dict_state"
    DICT_PIXELS = "dict_pixels"
    DICT_PIXELS_STATE = "dict_pixels_state"
    DICT_LATENT_STATE = "dict_latent_state"


_MODES = tuple(m.value for m in ObservationMode)
_PIXEL_MODES = (ObservationMode.DICT_PIXELS, ObservationMode.DICT_PIXELS_STATE)
_VIEWS = ("view_0", "view_1")
_IMAGE_SHAPE = (4, 4, 3)
_LATENT_SIZE = 12
_PRIVILEGED_SIZE = 4


@struct.dataclass
class FastPipelineState:
    """Position and velocity (shape ``(1,)`` each), with Brax's read-only views ``q``, ``qd`` and ``x``."""

    qpos: jax.Array
    qvel: jax.Array

    @property
    def q(self) -> jax.Array:
        return self.qpos

    @property
    def qd(self) -> jax.Array:
        return self.qvel

    @property
    def x(self) -> Transform:
        """The point as one body on the x axis."""
        pos = jnp.concatenate([self.qpos, jnp.zeros((2,), self.qpos.dtype)])[None]
        return Transform(pos=pos, rot=jnp.array([[1.0, 0.0, 0.0, 0.0]], pos.dtype))


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


class Fast(Env):
    """Brax's ``fast`` test task: push right to be paid the position (no MJX; compiles in milliseconds).

    Args:
      asymmetric_obs: add a ``'privileged_state'`` entry for an asymmetric critic (dict modes only).
      obs_mode: an ``ObservationMode`` or its value: ``'ndarray'``, ``'dict_state'``, ``'dict_pixels'``,
        ``'dict_pixels_state'`` or ``'dict_latent_state'``.
      pixel_obs: accepted for Brax scripts, which pass it beside a pixel ``obs_mode``; ``True`` requires
        ``'dict_pixels'`` or ``'dict_pixels_state'`` (the images come from ``obs_mode``).
      backend: Brax's pipeline names are accepted and ignored (there is no physics pipeline).
    """

    default_episode_length = 100

    def __init__(
        self,
        asymmetric_obs: bool = False,
        obs_mode: ObservationMode | str = ObservationMode.NDARRAY,
        pixel_obs: bool = False,
        backend: str = "mjx",
        **kwargs: Any,
    ):
        if kwargs:
            raise ValueError(
                f"fast got unknown keyword argument(s) {sorted(kwargs)}; it accepts asymmetric_obs, obs_mode, "
                "pixel_obs and backend"
            )
        if backend not in BRAX_BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(map(repr, BRAX_BACKENDS))}; got {backend!r}")
        self._asymmetric_obs = _check_bool("asymmetric_obs", asymmetric_obs)
        pixel_obs = _check_bool("pixel_obs", pixel_obs)
        try:
            self._obs_mode = ObservationMode(obs_mode)
        except ValueError:
            raise ValueError(f"obs_mode must be one of {', '.join(map(repr, _MODES))}; got {obs_mode!r}") from None
        if self._asymmetric_obs and self._obs_mode == ObservationMode.NDARRAY:
            raise ValueError("asymmetric_obs=True needs a dict obs_mode (e.g. 'dict_state'); got obs_mode='ndarray'")
        if pixel_obs and self._obs_mode not in _PIXEL_MODES:
            raise ValueError(
                f"pixel_obs=True needs obs_mode 'dict_pixels' or 'dict_pixels_state'; got {self._obs_mode.value!r}"
            )
        self._dt = 0.02
        # Brax's trace counters: how many times reset and step were traced (or run eagerly).
        self._reset_count = 0
        self._step_count = 0

    @property
    def dt(self) -> jax.Array:
        return jnp.float32(self._dt)

    @property
    def obs_mode(self) -> ObservationMode:
        return self._obs_mode

    @property
    def reset_count(self) -> int:
        return self._reset_count

    @property
    def step_count(self) -> int:
        return self._step_count

    def reset(self, rng: jax.Array) -> State:
        del rng  # the task starts at rest at the origin, as Brax's
        self._reset_count += 1
        zero1 = jnp.zeros((1,), jnp.float32)
        pipeline_state = FastPipelineState(qpos=zero1, qvel=zero1)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state, self._obs(pipeline_state), zero, zero)

    def step(self, state: State, action: jax.Array) -> State:
        self._step_count += 1
        push = (action > 0).astype(jnp.float32)
        velocity = state.pipeline_state.qvel + push * self._dt
        position = state.pipeline_state.qpos + velocity * self._dt
        pipeline_state = FastPipelineState(qpos=position, qvel=velocity)
        done = jnp.where(jnp.all(jnp.isfinite(action)), 0.0, 1.0).astype(jnp.float32)
        return state.replace(
            pipeline_state=pipeline_state, obs=self._obs(pipeline_state), reward=position[0], done=done
        )

    def _obs(self, pipeline_state: FastPipelineState) -> jax.Array | dict[str, jax.Array]:
        state = jnp.concatenate([pipeline_state.qpos, pipeline_state.qvel])
        mode = self._obs_mode
        if mode == ObservationMode.NDARRAY:
            return state
        if mode == ObservationMode.DICT_PIXELS:
            return self._pixels()
        obs = {"state": state}
        if self._asymmetric_obs:
            obs["privileged_state"] = jnp.zeros((_PRIVILEGED_SIZE,), jnp.float32)
        if mode == ObservationMode.DICT_PIXELS_STATE:
            obs.update(self._pixels())
        elif mode == ObservationMode.DICT_LATENT_STATE:
            obs.update({f"latent_pixels/{v}": jnp.zeros((_LATENT_SIZE,), jnp.float32) for v in _VIEWS})
        return obs

    @staticmethod
    def _pixels() -> dict[str, jax.Array]:
        return {f"pixels/{v}": jnp.zeros(_IMAGE_SHAPE, jnp.float32) for v in _VIEWS}

    @property
    def observation_size(self) -> int | Mapping[str, int | tuple[int, ...]]:
        """2, or for a dict mode each key's shape, a 1-D shape as its int length (as Brax's ``fast`` reports)."""
        size = super().observation_size
        if isinstance(size, Mapping):
            return {k: v[0] if len(v) == 1 else v for k, v in size.items()}
        return size

    @property
    def action_size(self) -> int:
        return 1
