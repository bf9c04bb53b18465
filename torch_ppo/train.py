"""PPO in PyTorch on brax_core environments through the bridge, with the JAX PPO's semantics and arguments.

``train`` checks its arguments (``arguments``: what each means and how it is checked), builds one process's
``trainer.Trainer`` (networks, Adam, envs, evaluator; restored from parameters or a checkpoint) and runs it through
the run driver both trainers share (``brax_core.training.run``). A training step is ``update.collect`` then
``update.PPOUpdate``; nothing in a training call reads a value back to the host but its metrics, once per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from brax_core.training.run.driver import RunDriver
from torch_ppo import arguments, distributed, network_factory
from torch_ppo.params import TorchPPOParams, params_of
from torch_ppo.trainer import Trainer

Metrics = dict[str, float]


def train(*args: Any, **kwargs: Any) -> tuple[Callable[..., Any], TorchPPOParams, Metrics]:
    # The signature is the hyperparameter schema's fields with torch_ppo's own arguments among them
    # (arguments.SIGNATURE, which help(train) and inspect.signature show); bound here as a def would bind it.
    if "wrap_env" in kwargs:  # the JAX trainer's argument, which a ported call may carry
        raise TypeError(
            f"torch_ppo.train takes no wrap_env (got wrap_env={kwargs['wrap_env']!r}): it wraps environment itself "
            "with brax_core.envs.training.wrap, as the JAX trainer's wrap_env=True does; pass the env before wrapping, "
            "a wrapper callable as wrap_env_fn, or a ready brax_bridge.TorchEnv"
        )
    bound = arguments.SIGNATURE.bind(*args, **kwargs)
    bound.apply_defaults()
    # The JAX trainer's network_factory (every preset's) becomes torch_ppo's own networks' options.
    defaults = {name: parameter.default for name, parameter in arguments.SIGNATURE.parameters.items()}
    given = network_factory.options_of_jax_factory(dict(bound.arguments), defaults)
    resolved_device = arguments.resolve_device(given["device"], given["environment"])
    dist = distributed.setup(resolved_device)
    threads_before = torch.get_num_threads()
    try:
        checked = arguments.parse(given, resolved_device, dist.world_size)
        if checked.num_threads is not None and resolved_device.type == "cpu":
            torch.set_num_threads(checked.num_threads)
        return _run(Trainer(checked, dist))
    finally:
        torch.set_num_threads(threads_before)
        distributed.teardown(dist)


train.__signature__ = arguments.SIGNATURE
# What every argument means: arguments.TRAIN_DOC, the text help(train) shows.
train.__doc__ = arguments.TRAIN_DOC


def _run(trainer: Trainer) -> tuple[Callable[..., Any], TorchPPOParams, Metrics]:
    """The run of one process: nothing to train past a restored checkpoint's steps, else the schedule."""
    hp, dist = trainer.hp, trainer.dist
    driver = RunDriver(
        trainer,
        trainer.args,
        make_policy=trainer.make_policy,
        env_steps=trainer.env_steps,
        main=dist.is_main,
        # A save needs every rank and a callback runs on rank 0 only: there the epoch's save (before the callbacks)
        # is what a failing callback leaves.
        save_before_failing_callback=not dist.enabled,
    )
    if hp.num_timesteps <= trainer.env_steps:
        driver.save()
        return trainer.make_policy, params_of(trainer.modules), {}
    trainer.build_envs()
    metrics = driver.run(driver.plan(trainer.steps_per_training_step), evaluate=trainer.evaluator is not None)
    return trainer.make_policy, params_of(trainer.modules), metrics
