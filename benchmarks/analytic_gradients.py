"""What a gradient through the physics costs: time of one backward through a horizon against its forward, per env,
and memory over a long analytic-gradient run.

``cost``: for each env, a ``TorchEnv(differentiable=True)`` and an APG policy (``torch_analytic.networks.APGPolicy``)
unroll ``--horizon`` steps three ways, alternating within each repetition: without gradients (``no_grad``: the plain
compiled step), recording the graph (the differentiable forward: ``jax.vjp`` keeps the residuals), and the backward
of minus the mean reward through it. The median of ``--repeats`` timed repetitions after one warm-up.

``memory``: ``torch_analytic.apg.train`` for ``--env-steps`` differentiable env steps, the process's resident memory
(``/proc/self/statm``) and its peak (``ru_maxrss``) read after every evaluation; the peak at the end against the peak
at 10 % of the run. A graph kept alive across updates (the leak TorchRL's ``BraxWrapper(requires_grad=True)`` had)
would grow both with every update.

    python benchmarks/analytic_gradients.py cost          # fast, inverted_pendulum, halfcheetah, ant, humanoid
    python benchmarks/analytic_gradients.py memory --env-steps 1000000
    python benchmarks/analytic_gradients.py cost --write  # also rewrites its section of its results page
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import torch  # noqa: E402
from _results import replace_section  # noqa: E402  (benchmarks/ is first on sys.path)

from brax_bridge import TorchEnv  # noqa: E402
from torch_analytic import apg, shac  # noqa: E402
from torch_analytic.networks import APGPolicy  # noqa: E402

COST_SECTION = "## Gradients through the physics, backward against forward"
NORM_SECTION = "## Gradients through the physics, gradient norms against the horizon"
MEMORY_SECTION = "## Gradients through the physics, memory over a long run"
ENVS = ("fast", "inverted_pendulum", "halfcheetah", "ant", "humanoid")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def resident_mib() -> float:
    """The process's resident memory now (Linux ``/proc/self/statm``), in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_SIZE / 2**20


def peak_mib() -> float:
    """The process's peak resident memory so far (``ru_maxrss``, KiB on Linux), in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def unroll(env: TorchEnv, policy: APGPolicy, observation: torch.Tensor, horizon: int, generator: torch.Generator):
    """Minus the mean reward of ``horizon`` policy steps from ``observation``, and the last observation."""
    rewards = []
    for _ in range(horizon):
        noise = torch.randn((env.num_envs, env.action_size), generator=generator, device=env.device)
        nxt = env.step(policy.act(observation, noise)).get("next")
        rewards.append(nxt.get("reward"))
        observation = nxt.get("observation")
    return -torch.stack(rewards).mean(), observation


def cost(env_name: str, num_envs: int, horizon: int, repeats: int) -> dict[str, float]:
    """Median seconds of the three unrolls of ``env_name`` (see the module docstring) and their ratios."""
    env = TorchEnv(env_name, num_envs, differentiable=True, seed=0)
    torch.manual_seed(0)
    policy = APGPolicy(env.observation_size, env.action_size).to(env.device)
    generator = torch.Generator(device=env.device).manual_seed(0)
    observation = env.reset().get("observation")
    times: dict[str, list[float]] = {"no_grad": [], "forward": [], "backward": []}
    for repetition in range(repeats + 1):
        env.detach()
        start = time.perf_counter()
        with torch.no_grad():
            _, observation = unroll(env, policy, observation, horizon, generator)
        plain = time.perf_counter() - start
        env.detach()
        start = time.perf_counter()
        loss, observation = unroll(env, policy, observation.detach(), horizon, generator)
        loss.detach().item()  # the forward has run (the CPU backend runs eagerly; this waits on any device)
        forward = time.perf_counter() - start
        start = time.perf_counter()
        loss.backward()
        torch.stack([p.grad.sum() for p in policy.parameters()]).sum().item()
        backward = time.perf_counter() - start
        policy.zero_grad(set_to_none=True)
        observation = observation.detach()
        if repetition:  # the first compiles
            times["no_grad"].append(plain)
            times["forward"].append(forward)
            times["backward"].append(backward)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        **med,
        "backward_over_forward": med["backward"] / med["forward"],
        "forward_over_no_grad": med["forward"] / med["no_grad"],
        "env_steps_per_s_training": num_envs * horizon / (med["forward"] + med["backward"]),
    }


def gradient_norms(env_name: str, num_envs: int, horizons: list[int], samples: int) -> dict[int, dict[str, float]]:
    """For each horizon, the global norm of the APG policy gradient (minus the mean reward of an unroll, as
    ``apg_loss``) over ``samples`` successive windows of a fixed, untrained policy from states spread by a warm-up:
    median, mean, coefficient of variation (std / mean), largest, and how many were not finite."""
    env = TorchEnv(env_name, num_envs, differentiable=True, seed=0)
    torch.manual_seed(0)
    policy = APGPolicy(env.observation_size, env.action_size).to(env.device)
    generator = torch.Generator(device=env.device).manual_seed(0)
    observation = env.reset().get("observation")
    with torch.no_grad():  # spread the envs over their episodes
        _, observation = unroll(env, policy, observation, 50, generator)
    out = {}
    for horizon in horizons:
        norms = []
        for _ in range(samples):
            env.detach()
            loss, observation = unroll(env, policy, observation.detach(), horizon, generator)
            policy.zero_grad(set_to_none=True)
            loss.backward()
            norms.append(float(torch.stack([p.grad.square().sum() for p in policy.parameters()]).sum().sqrt()))
            observation = observation.detach()
        finite = [n for n in norms if math.isfinite(n)]
        mean = statistics.fmean(finite) if finite else float("nan")
        out[horizon] = {
            "median": statistics.median(finite) if finite else float("nan"),
            "mean": mean,
            "cv": statistics.pstdev(finite) / mean if len(finite) > 1 and mean > 0 else float("nan"),
            "max": max(finite) if finite else float("nan"),
            "not_finite": len(norms) - len(finite),
        }
        print(env_name, horizon, json.dumps({k: round(v, 4) for k, v in out[horizon].items()}), flush=True)
    return out


def memory(
    algo: str, env_name: str, env_steps: int, num_envs: int, horizon: int, num_evals: int
) -> dict[str, object]:
    """Resident and peak memory after each evaluation of an ``algo`` (apg, shac) run of ``env_steps``
    differentiable env steps."""
    updates = max(env_steps // (num_envs * horizon), num_evals)
    readings: list[dict[str, float]] = []

    def record(epoch: int, metrics: dict[str, float]) -> None:
        readings.append(
            {
                "epoch": epoch,
                "resident_mib": resident_mib(),
                "peak_mib": peak_mib(),
                "live_jax_arrays": len(jax.live_arrays()),
            }
        )

    start = time.perf_counter()
    {"apg": apg, "shac": shac}[algo].train(
        env_name, episode_length=1000, policy_updates=updates, horizon_length=horizon, num_envs=num_envs,
        num_evals=num_evals + 1, num_eval_envs=16, progress_fn=record,
    )
    trained = readings[1:]  # after each evaluation during training (readings[0]: before it)
    first = trained[0]
    return {
        "env": env_name,
        "algo": algo,
        "env_steps": updates * num_envs * horizon,
        "seconds": time.perf_counter() - start,
        "readings": readings,
        "peak_growth": trained[-1]["peak_mib"] / first["peak_mib"] - 1.0,
        "resident_growth": trained[-1]["resident_mib"] / first["resident_mib"] - 1.0,
    }


def _machine() -> str:
    load = os.getloadavg()[0]
    return (
        f"{os.cpu_count()}-core {platform.machine()} CPU, JAX {jax.__version__} ({jax.default_backend()}), torch "
        f"{torch.__version__}, load average {load:.2f}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("cost", "memory", "norms"))
    parser.add_argument("--horizons", default="4,8,16,32,64", help="norms: the horizons to measure")
    parser.add_argument("--samples", type=int, default=12, help="norms: windows per horizon")
    parser.add_argument("--envs", default=",".join(ENVS))
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--horizon", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--env-steps", type=int, default=1_000_000)
    parser.add_argument("--num-evals", type=int, default=10)
    parser.add_argument("--algos", default="apg,shac", help="memory: the torch trainers to run, apg and/or shac")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's section of its results page")
    args = parser.parse_args(argv)
    command = "python benchmarks/analytic_gradients.py " + " ".join(sys.argv[1:] if argv is None else argv)
    names = [n for n in args.envs.split(",") if n]
    if args.what == "cost":
        rows = {}
        for name in names:
            rows[name] = cost(name, args.num_envs, args.horizon, args.repeats)
            print(name, json.dumps({k: round(v, 4) for k, v in rows[name].items()}), flush=True)
        lines = [
            f"`{command}`; {_machine()}; {args.num_envs} envs, a horizon of {args.horizon} steps, APG's policy "
            f"(4 × 32, layer norm), medians of {args.repeats} repetitions, the three unrolls alternating.",
            "",
            "| env | unroll without gradients (s) | differentiable forward (s) | backward (s) | backward / forward "
            "| forward / without gradients | env steps/s, forward + backward |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, r in rows.items():
            lines.append(
                f"| `{name}` | {r['no_grad']:.3f} | {r['forward']:.3f} | {r['backward']:.3f} | "
                f"{r['backward_over_forward']:.2f} | {r['forward_over_no_grad']:.2f} | "
                f"{r['env_steps_per_s_training']:,.0f} |"
            )
        result: object = rows
        section = COST_SECTION
    elif args.what == "norms":
        horizons = [int(h) for h in args.horizons.split(",")]
        result = {name: gradient_norms(name, args.num_envs, horizons, args.samples) for name in names}
        lines = [
            f"`{command}`; {_machine()}; an untrained APG policy (4 × 32, layer norm), {args.num_envs} envs spread "
            f"over their episodes, {args.samples} successive windows per horizon: the global norm of the gradient of "
            "minus the window's mean reward with respect to the policy's parameters.",
            "",
            "| env | horizon | median norm | mean norm | std / mean | largest | not finite |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, by_horizon in result.items():
            for horizon, r in by_horizon.items():
                lines.append(
                    f"| `{name}` | {horizon} | {r['median']:.3g} | {r['mean']:.3g} | {r['cv']:.2f} | {r['max']:.3g} | "
                    f"{r['not_finite']} of {args.samples} |"
                )
        section = NORM_SECTION
    else:
        result = []
        for algo in args.algos.split(","):
            for name in names:
                result.append(memory(algo, name, args.env_steps, args.num_envs, args.horizon, args.num_evals))
                print(json.dumps(result[-1]), flush=True)  # each run's readings as soon as it ends
        trainers = " and ".join(f"`torch_analytic.{algo}.train`" for algo in args.algos.split(","))
        lines = [
            f"`{command}`; {_machine()}; {trainers}, {args.num_envs} envs, horizon {args.horizon}, "
            f"memory read after each of {args.num_evals} evaluations spread evenly over the run (the first after "
            f"{100 // args.num_evals} %, the column \"first\").",
            "",
            "| trainer | env | env steps | seconds | peak, first (MiB) | peak at the end (MiB) | peak growth "
            "| resident, first (MiB) | resident at the end (MiB) | live JAX arrays, first / end |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in result:
            first, last = r["readings"][1], r["readings"][-1]
            print(r["env"], json.dumps({k: v for k, v in r.items() if k != "readings"}), flush=True)
            lines.append(
                f"| {r['algo']} | `{r['env']}` | {r['env_steps']:,} | {r['seconds']:,.0f} | {first['peak_mib']:,.0f} | "
                f"{last['peak_mib']:,.0f} | {100 * r['peak_growth']:+.1f} % | {first['resident_mib']:,.0f} | "
                f"{last['resident_mib']:,.0f} | {first['live_jax_arrays']} / {last['live_jax_arrays']} |"
            )
        section = MEMORY_SECTION
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.write:
        replace_section(None, section, "\n".join(lines), keep=("Reading",))


if __name__ == "__main__":
    main()
