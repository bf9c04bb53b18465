"""The packages depend in one direction: brax_core -> brax_bridge -> torch_training -> torch_ppo, torch_analytic,
torch_sac -> brax_bridge_app.

One folder per layer, no exceptions: brax_core is JAX only; brax_bridge adds torch; torch_training holds what every
torch trainer shares (normaliser, layers, bridge evaluator, device rule, gradient norms, checkpoint files); the torch
trainers, torch_ppo, torch_analytic and torch_sac, stand beside each other on it and import nothing of each other;
brax_bridge_app (the command line, its run folders and reports) may import everything. Two checks:
importing each layer's modules in a fresh interpreter loads nothing from a layer above (or torch, for
brax_core), and no module of ours hides an import of our packages inside a function.
"""

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("brax_core", "brax_bridge", "torch_training", "torch_ppo", "torch_analytic", "torch_sac", "brax_bridge_app")
APPLICATION = ("brax_bridge_app",)
# The adapters' libraries (optional extras) build on torch, so they sit with it: never below the bridge core.
TORCH = ("torch", "tensordict", "torchrl", "gymnasium", "stable_baselines3", "rsl_rl")
# Optional extra -> the bridge-core module adapting it; each imports its library at module top, so without the
# extra installed that one module fails to import (and the probe skips it) while the rest of the bridge loads.
OPTIONAL_EXTRAS = {
    "torchrl": "brax_bridge.torchrl",
    "gymnasium": "brax_bridge.gymnasium",
    "stable_baselines3": "brax_bridge.sb3",
    "rsl_rl": "brax_bridge.rsl_rl",
    "onnx": None,
}

# Libraries that modules import inside the function that needs them, never at module top: MuJoCo Playground
# (the ``playground`` extra) is slow to import and loads torch and Brax, so ``brax_core.envs.playground`` loads it
# when a Playground task is first asked for; orbax takes about 0.3 s, which only a run that saves or restores a
# checkpoint pays. Importing any of our modules must load none of them.
IMPORTED_ON_USE = ("mujoco_playground", "orbax")

# (file, imported module prefix) -> why a function-local import of our own packages is right there.
LOCAL_IMPORTS_ALLOWED = {
    ("brax_bridge_app/cli.py", "brax_bridge_app"): (
        "each command loads the application module it runs, so `brax-bridge --help` answers without importing "
        "JAX, MuJoCo or torch (test_the_command_line_module_loads_no_framework checks that)"
    ),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


MODULES = [_module_name(p) for p in _sources()]
LAYERS = {
    "brax_core": [m for m in MODULES if _within(m, ("brax_core",))],
    "brax_bridge": [m for m in MODULES if _within(m, ("brax_bridge",))],
    "torch_training": [m for m in MODULES if _within(m, ("torch_training",))],
    "torch_ppo": [m for m in MODULES if _within(m, ("torch_ppo",))],
    "torch_analytic": [m for m in MODULES if _within(m, ("torch_analytic",))],
    "torch_sac": [m for m in MODULES if _within(m, ("torch_sac",))],
}
TORCH_TRAINERS = ("torch_ppo", "torch_analytic", "torch_sac")
FORBIDDEN = {
    "brax_core": ("brax_bridge", "torch_training", *TORCH_TRAINERS, *TORCH),
    "brax_bridge": ("torch_training", *TORCH_TRAINERS, *APPLICATION),
    "torch_training": (*TORCH_TRAINERS, *APPLICATION),
    **{trainer: (*(t for t in TORCH_TRAINERS if t != trainer), *APPLICATION) for trainer in TORCH_TRAINERS},
}

# Stages of (modules, forbidden prefixes), imported bottom-up in one fresh interpreter, one module at a time;
# reports per module the forbidden modules its import newly loaded. Lower stages are proven free of everything
# above them before a higher stage starts, so "newly loaded" is all that matters (and JAX/torch load once).
_PROBE = textwrap.dedent(
    """
    import importlib, json, sys
    report = []
    stages, optional = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    for modules, forbidden in stages:
        blame, skipped = {}, []
        def bad():
            return {m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in forbidden)}
        for name in modules:
            before = bad()
            try:
                importlib.import_module(name)
            except ImportError as err:
                if (err.name or "").partition(".")[0] not in optional:  # optional extras only
                    raise
                skipped.append(name)
                continue
            new = sorted(bad() - before)
            if new:
                blame[name] = new
        report.append({"blame": blame, "skipped": skipped})
    print(json.dumps(report))
    import gc
    gc.freeze()  # spares the exit the collector's walk over what the imports loaded (seconds)
    """
)


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter that imports this checkout's packages; asserts that it succeeded."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.setdefault("JAX_PLATFORMS", "cpu")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def _probe(*stages: tuple[list[str], tuple[str, ...]]) -> list[dict]:
    out = _python(_PROBE, json.dumps(stages), json.dumps(sorted(OPTIONAL_EXTRAS)))
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def layer_imports() -> dict[str, dict]:
    # The torch trainers sit side by side: each is probed after the layers below in an interpreter of its own,
    # so that neither's modules are already loaded when the other's imports are checked.
    below = ["brax_core", "brax_bridge", "torch_training"]
    reports = {}
    for trainer in TORCH_TRAINERS:
        names = [*below, trainer]
        stages = [(LAYERS[name], (*FORBIDDEN[name], *IMPORTED_ON_USE)) for name in names]
        reports.update(zip(names, _probe(*stages), strict=True))
    return reports


def test_layers_are_found():
    assert "brax_core.envs.base" in LAYERS["brax_core"]
    assert {"brax_bridge.env", "brax_bridge.differentiable", "brax_bridge.convert"} <= set(LAYERS["brax_bridge"])
    assert {"torch_training.normalizer", "torch_training.evaluation"} <= set(LAYERS["torch_training"])
    assert "torch_ppo.policy_transfer" in LAYERS["torch_ppo"]
    assert {"torch_analytic.apg", "torch_analytic.networks"} <= set(LAYERS["torch_analytic"])
    assert {"torch_sac.train", "torch_sac.losses", "torch_sac.replay_buffer"} <= set(LAYERS["torch_sac"])
    assert {"brax_bridge_app.cli", "brax_bridge_app.runs"} <= set(MODULES)
    assert not any(_within(m, APPLICATION) for layer in LAYERS.values() for m in layer)


@pytest.mark.parametrize("layer", list(LAYERS))
def test_importing_a_layer_loads_nothing_from_above(layer, layer_imports):
    result = layer_imports[layer]
    assert result["blame"] == {}, f"{layer} modules load modules of a higher layer: {result['blame']}"
    # A module is skipped only where its extra is not installed: the probe checked every module of the layer.
    absent = {module for extra, module in OPTIONAL_EXTRAS.items()
              if module and importlib.util.find_spec(extra) is None}
    assert set(result["skipped"]) == absent & set(LAYERS[layer]), result["skipped"]


# The part of brax_core the command line's flags are built from: every algorithm's configuration, standard library
# only.
SCHEMA_MODULES = {
    "brax_core", "brax_core.training", "brax_core.training.agents", "brax_core.training.config",
    "brax_core.training.agents.ppo", "brax_core.training.agents.ppo.config",
    "brax_core.training.agents.ppo.adaptive_kl",
    "brax_core.training.agents.apg", "brax_core.training.agents.apg.config", "brax_core.training.agents.shac",
    "brax_core.training.agents.shac.config", "brax_core.training.agents.sac", "brax_core.training.agents.sac.config",
    "brax_core.training.validation",
}


def test_the_command_line_module_loads_no_framework():
    forbidden = ("jax", "mujoco", "flax", *TORCH, "brax_core", "brax_bridge", "torch_training", *TORCH_TRAINERS)
    (result,) = _probe((["brax_bridge_app.cli"], forbidden))
    loaded = set(result["blame"].get("brax_bridge_app.cli", []))
    # Not even brax_bridge: importing it configures JAX's GPU memory, which the command's help has no business doing.
    assert loaded <= SCHEMA_MODULES, f"brax-bridge --help loads {sorted(loaded - SCHEMA_MODULES)}"


# The run driver both trainers share (schedule, loop, checkpoint directory) is the standard library and NumPy only.
RUN_DRIVER = [m for m in MODULES if _within(m, ("brax_core.training.run",))]
FRAMEWORKS = ("jax", "jaxlib", "flax", "optax", "orbax", "mujoco", "ml_collections", *TORCH)


def test_the_run_driver_loads_no_framework():
    assert {"brax_core.training.run.driver", "brax_core.training.run.schedule"} <= set(RUN_DRIVER)
    # One interpreter: the driver's modules, then the JAX trainer, which the probe must see loading JAX.
    driver, trainer = _probe((RUN_DRIVER, FRAMEWORKS), (["brax_core.training.agents.ppo.train"], FRAMEWORKS))
    assert driver["blame"] == {}, f"the run driver loads frameworks: {driver['blame']}"
    assert "jax" in trainer["blame"]["brax_core.training.agents.ppo.train"]  # the probe sees what is loaded


def _package(path: Path) -> str:
    """The package a file's relative imports start from (a package's ``__init__`` is that package)."""
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = package.split(".")
        base = parts[: len(parts) - (node.level - 1)]
        return [".".join([*base, node.module] if node.module else base)]
    return [node.module]


def _local_imports(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    found = []
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found += [(node.lineno, name) for name in _imported(node, package) if _within(name, PACKAGES)]
    return sorted(set(found))


def test_no_function_hides_an_import_of_our_packages():
    offenders = []
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        for line, name in _local_imports(ast.parse(path.read_text(), relative), _package(path)):
            if not any(relative == f and _within(name, (p,)) for f, p in LOCAL_IMPORTS_ALLOWED):
                offenders.append(f"{relative}:{line} imports {name} inside a function")
    assert offenders == []


def test_no_module_imports_from_a_layer_above():
    offenders = []
    for path in _sources():
        module = _module_name(path)
        layer = next((name for name, members in LAYERS.items() if module in members), None)
        if layer is None:  # the application layer may import everything
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imported = _imported(node, _package(path))
                offenders += [f"{module} imports {n}" for n in imported if _within(n, FORBIDDEN[layer])]
    assert offenders == []


def test_extras_imported_on_use_stay_inside_functions():
    offenders = []
    for path in _sources():
        tree = ast.parse(path.read_text())
        inside = {id(node) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for node in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in inside:
                names = _imported(node, _package(path))
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n} at module level"
                              for n in names if _within(n, IMPORTED_ON_USE)]
    assert offenders == []


def test_the_checks_catch_what_they_look_for():
    """A hidden import and an upward import in made-up sources are found (the checks can fail). That the import
    probe sees what a module loads is shown by the run driver's test, with the JAX trainer loading JAX."""
    source = "import os\n\ndef f():\n    from torch_ppo import train\n    import json\n    return train, json\n"
    assert _local_imports(ast.parse(source), "brax_bridge") == [(4, "torch_ppo")]
    relative = ast.parse("from .application import runs\n").body[0]
    assert _imported(relative, "brax_bridge") == ["brax_bridge.application"]
    assert _imported(ast.parse("from .. import envs\n").body[0], "brax_core.io") == ["brax_core"]


@pytest.mark.parametrize("module", ["brax_core.base", "brax_core.envs.hopper", "brax_core.io.mjcf"])
def test_brax_core_modules_that_load_mujoco_keep_its_import_line_quiet(module):
    """``import brax_core`` loads nothing (the schema above needs that), so each module that imports mujoco
    imports ``brax_core._quiet`` first: MJX's import-time line about a missing Warp never reaches stdout.

    MJX prints that line only where Warp is missing, and the suite's virtualenv has it (the playground extra), so
    the probe hides Warp from the interpreter as a machine without it would, and reports on stderr that MJX saw none.
    """
    out = _python(f"import sys\nsys.modules['warp'] = None\nimport {module}\nimport mujoco.mjx.warp as mjx_warp\n"
                  "sys.stderr.write(f'MJX sees Warp: {mjx_warp.WARP_INSTALLED}\\n')\n")
    assert "MJX sees Warp: False" in out.stderr, out.stderr[-3000:]
    assert out.stdout == ""


_WARP_PROBE = """
import importlib.util, json
import brax_core.envs
import mujoco.mjx.warp as mjx_warp
print(json.dumps({"mjx_sees_warp": mjx_warp.WARP_INSTALLED, "installed": importlib.util.find_spec("warp") is not None}))
"""


def test_mjx_keeps_warp_when_brax_core_is_imported_first():
    """Warp runs MJX's Warp implementation (the default of many MuJoCo Playground configs) on a CPU too: a program
    that imports brax_core before loading such a task must find MJX with Warp wherever Warp is installed."""
    result = json.loads(_python(_WARP_PROBE).stdout.strip().splitlines()[-1])
    assert result["mjx_sees_warp"] == result["installed"]


def test_a_jax_cuda_plugin_is_found_without_starting_jax(tmp_path, monkeypatch):
    """JAX finds its plugins as ``jax_plugins.<name>`` modules or ``jax_plugins`` entry points; so does the check."""
    import importlib.machinery
    import importlib.metadata

    from brax_core import _jax_install

    plugins = tmp_path / "jax_plugins"
    (plugins / "xla_tpu").mkdir(parents=True)
    (plugins / "xla_tpu" / "__init__.py").write_text("")
    spec = importlib.machinery.ModuleSpec("jax_plugins", None, is_package=True)
    spec.submodule_search_locations = [str(plugins)]
    monkeypatch.setattr(_jax_install.importlib.util, "find_spec", lambda name: spec if name == "jax_plugins" else None)
    monkeypatch.setattr(_jax_install.importlib.metadata, "entry_points", lambda group: [])
    assert _jax_install.cuda_plugin_installed() is False
    (plugins / "xla_cuda13").mkdir()
    (plugins / "xla_cuda13" / "__init__.py").write_text("")
    assert _jax_install.cuda_plugin_installed() is True
    (plugins / "xla_cuda13" / "__init__.py").unlink()
    (plugins / "xla_cuda13").rmdir()
    entry = importlib.metadata.EntryPoint("xla_cuda12", "jax_cuda12_plugin", "jax_plugins")
    monkeypatch.setattr(_jax_install.importlib.metadata, "entry_points", lambda group: [entry])
    assert _jax_install.cuda_plugin_installed() is True
