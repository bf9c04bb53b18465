"""brax_core's JAX PPO against Brax 0.14.2's own PPO, side by side: wall time to an evaluation reward.

Brax 0.14.2's PPO does not start on this project's JAX (``jax.device_put_replicated`` was removed), so Brax runs
in a virtualenv of its own, built once in a cache folder (``--venv``; default
``~/.cache/brax_bridge/vs_brax_venv``) with ``brax==0.14.2``, ``jax==0.7.2`` (CPU), ``mujoco==3.3.7`` and
``mujoco-mjx==3.3.7``. Every run is a fresh process: brax_core's in this interpreter, Brax's in the virtualenv's.
Runs alternate, Brax then brax_core for each seed, so a change of load on the machine hits both. Each run records

* start-up: seconds from launching the process to its first progress report (imports, building the env,
  compiling, the evaluation before training),
* seconds from launching the process to the first evaluation with reward >= the configuration's threshold, and
  the env steps there,
* the final evaluation reward, the whole run's wall time, and the 1-minute load average before and after.

brax_core's runs each get an empty persistent compile cache (``BRAX_BRIDGE_JAX_CACHE`` = a fresh folder), so both
sides compile everything, as Brax (no persistent cache) does; per configuration one more brax_core run (the first
seed) reuses the first run's filled cache, as a warm-cache column.

Configurations (both trainers get the same arguments and the env from ``get_environment(name,
backend="generalized")``; brax_core's envs follow Brax's definitions, with the deliberate differences the README's
"The environments and Brax's" table lists):

1. ``inverted_pendulum`` with Brax's hyperparameters from its training notebook (``notebooks/training.ipynb``):
   2048 envs, batch 1024, unroll 5, 32 minibatches, 4 updates per batch, discounting 0.97, learning rate 3e-4,
   entropy cost 1e-2, reward scaling 10, normalised observations, 2M env steps, 20 evaluations; Brax's default
   networks. Threshold 950.
2. ``inverted_pendulum`` with brax_core's ``presets.TRAIN_KWARGS['inverted_pendulum']`` (its networks too) for both.
   Threshold 950.
3. ``inverted_double_pendulum`` with Brax's notebook hyperparameters for it (as 1, but 20M env steps). Threshold
   9,100, see ``DOUBLE_PENDULUM_THRESHOLD_SOURCE``.
4. MuJoCo Playground's ``CheetahRun`` with Playground's own ``brax_ppo_config("CheetahRun")`` scaled for a CPU
   (``presets.PLAYGROUND_CPU``), trained as Playground's ``train_jax_ppo`` flow does: Brax's PPO gets
   ``registry.load("CheetahRun")`` and ``wrap_env_fn=wrapper.wrap_for_brax_training``; brax_core's gets
   ``"playground:CheetahRun"``. Threshold 100, see ``CHEETAH_THRESHOLD_SOURCE``.

``--brax-on-ours`` runs something else: Brax's PPO on brax_core's env (same configuration and seeds), in this
interpreter, with Brax 0.14.2 alone installed into a folder (``--brax-target``; ``pip install --no-deps --target``) and
``jax.device_put_replicated`` supplied. Where the two libraries' curves differ, it tells the trainer's share from the
env's. It prints each run and writes the curves with ``--json``.

Not part of ``make test``; nothing imports it. A run of configuration 1 takes several minutes per process on a
2-core CPU, configuration 3 far longer.

    python benchmarks/vs_brax.py --seeds 0 --configs 2
    python benchmarks/vs_brax.py --seeds 0 1 2 --configs 1 2 --write --json /tmp/vs_brax.json
    python benchmarks/vs_brax.py --brax-on-ours --configs 3 --seeds 0 1 2 --json /tmp/brax_on_ours.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from _results import (  # benchmarks/ is the script's directory, first on sys.path
    add_write_option,
    old_section,
    replace_section,
)

SECTION = "## Against Brax's PPO"
MACHINE = "2-core CPU without a GPU"
PINS = {
    "brax": "0.14.2",
    "jax": "0.7.2",
    "jaxlib": "0.7.2",
    "mujoco": "3.3.7",
    "mujoco-mjx": "3.3.7",
    # The newest MuJoCo Playground on MuJoCo 3.3.x (0.1.0 and later need MuJoCo 3.4); its CheetahRun task is the
    # one in this project's Playground, which adds only the choice of MJX implementation.
    "playground": "0.0.5",
}
_EVENT = "VS_BRAX "

# Brax's training notebook (notebooks/training.ipynb, "Training" cell), the same in 0.14.2 and later.
_BRAX_NOTEBOOK_PENDULUM = dict(
    num_timesteps=2_000_000,
    num_evals=20,
    reward_scaling=10,
    episode_length=1000,
    normalize_observations=True,
    action_repeat=1,
    unroll_length=5,
    num_minibatches=32,
    num_updates_per_batch=4,
    discounting=0.97,
    learning_rate=3e-4,
    entropy_cost=1e-2,
    num_envs=2048,
    batch_size=1024,
)
DOUBLE_PENDULUM_THRESHOLD_SOURCE = (
    "Brax publishes no training figure for `inverted_double_pendulum` (its training notebook's reward-axis limits "
    "`max_y` have no entry for either pendulum, and the notebook's stored output is `ant`'s), so the threshold is "
    "Gymnasium's registered `reward_threshold` for InvertedDoublePendulum-v5, 9,100 (for InvertedPendulum-v5 it is "
    "the 950 used above); Brax's env has the same reward, 10 per step alive less distance and velocity penalties, "
    "at most about 9,360 over 1,000 steps"
)
# Configuration 4's env steps: Playground's CheetahRun config scaled for a CPU by ``presets.PLAYGROUND_CPU``.
CHEETAH_STEPS = 614_400
CHEETAH_THRESHOLD_SOURCE = (
    "Playground's paper (arXiv:2502.08844, Control Suite learning curves) shows its Brax PPO near 850 on CheetahRun "
    "after 60M env steps on a GPU; 614k env steps on a CPU get about a fifth of that (a random policy gets about 4), "
    "so the threshold is 100: clear learning, reached by both trainers within this budget"
)


def _configs() -> dict[int, dict[str, Any]]:
    """The three configurations; the preset one reads brax_core's presets (so only in this interpreter)."""
    from brax_core.training.agents.ppo import presets

    preset = dict(presets.TRAIN_KWARGS["inverted_pendulum"])
    preset.pop("network_factory")
    network = presets.network_kwargs("inverted_pendulum")
    from mujoco_playground.config import dm_control_suite_params

    cheetah = presets.from_playground(dm_control_suite_params.brax_ppo_config("CheetahRun"))
    cheetah.pop("network_factory", None)  # CheetahRun's config names none: both libraries' default networks
    return {
        1: dict(
            env="inverted_pendulum",
            hparams=dict(_BRAX_NOTEBOOK_PENDULUM),
            network=None,
            threshold=950.0,
            title="`inverted_pendulum`, Brax's notebook hyperparameters",
            threshold_source="",
        ),
        2: dict(
            env="inverted_pendulum",
            hparams=preset,
            network={
                **network,
                "policy_hidden_layer_sizes": list(network["policy_hidden_layer_sizes"]),
                "value_hidden_layer_sizes": list(network["value_hidden_layer_sizes"]),
            },
            threshold=950.0,
            title="`inverted_pendulum`, brax_core's preset `PRESETS['inverted_pendulum']`",
            threshold_source="",
        ),
        3: dict(
            env="inverted_double_pendulum",
            hparams=dict(_BRAX_NOTEBOOK_PENDULUM, num_timesteps=20_000_000),
            network=None,
            threshold=9100.0,
            title="`inverted_double_pendulum`, Brax's notebook hyperparameters",
            threshold_source=DOUBLE_PENDULUM_THRESHOLD_SOURCE,
        ),
        4: dict(
            env="playground:CheetahRun",
            hparams={**cheetah, **presets.PLAYGROUND_CPU, "num_timesteps": CHEETAH_STEPS},
            network=None,
            threshold=100.0,
            title="MuJoCo Playground `CheetahRun`, Playground's `brax_ppo_config` scaled for a CPU",
            threshold_source=CHEETAH_THRESHOLD_SOURCE,
        ),
    }


# ----------------------------------------------------------------------------------------------------------------
# The measured process (runs in either interpreter: only the standard library at module level).


def _emit(**event: Any) -> None:
    print(_EVENT + json.dumps(event), flush=True)


def _versions(names: tuple[str, ...]) -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def _without_menagerie() -> None:
    """Lets Playground 0.0.5 import offline: importing it clones MuJoCo Menagerie (for the locomotion and
    manipulation tasks, which CheetahRun does not use) unless the checkout's folder exists, and fails without a
    network. An empty folder stands in for it."""
    import importlib.util

    package = importlib.util.find_spec("mujoco_playground").submodule_search_locations[0]
    os.makedirs(os.path.join(package, "external_deps", "mujoco_menagerie"), exist_ok=True)


def child(side: str, spec: dict[str, Any]) -> None:
    """One training run; prints each evaluation as an event line with its wall-clock time."""

    def progress(step: int, metrics: dict[str, Any]) -> None:
        if "eval/episode_reward" in metrics:
            eval_s = float(metrics.get("eval/epoch_eval_time", float("nan")))
            reward = float(metrics["eval/episode_reward"])
            _emit(kind="eval", t=time.time(), step=int(step), reward=reward, eval_s=eval_s)

    import functools

    if side in ("brax", "brax_on_ours"):
        if side == "brax_on_ours":  # Brax's PPO (installed with --target, see brax_target) on brax_core's env
            from _brax_compat import supply_device_put_replicated  # benchmarks/ is first on sys.path

            supply_device_put_replicated()
            from brax_core import envs
        else:
            from brax import envs
        from brax.training.agents.ppo import networks as ppo_networks
        from brax.training.agents.ppo import train as ppo
        from flax import linen

        # Brax's make_ppo_networks takes the activation as a function, brax_core's also by name.
        activation = lambda name: getattr(linen, name)  # noqa: E731
        names = ("brax", "jax", "jaxlib", "mujoco", "mujoco-mjx", "flax", "optax")
    else:
        from brax_core import envs
        from brax_core.training.agents.ppo import networks as ppo_networks
        from brax_core.training.agents.ppo import train as ppo

        activation = lambda name: name  # noqa: E731
        names = ("jax", "jaxlib", "mujoco", "mujoco-mjx", "flax", "optax")
    kwargs = dict(spec["hparams"])
    if spec["network"]:
        net = spec["network"]
        kwargs["network_factory"] = functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=tuple(net["policy_hidden_layer_sizes"]),
            value_hidden_layer_sizes=tuple(net["value_hidden_layer_sizes"]),
            activation=activation(net["activation"]),
        )
    if side == "brax_on_ours":  # brax_core's env object, Playground's tasks included: Brax's PPO takes no name
        env = envs.get_environment(spec["env"])
    elif spec["env"].startswith("playground:"):
        names = (*names, "playground")
        if side == "brax":  # as Playground's train_jax_ppo hands its env to Brax
            _without_menagerie()
            from mujoco_playground import registry, wrapper

            env = registry.load(spec["env"].split(":", 1)[1])
            kwargs["wrap_env_fn"] = wrapper.wrap_for_brax_training
        else:
            env = spec["env"]
    else:
        env = envs.get_environment(spec["env"], backend="generalized")
    ppo.train(environment=env, seed=spec["seed"], progress_fn=progress, **kwargs)
    _emit(kind="done", t=time.time(), versions=_versions(names), python=platform.python_version())


# ----------------------------------------------------------------------------------------------------------------
# The driver.


def _venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def _venv_versions(venv: str) -> dict[str, str] | None:
    python = _venv_python(venv)
    if not os.path.exists(python):
        return None
    code = (
        "import json; from importlib import metadata as m\n"
        f"names = {sorted(PINS)!r}\n"
        "out = {}\n"
        "for n in names:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = None\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def ensure_venv(venv: str) -> dict[str, str]:
    """The virtualenv with Brax's pinned stack, built (or repaired) with pip when its versions differ."""
    if _venv_versions(venv) != PINS:
        print(f"building Brax's virtualenv in {venv} ({', '.join(f'{k}=={v}' for k, v in PINS.items())})", flush=True)
        if not os.path.exists(_venv_python(venv)):
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pins = [f"{k}=={v}" for k, v in PINS.items()]
        subprocess.run([_venv_python(venv), "-m", "pip", "install", "-q", *pins], check=True)
    found = _venv_versions(venv)
    if found != PINS:
        raise SystemExit(f"Brax's virtualenv {venv} has {found} after pip install, expected {PINS}")
    return found


def brax_target(folder: str) -> str:
    """A folder holding Brax 0.14.2 alone (``pip install --no-deps --target``), for Brax's PPO in this interpreter."""
    if not os.path.isfile(os.path.join(folder, "brax", "__init__.py")):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", folder, f"brax=={PINS['brax']}"],
            check=True,
        )
    return folder


def brax_on_ours(config: dict[str, Any], seeds: list[int], target: str) -> dict[str, Any]:
    """Brax's PPO trained on brax_core's env, one fresh process per seed: which of two differing curves is the
    trainer's doing and which the env's."""
    _, ours_env = side_environments()
    env = {**ours_env, "PYTHONPATH": os.pathsep.join(filter(None, [brax_target(target), ours_env.get("PYTHONPATH")]))}
    runs = {}
    for seed in seeds:
        runs[str(seed)] = _run("brax_on_ours", sys.executable, _spec(config, seed), env)
        _log(f"seed {seed} Brax's PPO on brax_core's {config['env']}", runs[str(seed)])
    return runs


def _run(side: str, python: str, spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    cmd = [python, os.path.abspath(__file__), "--child", side, "--spec", json.dumps(spec)]
    load_before = os.getloadavg()[0]
    launched = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    ended = time.time()
    events = [json.loads(x[len(_EVENT) :]) for x in done.stdout.splitlines() if x.startswith(_EVENT)]
    if done.returncode != 0 or not events or events[-1]["kind"] != "done":
        raise SystemExit(f"{side} run failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    curve = [(e["step"], e["reward"], e["t"] - launched) for e in events if e["kind"] == "eval"]
    eval_seconds = [e.get("eval_s") for e in events if e["kind"] == "eval"]
    reached = next(((s, t) for s, r, t in curve if r >= spec["threshold"]), None)
    return {
        "curve": curve,
        "eval_s": eval_seconds,
        "startup_s": curve[0][2] if curve else None,
        "time_to_threshold_s": reached[1] if reached else None,
        "steps_to_threshold": reached[0] if reached else None,
        "final_reward": curve[-1][1] if curve else None,
        "wall_s": ended - launched,
        "load_1min": [load_before, os.getloadavg()[0]],
        "versions": events[-1]["versions"],
        "python": events[-1]["python"],
    }


def _log(label: str, r: dict[str, Any]) -> None:
    print(
        f"{label}: start-up {_fmt(r['startup_s'], 1)} s, to threshold {_fmt(r['time_to_threshold_s'], 1)} s at "
        f"{_fmt(r['steps_to_threshold'])} steps, final {_fmt(r['final_reward'], 1)}, wall {r['wall_s']:.1f} s, load "
        f"{r['load_1min'][0]:.1f}->{r['load_1min'][1]:.1f}; curve {[(s, round(x)) for s, x, _ in r['curve']]}",
        flush=True,
    )


def _spec(config: dict[str, Any], seed: int) -> dict[str, Any]:
    return {key: config[key] for key in ("env", "hparams", "network", "threshold")} | {"seed": seed}


def side_environments() -> tuple[dict[str, str], dict[str, str]]:
    """The process environments of Brax's runs (its virtualenv's packages only, no shared compile cache) and of ours,
    both on the CPU."""
    brax_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JAX_COMPILATION_CACHE_DIR")}
    return {**brax_env, "JAX_PLATFORMS": "cpu"}, {**os.environ, "JAX_PLATFORMS": "cpu"}


def current_commit() -> str:
    """This checkout's short commit hash (``unknown`` outside git)."""
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=os.path.dirname(os.path.abspath(__file__)),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def run_case(number: int, config: dict[str, Any], seeds: list[int], venv: str, warm: bool = True) -> dict[str, Any]:
    brax_env, ours_env = side_environments()
    scratch = tempfile.mkdtemp(prefix="vs_brax_cache_")
    result: dict[str, Any] = {"config": number, **config, "seeds": seeds, "runs": {}, "warm": None}
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    try:
        first_cache = None
        for seed in seeds:
            spec = _spec(config, seed)
            brax = _run("brax", _venv_python(venv), spec, brax_env)
            _log(f"config {number} seed {seed} Brax", brax)
            cache = tempfile.mkdtemp(dir=scratch)
            first_cache = first_cache or cache
            ours = _run("ours", sys.executable, spec, {**ours_env, "BRAX_BRIDGE_JAX_CACHE": cache})
            _log(f"config {number} seed {seed} brax_core (empty cache)", ours)
            result["runs"][str(seed)] = {"brax": brax, "ours": ours}
        if warm:
            env = {**ours_env, "BRAX_BRIDGE_JAX_CACHE": first_cache}
            result["warm"] = _run("ours", sys.executable, _spec(config, seeds[0]), env)
            _log(f"config {number} seed {seeds[0]} brax_core (warm cache)", result["warm"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["when"] = f"{started}-{time.strftime('%H:%M', time.gmtime())} UTC"
    return result


# ----------------------------------------------------------------------------------------------------------------
# Tables.


def _fmt(x: Any, digits: int = 0) -> str:
    if x is None:
        return "not reached"
    return f"{x:,.{digits}f}" if isinstance(x, float) else f"{x:,}"


def _median(values: list[Any]) -> Any:
    """The median, where a run that never reached the threshold (``None``) counts as slower than every run that
    did: defined while the middle falls on runs that reached it, ``None`` where it falls on one that did not (so a
    missing run never flatters its side)."""
    if not values:
        return None
    ordered = sorted(values, key=lambda v: (v is None, 0 if v is None else v))
    middle = ordered[(len(ordered) - 1) // 2 : len(ordered) // 2 + 1]
    return None if any(v is None for v in middle) else statistics.mean(middle)


def _hparams_text(config: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in config["hparams"].items())
    network = config["network"] or "each library's default `make_ppo_networks` (policy 4x32, value 5x256, swish)"
    return f"{text}; networks: {network}"


def config_markdown(result: dict[str, Any]) -> str:
    threshold = result["threshold"]
    t = f"{threshold:,.0f}"
    seeds = result["seeds"]
    runs = result["runs"]
    warm = result["warm"]
    first = runs[str(seeds[0])]
    fmt = lambda v: ", ".join(f"{k} {x}" for k, x in v.items())  # noqa: E731
    lines = [
        f"### Configuration {result['config']}: {result['title']}, threshold {t}",
        "",
        f"`{result['command']}` — **{len(seeds)} seed{'s' if len(seeds) != 1 else ''}** "
        f"({', '.join(map(str, seeds))}), measured {result['when']} on a {MACHINE}. Hyperparameters (both): "
        f"{_hparams_text(result)}. Versions: Brax side python {first['brax']['python']}, "
        f"{fmt(first['brax']['versions'])}; brax_core side (commit {result['commit']}) python "
        f"{first['ours']['python']}, {fmt(first['ours']['versions'])}.",
    ]
    if result["threshold_source"]:
        lines += ["", f"Threshold: {result['threshold_source']}."]
    lines += [
        "",
        f"| seed | Brax start-up (s) | Brax to {t} (s) | Brax steps at {t} | Brax final | ours start-up (s) | "
        f"ours to {t} (s) | ours steps at {t} | ours final | ours / Brax, to {t} | ours, warm cache: start-up / "
        f"to {t} (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios = []
    for seed in seeds:
        b, o = runs[str(seed)]["brax"], runs[str(seed)]["ours"]
        ratio = (
            o["time_to_threshold_s"] / b["time_to_threshold_s"]
            if o["time_to_threshold_s"] and b["time_to_threshold_s"]
            else None
        )
        ratios.append(ratio)
        warm_cell = (
            f"{_fmt(warm['startup_s'], 1)} / {_fmt(warm['time_to_threshold_s'], 1)}"
            if warm and seed == seeds[0]
            else "-"
        )
        lines.append(
            f"| {seed} | {_fmt(b['startup_s'], 1)} | {_fmt(b['time_to_threshold_s'], 1)} | "
            f"{_fmt(b['steps_to_threshold'])} | {_fmt(b['final_reward'], 1)} | {_fmt(o['startup_s'], 1)} | "
            f"{_fmt(o['time_to_threshold_s'], 1)} | {_fmt(o['steps_to_threshold'])} | {_fmt(o['final_reward'], 1)} | "
            f"{_fmt(ratio, 2)} | {warm_cell} |"
        )
    med = {
        side: {
            key: _median([runs[str(s)][side][key] for s in seeds])
            for key in runs[str(seeds[0])][side]
            if key in ("startup_s", "time_to_threshold_s", "steps_to_threshold", "final_reward")
        }
        for side in ("brax", "ours")
    }
    med_ratio = (
        med["ours"]["time_to_threshold_s"] / med["brax"]["time_to_threshold_s"]
        if med["ours"]["time_to_threshold_s"] and med["brax"]["time_to_threshold_s"]
        else None
    )
    lines.append(
        f"| **median** | {_fmt(med['brax']['startup_s'], 1)} | {_fmt(med['brax']['time_to_threshold_s'], 1)} | "
        f"{_fmt(med['brax']['steps_to_threshold'])} | {_fmt(med['brax']['final_reward'], 1)} | "
        f"{_fmt(med['ours']['startup_s'], 1)} | {_fmt(med['ours']['time_to_threshold_s'], 1)} | "
        f"{_fmt(med['ours']['steps_to_threshold'])} | {_fmt(med['ours']['final_reward'], 1)} | "
        f"**{_fmt(med_ratio, 2)}** | - |"
    )
    lines += ["", "Load average (1 min) before -> after each run, in the order run:"]
    order = []
    for seed in seeds:
        for side, name in (("brax", "Brax"), ("ours", "ours")):
            load = runs[str(seed)][side]["load_1min"]
            order.append(f"seed {seed} {name} {load[0]:.1f} -> {load[1]:.1f}")
    if warm:
        order.append(f"ours warm {warm['load_1min'][0]:.1f} -> {warm['load_1min'][1]:.1f}")
    lines.append("; ".join(order) + ".")
    brax_steps = [s for s, _, _ in runs[str(seeds[0])]["brax"]["curve"]]
    ours_steps = [s for s, _, _ in runs[str(seeds[0])]["ours"]["curve"]]
    lines += ["", "Evaluation reward at each evaluation point (Brax / ours, cold; env steps):", ""]
    if brax_steps != ours_steps:
        lines.append(f"(The evaluation points differ: Brax {brax_steps}, ours {ours_steps}.)")
        lines.append("")
    lines.append("| seed | " + " | ".join(f"{s:,}" for s in ours_steps) + " |")
    lines.append("| --- |" + " ---: |" * len(ours_steps))
    for seed in seeds:
        bc = {s: r for s, r, _ in runs[str(seed)]["brax"]["curve"]}
        oc = {s: r for s, r, _ in runs[str(seed)]["ours"]["curve"]}
        cells = [f"{bc.get(s, float('nan')):.0f} / {oc.get(s, float('nan')):.0f}" for s in ours_steps]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def section_markdown(results: list[dict[str, Any]]) -> str:
    """The results section: what is compared, then one table per configuration."""
    head = [
        SECTION,
        "",
        f"`benchmarks/vs_brax.py`; machine: {MACHINE} (x86_64), shared with other jobs (load averages under each "
        "table). brax_core's JAX PPO (`brax_core.training.agents.ppo.train.train`) against Brax 0.14.2's "
        '(`brax.training.agents.ppo.train.train`), `get_environment(name, backend="generalized")` on both '
        "sides (configuration 4: Playground's task, as its table says), the same arguments and seeds. "
        "Every run is a fresh process, Brax and brax_core alternating; times "
        "are seconds from launching the process (imports, env construction and compilation included). "
        "brax_core's cold runs each start with an empty persistent compile cache (Brax keeps none); the warm "
        "column is one more brax_core run reusing the first seed's filled cache. Brax runs in a virtualenv the "
        "script builds (Brax 0.14.2's PPO does not start on jax 0.10). Each configuration's table comes from the "
        "command above it.",
        "",
        "",
    ]
    return "\n".join(head) + "\n".join(config_markdown(r) + "\n" for r in results)


def _write_section(path: str, text: str) -> None:
    """Replaces the section's head and the configurations just measured; keeps other configurations' tables."""
    subsection = re.compile(r"^### Configuration (\d+):.*?(?=^### Configuration |\Z)", re.S | re.M)
    tables = {int(m.group(1)): m.group(0).rstrip("\n") for m in subsection.finditer(old_section(path, SECTION))}
    new_head = text[: subsection.search(text).start()] if subsection.search(text) else text
    tables.update({int(m.group(1)): m.group(0).rstrip("\n") for m in subsection.finditer(text)})
    merged = new_head.removeprefix(SECTION).strip("\n") + "\n\n" + "\n\n".join(tables[k] for k in sorted(tables))
    print(f"wrote {SECTION!r} to {replace_section(path, SECTION, merged)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--configs", type=int, nargs="+", default=[1, 2, 3, 4], help="which configurations: 1-4")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-cache run of each configuration")
    parser.add_argument("--venv", default=os.path.expanduser("~/.cache/brax_bridge/vs_brax_venv"))
    add_write_option(parser)
    parser.add_argument("--json", default=None, help="also dump the raw figures here")
    parser.add_argument("--from-json", default=None, help="render (and --write) a previous run's figures, no runs")
    parser.add_argument(
        "--brax-on-ours",
        action="store_true",
        help="instead: train Brax's PPO on brax_core's env for each seed and configuration; print, --json the curves",
    )
    parser.add_argument("--brax-target", default=os.path.expanduser("~/.cache/brax_bridge/vs_brax_target"))
    parser.add_argument("--child", choices=("brax", "ours", "brax_on_ours"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, json.loads(args.spec))
        return
    bad = sorted(set(args.configs) - {1, 2, 3, 4})
    if bad:
        parser.error(f"--configs accepts 1, 2, 3 and 4, got {bad}")
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds must be distinct, got {args.seeds}")

    if args.brax_on_ours:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        configs = _configs()
        results = {n: brax_on_ours(configs[n], args.seeds, args.brax_target) for n in dict.fromkeys(args.configs)}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        return
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
    else:
        results = _measure(args, argv)
    text = section_markdown(results)
    print("\n" + text)
    if args.write is not None:
        _write_section(args.write, text)


def _measure(args: argparse.Namespace, argv: list[str] | None) -> list[dict[str, Any]]:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    configs = _configs()
    ensure_venv(args.venv)
    command = "python " + " ".join(["benchmarks/vs_brax.py", *(argv if argv is not None else sys.argv[1:])])
    commit = current_commit()
    results = []
    for number in dict.fromkeys(args.configs):
        result = run_case(number, configs[number], args.seeds, args.venv, warm=not args.no_warm)
        results.append({**result, "command": command, "commit": commit})
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
