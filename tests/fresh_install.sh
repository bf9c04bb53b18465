#!/usr/bin/env bash
# `make test`: installs brax-bridge the way a user does and checks it, then runs the test suite.
#
# 1. a fresh virtualenv ($TEST_VENV) with a current pip, torch==2.13.0 first (the CPU build), then a wheel built
#    from this checkout with no extras (not editable); `pip check`, and tests/install_check.py core: TorchEnv,
#    both trainers and `brax-bridge train`, imported from the virtualenv from outside the checkout;
# 2. each extra of $EXTRAS added in turn, each followed by its own check (its adapter or feature on a tiny case);
# 3. the `test` extra, then the suite (pytest -n 2) in the same virtualenv, unless SUITE=0.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
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
