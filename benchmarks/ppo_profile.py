"""Where a PPO training step's time goes, brax_core's and Brax 0.14.2's side by side: rollout against SGD.

A training step collects ``batch_size * num_minibatches * unroll_length`` env steps (the rollout, with GAE's
inputs) and then makes ``num_updates_per_batch`` passes of ``num_minibatches`` Adam steps over them (the SGD).
Both libraries compile the step as one program, so the split is measured from outside, with the public API only:
each side trains a few steps of one ``benchmarks/vs_brax.py`` configuration twice in fresh processes, with its
``num_updates_per_batch`` and with 1, evaluating after every training step. With ``T_u`` the median seconds of a
training step (the time between two evaluations less the evaluation's own ``eval/epoch_eval_time``, skipping the
first step, in which Brax compiles its training program):

* SGD pass ``S = (T_U - T_1) / (U - 1)``, SGD ``U * S``, rollout ``T_1 - S``.

The SGD's arithmetic is estimated from the network sizes (multiply-adds of every dense layer, forward and backward,
for the minibatch's samples; the value network's bootstrap forward too) and set against a reference: the same
networks regressed with Adam on minibatches of the same size in this interpreter's JAX (a plain ``lax.scan`` of
``num_minibatches * U`` steps), which is about as fast as this CPU multiplies those matrices.

brax_core runs at the LLVM level its trainer picks for the configuration's full run length
(``compile.auto_level_for_run``), not for the shortened run, so the figures are the full run's.

    python benchmarks/ppo_profile.py --configs 1 --write --json /tmp/ppo_profile.json

Not part of ``make test``; nothing imports it. Brax runs in ``vs_brax.py``'s virtualenv.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import vs_brax
from _results import add_write_option, replace_section  # benchmarks/ is the script's directory, first on sys.path

SECTION = "## Where PPO's training step spends its time"
# Brax's make_ppo_networks defaults, used by configurations that name no network.
_DEFAULT_NETWORK = {"policy_hidden_layer_sizes": [32] * 4, "value_hidden_layer_sizes": [256] * 5}


def _step_seconds(run: dict[str, Any]) -> float:
    """Median seconds of a training step after the first (each evaluation interval holds one step)."""
    times = [t for _, _, t in run["curve"]]
    evals = run["eval_s"]
    steps = [times[i] - times[i - 1] - evals[i] for i in range(2, len(times))]
    if not steps:
        raise SystemExit("need at least 3 training steps (--steps 3)")
    return statistics.median(steps)


def _layer_macs(sizes: list[int]) -> int:
    return sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def sgd_flops(hparams: dict[str, Any], network: dict[str, Any], obs_size: int, action_size: int) -> float:
    """Estimated floating-point operations of one minibatch's Adam step (dense layers only)."""
    samples = hparams["batch_size"] * hparams["unroll_length"]
    policy = _layer_macs([obs_size, *network["policy_hidden_layer_sizes"], 2 * action_size])
    value = _layer_macs([obs_size, *network["value_hidden_layer_sizes"], 1])
    # forward + backward (weights and inputs) = 3 forwards; the bootstrap values are a forward only
    return 2.0 * (3 * samples * (policy + value) + hparams["batch_size"] * value)


def reference_sgd_seconds(hparams: dict[str, Any], network: dict[str, Any], obs_size: int, action_size: int) -> float:
    """Seconds of ``num_minibatches * num_updates_per_batch`` plain Adam steps of the same networks and minibatch."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import linen

    class MLP(linen.Module):
        sizes: tuple[int, ...]

        @linen.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            for i, size in enumerate(self.sizes):
                x = linen.Dense(size)(x)
                if i < len(self.sizes) - 1:
                    x = linen.swish(x)
            return x

    policy = MLP((*network["policy_hidden_layer_sizes"], 2 * action_size))
    value = MLP((*network["value_hidden_layer_sizes"], 1))
    samples = hparams["batch_size"] * hparams["unroll_length"]
    steps = hparams["num_minibatches"] * hparams["num_updates_per_batch"]
    key = jax.random.PRNGKey(0)
    x = jnp.zeros((samples, obs_size))
    params = (policy.init(key, x), value.init(key, x))
    optimizer = optax.adam(3e-4)

    def loss(params: Any, obs: jax.Array) -> jax.Array:
        bootstrap = jax.lax.stop_gradient(value.apply(params[1], obs[: hparams["batch_size"]]))
        squares = jnp.mean(policy.apply(params[0], obs) ** 2) + jnp.mean(value.apply(params[1], obs) ** 2)
        return squares + bootstrap.mean()

    @jax.jit
    def passes(params: Any, state: Any, batches: jax.Array) -> Any:
        def adam_step(carry: Any, obs: jax.Array) -> Any:
            params, state = carry
            updates, state = optimizer.update(jax.grad(loss)(params, obs), state, params)
            return (optax.apply_updates(params, updates), state), None

        return jax.lax.scan(adam_step, (params, state), batches)[0]

    batches = jax.random.normal(key, (steps, samples, obs_size))
    carry = jax.block_until_ready(passes(params, optimizer.init(params), batches))
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        carry = jax.block_until_ready(passes(*carry, batches))
        timings.append(time.perf_counter() - start)
    return min(timings)


def profile_config(number: int, config: dict[str, Any], seed: int, steps: int, venv: str) -> dict[str, Any]:
    from brax_core import envs
    from brax_core.compile import auto_level_for_run

    hparams = dict(config["hparams"])
    updates = hparams["num_updates_per_batch"]
    if updates < 2:
        raise SystemExit(f"configuration {number} makes {updates} pass per batch; the split needs at least 2")
    step_env_steps = (
        hparams["batch_size"] * hparams["num_minibatches"] * hparams["unroll_length"] * hparams.get("action_repeat", 1)
    )
    env = envs.get_environment(config["env"])
    level = auto_level_for_run(hparams["num_timesteps"], getattr(env, "unwrapped", env).mj_model)
    short = dict(hparams, num_timesteps=steps * step_env_steps, num_evals=steps + 1)
    network = config["network"] or _DEFAULT_NETWORK
    brax_env, ours_env = vs_brax.side_environments()
    ours_env["BRAX_CORE_CPU_OPT_LEVEL"] = str(level)
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    sides: dict[str, Any] = {}
    for side, python, run_env in (
        ("brax", vs_brax._venv_python(venv), brax_env),
        ("ours", sys.executable, ours_env),
    ):
        timed = {}
        for passes in (updates, 1):
            spec = dict(vs_brax._spec(dict(config, hparams=dict(short, num_updates_per_batch=passes)), seed))
            run = vs_brax._run(side, python, spec, run_env)
            timed[passes] = {
                "step_s": _step_seconds(run),
                "eval_s": statistics.median(run["eval_s"][1:]),
                "load_1min": run["load_1min"],
                "curve": run["curve"],
                "versions": run["versions"],
            }
            print(f"config {number} {side} U={passes}: {timed[passes]['step_s']:.2f} s a training step", flush=True)
        sgd_pass = (timed[updates]["step_s"] - timed[1]["step_s"]) / (updates - 1)
        sides[side] = {
            "runs": timed,
            "step_s": timed[updates]["step_s"],
            "sgd_s": updates * sgd_pass,
            "rollout_s": timed[1]["step_s"] - sgd_pass,
            "eval_s": timed[updates]["eval_s"],
        }
    flops = sgd_flops(hparams, network, env.observation_size, env.action_size) * hparams["num_minibatches"] * updates
    reference = reference_sgd_seconds(hparams, network, env.observation_size, env.action_size)
    return {
        "config": number,
        "title": config["title"],
        "hparams": hparams,
        "network": network,
        "level": level,
        "step_env_steps": step_env_steps,
        "sides": sides,
        "sgd_gflop": flops / 1e9,
        "reference_sgd_s": reference,
        "when": f"{started}-{time.strftime('%H:%M', time.gmtime())} UTC",
    }


def config_markdown(r: dict[str, Any], command: str, commit: str) -> str:
    ours, brax = r["sides"]["ours"], r["sides"]["brax"]
    rows = [
        f"### Configuration {r['config']}: {r['title']}",
        "",
        f"`{command}` — measured {r['when']} on a {vs_brax.MACHINE} (brax_core at commit {commit}, LLVM level "
        f"{r['level']}, the level of the full run). A training step = {r['step_env_steps']:,} env steps and "
        f"{r['hparams']['num_updates_per_batch']} x {r['hparams']['num_minibatches']} Adam steps on minibatches of "
        f"{r['hparams']['batch_size'] * r['hparams']['unroll_length']:,} samples; policy "
        f"{r['network']['policy_hidden_layer_sizes']}, value {r['network']['value_hidden_layer_sizes']}.",
        "",
        "| seconds per training step | Brax 0.14.2 | brax_core | brax_core / Brax |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, key in (
        ("rollout (env steps, policy, GAE inputs)", "rollout_s"),
        ("SGD", "sgd_s"),
        ("whole step", "step_s"),
        (f"an evaluation ({r['hparams'].get('num_eval_envs', 128)} envs, one episode each)", "eval_s"),
    ):
        rows.append(f"| {label} | {brax[key]:.2f} | {ours[key]:.2f} | {ours[key] / brax[key]:.2f} |")
    sgd_rate = [r["sgd_gflop"] / side["sgd_s"] for side in (brax, ours)]
    rows.append(f"| SGD, GFLOP/s (≈{r['sgd_gflop']:.0f} GFLOP a step) | {sgd_rate[0]:.0f} | {sgd_rate[1]:.0f} | - |")
    rows += [
        "",
        f"Reference: the same networks regressed with Adam on minibatches of the same size, as many steps, in "
        f"brax_core's JAX: {r['reference_sgd_s']:.2f} s ({r['sgd_gflop'] / r['reference_sgd_s']:.0f} GFLOP/s).",
        "",
        "Load average (1 min) before -> after each run: "
        + "; ".join(
            f"{side} U={u} {run['load_1min'][0]:.1f} -> {run['load_1min'][1]:.1f}"
            for side in ("brax", "ours")
            for u, run in r["sides"][side]["runs"].items()
        )
        + ".",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", type=int, nargs="+", default=[1], help="vs_brax.py configurations: 1, 2 or 3")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=4, help="training steps per run (>= 3; the first is skipped)")
    parser.add_argument("--venv", default=os.path.expanduser("~/.cache/brax_bridge/vs_brax_venv"))
    add_write_option(parser)
    parser.add_argument("--json", default=None, help="also dump the raw figures here")
    args = parser.parse_args(argv)
    bad = sorted(set(args.configs) - {1, 2, 3})
    if bad:
        parser.error(f"--configs accepts 1, 2 and 3, got {bad}")
    if args.steps < 3:
        parser.error(f"--steps must be >= 3, got {args.steps}")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    vs_brax.ensure_venv(args.venv)
    configs = vs_brax._configs()
    results = [profile_config(n, configs[n], args.seed, args.steps, args.venv) for n in dict.fromkeys(args.configs)]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    command = "python " + " ".join(["benchmarks/ppo_profile.py", *(argv if argv is not None else sys.argv[1:])])
    commit = vs_brax.current_commit()
    body = "\n\n".join(
        [
            "Method and estimates: `benchmarks/ppo_profile.py`'s docstring. Tables come from the command above each.",
            *(config_markdown(r, command, commit) for r in results),
        ]
    )
    print(f"\n{SECTION}\n\n{body}")
    if args.write is not None:
        # The hand-written comparison with earlier figures and the reading are carried over.
        replace_section(args.write, SECTION, body, keep=("Before:", "Reading"))


if __name__ == "__main__":
    main()
