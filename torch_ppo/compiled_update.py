"""torch_ppo's minibatch step compiled whole: the loss, its gradients, clipping, ``ADAPTIVE_KL``, Adam and the
metric sums as one ``torch.compile`` program (two under DDP, with the gradient all-reduce between them); on a CPU
a whole pass over the batch, its minibatch steps scanned in one program.

Eagerly, a minibatch step launches a few hundred small operations from Python (the forward, autograd's backward,
Adam's per-tensor stages); at the minibatch sizes of the presets that launching, not arithmetic, is the cost. Here
``torch.func.grad`` differentiates the same loss (``update.LossModule``) and Adam is written over the optimiser's own
state tensors, so the compiler sees one function of fixed-shape tensors and fuses it into a few kernels. What is
left of a step's cost on a CPU is mostly the compiled call itself; scanning the pass's steps
(``torch._higher_order_ops.scan``, Adam's state carried from step to step) pays it once per pass
(benchmarks/results/training-speed.md, "The update's pass in one program").
Checkpoints hold the same ``torch.optim.Adam`` state either way, and the parameters after a step equal the eager
step's to float32 rounding (tests/test_torch_ppo_compiled_update.py).

``torch_compile`` chooses: ``True`` or ``False``, or ``None`` (the default) for the compiled step when the run is
long enough to repay compiling it (``use_compiled_update``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch._higher_order_ops.scan import scan
from torch.func import functional_call, grad

from brax_core.training.run.schedule import plan_run
from torch_ppo.losses import Batch, LossTerms
from torch_ppo.update import PPOUpdate, adapt_learning_rate, step_metrics
from torch_training.gradients import global_norm_scale

# Minibatch steps from which ``torch_compile=None`` compiles: below it, compiling costs more than the steps save
# (benchmarks/results/training-speed.md measures both on a CPU).
AUTO_MIN_MINIBATCH_STEPS = 20_000
# The same on a CUDA GPU, where the eager step's kernel launches cost more and the compiled step saves more per
# step, so a shorter run repays its compiling (benchmarks/results/gpu.md, "Where torch_ppo's training step goes").
AUTO_MIN_MINIBATCH_STEPS_CUDA = 4_000


def compile_options(device: torch.device) -> dict[str, Any]:
    """``torch.compile``'s arguments for the minibatch step's programs on ``device``.

    On a CPU, inductor's C++ wrapper: the compiled program calls its kernels from generated C++ instead of a
    generated Python function, whose launching is much of a step's cost at these sizes
    (benchmarks/results/training-speed.md, "Inductor's C++ wrapper on a CPU"). Elsewhere inductor's defaults.
    """
    options: dict[str, Any] = dict(fullgraph=True, dynamic=False)
    if torch.device(device).type == "cpu":
        options["options"] = {"cpp_wrapper": True}
    return options


def run_minibatch_steps(config: Any, env_steps_per_training_step: int) -> int:
    """The minibatch steps of the whole run the hyperparameters ``config`` (a ``PPOConfig``) plan
    (``brax_core.training.run.schedule.plan_run``); 0 for a run with nothing to train."""
    if config.run.num_timesteps <= 0:
        return 0
    training_steps = plan_run(config, 0, env_steps_per_training_step).training_steps
    return training_steps * config.algorithm.num_minibatches * config.algorithm.num_updates_per_batch


def use_compiled_update(
    torch_compile: bool | None,
    observation_size: int | Mapping[str, Any],
    minibatch_steps: int,
    device: torch.device | str = "cpu",
) -> bool:
    """Whether a run on ``device`` compiles its minibatch step: ``torch_compile`` when given; else for runs of at
    least ``AUTO_MIN_MINIBATCH_STEPS`` minibatch steps (``AUTO_MIN_MINIBATCH_STEPS_CUDA`` on a CUDA GPU) on flat
    observations. ``torch_compile=True`` with dict observations is a ``ValueError`` (the compiled step takes flat
    observation tensors)."""
    structured = isinstance(observation_size, Mapping)
    if torch_compile is None:
        cuda = torch.device(device).type == "cuda"
        threshold = AUTO_MIN_MINIBATCH_STEPS_CUDA if cuda else AUTO_MIN_MINIBATCH_STEPS
        return not structured and minibatch_steps >= threshold
    if torch_compile and structured:
        raise ValueError(
            "torch_compile=True compiles the update over flat observation tensors; this env's observations are a "
            f"dict of {sorted(observation_size)}: pass torch_compile=False or None"
        )
    return bool(torch_compile)


class CompiledPPOUpdate(PPOUpdate):
    """``PPOUpdate`` whose minibatch steps run as compiled code (see the module docstring).

    On a CPU a whole pass over the batch is one program: a ``scan`` of the minibatch steps, Adam's state carried
    from step to step and written back once, so the steps' launching costs one call instead of ``num_minibatches``
    (``scan_passes``). Elsewhere, and under DDP (whose all-reduce runs between a step's programs), each minibatch step
    is one call.

    ``fall_back``: a program that fails to compile logs why and the run continues eagerly (for the automatic choice);
    otherwise the error propagates. ``scan_passes``: None for the choice above; False compiles a step per call on a
    CPU too (what ``benchmarks/update_speed.py`` compares with).
    """

    def __init__(self, *args: Any, fall_back: bool = False, scan_passes: bool | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        group = self.optimizer.param_groups[0]
        if len(self.optimizer.param_groups) != 1 or group["amsgrad"] or group["weight_decay"] or group["maximize"]:
            raise ValueError("the compiled update implements plain Adam over one parameter group")
        loss = self.loss_module
        self._loss = loss.module if isinstance(loss, nn.parallel.DistributedDataParallel) else loss
        named = list(self._loss.named_parameters())
        self._names = [name for name, _ in named]
        self._params = [p for _, p in named]
        self._fall_back = fall_back
        self._eager = False  # compiling failed and the run fell back
        self._compiled_once = False
        # Adam's betas and its constant rate as double tensors on the device (Adam computes its bias corrections and
        # step size in double precision).
        self._betas = torch.tensor(group["betas"], dtype=torch.float64, device=self.device)
        self._constant_lr = torch.tensor(float(group["lr"]), dtype=torch.float64, device=self.device)
        options = compile_options(self.device)
        if scan_passes and self.dist.enabled:
            raise ValueError("scan_passes=True needs one process: under DDP each step's gradients are all-reduced")
        self.scan_passes = (
            not self.dist.enabled and torch.device(self.device).type == "cpu" if scan_passes is None else scan_passes
        )
        if self.dist.enabled:  # gradients, then the all-reduce outside, then the Adam step
            self._gradients_program = torch.compile(self._gradients, **options)
            self._apply_program = torch.compile(self._apply, **options)
        elif self.scan_passes:
            self._pass_program = torch.compile(self._pass, **options)
        else:
            self._step_program = torch.compile(self._step, **options)

    def __call__(self, rollout: Any) -> None:
        # Adam's bias corrections need beta ** step; the running powers (kept in double precision, as Adam computes
        # them) spare every element of every parameter a pow per step (the compiler would inline it).
        state = self.optimizer.state[self._params[0]]
        count = state["step"].to(self._betas) if state else torch.zeros_like(self._betas)
        self._beta_powers = torch.pow(self._betas, count)
        # Adam's state and rate once per batch, not per minibatch step (restoring a checkpoint, between batches,
        # replaces the state tensors).
        self._adam = (*self._adam_state(), self._beta_powers, self.metric_sums, self._lr())
        super().__call__(rollout)

    def sgd_pass(self, shuffled: Batch) -> None:
        if self._eager or not self.scan_passes:
            super().sgd_pass(shuffled)
            return
        algorithm = self.config.algorithm
        shape = (algorithm.unroll_length, self.local_batch, self.modules.action_size)
        # drawn one minibatch at a time, as the step-by-step pass draws them
        noise = torch.stack([self.entropy_noise(shape) for _ in range(algorithm.num_minibatches)])
        if not self._run_compiled(self._run_pass, shuffled, noise):
            for i in range(algorithm.num_minibatches):  # eagerly, with the same draws
                PPOUpdate.sgd_step(self, shuffled.map(lambda x, i=i: x[i]), noise[i])
        self.metric_count += algorithm.num_minibatches

    def sgd_step(self, minibatch: Batch, noise: torch.Tensor) -> None:
        if self._eager or not self._run_compiled(self._run_programs, minibatch, noise):
            super().sgd_step(minibatch, noise)

    def _run_compiled(self, run: Any, *args: Any) -> bool:
        """``run(*args)``; False where its first compile failed and the run falls back to the eager update."""
        # Every input of the compiled programs keeps its shape, dtype and strides from one call to the next, so once
        # compiled their guards need not be evaluated on each of the hundreds of calls per batch (they cost more
        # than the arithmetic at these sizes). Only these calls skip them.
        stance = (
            torch.compiler.set_stance("default", skip_guard_eval_unsafe=True)
            if self._compiled_once
            else contextlib.nullcontext()
        )
        try:
            with stance:
                run(*args)
        except Exception as error:
            if self._compiled_once or not self._fall_back:
                raise
            logging.warning(
                "torch_ppo trains with the eager update: compiling the minibatch step failed (%s: %s); pass "
                "torch_compile=False to choose it without trying",
                type(error).__name__,
                str(error).splitlines()[0] if str(error) else "",
            )
            self._eager = True
            return False
        self._compiled_once = True
        return True

    def _run_programs(self, minibatch: Batch, noise: torch.Tensor) -> None:
        if self.dist.enabled:
            grads, terms = self._gradients_program(self._params, minibatch, noise)
            grads, kl_mean = self._all_reduce(grads, terms.kl_mean)
            self._apply_program(self._params, grads, terms, kl_mean, *self._adam)
        else:
            self._step_program(self._params, minibatch, noise, *self._adam)

    def _run_pass(self, shuffled: Batch, noise: torch.Tensor) -> None:
        """One pass's program, then its results written into the parameters, Adam's state and the metric sums."""
        present = {field.name: getattr(shuffled, field.name) for field in dataclasses.fields(shuffled)}
        present = {name: value for name, value in present.items() if value is not None}
        exp_avgs, exp_avg_sqs, steps, beta_powers, metric_sums, lr = self._adam
        with torch.no_grad():  # the program's outputs need no graph (a graph's flag would also change its guards)
            params, avgs, avg_sqs, powers, new_lr, sums = self._pass_program(
                [p.detach() for p in self._params],
                exp_avgs,
                exp_avg_sqs,
                beta_powers,
                lr,
                tuple(present.values()),
                noise,
                tuple(present),
            )
            self._store(
                (self._params, exp_avgs, exp_avg_sqs, steps, beta_powers, metric_sums, lr),
                (params, avgs, avg_sqs, powers, new_lr, sums),
                noise.shape[0],
            )

    # ---------------------------------------------------------------- the compiled functions

    def _step(self, params, minibatch, noise, exp_avgs, exp_avg_sqs, steps, beta_powers, metric_sums, lr) -> None:
        grads, terms = self._gradients(params, minibatch, noise)
        self._apply(params, grads, terms, terms.kl_mean, exp_avgs, exp_avg_sqs, steps, beta_powers, metric_sums, lr)

    def _pass(self, params, exp_avgs, exp_avg_sqs, beta_powers, lr, inputs, noise, names) -> tuple[Any, ...]:
        """The minibatch steps of one pass as a ``scan`` over ``inputs`` (the present fields of ``Batch`` named
        ``names``, ``[minibatch, ...]``) and ``noise``: the new parameters, Adam's moments, beta powers and rate, and
        the sums of the steps' metrics."""
        count = len(params)

        def minibatch_step(carry, xs):
            params, exp_avgs, exp_avg_sqs = carry[:count], carry[count : 2 * count], carry[2 * count : 3 * count]
            beta_powers, lr = carry[-2], carry[-1]
            fields, step_noise = xs
            grads, terms = self._gradients(params, Batch(**dict(zip(names, fields, strict=True))), step_noise)
            *updated, lr, metrics = self._adam_update(
                params, grads, terms, terms.kl_mean, exp_avgs, exp_avg_sqs, beta_powers, lr
            )
            # a rate the step left as it was would be the carry's input itself, which a scan may not return
            lr = lr if self.adaptive_kl else lr.clone()
            return (*updated[0], *updated[1], *updated[2], updated[3], lr), metrics

        carry, metrics = scan(minibatch_step, (*params, *exp_avgs, *exp_avg_sqs, beta_powers, lr), (inputs, noise))
        return (
            carry[:count],
            carry[count : 2 * count],
            carry[2 * count : 3 * count],
            carry[-2],
            carry[-1],
            metrics.sum(0),
        )

    def _gradients(self, params, minibatch, noise) -> tuple[list[torch.Tensor], LossTerms]:
        def total_loss(named: dict[str, torch.Tensor]) -> tuple[torch.Tensor, LossTerms]:
            terms = functional_call(self._loss, named, (minibatch, noise))
            return terms.total_loss, terms

        grads, terms = grad(total_loss, has_aux=True)(dict(zip(self._names, params, strict=True)))
        return [grads[name] for name in self._names], terms

    def _apply(self, params, grads, terms, kl_mean, exp_avgs, exp_avg_sqs, steps, beta_powers, metric_sums, lr) -> None:
        """``_adam_update`` written into the parameters, Adam's state, the rate and the metric sums."""
        with torch.no_grad():
            new_params, avgs, avg_sqs, powers, new_lr, metrics = self._adam_update(
                params, grads, terms, kl_mean, exp_avgs, exp_avg_sqs, beta_powers, lr
            )
            self._store(
                (params, exp_avgs, exp_avg_sqs, steps, beta_powers, metric_sums, lr),
                (new_params, avgs, avg_sqs, powers, new_lr, metrics),
                1,
            )

    def _store(self, state: tuple[Any, ...], updated: tuple[Any, ...], step_count: int) -> None:
        """Writes ``_adam_update``'s results (or a pass's) into the live parameters, Adam's moments and step counts,
        the beta powers, the rate (under ``ADAPTIVE_KL``) and the metric sums, ``step_count`` minibatch steps on."""
        params, exp_avgs, exp_avg_sqs, steps, beta_powers, metric_sums, lr = state
        new_params, avgs, avg_sqs, powers, new_lr, metrics = updated
        torch._foreach_copy_(params, new_params)
        torch._foreach_copy_(exp_avgs, avgs)
        torch._foreach_copy_(exp_avg_sqs, avg_sqs)
        torch._foreach_add_(steps, float(step_count))
        beta_powers.copy_(powers)
        if self.adaptive_kl:
            lr.copy_(new_lr)
        metric_sums.add_(metrics)

    def _adam_update(self, params, grads, terms, kl_mean, exp_avgs, exp_avg_sqs, beta_powers, lr) -> tuple[Any, ...]:
        """Clipping, the learning-rate rule and Adam (``torch.optim.Adam``'s arithmetic) as new tensors: the
        parameters, Adam's moments, the beta powers, the rate and the step's metrics."""
        config = self.config
        # The norm as sums of squares, which the compiler fuses into few loops; _foreach_norm compiles to slower code
        # here (benchmarks/results/training-speed.md, "Training speed across the diagnostics").
        norm = torch.stack([g.square().sum() for g in grads]).sum().sqrt()
        if config.algorithm.max_grad_norm is not None:
            scale = global_norm_scale(norm, config.algorithm.max_grad_norm)
            grads = [g * scale for g in grads]
        if self.adaptive_kl:
            lr = adapt_learning_rate(
                lr,
                kl_mean,
                config.algorithm.desired_kl,
                config.algorithm.learning_rate_schedule_min_lr,
                config.algorithm.learning_rate_schedule_max_lr,
            )
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        beta_powers = beta_powers * self._betas
        step_size = (lr / (1 - beta_powers[0])).to(torch.float32)
        correction2_sqrt = torch.sqrt(1 - beta_powers[1]).to(torch.float32)
        exp_avgs = [exp_avg.lerp(g, 1 - beta1) for exp_avg, g in zip(exp_avgs, grads, strict=True)]
        exp_avg_sqs = [(sq * beta2).addcmul(g, g, value=1 - beta2) for sq, g in zip(exp_avg_sqs, grads, strict=True)]
        params = [
            param - step_size * exp_avg / (exp_avg_sq.sqrt() / correction2_sqrt + group["eps"])
            for param, exp_avg, exp_avg_sq in zip(params, exp_avgs, exp_avg_sqs, strict=True)
        ]
        metrics = torch.stack([value.to(torch.float32) for value in step_metrics(self.metric_names, terms, norm, lr)])
        return params, exp_avgs, exp_avg_sqs, beta_powers, lr, metrics

    # ---------------------------------------------------------------- eager glue

    def _adam_state(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """Adam's ``exp_avg``, ``exp_avg_sq`` and ``step`` per parameter, created as ``torch.optim.Adam`` creates
        them."""
        state = self.optimizer.state
        for param in self._params:
            if not state[param]:
                capturable = self.optimizer.param_groups[0]["capturable"]
                state[param]["step"] = torch.zeros((), dtype=torch.float32, device=param.device if capturable else None)
                state[param]["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state[param]["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        return tuple([state[p][key] for p in self._params] for key in ("exp_avg", "exp_avg_sq", "step"))

    def _lr(self) -> Any:
        """Adam's rate: a tensor under ``ADAPTIVE_KL`` (changed in place), else the constant."""
        lr = self.optimizer.param_groups[0]["lr"]
        return lr if isinstance(lr, torch.Tensor) else self._constant_lr

    def _all_reduce(self, grads: list[torch.Tensor], kl_mean: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Every process's mean gradient (one flat all-reduce, as DDP averages) and mean minibatch KL."""
        flat = torch.cat([g.reshape(-1) for g in grads] + [kl_mean.reshape(1)])
        torch.distributed.all_reduce(flat, group=self.dist.group)
        flat /= self.dist.world_size
        parts = flat.split([g.numel() for g in grads] + [1])
        return [part.view_as(g) for part, g in zip(parts, grads, strict=False)], parts[-1][0]
