"""Collection alone, side by side in one process: torch_ppo's batch of unrolls collected in one JAX program
(``collection='fused'``), step by step through the bridge (``'bridge'``), and the JAX trainer's rollout of the same
envs, unrolls and policy (``make_training_step``'s ``generate_unroll`` scan), on an env's preset.

Each env runs in a fresh process at XLA CPU level 1 (the level of a full-length run; ``BRAX_CORE_CPU_OPT_LEVEL``
overrides it), torch with one thread (torch_ppo's default); three calls of each collector first (compiling), then
``--rounds`` rounds of one call of each, in turn, and the median milliseconds per batch of each:

  python benchmarks/collection_speed.py --envs halfcheetah ant humanoid --rounds 20 [--write]

``--end-to-end N`` times whole runs instead: ``torch_ppo.train`` on each env's preset for ``N`` env steps (two
evaluations), collecting fused and then through the bridge, each in a fresh process, first with empty compile caches
(JAX's, the program cache and inductor's: everything compiles) and then again with the caches it filled (a second
run of the same configuration), from the ``train`` call to its return:

  python benchmarks/collection_speed.py --envs halfcheetah --end-to-end 100000 [--write]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time

from _results import add_write_option, replace_section, wrap_prose

SECTION = "## Collection in one program"
END_TO_END = "## Collection in one program, whole runs"
COLLECTORS = ("fused", "bridge", "jax")


def _worker(env_name: str, rounds: int) -> dict:
    import jax
    import torch

    import torch_ppo
    from brax_core import compile as compile_options
    from brax_core import envs
    from brax_core.training import acting
    from brax_core.training.agents.ppo import environments
    from brax_core.training.agents.ppo.presets import TRAIN_KWARGS
    from torch_ppo import arguments, distributed, update
    from torch_ppo.policy_transfer import jax_policy_factory, jax_policy_params
    from torch_ppo.trainer import TorchPPOBackend

    preset = dict(TRAIN_KWARGS[env_name])
    network = dict(preset.pop("network_factory").keywords)
    defaults = {name: p.default for name, p in inspect.signature(torch_ppo.train).parameters.items()}
    given = {**defaults, **preset, **network, "environment": env_name, "num_evals": 0}
    device = torch.device("cpu")
    torch.set_num_threads(1)
    run = TorchPPOBackend(arguments.parse(given, device, 1), distributed.setup(device))
    run.build_envs()
    env, unroll_length = run.env, run.config.algorithm.unroll_length

    def fused() -> None:
        batch, _, _ = run.fused(run.generator)
        batch.get("observation").sum()  # the batch is ready to use

    def bridge() -> None:
        batch, run.obs = update.collect(
            env, run.modules, run.actor.module[-1], run.obs, num_unrolls=run.num_unrolls, unroll_length=unroll_length,
            keep_distribution=False, tracker=None,
        )
        batch.get("observation").sum()

    # The JAX trainer's rollout: its wrapped env of the same envs and episode, the actor's weights in brax_core's
    # networks, make_training_step's scan over unrolls of generate_unroll.
    jax_env = environments.wrap_for(
        envs.get_environment(env_name), env.num_envs, None, wrap_env=True, episode_length=env.episode_length,
        action_repeat=env.action_repeat, randomization_fn=None,
    )
    make_policy, _ = jax_policy_factory(run.modules)
    params = jax_policy_params(run.modules)

    def rollout(state, params, key):
        policy = make_policy(params)

        def unroll(carry, _):
            state, k = carry
            k, k_unroll = jax.random.split(k)
            state, data = acting.generate_unroll(jax_env, state, policy, k_unroll, unroll_length, ("truncation",))
            return (state, k), data

        (state, _), data = jax.lax.scan(unroll, (state, key), (), length=run.num_unrolls)
        return state, data

    program = jax.jit(rollout, donate_argnums=(0,), compiler_options=compile_options.compiler_options("cpu", 1))
    jax_state = [jax.jit(jax_env.reset)(jax.random.split(jax.random.PRNGKey(0), env.num_envs))]
    key = jax.random.PRNGKey(1)

    def jax_rollout() -> None:
        state, data = program(jax_state[0], params, key)
        jax_state[0] = state
        jax.block_until_ready(data)

    calls = {"fused": fused, "bridge": bridge, "jax": jax_rollout}
    for call in calls.values():
        for _ in range(3):
            call()
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {
        "env": env_name, "env_steps": run.num_unrolls * unroll_length * env.num_envs * env.action_repeat,
        "ms": {name: statistics.median(values) for name, values in times.items()},
    }


def _run_worker(env_name: str, num_timesteps: int, collection: str) -> float:
    import torch_ppo
    from brax_core.training.agents.ppo.presets import TRAIN_KWARGS

    preset = dict(TRAIN_KWARGS[env_name])
    network = dict(preset.pop("network_factory").keywords)
    preset.update(network, num_timesteps=num_timesteps, num_evals=2)
    start = time.perf_counter()
    torch_ppo.train(env_name, collection=collection, **preset)
    return time.perf_counter() - start


def _end_to_end(args: argparse.Namespace) -> str:
    import tempfile

    rows = []
    for env_name in args.envs:
        for collection in ("fused", "bridge"):
            with tempfile.TemporaryDirectory() as caches:
                env = {**os.environ, "BRAX_BRIDGE_JAX_CACHE": os.path.join(caches, "jax"),
                       "TORCHINDUCTOR_CACHE_DIR": os.path.join(caches, "inductor")}
                env.pop("BRAX_CORE_CPU_OPT_LEVEL", None)  # the run's own choice, as a user's run makes it
                walls = []
                for _ in ("cold", "warm"):
                    cmd = [sys.executable, os.path.abspath(__file__), "--run-worker", env_name, collection,
                           "--end-to-end", str(args.end_to_end)]
                    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
                    line = next((x for x in out.stdout.splitlines() if x.startswith("WALL ")), None)
                    if out.returncode != 0 or line is None:
                        raise SystemExit(f"{env_name} {collection} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
                    walls.append(float(line[5:]))
            rows.append((env_name, collection, *walls))
            print(f"{env_name} {collection}: cold {walls[0]:.1f} s, warm {walls[1]:.1f} s; 1-minute load average "
                  f"after {os.getloadavg()[0]:.2f}", flush=True)
    lines = ["| env (preset) | env steps | collection | empty caches (s) | warm caches (s) |",
             "| --- | ---: | --- | ---: | ---: |"]
    lines += [f"| `{e}` | {args.end_to_end:,} | {c} | {cold:.1f} | {warm:.1f} |" for e, c, cold, warm in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["halfcheetah", "ant", "humanoid"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--end-to-end", type=int, default=None, metavar="N", help="whole runs of N env steps")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--run-worker", nargs=2, default=None, help=argparse.SUPPRESS)
    add_write_option(parser)
    args = parser.parse_args()
    if args.worker is not None:
        print("RESULT " + json.dumps(_worker(args.worker, args.rounds)), flush=True)
        return
    if args.run_worker is not None:
        print(f"WALL {_run_worker(args.run_worker[0], args.end_to_end, args.run_worker[1]):.3f}", flush=True)
        return
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    command = "python benchmarks/collection_speed.py " + " ".join(sys.argv[1:])
    if args.end_to_end is not None:
        table = _end_to_end(args)
        text = wrap_prose(
            f"Whole runs, `{command}`, {when}, load average {load:.2f} at the start: x86_64, 2-core CPU, no GPU; each "
            "run a fresh process, from the `train` call to its return, with empty compile caches and then with the "
            "caches that run filled."
        ) + "\n\n" + table + "\n"
        print(text)
        if args.write is not None:
            replace_section(args.write, END_TO_END, text)
        return
    results = []
    for env_name in args.envs:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", env_name, "--rounds", str(args.rounds)]
        out = subprocess.run(
            cmd, capture_output=True, text=True, check=False, env={"BRAX_CORE_CPU_OPT_LEVEL": "1", **os.environ}
        )
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        if out.returncode != 0 or line is None:
            raise SystemExit(f"{env_name} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
        results.append(json.loads(line[7:]))
        ms = results[-1]["ms"]
        print(f"{env_name}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items())
              + f"; 1-minute load average after {os.getloadavg()[0]:.2f}", flush=True)
    rows = [
        f"| `{r['env']}` | {r['env_steps']:,} | {r['ms']['jax']:,.1f} | {r['ms']['fused']:,.1f} "
        f"| {r['ms']['bridge']:,.1f} | {r['ms']['jax'] / r['ms']['fused']:.2f} "
        f"| {r['ms']['jax'] / r['ms']['bridge']:.2f} |"
        for r in results
    ]
    body = "\n".join([
        wrap_prose(
            f"`{command}`, {when}, load average {load:.2f} at the start: x86_64, 2-core CPU, no GPU; each env in a "
            "fresh process, XLA CPU level 1, torch with one thread; the median over the rounds of one call of each "
            "collector in turn. Milliseconds per training step's batch of unrolls on the env's preset; the speed "
            "columns are the JAX trainer's time over torch_ppo's (1.00: as fast)."
        ), "",
        "| env (preset) | env steps per batch | JAX trainer's rollout (ms) | torch_ppo fused (ms) | torch_ppo through "
        "the bridge (ms) | fused speed / JAX | bridge speed / JAX |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ]) + "\n"
    print(f"{SECTION}\n\n{body}")
    if args.write is not None:
        replace_section(args.write, SECTION, body)


if __name__ == "__main__":
    main()
