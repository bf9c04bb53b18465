#!/usr/bin/env bash
# `make test`: installs brax-bridge the way a user does and checks it, then runs the test suite.
#
# 1. a fresh virtualenv ($TEST_VENV) with a current pip, torch==2.13.0 first (the CPU build), then a wheel built
#    from this checkout with no extras (not editable); `pip check`, and tests/install_check.py core: TorchEnv,
#    both trainers and `brax-bridge train`, imported from the virtualenv from outside the checkout;
# 2. each extra of $EXTRAS added in turn, each followed by its own check (its adapter or feature on a tiny case);
# 3. the main job's path as a newcomer meets it: `make run` with the machine's stock Python ($STOCK_PYTHON: the
#    distribution's /usr/bin/python3 where it is supported, which refuses `pip install` outside a virtualenv) into a
#    fresh virtualenv of its own, at a tiny size, then again, reusing that virtualenv without installing anything;
# 4. the `test` extra, then the suite (pytest -n 2) in the same virtualenv, unless SUITE=0.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
source scripts/check_python.sh
check_python "$PYTHON"
TEST_VENV=${TEST_VENV:-.venv-test}
EXTRAS=${EXTRAS:-torchrl gymnasium sb3 rsl-rl export playground tensorboard wandb docs}
SUITE=${SUITE:-1}
start=$(date +%s)
step() { echo "== [$(( $(date +%s) - start )) s] $*"; }

step "fresh virtualenv $TEST_VENV"
rm -rf "$TEST_VENV"
"$PYTHON" -m venv "$TEST_VENV"
VENV_PYTHON=$ROOT/$TEST_VENV/bin/python
# A current pip, as a user's would be: the pip that Python 3.11's venv bundles (23.2) parses every installed
# package's requirements with pyparsing, about 7 s per `pip install` even where there is nothing to install, against
# under 2 s for pip 26.3; the upgrade pays for itself on the second install.
"$VENV_PYTHON" -m pip install --disable-pip-version-check -q --upgrade pip
# --no-compile: pip would byte-compile every file of every package (torch alone: three quarters of its install
# time); Python compiles the modules a run imports when it first imports them, and keeps them in this throwaway
# virtualenv even where the environment says not to write bytecode (without that, every process of the checks and
# the suite would compile torch and JAX from source again).
unset PYTHONDONTWRITEBYTECODE
pip_install() { "$VENV_PYTHON" -m pip install --disable-pip-version-check --no-compile -q "$@"; }
pip_install torch==2.13.0
"$VENV_PYTHON" -m pip wheel --disable-pip-version-check -q --no-deps -w "$TEST_VENV/dist" .
WHEEL=$(ls "$ROOT/$TEST_VENV"/dist/brax_bridge-*.whl)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
check() {
  # From a folder outside the checkout, so that `import brax_core` finds the installed package.
  (cd "$WORK" && "$VENV_PYTHON" "$ROOT/tests/install_check.py" "$1" --work "$WORK")
}

step "pip install $(basename "$WHEEL") (no extras)"
pip_install torch==2.13.0 "$WHEEL"
"$VENV_PYTHON" -m pip check
check core

for extra in $EXTRAS; do
  step "extra $extra"
  pip_install torch==2.13.0 "$WHEEL[$extra]"
  check "$extra"
done

if [ -z "${STOCK_PYTHON:-}" ]; then
  STOCK_PYTHON=$PYTHON
  if [ -x /usr/bin/python3 ] && (check_python /usr/bin/python3) 2>/dev/null; then STOCK_PYTHON=/usr/bin/python3; fi
fi
step "make run with $STOCK_PYTHON into a fresh virtualenv, at a tiny size"
RUN_VENV=$WORK/run-venv
TINY_RUN="--seeds 0 --num-timesteps 800 --num-envs 8 --batch-size 8 --num-minibatches 2 --unroll-length 5 \
--num-evals 2 --num-eval-envs 8 --episode-length 20 --policy-hidden-layer-sizes 8,8 --value-hidden-layer-sizes 8,8"
# Without the outer make's flags and variables (`make test PYTHON=...` must not reach this make).
make_run() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory run PYTHON="$STOCK_PYTHON" VENV="$RUN_VENV" \
    OUT="$WORK/main-job" RUN_ARGS="$TINY_RUN"
}
make_run
step "make run again: the virtualenv reused, nothing installed"
make_run | tee "$WORK/second-run.log"
grep -q "^== reusing the virtualenv $RUN_VENV" "$WORK/second-run.log"
if grep "^== installing\|^== creating" "$WORK/second-run.log"; then echo "the second make run installed again"; exit 1; fi
"$VENV_PYTHON" - "$WORK/main-job" "$RUN_VENV" "$STOCK_PYTHON" <<'PY'
import json, pathlib, subprocess, sys
out, venv, stock = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
runs = json.loads((out / "compare.json").read_text())["runs"]
assert sorted((run["trainer"], run["status"]) for run in runs) == [("jax", "completed"), ("torch", "completed")], runs
assert (out / "report.md").is_file() and (out / "compare.png").is_file()
base = [subprocess.check_output([python, "-c", "import sys; print(sys.base_prefix)"], text=True)
        for python in (f"{venv}/bin/python", stock)]
assert base[0] == base[1], f"the virtualenv was not made by {stock}: {base}"
print(f"main job: both trainers completed, report.md and compare.png written, virtualenv made by {stock}")
PY

if [ "$SUITE" = 1 ]; then
  # The render and video tests draw frames with a headless OpenGL backend (Mesa's EGL or OSMesa); where neither
  # works, Debian's Mesa packages are installed when this runs as root with apt-get, else those tests report skips.
  has_gl() {
    (cd "$WORK" && "$VENV_PYTHON" -c "from brax_core.io import image; exit(image.backend_available() is None)")
  }
  if ! has_gl && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    step "headless OpenGL for the render tests: apt-get install libegl1 libgl1-mesa-dri libosmesa6"
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libegl1 libgl1-mesa-dri \
      libosmesa6 >/dev/null; } || echo "could not install Mesa's OpenGL: the render tests will report skips"
  fi
  step "extra test, then the test suite"
  pip_install torch==2.13.0 "$WHEEL[test]"
  "$VENV_PYTHON" -m pip check
  "$VENV_PYTHON" -m pytest -q -n 2 --dist worksteal
fi
step "done"
