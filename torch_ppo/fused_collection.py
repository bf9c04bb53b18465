"""torch_ppo's collection in one compiled JAX program: a whole training step's unrolls of every env, as the JAX
trainer collects them, handed to torch as views.

The per-step path (``update.collect``) crosses the bridge at every env step: a program call, then a wait, because
the torch actor needs the observation. ``FusedCollection`` runs the actor inside the JAX program instead: brax_core's
networks of the actor's layout (``policy_transfer.jax_policy_networks``) read the actor's live weights through
DLPack views (``jax_policy_views``: no copies, so each call sees the last update's weights), the standard-normal
draws come from torch's generator in one tensor (so a checkpoint's generator state still resumes the run exactly),
and a ``lax.scan`` steps every env ``num_unrolls * unroll_length`` times through ``TorchEnv.step_fn`` on the env's
own state (``TorchEnv.advance``). The batch has ``update.collect``'s keys, layout and meaning; the episode sums the
``EpisodeTracker`` keeps are summed inside the program.

It covers every actor brax_core's networks express (torch_ppo's own networks and normaliser, either distribution);
a ``network_factory``'s modules, a differentiable env or one with ``set_system`` fields take the per-step path.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import torch
from jax.sharding import SingleDeviceSharding
from tensordict import TensorDict, TensorDictBase

from brax_bridge import TorchEnv
from brax_bridge.convert import jax_to_torch, tensor_to_array
from brax_core import compile as compile_options
from brax_core import program_cache
from torch_ppo.networks import PPOModules
from torch_ppo.policy_transfer import jax_params_of_views, jax_policy_networks, jax_policy_views

# How a run collects (``train(..., collection=...)``, the ``training/collection`` metric): in one JAX program, or
# step by step through the bridge.
COLLECTIONS = ("fused", "bridge")
_NEXT = ("final_observation", "reward", "terminated", "truncated", "done")
_PACKAGES = ("brax_core", "brax_bridge", "torch_ppo")  # the code the program runs, for the program cache's key


def unsupported_reason(env: TorchEnv, modules: PPOModules) -> str | None:
    """Why ``FusedCollection`` cannot collect for ``modules`` on ``env`` (``None`` where it can)."""
    try:
        _networks_for(env, modules)
    except ValueError as reason:
        return str(reason)
    return None


def _networks_for(env: TorchEnv, modules: PPOModules) -> tuple[Any, dict[str, Any]]:
    """``jax_policy_networks(modules)`` for a collection on ``env``; ``ValueError`` naming why there is none."""
    if env.differentiable:
        raise ValueError("the env is differentiable")
    if env.system_fields_set:
        raise ValueError("the env's model fields were set with set_system")
    return jax_policy_networks(modules)


class FusedCollection:
    """Collects ``num_unrolls`` unrolls of ``unroll_length`` steps of every env of ``env`` in one program call (see
    the module docstring); ``keep_distribution`` keeps the policy's ``loc`` and ``scale``, ``track_episodes`` the
    sums of the episodes that end. Raises ``ValueError`` where it cannot (``unsupported_reason``)."""

    def __init__(
        self,
        env: TorchEnv,
        modules: PPOModules,
        *,
        num_unrolls: int,
        unroll_length: int,
        keep_distribution: bool,
        track_episodes: bool,
    ):
        try:
            networks, layout = _networks_for(env, modules)
        except ValueError as reason:
            raise ValueError(f"the collection cannot run in one JAX program: {reason}") from None
        self.env, self.modules = env, modules
        self.num_unrolls, self.unroll_length = num_unrolls, unroll_length
        self.noise_shape = (num_unrolls * unroll_length, env.num_envs, env.action_size)
        self._unroll = functools.partial(
            _unroll, env.step_fn, networks, num_unrolls, unroll_length, keep_distribution, track_episodes
        )
        options = compile_options.compiler_options(env.jax_device.platform, env.cpu_opt_level)
        self._jit = functools.partial(jax.jit, donate_argnums=(0,), compiler_options=options)
        self._description = _describe(env, layout, num_unrolls, unroll_length, keep_distribution, track_episodes)
        self._program: Any = None

    def lower(self) -> Iterator[jax.stages.Lowered]:
        """Traces (or loads from ``brax_core.program_cache``, so that a later run of the configuration skips tracing
        the physics) and lowers the collection for the env's state (laid out as its reset makes it) and the actor's
        views, for ``brax_bridge.compile_envs``: it compiles beside the env's own programs, before the first reset."""
        env = self.env
        on_device = SingleDeviceSharding(env.jax_device)
        abstract = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device, weak_type=x.weak_type)  # noqa: E731
        noise = jax.ShapeDtypeStruct(self.noise_shape, jnp.float32, sharding=on_device)
        args = (env.state_shapes, jax.tree.map(abstract, jax_policy_views(self.modules)), noise)
        jitted, _ = program_cache.cached(
            self._unroll, self._jit, args, self._description, self.env.jax_device.platform, _PACKAGES
        )
        self._program = jitted
        yield jitted.trace(*args).lower()

    def use(self, compiled: list[Any]) -> None:
        """Takes the compiled collection that ``compile_envs`` returned for ``lower``'s program."""
        (self._program,) = compiled

    def program(self, state: Any, views: Any, noise: jax.Array) -> Any:
        """The collection (compiled by ``lower`` and ``use``, else at the first call)."""
        if self._program is None:
            self.use([lowered.compile() for lowered in self.lower()])
        return self._program(state, views, noise)

    def noise(self, generator: torch.Generator) -> torch.Tensor:
        """One collection's standard-normal draws, ``[num_unrolls * unroll_length, num_envs, action_size]`` in step
        order (a method, so that a check of collection can fix them, as ``TanhNormalSampler.noise``)."""
        return torch.randn(self.noise_shape, generator=generator, device=self.env.device, dtype=torch.float32)

    @torch.inference_mode()
    def __call__(self, generator: torch.Generator) -> tuple[TensorDictBase, Any, dict[str, torch.Tensor]]:
        """``(batch [num_unrolls * num_envs, unroll_length], the envs' observation now, episode sums)``: the sums
        of each episode metric over the episodes that ended and their ``count``, as ``EpisodeTracker.totals``."""
        env = self.env
        noise = tensor_to_array(self.noise(generator))
        observation, (records, sums) = env.advance(self.program, jax_policy_views(self.modules), noise)
        data = jax_to_torch(records)
        data["next"] = {name: data.pop(name) for name in _NEXT}
        rows = self.num_unrolls * env.num_envs
        batch = TensorDict(data, batch_size=[rows, self.unroll_length], device=env.device)
        return batch, observation, jax_to_torch(sums)


def _describe(env: TorchEnv, layout: dict[str, Any], *settings: Any) -> dict[str, Any] | None:
    """What the collection computes beyond its arguments, for ``brax_core.program_cache`` (None: traced each run, as
    for a user's env, wrapper or reward function)."""
    if program_cache.folder() is None:
        return None
    try:
        step = program_cache.describe(env.step_fn)
    except TypeError:
        return None
    return dict(owner="torch_ppo.FusedCollection", step=step, num_envs=env.num_envs, policy=layout, settings=settings)


def _unroll(
    step_fn: Any,
    networks: Any,
    num_unrolls: int,
    unroll_length: int,
    keep_distribution: bool,
    track_episodes: bool,
    state: Any,
    views: Any,
    noise: jax.Array,
) -> tuple[Any, Any, tuple[dict[str, Any], dict[str, Any]]]:
    """The traced collection: ``(state, its observation, (records, episode sums))`` after a step per row of
    ``noise``; records in ``update.collect``'s layout, a row per unroll and env (unroll-major)."""
    normalizer_params, policy_params = jax_params_of_views(views)
    distribution = networks.parametric_action_distribution

    def one_step(carry: tuple[Any, dict[str, jax.Array]], eps: jax.Array) -> tuple[Any, dict[str, Any]]:
        state, sums = carry
        observation = state.obs
        logits = networks.policy_network.apply(normalizer_params, policy_params, observation)
        dist = distribution.create_dist(logits)
        loc, scale = dist.loc, jnp.broadcast_to(dist.scale, dist.loc.shape)
        raw_action = loc + scale * eps
        action = distribution.postprocess(raw_action)
        state, out = step_fn(state, action)
        record = {
            "observation": observation, "action": action, "raw_action": raw_action,
            "action_log_prob": distribution.log_prob(logits, raw_action), "final_observation": out.final_obs,
            "reward": out.reward, "terminated": out.terminated, "truncated": out.truncated, "done": out.done,
        }
        if keep_distribution:
            record["loc"], record["scale"] = loc, scale
        if track_episodes:
            sums = _add_episodes(sums, state.info)
        return (state, sums), record

    zero = jnp.zeros((), jnp.float32)
    sums = {"count": zero}
    if track_episodes:
        sums.update({name: zero for name in state.info.get("episode_metrics", {})})
    (state, sums), records = jax.lax.scan(one_step, (state, sums), noise)

    def unroll_major(x: jax.Array) -> jax.Array:
        # [unrolls * steps, envs, ...] -> [unrolls * envs, steps, ...], as the per-step path stacks its unrolls.
        x = x.reshape(num_unrolls, unroll_length, *x.shape[1:])
        return jnp.swapaxes(x, 1, 2).reshape(num_unrolls * x.shape[2], unroll_length, *x.shape[3:])

    return state, state.obs, (jax.tree.map(unroll_major, records), sums)


def _add_episodes(sums: dict[str, jax.Array], info: Mapping[str, Any]) -> dict[str, jax.Array]:
    """``sums`` plus the metrics of the episodes that ended on this step (``EpisodeTracker.update``'s sums)."""
    done = info["episode_done"].reshape(-1).astype(jnp.float32)
    out = {"count": sums["count"] + done.sum()}
    for name, value in info.get("episode_metrics", {}).items():
        out[name] = sums[name] + (value.reshape(-1).astype(jnp.float32) * done).sum()
    return out
