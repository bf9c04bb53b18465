"""torch_ppo's side of a run (``brax_core.training.run.driver.Backend``): the networks, Adam, the envs and the
evaluator of one process, built from ``TrainArguments``, restored from parameters or a checkpoint, stepped by
``fused_collection.FusedCollection`` (or ``update.collect``) and ``update.PPOUpdate``, evaluated and saved."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from brax_core.training import resume
from brax_core.training.agents.ppo import adaptive_kl
from brax_core.training.agents.ppo.config import KEYWORD_FIELDS
from brax_core.training.checkpoint import check_observation_size
from torch_ppo import checkpoint, compiled_update, distributed, environments, fused_collection, update
from torch_ppo.arguments import TrainArguments
from torch_ppo.networks import PPOModules, make_actor
from torch_ppo.params import TorchPPOParams, load_params, make_inference_fn, params_of
from torch_ppo.policy_transfer import jax_params_to_torch


class TorchPPOBackend:
    """One process's training run (see the module docstring); ``env_steps`` is where it starts."""

    def __init__(self, args: TrainArguments, dist: distributed.DistributedContext):
        config = self.config = args.config
        self.args, self.dist, self.device = args, dist, args.device
        self.local_envs = config.env.num_envs // dist.world_size
        self.num_unrolls = config.algorithm.batch_size * config.algorithm.num_minibatches // config.env.num_envs
        self.env_seed = config.run.seed + 7919 * dist.rank
        self.env = environments.make_env(
            args.environment,
            self.local_envs,
            config.env.episode_length,
            config.env.action_repeat,
            self.device,
            self.env_seed,
            args.randomization_fn,
            args.wrap_env_fn,
            config.run.num_timesteps,
        )
        self.action_repeat = self.env.action_repeat  # a ready TorchEnv brings its own
        algorithm = config.algorithm
        self.steps_per_training_step = (
            algorithm.batch_size * algorithm.unroll_length * algorithm.num_minibatches * self.action_repeat
        )
        obs_size, action_size = self._sizes()
        with torch.random.fork_rng(devices=[]):  # initial weights from the seed alone, same on every rank
            torch.manual_seed(config.run.seed)
            self.modules = PPOModules(
                obs_size,
                action_size,
                config.network.policy_hidden_layer_sizes,
                config.network.value_hidden_layer_sizes,
                config.network.activation,
                config.algorithm.normalize_observations,
                use_distributional_critic=config.algorithm.use_distributional_critic,
                num_quantiles=config.network.num_quantiles,
                **args.network_options,
            ).to(self.device)
            self.modules.normalizer.set_update_rule(
                algorithm.normalize_observations_mode,
                algorithm.normalize_observations_std_eps,
                algorithm.normalize_until_count,
            )
        self.generator = torch.Generator(device=self.device).manual_seed(config.run.seed * 1_000_003 + dist.rank)
        self.eval_generator = torch.Generator(device=self.device).manual_seed(config.run.seed * 1_000_003 + 999_983)
        loss_module: nn.Module = update.LossModule(self.modules, update.loss_config(config))
        if dist.enabled:
            loss_module = nn.parallel.DistributedDataParallel(
                loss_module, broadcast_buffers=False, process_group=dist.group
            )
        minibatch_steps = compiled_update.run_minibatch_steps(config, self.steps_per_training_step)
        compiled = compiled_update.use_compiled_update(config.run.torch_compile, obs_size, minibatch_steps, self.device)
        logging.info("torch_ppo's minibatch step: %s", "compiled" if compiled else "eager")
        update_class = compiled_update.CompiledPPOUpdate if compiled else update.PPOUpdate
        self.update = update_class(
            self.modules,
            loss_module,
            _adam(
                self.modules, algorithm.learning_rate, algorithm.learning_rate_schedule == adaptive_kl.NAME, self.device
            ),
            config,
            local_batch=config.algorithm.batch_size // dist.world_size,
            generator=self.generator,
            dist=dist,
            **({"fall_back": config.run.torch_compile is None} if compiled else {}),
        )
        self.fused = self._fused_collection(args.collection)
        self.make_policy = make_inference_fn(self.modules)
        self.env_steps = 0
        self.saved_env_state = None
        self.obs: Any = None
        self.evaluator: environments.Evaluator | None = None
        self.tracker: update.EpisodeTracker | None = None
        if args.restore_params is not None:
            self._restore_params(args.restore_params, args.restore_value_fn)
        if args.restore_checkpoint_path is not None:
            self._restore_checkpoint(self._checkpoint_every_rank_restores(args.restore_checkpoint_path))

    # ---------------------------------------------------------------- set-up

    def _sizes(self) -> tuple[int | dict[str, Any], int]:
        """The training env's observation and action sizes, checked against the observation keys and the
        evaluation env's size before anything compiles (the size comes from tracing the env's reset)."""
        config, eval_env = self.config, self.args.eval_env
        obs_size = self.env.observation_size
        if isinstance(obs_size, Mapping):
            for name in ("policy_obs_key", "value_obs_key"):
                key = getattr(config.network, name)
                if key not in obs_size:
                    raise ValueError(f"{name}={key!r} is not among the env's observation keys {sorted(obs_size)}")
            obs_size = dict(obs_size)
        else:
            obs_size = int(obs_size)
        if eval_env is not None and config.run.num_evals > 0:
            check_observation_size("eval_env", eval_env.observation_size, obs_size)
        return obs_size, int(self.env.action_size)

    def _fused_collection(self, collection: str | None) -> fused_collection.FusedCollection | None:
        """The collection in one JAX program, unless ``collection`` is ``'bridge'`` or (``None``) it cannot run;
        ``'fused'`` where it cannot raises, naming why, before anything compiles."""
        if collection == "bridge":
            return None
        try:
            return fused_collection.FusedCollection(
                self.env,
                self.modules,
                num_unrolls=self.num_unrolls,
                unroll_length=self.config.algorithm.unroll_length,
                keep_distribution=self.update.adaptive_kl,
                track_episodes=self.config.run.log_training_metrics,
            )
        except ValueError as reason:
            if collection == "fused":
                raise ValueError(f"collection='fused': {reason}") from None
            logging.info("collecting through the bridge: %s", reason)
            return None

    def _restore_params(self, params: Any, with_value: bool) -> None:
        first = params[0] if isinstance(params, tuple | list) else getattr(params, "normalizer_params", None)
        # torch_ppo's normaliser statistics are a plain dict; the JAX trainer's are a RunningStatisticsState.
        if not isinstance(first, dict):
            params = jax_params_to_torch(params)  # the JAX trainer's params
        shapes = lambda m: (  # noqa: E731
            {k: tuple(torch.as_tensor(v).shape) for k, v in m.items()}
            if isinstance(m, Mapping)
            else tuple(torch.as_tensor(m).shape)
        )
        got, want = shapes(params[0]["mean"]), shapes(self.modules.normalizer.stats()["mean"])
        if got != want:
            raise ValueError(
                f"restore_params were trained on observations of shape {got} but this environment's are {want}: "
                "they belong to another environment"
            )
        if not with_value:
            params = TorchPPOParams(params[0], params[1], {})
        load_params(self.modules, params)

    def _checkpoint_every_rank_restores(self, path: str) -> str:
        """Rank 0's newest checkpoint, on every rank: a folder resolved by each rank alone could name different
        checkpoints (one still being written elsewhere), and ranks resuming at different step counts would wait
        on each other's collectives forever."""
        chosen = distributed.broadcast_object(self.dist, path)
        if not os.path.exists(chosen):
            raise FileNotFoundError(
                f"restore_checkpoint_path: process {self.dist.rank} cannot read {chosen!r}, the checkpoint process 0 "
                "restores; with several processes or machines the checkpoint folder must be one every process reads"
            )
        return chosen

    def _restore_checkpoint(self, path: str) -> None:
        state = checkpoint.load(path, map_location=self.device)
        requested = self.checkpoint_config(0)
        changed = resume.check_config(
            state["path"],
            _comparable(state["config"]),
            _comparable(requested),
            self.args.allow_config_changes,
        )
        for name, (saved, now) in changed.items():
            logging.warning("resuming from %s with %s changed from %r to %r", state["path"], name, saved, now)
        try:
            self.modules.load_state_dict(state["modules"])
            self.update.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as e:
            raise ValueError(f"checkpoint {state['path']!r} does not fit these networks: {e}") from e
        self.env_steps = int(state["env_steps"])
        rng_states = state["rng_state"]
        self.generator.set_state(rng_states[min(self.dist.rank, len(rng_states) - 1)].cpu())
        per_rank = state.get("env_states")
        if per_rank is not None and len(per_rank) == self.dist.world_size:
            self.saved_env_state = per_rank[self.dist.rank]  # every rank continues its own envs
        elif self.dist.rank == 0:
            self.saved_env_state = state.get("env_state")

    def checkpoint_config(self, env_steps: int) -> dict[str, Any]:
        """The run's configuration as checkpoints record it, at ``env_steps``: env, networks, hyperparameters (those of
        its ``TrainArguments`` that are JSON values), env-step count."""
        args, plain = self.args, (bool, int, float, str, type(None))
        environment = args.environment
        if not isinstance(environment, str):
            environment = type(getattr(environment, "unwrapped_env", environment)).__name__
        settings = {
            **{k: v for k, v in args.config.flat().items()
               if isinstance(v, plain) and k in KEYWORD_FIELDS and k != "num_timesteps"},
            **{k: v for k, v in args.kernel_inits.items() if isinstance(v, plain)},
            "eval_backend": args.eval_backend,
            "num_threads": args.num_threads,
            "restore_value_fn": args.restore_value_fn,
            "action_repeat": int(self.action_repeat),  # a ready TorchEnv brings its own
        }
        for name in ("policy_hidden_layer_sizes", "value_hidden_layer_sizes"):
            settings[name] = list(getattr(args.config.network, name))
        return {
            "format": checkpoint.FORMAT,
            "environment": environment,
            "network": self.modules.config(),
            "episode_length": int(self.env.episode_length),
            "action_repeat": int(self.action_repeat),
            "env_steps": int(env_steps),
            "training": settings,
        }

    def build_envs(self) -> None:
        """Builds the evaluator (rank 0), compiles the envs and the evaluation, and resets (or restores) the envs."""
        if self.config.run.num_evals > 0 and self.dist.is_main:
            self.evaluator = environments.make_evaluator(self.args, self.env, self.modules, self.device)
        environments.compile_programs(self.env, self.evaluator, self.fused)
        self.obs = self.env.reset(seed=self.env_seed).get("observation")
        if self.saved_env_state is not None:
            try:
                self.obs = self.env.load_state_dict(self.saved_env_state)
            except ValueError:
                pass  # saved from another env layout: training continues from the fresh reset
        self.actor = make_actor(self.modules, deterministic=False, generator=self.generator)
        self.tracker = update.EpisodeTracker(self.env) if self.config.run.log_training_metrics else None

    # ---------------------------------------------------------------- the run driver's backend

    def collect(self) -> TensorDictBase:
        """One training step's batch of unrolls from the envs' current state (the actor's draws)."""
        if self.fused is not None:
            rollout, self.obs, episodes = self.fused(self.generator)
            if self.tracker is not None:
                self.tracker.add(episodes)
            return rollout
        rollout, self.obs = update.collect(
            self.env,
            self.modules,
            self.actor.module[-1],
            self.obs,
            num_unrolls=self.num_unrolls,
            unroll_length=self.config.algorithm.unroll_length,
            keep_distribution=self.update.adaptive_kl,
            tracker=self.tracker,
        )
        return rollout

    def train(self, num_steps: int) -> None:
        for _ in range(num_steps):
            self.update(self.collect())
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def reset_envs(self, env_steps: int) -> None:
        reset_seed = (self.env_seed * 1_000_003 + env_steps) % (2**31 - 1)
        self.obs = self.env.reset(seed=reset_seed).get("observation")

    def skip_evaluations(self, count: int) -> None:
        self.evaluator.runs = count  # the unbroken run's evaluation seeds continue

    def training_metrics(self) -> dict[str, float]:
        """The update's metric means and the training episodes' sums since the last read, over every process (the
        only host read of a training call)."""
        update_metrics = self.update.read_metrics()
        episode = self.tracker.totals() if self.tracker is not None else {}
        values = [*update_metrics.values(), *episode.values()]
        if values and self.dist.enabled:
            packed = torch.stack(values)
            scale = [1.0 / self.dist.world_size] * len(update_metrics) + [1.0] * len(episode)
            torch.distributed.all_reduce(packed, group=self.dist.group)
            values = list(packed * torch.tensor(scale, device=packed.device))
        host = torch.stack(values).tolist() if values else []
        out = dict(zip(update_metrics, host[: len(update_metrics)], strict=True))
        if self.tracker is not None:
            totals = dict(zip(episode, host[len(update_metrics) :], strict=True))
            out["episode_count"] = totals.pop("count")
            out.update({f"episode_sum/{name}": total for name, total in totals.items()})
        out["collection"] = "bridge" if self.fused is None else "fused"
        return out

    def evaluate(self, training_metrics: Mapping[str, float]) -> dict[str, float]:
        self.modules.eval()
        metrics = self.evaluator.run(self.modules, self.config.run.deterministic_eval, self.eval_generator)
        self.modules.train()
        return {**training_metrics, **metrics}

    def params(self) -> TorchPPOParams:
        return params_of(self.modules)

    def save(self, env_steps: int) -> None:
        """Writes the checkpoint of ``env_steps``; every rank takes part under DDP (rank 0 writes)."""
        if self.args.save_checkpoint_path is None:
            return
        env_state = self.env.state_dict() if self.obs is not None else None
        rng_states, env_states = distributed.gather_process_states(self.dist, self.generator.get_state(), env_state)
        if self.dist.is_main:
            checkpoint.save(
                self.args.save_checkpoint_path,
                {
                    "config": self.checkpoint_config(env_steps),
                    "modules": self.modules.state_dict(),
                    "optimizer": self.update.optimizer.state_dict(),
                    "env_steps": env_steps,
                    "rng_state": rng_states,
                    "env_state": env_state,
                    **({"env_states": env_states} if env_states is not None else {}),
                },
                max_to_keep=self.config.run.max_to_keep,
            )
        if self.dist.enabled:
            # No rank goes on until the checkpoint exists: a rank that resumes from this folder next must find it.
            torch.distributed.barrier(group=self.dist.group)


def _comparable(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a run configuration a resumed run must share: env, networks, episode, and the training
    hyperparameters both trainers record (``resume.RESUME_FIELDS``)."""
    training = config.get("training", {})
    return {
        **{k: config[k] for k in ("environment", "network", "episode_length", "action_repeat") if k in config},
        "training": {k: training[k] for k in resume.RESUME_FIELDS if k in training},
    }


def _adam(modules: PPOModules, learning_rate: float, adaptive: bool, device: torch.device) -> torch.optim.Adam:
    """Adam over ``modules``' parameters, its rate a tensor that ``ADAPTIVE_KL`` changes in place (``adaptive``).

    On CUDA it is capturable (its step counts live on the device, so no step reads one back to the host, and the
    compiled update can run it). ``foreach``: one call per Adam stage for all parameters instead of a Python loop over
    them (on the CPU the default); it applies the same operations to each tensor, so the updates are bit for bit the
    same."""
    capturable = device.type == "cuda"
    if adaptive:
        # A tensor learning rate on the device (float32 as on the JAX side); Adam takes one with foreach only when
        # capturable.
        lr = torch.tensor(learning_rate, dtype=torch.float32, device=device)
        return torch.optim.Adam(modules.parameters(), lr=lr, eps=1e-8, capturable=capturable, foreach=capturable)
    return torch.optim.Adam(modules.parameters(), lr=learning_rate, eps=1e-8, capturable=capturable, foreach=True)
