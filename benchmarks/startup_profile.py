"""Where the JAX PPO's cold start goes: its programs for a ``vs_brax.py`` configuration, traced and compiled one by one.

For each variant, a fresh process with an empty compile cache (a temporary folder, so neither JAX's persistent cache
nor ``brax_core.program_cache`` helps) runs ``ppo.train`` on the configuration for a few training steps, with the
trainer's three programs (reset, training, evaluation) traced and compiled one after the other instead of side by
side, and times each: tracing and lowering, then XLA's compile. The variants differ only in the training program:

* ``full``: the trainer's own;
* ``rollout``: its rollout alone (the env steps and the policy; the PPO update replaced by the sum of the collected
  data, so that XLA keeps the rollout);
* ``update``: its PPO update alone (on data of the rollout's shapes, made from the step's key; no env step).

The reset's tracing happens before these timings (the trainer asks for its output shapes first), so its figure
is near zero. The compiles run at the LLVM level the trainer picks for the configuration's full run
(``compile.auto_level_for_run``). Made for a CPU; not part of ``make test``.

    python benchmarks/startup_profile.py --configs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

VARIANTS = ("full", "rollout", "update")
PROGRAMS = ("reset", "training", "evaluation")


def _patch_training_step(ppo_step: Any, variant: str) -> None:
    """Replaces ``ppo_step.make_training_step`` by one building the variant's training step."""
    import jax
    import jax.numpy as jnp

    original = ppo_step.make_training_step

    def make(env, make_policy, update, **kwargs):
        if variant == "full":
            return original(env, make_policy, update, **kwargs)

        def collected(ts, env_state, key):
            box = {}

            def keep(ts, data, _key):
                box["data"] = data
                return ts, {"collected": sum(jnp.sum(x.astype(jnp.float32)) for x in jax.tree.leaves(data))}

            return original(env, make_policy, keep, **kwargs)(ts, env_state, key), box["data"]

        if variant == "rollout":
            return lambda ts, env_state, key: collected(ts, env_state, key)[0]

        def update_only(ts, env_state, key):
            shapes = jax.eval_shape(lambda: collected(ts, env_state, key)[1])
            data = jax.tree.map(lambda s: jax.random.uniform(key, s.shape).astype(s.dtype), shapes)
            ts, metrics = update(ts, data, key)
            steps = ppo_step.add_steps(ts.env_steps, kwargs["env_steps_per_training_step"])
            return ts.replace(env_steps=steps, training_step=ts.training_step + 1), env_state, metrics

        return update_only

    ppo_step.make_training_step = make


def child(config_number: int, variant: str) -> None:
    start = time.perf_counter()
    import vs_brax  # benchmarks/ is this script's directory, first on sys.path

    from brax_core import compile as compile_options
    from brax_core import envs
    from brax_core.training.agents.ppo import networks as ppo_networks
    from brax_core.training.agents.ppo import train as ppo
    from brax_core.training.agents.ppo import training_step as ppo_step

    imports_s = time.perf_counter() - start
    config = vs_brax._configs()[config_number]
    timings: dict[str, float] = {}

    def one_by_one(lowered):
        compiled, programs = [], iter(lowered)
        for name in PROGRAMS:
            t = time.perf_counter()
            program = next(programs, None)
            if program is None:
                break
            timings[f"{name}_trace_s"] = time.perf_counter() - t
            t = time.perf_counter()
            compiled.append(program.compile())
            timings[f"{name}_compile_s"] = time.perf_counter() - t
        return compiled

    compile_options.compile_side_by_side = one_by_one
    _patch_training_step(ppo_step, variant)
    hparams = dict(config["hparams"])
    steps_per_training_step = hparams["batch_size"] * hparams["num_minibatches"] * hparams["unroll_length"]
    hparams.update(num_timesteps=3 * steps_per_training_step, num_evals=2)
    network = config["network"] or {}
    factory = ppo_networks.make_ppo_networks
    if network:
        import functools

        factory = functools.partial(factory, **{k: tuple(v) if isinstance(v, list) else v for k, v in network.items()})
    t = time.perf_counter()
    ppo.train(environment=envs.get_environment(config["env"]), seed=0, network_factory=factory, **hparams)
    print(json.dumps({"variant": variant, "imports_s": imports_s, "train_call_s": time.perf_counter() - t,
                      **timings}), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, nargs="+", default=[2], help="vs_brax.py configurations: 1, 2 or 3")
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--child", nargs=2, metavar=("CONFIG", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(int(args.child[0]), args.child[1])
        return
    bad = [c for c in args.configs if c not in (1, 2, 3)]
    if bad:
        raise SystemExit(f"--configs: expected 1, 2 or 3, got {bad}")
    import vs_brax

    from brax_core import compile as compile_options
    from brax_core import envs

    rows = []
    for number in args.configs:
        config = vs_brax._configs()[number]
        model = envs.get_environment(config["env"]).mj_model
        level = compile_options.auto_level_for_run(config["hparams"]["num_timesteps"], model)
        for variant in VARIANTS:
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "BRAX_BRIDGE_JAX_CACHE": cache, "BRAX_CORE_CPU_OPT_LEVEL": str(level)}
                load = os.getloadavg()[0]
                out = subprocess.run([sys.executable, __file__, "--child", str(number), variant], env=env,
                                     capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(f"config {number} {variant} failed:\n{out.stderr[-3000:]}")
            row = {"config": number, "llvm_level": level, "load_before": load, "load_after": os.getloadavg()[0],
                   **json.loads(out.stdout.strip().splitlines()[-1])}
            rows.append(row)
            head = f"config {number} ({config['env']}, LLVM level {level}) {variant:8s}"
            print(f"{head} imports {row['imports_s']:.1f} s; "
                  + "; ".join(f"{p} trace {row.get(p + '_trace_s', float('nan')):.2f} s compile "
                              f"{row.get(p + '_compile_s', float('nan')):.2f} s" for p in PROGRAMS)
                  + f"; load {load:.1f} -> {row['load_after']:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
