"""``torch_ppo.train``'s arguments: what each means (``TRAIN_DOC``, the text ``help(train)`` shows) and their
checks.

The hyperparameters are the fields of the ``PPOConfig`` both trainers share (``brax_core.training.agents.ppo.config``):
``train``'s keywords of those names become one config (``train_from_config`` takes one as it is), checked by the
schema, so the messages are the JAX trainer's. ``parse`` checks the torch-only arguments and the process count and
returns one typed ``TrainArguments``, before anything is built.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

import torch

from brax_bridge import TorchEnv
from brax_core import envs
from brax_core.envs.base import Env
from brax_core.envs.wrappers import training as env_training
from brax_core.training import resume
from brax_core.training.agents.ppo.config import BY_NAME, KEYWORD_FIELDS, PPOConfig
from brax_core.training.agents.ppo.config import defaults as schema_defaults
from brax_core.training.run import checkpoints as run_checkpoints
from brax_core.training.validation import boolean as _bool
from brax_core.training.validation import callable_arg as _callable
from brax_core.training.validation import positive_int as _positive_int
from torch_ppo.evaluation import EVAL_BACKENDS
from torch_ppo.fused_collection import COLLECTIONS
from torch_training import network_factory as custom_networks
from torch_training.layers import resolve_kernel_init

TRAIN_DOC = """Trains a PPO agent with PyTorch on a brax_core environment stepped through ``brax_bridge.TorchEnv``.

Arguments have the names, meanings and defaults of ``brax_core.training.agents.ppo.train.train`` (see its docstring)
and are checked by the same schema (``brax_core.training.agents.ppo.config.PPOConfig``), so bad values are refused
with the JAX trainer's messages. In particular ``num_timesteps`` is the *total* step count, and a run restored from
a checkpoint counts from the checkpoint's steps. Only what the JAX trainer takes as a ``network_factory`` is given
here directly: ``policy_hidden_layer_sizes``, ``value_hidden_layer_sizes``, ``activation`` (a name such as
``'swish'`` or a callable), ``num_quantiles`` (the distributional critic's outputs) and the other
``make_ppo_networks`` options with its names, defaults and meanings (``distribution_type``, ``noise_std_type``,
``init_noise_std``, ``state_dependent_std``, ``mean_clip_scale``, ``policy_obs_key``/``value_obs_key`` for dict
observations, and the ``*_kernel_init_fn``/``_kwargs`` pairs, given by Brax's initialiser names or the
``jax.nn.initializers`` functions; ``delta_orthogonal``, a convolution initialiser, has no torch counterpart).
Networks of your own: ``network_factory=fn``, where ``fn(observation_size, action_size)`` returns
``(policy_module, value_module)``, two ``torch.nn.Module``s over normalised observations ``[batch,
observation_size]``; the policy module gives ``[batch, 2 * action_size]`` (the mean of each action dimension, then
its scale before the softplus: the JAX trainer's layout) and the value module ``[batch]`` or ``[batch, 1]``. The
normaliser, the tanh-squashed normal distribution, the losses, DDP, checkpoints and resume stay as they are; a
module of the wrong output size is refused before training, and the options of torch_ppo's own networks above must
keep their defaults beside it. Its actor evaluates through the bridge (``eval_backend='jax'`` is refused) and
``torch_ppo.load_policy(path, network_factory=fn)`` rebuilds it from a checkpoint (see
``torch_training.network_factory``).
The ``ADAPTIVE_KL`` learning-rate schedule changes Adam's learning rate (a tensor, so no host read) at every
minibatch from the minibatch's mean ``KL(behaviour || current)``, averaged over processes, and updates the
observation statistics after a batch's SGD, as the JAX trainer does; the clipped value loss compares with the
values the critic gave the batch before its SGD. ``use_pmap_on_reset`` is accepted and changes nothing: the
bridge resets all envs in one compiled call. Torch additions: ``device`` (default: a ready TorchEnv's device, else JAX's
default device where torch can reach it, else the CPU),
``torch_compile`` (the minibatch step as one ``torch.compile`` program: ``True``, ``False``, or ``None`` for runs
long enough to repay compiling it; ``torch_ppo.compiled_update``), ``num_threads`` (torch's intra-op threads on CPU
while training, restored on return; ``None`` keeps torch's setting). The default is 1: JAX's physics runs on its own
thread pool on the same cores, and torch's OpenMP workers waiting at barriers behind it slow
small ops down (benchmarks/results/startup.md). ``environment``/``eval_env`` may also be ready
``TorchEnv``s (with ``num_envs`` per process). On a CPU the training env's step compiles at LLVM level 0 (faster to
compile, slower to run) for runs too short for level 1 to repay its compile, and the evaluation
at the level the JAX trainer would choose for ``num_timesteps`` on this environment (see
``brax_core.compile.auto_level_for_run``: a physics step alone repays level 1 sooner than a trainer's whole
program); a ready ``TorchEnv`` keeps its own ``cpu_opt_level``. ``restore_params`` takes ``TorchPPOParams`` or the
JAX trainer's ``PPOTrainingParams``.
``wrap_env_fn`` is the JAX trainer's: a Brax-style wrapper ``fn(env, episode_length=, action_repeat=,
randomization_fn=)`` that replaces ``brax_core.envs.training.wrap`` for the training and evaluation envs (see
``TorchEnv``'s ``wrap_env_fn`` for what it must return); MuJoCo Playground's ``wrap_for_brax_training`` means
brax_core's own wrappers. A ready ``TorchEnv`` brings its own wrappers and episode length (an ``episode_length``
that differs from it is refused). ``max_checkpoints_to_keep`` is a deprecated alias of ``max_to_keep``.
``vision`` and ``augment_pixels`` exist for the JAX trainer's signature; torch_ppo has no image networks, so only
``False`` is accepted. So does ``wrap_env``: torch_ppo wraps its envs itself, and any value but ``None`` is refused.

Evaluation (``eval_backend``, a torch addition): ``'jax'`` copies the actor's weights into brax_core's networks
of the same layout and runs the JAX trainer's evaluation (its env, ``make_eval_env``, and its compiled rollout)
in one call per evaluation; ``'torch'`` has the torch actor step a separate ``TorchEnv`` of ``num_eval_envs``
envs through the bridge, a call per env step where ``'jax'`` makes one call per evaluation
(benchmarks/results/training-speed.md, "PPO parity"). Both report the same ``eval/*`` metrics. ``None`` (the
default) means ``'jax'``, except for an ``eval_env`` that is a ready ``TorchEnv`` or an actor brax_core's networks
cannot express (an activation function known to torch only), which go through the bridge; ``'jax'`` refuses those.

Collection (``collection``, a torch addition): ``'fused'`` collects a training step's unrolls of every env in one
compiled JAX program that runs the actor's live weights in brax_core's networks of the same layout
(``torch_ppo.fused_collection``), ``'bridge'`` has the torch actor step the env through the bridge, a call per env
step (for a ``TorchEnv`` your own code also steps, or to compare). Both give the same batch; the
``training/collection`` metric says which ran. ``None`` (the default) means ``'fused'``, except for an actor
brax_core's networks cannot express (``network_factory``'s modules, an activation function known to torch only),
a differentiable env or one with ``set_system`` fields, which go through the bridge; ``'fused'`` refuses those.

Resuming (``restore_checkpoint_path``) follows the JAX trainer: the checkpoint's saved configuration (env,
networks, training hyperparameters) must equal this call's unless the differing fields are named in
``allow_config_changes`` (``True``: any; sizes never), and with the same ``num_timesteps``, ``num_evals``,
``num_resets_per_eval`` and ``training_metrics_steps`` the resumed run continues the saved run's schedule (same
evaluation points and final step count; the same parameters bit for bit on CPU). ``progress_fn`` and
``policy_params_fn`` run after their step's checkpoint is saved; one that raises between evaluations has the
run saved first (single process), and its exception carries a note naming it.

Launched by ``torchrun`` with several processes, each owns ``num_envs / world_size`` envs (see
``torch_ppo.distributed``).

Returns:
  ``(make_policy, params, metrics)``: ``make_policy(params, deterministic=False)`` gives
  ``policy(observation, generator=None) -> (action, extras)``; ``params`` is
"""

# The defaults of torch_ppo.train's kernel-initialiser arguments (make_ppo_networks' own).
KERNEL_INIT_DEFAULTS: dict[str, Any] = {
    "policy_network_kernel_init_fn": "lecun_uniform",
    "policy_network_kernel_init_kwargs": None,
    "value_network_kernel_init_fn": "lecun_uniform",
    "value_network_kernel_init_kwargs": None,
    "mean_kernel_init_fn": None,
    "mean_kernel_init_kwargs": None,
}

# PPOModules' options beyond sizes, activation and normalisation: schema fields, then the kernel initialisers.
_SCHEMA_NETWORK_OPTIONS = (
    "distribution_type",
    "noise_std_type",
    "init_noise_std",
    "state_dependent_std",
    "mean_clip_scale",
    "policy_obs_key",
    "value_obs_key",
)
_KERNEL_INITS = ("policy_network_kernel_init", "value_network_kernel_init", "mean_kernel_init")


@dataclasses.dataclass(frozen=True)
class TrainArguments:
    """``train``'s arguments once checked: the hyperparameters as the schema validated them, and how to run."""

    config: PPOConfig
    environment: str | Env | TorchEnv
    eval_env: Env | TorchEnv | None
    eval_backend: str | None
    collection: str | None
    progress_fn: Callable[[int, Mapping[str, Any]], None]
    policy_params_fn: Callable[..., None]
    randomization_fn: Callable[..., Any] | None
    wrap_env_fn: Callable[..., Any] | None
    restore_params: Any | None
    restore_value_fn: bool
    restore_checkpoint_path: str | None
    save_checkpoint_path: str | os.PathLike | None
    allow_config_changes: bool | tuple[str, ...]
    # ``<layer>_kernel_init_fn`` and ``<layer>_kernel_init_kwargs`` for the policy, value and mean layers.
    kernel_inits: Mapping[str, Any]
    network_factory: custom_networks.NetworkFactory | None
    device: torch.device
    num_threads: int | None

    @property
    def network_options(self) -> dict[str, Any]:
        """``PPOModules``' keyword arguments beyond sizes, activation and normalisation."""
        fields = self.config.flat()
        return {
            **{name: fields[name] for name in _SCHEMA_NETWORK_OPTIONS},
            **self.kernel_inits,
            "network_factory": self.network_factory,
        }


def parse(
    arguments: Mapping[str, Any], device: torch.device, world_size: int, config: PPOConfig | None = None
) -> TrainArguments:
    """``train``'s keyword arguments, checked before anything is built (errors name the argument). ``config``: the
    run's ``PPOConfig`` (``train_from_config``), validated already; without it the config is built from the keyword
    arguments. Either way it records the trainer, the device and a registered env's name."""
    if arguments["wrap_env"] is not None:  # the JAX trainer's argument, which a ported call may carry
        raise TypeError(
            f"torch_ppo.train takes no wrap_env (got wrap_env={arguments['wrap_env']!r}): it wraps environment "
            "itself with brax_core.envs.training.wrap, as the JAX trainer's wrap_env=True does; pass the env before "
            "wrapping, a wrapper callable as wrap_env_fn, or a ready brax_bridge.TorchEnv"
        )
    environment = arguments["environment"]
    if isinstance(environment, str):
        envs.get_environment_class(environment)  # unknown names raise here, listing the registered ones
    elif envs.is_env(environment):
        environment = _unwrapped_env("environment", envs.as_env(environment))  # a Playground MjxEnv: a brax_core Env
    elif not isinstance(environment, TorchEnv):
        raise TypeError(
            "environment must be a brax_core Env, a MuJoCo Playground MjxEnv, a registered environment name "
            f"('playground:<task>' too) or a brax_bridge.TorchEnv, got {environment!r}"
        )
    for name in ("vision", "augment_pixels"):
        if arguments[name] is not False:
            raise ValueError(
                f"{name}={arguments[name]!r}: torch_ppo has no networks for image observations; train pixel "
                "observations with the JAX trainer (brax_core.training.agents.ppo.train, e.g. with "
                "networks_vision.make_ppo_networks_vision)"
            )
    if config is None:
        fields = {name: arguments[name] for name in KEYWORD_FIELDS}
        if arguments["max_checkpoints_to_keep"] is not None:  # deprecated alias of max_to_keep
            fields["max_to_keep"] = arguments["max_checkpoints_to_keep"]
        config = PPOConfig.from_flat(fields)
    elif config.run.trainer not in (None, "torch"):
        raise ValueError(
            f"config.run.trainer is {config.run.trainer!r}; this is torch_ppo: use config.replace(trainer='torch') "
            "(or None) to train the config here"
        )
    recorded = {"trainer": "torch", "device": str(device)}
    if isinstance(environment, str) and config.env.name is None:
        recorded["name"] = environment
    config = config.replace(**recorded)
    # Kernel initialisers are outside the schema (a name and its keyword arguments): resolved once here so a bad
    # one fails before any env compiles.
    kernel_inits = {}
    for prefix in _KERNEL_INITS:
        fn, kwargs = arguments[f"{prefix}_fn"], arguments[f"{prefix}_kwargs"]
        if fn is not None:
            resolve_kernel_init(f"{prefix}_fn", fn, f"{prefix}_kwargs", kwargs)
        elif kwargs:
            raise ValueError(f"{prefix}_kwargs needs {prefix}_fn")
        kernel_inits.update({f"{prefix}_fn": fn, f"{prefix}_kwargs": kwargs})
    restore_value_fn = _bool("restore_value_fn", arguments["restore_value_fn"])
    progress_fn, policy_params_fn = resume.checked_callbacks(arguments["progress_fn"], arguments["policy_params_fn"])
    allow_config_changes = resume.check_allow("allow_config_changes", arguments["allow_config_changes"])
    randomization_fn = arguments["randomization_fn"]
    if randomization_fn is not None:
        _callable("randomization_fn", randomization_fn)
    wrap_env_fn = _checked_wrap_env_fn(arguments["wrap_env_fn"], environment)
    eval_backend, eval_env = _checked_evaluation(arguments["eval_backend"], arguments["eval_env"])
    collection = _checked_collection(arguments["collection"], arguments["network_factory"])
    network_factory = _checked_network_factory(arguments, config, eval_backend)
    if config.env.num_envs % world_size != 0:
        raise ValueError(
            f"num_envs ({config.env.num_envs}) must be divisible by the number of processes ({world_size})"
        )
    if config.algorithm.batch_size % world_size != 0:
        raise ValueError(
            f"batch_size ({config.algorithm.batch_size}) must be divisible by the number of processes ({world_size})"
        )
    num_threads = arguments["num_threads"]
    if num_threads is not None:
        num_threads = _positive_int("num_threads", num_threads)
    save_checkpoint_path, restore_checkpoint_path = run_checkpoints.checked_paths(
        arguments["save_checkpoint_path"], arguments["restore_checkpoint_path"]
    )
    return TrainArguments(
        config=config,
        environment=environment,
        eval_env=eval_env,
        eval_backend=eval_backend,
        collection=collection,
        progress_fn=progress_fn,
        policy_params_fn=policy_params_fn,
        randomization_fn=randomization_fn,
        wrap_env_fn=wrap_env_fn,
        restore_params=arguments["restore_params"],
        restore_value_fn=restore_value_fn,
        restore_checkpoint_path=restore_checkpoint_path,
        save_checkpoint_path=save_checkpoint_path,
        allow_config_changes=allow_config_changes,
        kernel_inits=kernel_inits,
        network_factory=network_factory,
        device=device,
        num_threads=num_threads,
    )


def _checked_wrap_env_fn(wrap_env_fn: Any, environment: Any) -> Callable[..., Any] | None:
    """The JAX trainer's ``wrap_env_fn`` (``None``: brax_core's wrappers, which Playground's wrapper means too)."""
    if wrap_env_fn is None:
        return None
    _callable("wrap_env_fn", wrap_env_fn)
    if envs.playground.is_playground_training_wrapper(wrap_env_fn):
        return None  # brax_core's own wrappers do what Playground's do, as in the JAX trainer
    if isinstance(environment, TorchEnv):
        raise ValueError(
            "wrap_env_fn cannot apply to a ready TorchEnv (it is wrapped already): pass wrap_env_fn to TorchEnv, "
            "or give train the env itself"
        )
    return wrap_env_fn


def _checked_network_factory(
    arguments: Mapping[str, Any], config: PPOConfig, eval_backend: str | None
) -> custom_networks.NetworkFactory | None:
    """``network_factory``, refused beside an option of torch_ppo's own networks set away from its default (it
    would be ignored) and beside what its modules cannot give (see ``torch_training.network_factory``)."""
    network_factory = arguments["network_factory"]
    if network_factory is None:
        return None
    custom_networks.check_factory(network_factory)
    fields, defaults = config.flat(), schema_defaults()
    for name in custom_networks.BUILT_IN_OPTIONS:
        value = fields[name] if name in BY_NAME else arguments[name]
        default = defaults[name] if name in BY_NAME else KERNEL_INIT_DEFAULTS[name]
        if value != default:
            raise ValueError(
                f"{name}={value!r} sets torch_ppo's own networks, which network_factory replaces: leave {name} at "
                f"its default ({default!r}) and build that into network_factory's modules, or drop network_factory"
            )
    for name, allowed in (("distribution_type", "tanh_normal"), ("use_distributional_critic", False)):
        if fields[name] != allowed:
            raise ValueError(
                f"{name}={fields[name]!r} needs torch_ppo's own networks: network_factory's policy module gives "
                f"the 'tanh_normal' distribution's parameters and its value module one value; with network_factory "
                f"leave {name}={allowed!r}"
            )
    if eval_backend == "jax":
        raise ValueError(
            "eval_backend='jax' rebuilds the actor from brax_core's networks, which cannot rebuild network_factory's "
            "modules: pass eval_backend='torch' (or None, which evaluates a network_factory's actor through the bridge)"
        )
    return network_factory


def _checked_collection(collection: Any, network_factory: Any) -> str | None:
    """``collection``, checked: one of ``COLLECTIONS`` or None, and not ``'fused'`` for a ``network_factory``'s
    modules (which brax_core's networks cannot run)."""
    if collection is not None and collection not in COLLECTIONS:
        raise ValueError(f"collection must be one of {', '.join(COLLECTIONS)} or None, got {collection!r}")
    if collection == "fused" and network_factory is not None:
        raise ValueError(
            "collection='fused' runs the actor in brax_core's networks, which cannot run network_factory's modules: "
            "pass collection='bridge' (or None, which collects a network_factory's actor through the bridge)"
        )
    return collection


def _checked_evaluation(eval_backend: Any, eval_env: Any) -> tuple[str | None, Env | TorchEnv | None]:
    """``eval_backend`` and ``eval_env``, checked against each other."""
    if eval_backend is not None and eval_backend not in EVAL_BACKENDS:
        raise ValueError(f"eval_backend must be one of {', '.join(EVAL_BACKENDS)} or None, got {eval_backend!r}")
    if eval_backend == "jax" and isinstance(eval_env, TorchEnv):
        raise ValueError(
            "eval_backend='jax' evaluates on a brax_core env, but eval_env is a TorchEnv: pass the env itself (a "
            "name or an Env), or eval_backend='torch' (or None) to step the TorchEnv through the bridge"
        )
    if eval_env is None or isinstance(eval_env, TorchEnv):
        return eval_backend, eval_env
    if not envs.is_env(eval_env):
        raise TypeError(
            "eval_env must be a brax_core Env, a MuJoCo Playground MjxEnv, a brax_bridge.TorchEnv or None, "
            f"got {eval_env!r}"
        )
    return eval_backend, _unwrapped_env("eval_env", envs.as_env(eval_env))


def _unwrapped_env(name: str, env: Env) -> Env:
    """``env``, refused when it is wrapped for training already: torch_ppo wraps its envs itself (there is no
    ``wrap_env=False`` as in the JAX trainer), and a second wrapping fails deep inside JAX."""
    if env_training.training_wrappers(env):
        unwrapped = type(env.unwrapped).__name__
        raise ValueError(
            f"{name} is {env_training.describe_wrapping(env)}; torch_ppo.train wraps its envs itself "
            "(brax_core.envs.training.wrap inside its TorchEnv, or wrap_env_fn) and takes no wrap_env=False as the "
            f"JAX trainer does: pass the env before wrapping ({name}.unwrapped: the {unwrapped} env) "
            "with episode_length, action_repeat and randomization_fn given to train, or a ready brax_bridge.TorchEnv"
        )
    return env
