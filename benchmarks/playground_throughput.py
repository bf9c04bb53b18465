"""Steps/s of a torch policy driving MuJoCo Playground's ``CheetahRun`` through each torch route, and the fused limit.

One process, side by side, at ``--num-envs`` envs; the same MLP (observation -> 64 tanh -> 64 tanh -> action,
tanh-squashed; identical weights everywhere, one torch thread) drives

(a) Playground's own torch wrapper, ``mujoco_playground.wrapper_torch.RSLRLBraxWrapper`` (its
    ``wrap_for_brax_training``: Brax's vmap, episode and auto-reset wrappers, jitted step),
(b) TorchRL's ``torchrl.envs.MujocoPlaygroundWrapper`` (a ``vmap`` of the jitted raw task step: no time limit
    and no auto-reset; CheetahRun never terminates, so the loop is the same work without them),
(c) one jitted ``lax.scan`` of (a)'s wrapped step with a JAX copy of the policy (no torch, no per-step dispatch:
    the limit for this loop); compiled with XLA's defaults as (a) and (b) are, and as (c') with the bridge's XLA
    options (LLVM level 1 on a CPU, what (d) and (e) compile with),
(d) ``brax_bridge.TorchEnv("playground:CheetahRun", ...)`` with the torch policy (copies counted on its hot path),
(e) the bridge's TorchRL adapter ``brax_bridge.torchrl.BraxBridgeEnv`` on the same task (it shares (d)'s compiled
    step).

Every Playground env is loaded with MJX's JAX implementation (``impl="jax"``; the task's default is Warp, which
needs an NVIDIA GPU). Every contender is built and run once for ``--steps`` steps before timing (that warm-up
compiles, including the recompile a weakly typed reset causes); then repetitions alternate between the contenders
so that load hits all alike, and the median of ``--repeats`` is reported. Policy evaluation (torch, or JAX inside
the scan) is part of every loop.

    pip install -e ".[playground,torchrl,rsl-rl]"
    python benchmarks/playground_throughput.py [--num-envs 1024] [--steps 150] [--repeats 3] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import platform
import statistics
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _results import add_write_option, replace_section  # noqa: E402  (benchmarks/ is first on sys.path)

import brax_bridge  # noqa: E402  (first: configures GPU memory sharing before JAX starts)
from brax_bridge import env as bridge_env  # noqa: E402
from brax_bridge.torchrl import BraxBridgeEnv  # noqa: E402

SECTION = "## MuJoCo Playground throughput"
TASK = "CheetahRun"
FUSED = "(c) fused `lax.scan`, JAX policy"
FUSED_BRIDGE_OPTIONS = "(c') the same, with the bridge's XLA options"


def _torchrl_loop(env: Any, policy: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[int], None]:
    """``run(n)``: ``n`` steps of a TorchRL-style env (TensorDict in, ``("next", ...)`` out) driven by ``policy``,
    continuing from where the previous call stopped."""
    state = {"td": env.reset()}

    def run(n: int) -> None:
        td = state["td"]
        for _ in range(n):
            td["action"] = policy(td["observation"])
            td = env.step(td).get("next")
        state["td"] = td

    return run


def _load_playground():
    import mujoco_playground

    return mujoco_playground


def _pg_env(mujoco_playground):
    # CheetahRun's default implementation is MuJoCo Warp (NVIDIA only); every contender runs MJX's JAX one.
    return mujoco_playground.registry.load(TASK, config_overrides={"impl": "jax"})


def _mlp_params(obs_size: int, action_size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    sizes = [obs_size, 64, 64, action_size]
    return [
        (rng.normal(size=(i, o)).astype(np.float32) / np.sqrt(i), (rng.normal(size=o) * 0.1).astype(np.float32))
        for i, o in zip(sizes[:-1], sizes[1:], strict=True)
    ]


def _torch_policy(params: list[tuple[np.ndarray, np.ndarray]]) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for w, b in params:
        linear = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(w.T.copy()))
            linear.bias.copy_(torch.from_numpy(b))
        layers += [linear, torch.nn.Tanh()]  # hidden activations and the final squashing into [-1, 1]
    return torch.nn.Sequential(*layers)


def _jax_policy(params, obs: jax.Array) -> jax.Array:
    x = obs
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return x


def contenders(num_envs: int, steps: int) -> tuple[dict[str, Callable[[int], None]], dict[str, str], dict]:
    """name -> ``run(steps)``, notes on contenders that could not be built, and the bridge's handles.

    Each contender is built here; the first timed call of each is the warm-up that compiles it."""
    t0 = time.perf_counter()
    mujoco_playground = _load_playground()
    probe = _pg_env(mujoco_playground)
    obs_size, action_size = int(probe.observation_size), int(probe.action_size)
    params = _mlp_params(obs_size, action_size)
    policy = _torch_policy(params)
    out: dict[str, Callable[[int], None]] = {}
    missing: dict[str, str] = {}

    print(f"  loaded Playground: {time.perf_counter() - t0:.0f} s", flush=True)

    # (a) Playground's wrapper prints its setup; keep the benchmark's output to the table.
    with contextlib.redirect_stdout(io.StringIO()):
        rsl = mujoco_playground.wrapper_torch.RSLRLBraxWrapper(
            _pg_env(mujoco_playground), num_envs, seed=0, episode_length=1000, action_repeat=1
        )
    rsl_state = {"obs": rsl.reset()}

    def run_rsl(n: int) -> None:
        obs = rsl_state["obs"]
        for _ in range(n):
            obs = rsl.step(policy(obs["state"]))[0]
        rsl_state["obs"] = obs

    out["(a) Playground `RSLRLBraxWrapper`"] = run_rsl
    print(f"  built (a): {time.perf_counter() - t0:.0f} s", flush=True)

    # (b) TorchRL's own Playground wrapper, where the installed TorchRL has one.
    try:
        from torchrl.envs import MujocoPlaygroundWrapper
    except ImportError as err:
        missing["(b) TorchRL `MujocoPlaygroundWrapper`"] = f"not in torchrl {metadata.version('torchrl')} ({err})"
    else:
        trl = MujocoPlaygroundWrapper(_pg_env(mujoco_playground), batch_size=[num_envs], device="cpu")
        trl.set_seed(0)
        out["(b) TorchRL `MujocoPlaygroundWrapper`"] = _torchrl_loop(trl, policy)
        print(f"  built (b): {time.perf_counter() - t0:.0f} s", flush=True)

    # (c) The same wrapped env as (a), stepped by one compiled scan with the JAX copy of the policy: once with XLA's
    # default options (as (a) and (b) compile), once with the bridge's (LLVM level 1 on a CPU), so that (d) can be
    # read against the same program options too.
    wrapped = mujoco_playground.wrapper.wrap_for_brax_training(
        _pg_env(mujoco_playground), episode_length=1000, action_repeat=1
    )
    jparams = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
    start = jax.jit(wrapped.reset)(jax.random.split(jax.random.PRNGKey(0), num_envs))
    for name, options in ((FUSED, None), (FUSED_BRIDGE_OPTIONS, bridge_env.compiler_options(jax.devices("cpu")[0]))):

        @functools.partial(jax.jit, static_argnums=2, donate_argnums=0, compiler_options=options)
        def rollout(state, p, n: int):
            def body(s, _):
                return wrapped.step(s, _jax_policy(p, s.obs)), ()

            return jax.lax.scan(body, state, (), length=n)[0]

        # CheetahRun's reset gives a weakly typed ``data.time`` and the step a strong one: started from the reset as
        # it is, the scan would compile a second time on its second call (inside the timed rounds).
        fused_state = {"s": jax.tree.map(lambda x: jnp.array(x, x.dtype, copy=True), start)}

        def run_fused(n: int, rollout=rollout, fused_state=fused_state) -> None:
            fused_state["s"] = rollout(fused_state["s"], jparams, n)
            jax.block_until_ready(fused_state["s"].obs)

        out[name] = run_fused
    print(f"  built (c): {time.perf_counter() - t0:.0f} s", flush=True)

    # (d) The bridge.
    torch_env = brax_bridge.TorchEnv(f"playground:{TASK}", num_envs, seed=0)
    bridge_state = {"obs": torch_env.reset()["observation"]}

    def run_bridge(n: int) -> None:
        obs = bridge_state["obs"]
        for _ in range(n):
            obs = torch_env.step(policy(obs))["next", "observation"]
        bridge_state["obs"] = obs

    out["(d) `TorchEnv`"] = run_bridge
    print(f"  built (d): {time.perf_counter() - t0:.0f} s", flush=True)

    # (e) The bridge's TorchRL adapter (same configuration as (d): it reuses (d)'s compiled step).
    adapter = BraxBridgeEnv(f"playground:{TASK}", num_envs, seed=0)
    out["(e) brax_bridge TorchRL adapter `BraxBridgeEnv`"] = _torchrl_loop(adapter, policy)
    return out, missing, {"torch_env": torch_env, "obs_size": obs_size, "action_size": action_size}


def measure(
    runs: dict[str, Callable[[int], None]], num_envs: int, steps: int, repeats: int, counted: str
) -> tuple[dict[str, float], dict[str, float], int]:
    """Median seconds per step of each contender over ``repeats`` alternating rounds, the warm-up's seconds per
    contender, and the bridge copies made during ``counted``'s timed rounds."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    warmup: dict[str, float] = {}
    copies = 0
    with torch.inference_mode():
        for name, run in runs.items():
            start = time.perf_counter()
            run(steps)  # compiles; the fused scan compiles for exactly this length
            warmup[name] = time.perf_counter() - start
            print(f"warm-up {name}: {warmup[name]:.0f} s", flush=True)
        for r in range(repeats):
            for name, run in runs.items():
                before = brax_bridge.stats().copies
                start = time.perf_counter()
                run(steps)
                times[name].append((time.perf_counter() - start) / steps)
                if name == counted:
                    copies += brax_bridge.stats().copies - before
            rates = ", ".join(f"{n}: {num_envs / t[-1]:,.0f}" for n, t in times.items())
            print(f"round {r + 1} (steps/s): {rates}", flush=True)
    return {name: statistics.median(t) for name, t in times.items()}, warmup, copies


def _versions() -> str:
    names = ("jax", "mujoco", "mujoco-mjx", "playground", "brax", "torch", "torchrl", "tensordict")
    found = []
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name} {metadata.version(name)}")
    return ", ".join(found)


def render(
    per_step: dict[str, float],
    missing: dict[str, str],
    num_envs: int,
    steps: int,
    repeats: int,
    copies: int,
    compiles: int,
    load: tuple[float, float],
    info: dict,
) -> str:
    fused = num_envs / per_step[FUSED]
    lines = [
        SECTION,
        "",
        f"Command: `python benchmarks/playground_throughput.py --num-envs {num_envs} --steps {steps} "
        f"--repeats {repeats} --write`  ",
        f"Machine: 2-core CPU without a GPU ({platform.machine()}, {os.cpu_count()} cores); {_versions()}. "
        f"1-minute load average {load[0]:.1f} before, {load[1]:.1f} after.  ",
        f'Task: Playground `{TASK}` (MJX `impl="jax"`, observation {info["obs_size"]}, action '
        f"{info['action_size']}), {num_envs} envs, time limit 1000. Policy: MLP {info['obs_size']}-64-64-"
        f"{info['action_size']} (tanh), identical weights in torch and (c)'s JAX copy; one torch thread, torch "
        f"loops under `torch.inference_mode`. {steps} timed steps per repetition after a warm-up of as many (which "
        f"compiles); {repeats} repetitions alternating between the drivers, medians shown.",
        "",
        "| driver | steps/s | vs (c) fused scan |",
        "| --- | ---: | ---: |",
    ]
    for name, seconds in per_step.items():
        rate = num_envs / seconds
        lines.append(f"| {name} | {rate:,.0f} | {rate / fused:.2f}x |")
    for name, why in missing.items():
        lines.append(f"| {name} | not measured: {why} | |")
    lines += [
        "",
        f"(d) `TorchEnv`: {copies} copies made by the bridge on its hot path over {repeats * steps} timed steps; "
        f"its step compiled {compiles} time(s) (shared with (e)). (a) reads each of the task's metrics to the host "
        "every step (`.item()`, its logging); (b) has no time limit or auto-reset; (c) is compiled with "
        "XLA's defaults, as (a) and (b) are; (c') and the bridge's step with the bridge's (LLVM level 1 on a CPU).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=150, help="timed steps per repetition (and of the warm-up)")
    parser.add_argument("--repeats", type=int, default=3)
    add_write_option(parser)
    args = parser.parse_args(argv)
    for name in ("num_envs", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
    torch.set_num_threads(1)

    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    runs, missing, info = contenders(args.num_envs, args.steps)
    print(f"built the drivers (their resets compile): {time.perf_counter() - start:.0f} s", flush=True)
    per_step, _, copies = measure(runs, args.num_envs, args.steps, args.repeats, counted="(d) `TorchEnv`")
    load_after = os.getloadavg()[0]
    text = render(
        per_step,
        missing,
        args.num_envs,
        args.steps,
        args.repeats,
        copies,
        info["torch_env"].num_compiles,
        (load_before, load_after),
        info,
    )
    print(text)
    if args.write is not None:
        print(f"wrote {SECTION!r} to {replace_section(args.write, SECTION, text.removeprefix(SECTION))}")
    return {name: args.num_envs / s for name, s in per_step.items()}


if __name__ == "__main__":
    main()
