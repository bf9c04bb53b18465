"""Soft Actor-Critic in PyTorch on the bridge, with the JAX SAC's semantics (``brax_core.training.agents.sac``).

Every training step steps each of ``num_envs`` ``TorchEnv`` envs once with actions sampled from the policy, writes
the transitions into the replay buffer on the env's device (after a prefill of ``min_replay_size`` transitions by
the initial policy), then makes ``grad_updates_per_step`` SGD steps on batches of ``batch_size`` drawn from it. An
SGD step is the JAX SAC's: the temperature's, the critics' and the actor's gradients, each taken at the parameters
the step started from, then an Adam step of each (the temperature's at 3e-4), then the target critics' Polyak average
(``tau``). A transition cut by the time limit bootstraps its target from ``final_observation``, the observation the
step reached (``bootstrap_on_timeout``). Envs that end an episode start again from that episode's first state, as the
JAX SAC's (``TorchEnv(full_reset=False)``).

The run goes through the run driver every trainer shares: ``max(num_evals - 1, 1)`` epochs, each followed by a
checkpoint, an evaluation (torch_ppo's bridge evaluator: ``eval/*`` metrics) and ``progress_fn(env_steps,
metrics)``; an evaluation before training with ``num_evals > 1`` (after the prefill, which leaves the policy as it
was). An epoch reads the device once, for its metrics' means.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import torch
from tensordict import TensorDict

from brax_bridge import TorchEnv
from brax_core import envs
from brax_core.training import resume
from brax_core.training import validation as v
from brax_core.training.agents.sac.config import SACConfig, check_flat_observations
from brax_core.training.run.driver import ReportedMetrics, RunDriver, ignore
from brax_core.training.run.schedule import plan_updates
from torch_sac import checkpoint, losses
from torch_sac.networks import SACActor, TwinQ
from torch_sac.replay_buffer import ReplayBuffer
from torch_training.device import resolve_device
from torch_training.evaluation import BridgeEvaluator

# train_from_config's options: train's arguments that are not configuration fields.
OPTIONS = ("progress_fn", "policy_params_fn", "eval_env", "randomization_fn", "save_checkpoint_path",
           "restore_checkpoint_path")
METRICS = ("critic_loss", "actor_loss", "alpha_loss", "alpha")
ALPHA_LEARNING_RATE = 3e-4  # the JAX SAC's (Brax's) temperature step


class SACUpdate:
    """The networks, the temperature and their optimisers; ``sgd_step(batch, noise)`` is one SGD step."""

    def __init__(self, config: SACConfig, observation_size: int, action_size: int, device: torch.device):
        network, algorithm = config.network, config.algorithm
        self.config = config
        self.actor = SACActor(observation_size, action_size, network.policy_hidden_layer_sizes, network.activation,
                              network.layer_norm, algorithm.normalize_observations).to(device)
        self.critic = TwinQ(observation_size, action_size, network.value_hidden_layer_sizes, network.activation,
                            network.layer_norm).to(device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.zeros((), device=device, requires_grad=True)
        self.optimizers = {
            "actor": torch.optim.Adam(self.actor.parameters(), lr=algorithm.learning_rate),
            "critic": torch.optim.Adam(self.critic.parameters(), lr=algorithm.learning_rate),
            "alpha": torch.optim.Adam([self.log_alpha], lr=ALPHA_LEARNING_RATE),
        }
        self.entropy_target = losses.target_entropy(action_size)
        # The parameters each loss's gradient is taken for, listed once (every SGD step uses them).
        self._params = ([self.log_alpha], list(self.critic.parameters()), list(self.actor.parameters()))
        self._target_params = list(self.target_critic.parameters())

    def sgd_step(self, batch: TensorDict, noise: torch.Tensor) -> torch.Tensor:
        """One SGD step on ``batch`` (normalised observations) with ``noise`` ``[3, batch, action]`` (the
        temperature's, the critics' and the actor's draws); returns ``METRICS`` stacked, on the device."""
        algorithm = self.config.algorithm
        alpha = self.log_alpha.detach().exp()
        alpha_loss = losses.alpha_loss(self.log_alpha, self.actor, batch, noise[0], self.entropy_target)
        critic_loss = losses.critic_loss(
            self.critic, self.target_critic, self.actor, alpha, batch, noise[1], algorithm.reward_scaling,
            algorithm.discounting, algorithm.bootstrap_on_timeout,
        )
        actor_loss = losses.actor_loss(self.actor, self.critic, alpha, batch, noise[2])
        # Each gradient at the step's starting parameters (the actor's through the critics before their step).
        for loss, params in zip((alpha_loss, critic_loss, actor_loss), self._params, strict=True):
            for param, grad in zip(params, torch.autograd.grad(loss, params), strict=True):
                param.grad = grad
        for optimizer in self.optimizers.values():
            optimizer.step()
        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self._params[1], algorithm.tau)
            return torch.stack([critic_loss, actor_loss, alpha_loss, self.log_alpha.exp()]).detach()

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "target_critic": self.target_critic}


class SACBackend:
    """The torch SAC's side of the run driver (``brax_core.training.run.driver.Backend``): a training step is one
    env step of every env and ``grad_updates_per_step`` SGD steps."""

    def __init__(self, config: SACConfig, update: SACUpdate, env: TorchEnv, evaluator: BridgeEvaluator | None,
                 generator: torch.Generator, save_checkpoint_path: str | os.PathLike | None):
        self.config, self.update, self.env, self.evaluator = config, update, env, evaluator
        self.generator, self._path = generator, save_checkpoint_path
        self.buffer = ReplayBuffer(config.replay_capacity, env.observation_size, env.action_size, env.device)
        self.observation: torch.Tensor | None = None
        self.training_steps = 0
        self._metrics: dict[str, float] = {}
        self._sums: torch.Tensor | None = None

    # ---- acting

    def start(self) -> None:
        """A new run: the envs reset, then the prefill (``prefill_actor_steps`` steps of the initial policy)."""
        self.observation = self.env.reset().get("observation")
        for _ in range(self.config.prefill_actor_steps):
            self.act()

    @torch.no_grad()
    def act(self) -> None:
        """One step of every env with sampled actions; its transitions into the buffer, its observations into the
        statistics (after the policy saw them, as the JAX SAC)."""
        observation, actor = self.observation, self.update.actor
        loc, scale = actor(observation)
        noise = torch.randn(loc.shape, generator=self.generator, device=loc.device)
        action = actor.postprocess(loc + scale * noise)
        nxt = self.env.step(action).get("next")
        done, truncated = nxt.get("done").squeeze(-1), nxt.get("truncated").squeeze(-1)
        actor.normalizer.update(observation)
        self.buffer.insert(TensorDict({
            "observation": observation, "action": action, "reward": nxt.get("reward").squeeze(-1),
            "discount": 1.0 - done.float(), "truncation": truncated.float(),
            "next_observation": nxt.get("final_observation"),
        }, batch_size=[self.env.num_envs]))
        self.observation = nxt.get("observation")

    def training_step(self) -> torch.Tensor:
        """One env step of every env, then ``grad_updates_per_step`` SGD steps; their metrics' mean."""
        self.act()
        algorithm, actor = self.config.algorithm, self.update.actor
        updates, size = algorithm.grad_updates_per_step, algorithm.batch_size
        batches = self.buffer.sample(updates * size, self.generator)
        with torch.no_grad():  # both networks read the observations the statistics normalise, as of this step
            for key in ("observation", "next_observation"):
                batches.set(key, actor.normalizer(batches.get(key)))
        noise = torch.randn((updates, 3, size, self.env.action_size), generator=self.generator,
                            device=self.env.device)
        metrics = [self.update.sgd_step(batches[i * size:(i + 1) * size], noise[i]) for i in range(updates)]
        return torch.stack(metrics).mean(0)

    # ---- the run driver's Backend

    def skip_evaluations(self, count: int) -> None:
        """Nothing to skip: the evaluations draw from the run's generator, which a checkpoint restores."""

    def train(self, num_steps: int) -> None:
        sums = torch.zeros(len(METRICS), device=self.env.device)
        for _ in range(num_steps):
            sums += self.training_step()
            self.training_steps += 1
        self._sums = sums / max(num_steps, 1)
        if self.env.device.type == "cuda":
            torch.cuda.synchronize(self.env.device)  # the driver times the call

    def training_metrics(self) -> dict[str, float]:
        if self._sums is not None:  # the epoch's one host read
            self._metrics = dict(zip(METRICS, self._sums.tolist(), strict=True))
            self._metrics["buffer_current_size"] = float(self.buffer.size)
            self._sums = None
        return self._metrics

    def evaluate(self, training_metrics: dict[str, float]) -> ReportedMetrics:
        if self.evaluator is None:
            return dict(training_metrics)
        actor = self.update.actor
        actor.eval()
        metrics = self.evaluator.run(SimpleNamespace(policy=actor), self.config.run.deterministic_eval,
                                     self.generator)
        actor.train()
        return {**training_metrics, **metrics}

    def save(self, env_steps: int) -> None:
        if self._path is not None:
            checkpoint.save(self._path, self.config, env_steps, self.state_dict())

    def params(self) -> SACActor:
        return copy.deepcopy(self.update.actor)

    # ---- checkpoints

    def state_dict(self) -> dict[str, Any]:
        update = self.update
        return {
            "network": {"observation_size": self.env.observation_size, "action_size": self.env.action_size},
            "counters": {"training_steps": self.training_steps,
                         "evaluations": 0 if self.evaluator is None else self.evaluator.runs},
            "modules": {name: module.state_dict() for name, module in update.modules().items()},
            "log_alpha": update.log_alpha.detach().cpu(),
            "optimizers": {name: optimizer.state_dict() for name, optimizer in update.optimizers.items()},
            "generator": self.generator.get_state(),
            "env": self.env.state_dict(),
            "replay_buffer": self.buffer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        update = self.update
        for name, module in update.modules().items():
            module.load_state_dict(state["modules"][name])
        with torch.no_grad():
            update.log_alpha.copy_(state["log_alpha"])
        for name, optimizer in update.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])
        self.generator.set_state(state["generator"].cpu())
        self.buffer.load_state_dict(state["replay_buffer"])
        self.training_steps = state["counters"]["training_steps"]
        if self.evaluator is not None:
            self.evaluator.runs = state["counters"]["evaluations"]
        self.env.reset()
        self.observation = self.env.load_state_dict(state["env"])


def make_policy(actor: SACActor, deterministic: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """``act(observation) -> action``: the mode with ``deterministic``, else a sample (torch's global generator)."""

    @torch.inference_mode()
    def act(observation: torch.Tensor) -> torch.Tensor:
        loc, scale = actor(observation)
        return torch.tanh(loc if deterministic else loc + scale * torch.randn_like(loc))

    return act


def train(
    environment: Any,
    num_timesteps: int,
    episode_length: int | None = None,
    action_repeat: int = 1,
    num_envs: int = 1,
    num_eval_envs: int = 128,
    learning_rate: float = 1e-4,
    discounting: float = 0.9,
    seed: int = 0,
    batch_size: int = 256,
    num_evals: int = 1,
    normalize_observations: bool = False,
    reward_scaling: float = 1.0,
    tau: float = 0.005,
    min_replay_size: int = 0,
    max_replay_size: int | None = None,
    grad_updates_per_step: int = 1,
    deterministic_eval: bool = False,
    bootstrap_on_timeout: bool = True,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: str = "relu",
    layer_norm: bool = False,
    device: Any = None,
    max_to_keep: int | None = None,
    progress_fn: Callable[[int, ReportedMetrics], None] = ignore,
    policy_params_fn: Callable[..., None] = ignore,
    eval_env: Any = None,
    randomization_fn: Callable[..., Any] | None = None,
    save_checkpoint_path: str | os.PathLike | None = None,
    restore_checkpoint_path: str | os.PathLike | None = None,
) -> tuple[Callable[..., Any], SACActor, ReportedMetrics]:
    """Trains a SAC agent in torch (see the module docstring).

    Arguments have the JAX SAC's names, meanings and defaults (``help(brax_core.training.agents.sac.train.train)``);
    its ``make_sac_networks`` options are given by name (``hidden_layer_sizes`` for both networks, ``activation``,
    ``layer_norm``). They become one ``SACConfig``, which ``train_from_config`` trains. ``environment``: a registered
    name or a brax_core ``Env`` with flat observations. ``device``: the bridge's device rule (JAX's default device
    where torch can reach it, else the CPU). ``progress_fn(env_steps, metrics)`` after every evaluation;
    ``policy_params_fn(env_steps, make_policy, actor)`` before training and after every epoch.
    ``save_checkpoint_path``: a checkpoint of the whole run, replay buffer included, at every epoch's end
    (``torch_sac.load_policy`` rebuilds the policy from one); ``restore_checkpoint_path`` continues that run
    exactly, with the same arguments but ``num_timesteps``, which may grow.

    Returns ``(make_policy, actor, metrics)``: ``make_policy(actor, deterministic=False)`` gives
    ``act(observation) -> action``; ``actor`` is the trained ``SACActor``; ``metrics`` the last reported.
    """
    config = SACConfig.from_train_kwargs({
        "name": environment if isinstance(environment, str) else None, "num_timesteps": num_timesteps,
        "episode_length": episode_length, "action_repeat": action_repeat, "num_envs": num_envs,
        "num_eval_envs": num_eval_envs, "learning_rate": learning_rate, "discounting": discounting, "seed": seed,
        "batch_size": batch_size, "num_evals": num_evals, "normalize_observations": normalize_observations,
        "reward_scaling": reward_scaling, "tau": tau, "min_replay_size": min_replay_size,
        "max_replay_size": max_replay_size, "grad_updates_per_step": grad_updates_per_step,
        "deterministic_eval": deterministic_eval, "bootstrap_on_timeout": bootstrap_on_timeout,
        "hidden_layer_sizes": hidden_layer_sizes, "activation": activation, "layer_norm": layer_norm,
        "device": device, "max_to_keep": max_to_keep,
    })
    return train_from_config(
        config, environment, progress_fn=progress_fn, policy_params_fn=policy_params_fn, eval_env=eval_env,
        randomization_fn=randomization_fn, save_checkpoint_path=save_checkpoint_path,
        restore_checkpoint_path=restore_checkpoint_path,
    )


@dataclasses.dataclass(frozen=True)
class _Options:
    environment: Any
    eval_env: Any
    progress_fn: Callable[..., None]
    policy_params_fn: Callable[..., None]
    randomization_fn: Callable[..., Any] | None
    save_checkpoint_path: str | os.PathLike | None
    restore_checkpoint_path: str | os.PathLike | None


def _environment(name: str, environment: Any) -> Any:
    if isinstance(environment, str):
        envs.get_environment_class(environment)  # an unknown name raises here, listing the registered ones
        return environment
    if envs.is_env(environment):
        return envs.as_env(environment)
    raise TypeError(f"{name} must be a registered environment name or a brax_core Env, got {environment!r}")


def _checked_options(config: SACConfig, environment: Any, options: dict[str, Any]) -> _Options:
    SACConfig.check_train_options(config, options, OPTIONS)
    environment = config.env.name if environment is None else environment
    if environment is None:
        raise TypeError("environment must be given when config.env.name is None")
    environment = _environment("environment", environment)
    eval_env = options.get("eval_env")
    eval_env = environment if eval_env is None else _environment("eval_env", eval_env)
    if options.get("randomization_fn") is not None:
        v.callable_arg("randomization_fn", options["randomization_fn"])
    callbacks = {}
    for name, signature in (("progress_fn", "(env_steps, metrics)"),
                            ("policy_params_fn", "(env_steps, make_policy, params)")):
        callbacks[name] = resume.check_callback(name, v.callable_arg(name, options.get(name, ignore)), signature)
    return _Options(environment, eval_env, callbacks["progress_fn"], callbacks["policy_params_fn"],
                    options.get("randomization_fn"), options.get("save_checkpoint_path"),
                    options.get("restore_checkpoint_path"))


def train_from_config(config: SACConfig, environment: Any = None,
                      **options: Any) -> tuple[Callable[..., Any], SACActor, ReportedMetrics]:
    """Trains ``config`` (a ``SACConfig``, the JAX SAC's too) on ``environment`` (default: ``config.env.name``, a
    registered name), on ``config.run.device`` (``None``: the bridge's device rule). ``options``: ``train``'s
    arguments that are not config fields, by the same names (``OPTIONS``). Returns what ``train`` returns."""
    opts = _checked_options(config, environment, options)
    device = resolve_device(config.run.device, opts.environment)
    if opts.save_checkpoint_path is not None:
        config.to_json()  # a setting JSON cannot hold is refused before training
    saved = checkpoint.resumable(opts.restore_checkpoint_path, config)
    env_config, seed = config.env, config.run.seed
    common = dict(episode_length=env_config.episode_length, action_repeat=env_config.action_repeat, device=device,
                  randomization_fn=opts.randomization_fn)
    unwrapped = envs.get_environment(opts.environment) if isinstance(opts.environment, str) else opts.environment
    check_flat_observations("environment", unwrapped.observation_size)
    env = TorchEnv(opts.environment, env_config.num_envs, seed=seed, full_reset=False, **common)
    evaluator = None
    if config.run.num_evals > 0:
        evaluator = BridgeEvaluator(
            TorchEnv(opts.eval_env, env_config.num_eval_envs, seed=seed + 104_729, **common),
            -(-env.episode_length // env_config.action_repeat), env_config.action_repeat, seed,
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        update = SACUpdate(config, env.observation_size, env.action_size, device)
    generator = torch.Generator(device=device).manual_seed(seed)
    backend = SACBackend(config, update, env, evaluator, generator, opts.save_checkpoint_path)
    if saved is None:
        backend.start()
    else:
        backend.load_state_dict(saved)

    per_step = config.env_steps_per_training_step
    schedule = plan_updates(config.num_epochs * config.steps_per_epoch, config.run.num_evals,
                            backend.training_steps, per_step)
    driver = RunDriver(
        backend, num_evals=config.run.num_evals, progress_fn=opts.progress_fn,
        policy_params_fn=opts.policy_params_fn, save_checkpoint_path=opts.save_checkpoint_path,
        restore_checkpoint_path=opts.restore_checkpoint_path, make_policy=make_policy,
        env_steps=(config.prefill_actor_steps + backend.training_steps) * per_step,
    )
    metrics = driver.run(schedule, evaluate=evaluator is not None,
                         report_training_at_evaluation_points=evaluator is None)
    return make_policy, update.actor, metrics


__all__ = ["METRICS", "OPTIONS", "SACBackend", "SACUpdate", "make_policy", "train", "train_from_config"]
