#!/usr/bin/env bash
# The Makefile's virtualenv: creates $VENV with $PYTHON (or reuses it), installs torch==2.13.0 and then the package
# (editable, with the comma-separated $EXTRAS) into it, and records what it installed so that the next call with the
# same pyproject.toml, Python and extras installs nothing. Distribution Pythons (Debian 12, Ubuntu 23.04 and later,
# Fedora, Homebrew) refuse `pip install` outside a virtualenv (PEP 668), so nothing is ever installed outside one.
#
#   PYTHON=python3 VENV=.venv EXTRAS=torchrl,test TORCH_INDEX=https://download.pytorch.org/whl/cpu bash scripts/venv.sh
#
# TORCH_INDEX, when set, is the index torch alone comes from (PyTorch's CPU index above: the CPU build instead of
# PyPI's CUDA build on Linux). A virtualenv made here by another Python is made again with $PYTHON when
# PYTHON_EXPLICIT=1 (the Makefile sets it when PYTHON is given on its command line) and kept as it is otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-}
PYTHON_EXPLICIT=${PYTHON_EXPLICIT:-1}
TORCH_INDEX=${TORCH_INDEX:-}
TORCH=torch==2.13.0
# shellcheck source=scripts/check_python.sh
source scripts/check_python.sh
venv_python=$VENV/bin/python
stamp=$VENV/.brax-bridge-install
stamped() { sed -n "s/^$1=//p" "$stamp" 2>/dev/null; }

if [ -f "$stamp" ] && [ "$PYTHON_EXPLICIT" != 1 ] && "$venv_python" -c '' 2>/dev/null; then
  python_id=$(stamped python)  # the virtualenv's own Python, kept
  PYTHON=$venv_python
else
  check_python "$PYTHON"
  python_id=$("$PYTHON" -c 'import sys; print(sys.executable, "%d.%d.%d" % sys.version_info[:3])')
fi
key=$("$PYTHON" -c 'import hashlib, sys; print(hashlib.sha256(open("pyproject.toml", "rb").read()
  + sys.argv[1].encode()).hexdigest())' "$TORCH $TORCH_INDEX")

# Every requested extra among those installed already.
extras_installed() {
  local have=",$(stamped extras),"
  local extra
  for extra in ${EXTRAS//,/ }; do
    [[ $have == *",$extra,"* ]] || return 1
  done
}

if [ -f "$stamp" ] && { [ "$(stamped python)" != "$python_id" ] || ! "$venv_python" -c '' 2>/dev/null; }; then
  # Made here by another Python (or that Python is gone): made again.
  echo "== $VENV was made with $(stamped python); making it again with $PYTHON ($python_id)"
  rm -rf "$VENV"
fi
if [ -f "$stamp" ]; then
  if [ "$(stamped key)" = "$key" ] && extras_installed; then
    echo "== reusing the virtualenv $VENV ($python_id): brax-bridge is installed there, nothing to install"
    exit 0
  fi
elif [ -e "$VENV" ]; then
  # A virtualenv this script did not make (a user's own .venv, say) is installed into, never deleted.
  if ! [ -f "$VENV/pyvenv.cfg" ] || ! "$venv_python" -c '' 2>/dev/null; then
    echo "error: VENV=$VENV exists and is not a working virtualenv; remove it or pass another folder," \
      "e.g. make run VENV=.venv-brax-bridge" >&2
    exit 2
  fi
  echo "== installing into the existing virtualenv $VENV"
else
  echo "== creating the virtualenv $VENV with $PYTHON ($python_id)"
  "$PYTHON" -m venv "$VENV"
  # A current pip: the one a venv bundles may predate the metadata of the wheels this install reads.
  "$venv_python" -m pip install --disable-pip-version-check -q --upgrade pip
fi

# Extras installed before and those asked for now, so that `make run` after `make install` keeps them.
all_extras=$(printf '%s\n' ${EXTRAS//,/ } $(stamped extras | tr ',' ' ') | sort -u | paste -sd, -)
pip_install() { "$venv_python" -m pip install --disable-pip-version-check -q "$@"; }
echo "== installing $TORCH${TORCH_INDEX:+ from $TORCH_INDEX} into $VENV"
if [ -n "$TORCH_INDEX" ]; then
  pip_install --index-url "$TORCH_INDEX" "$TORCH"
else
  pip_install "$TORCH"
fi
echo "== installing brax-bridge (editable${all_extras:+, extras $all_extras}) into $VENV"
pip_install "$TORCH" -e ".${all_extras:+[$all_extras]}"
printf 'python=%s\nkey=%s\nextras=%s\n' "$python_id" "$key" "$all_extras" > "$stamp"
