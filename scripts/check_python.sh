# Sourced by scripts/venv.sh and tests/fresh_install.sh: check_python PYTHON stops with one line naming what to
# install when PYTHON is missing, older than brax-bridge supports, or cannot make a virtualenv with pip in it, before
# anything is created or downloaded.

# pyproject.toml's requires-python (tests/test_make_venv.py checks that the two agree).
BRAX_BRIDGE_MIN_PYTHON=3.11

check_python() {
  local python=$1 version
  if ! command -v "$python" >/dev/null 2>&1; then
    echo "error: PYTHON=$python: no such command; brax-bridge needs Python >= $BRAX_BRIDGE_MIN_PYTHON" \
      "(Debian/Ubuntu: sudo apt install python3 python3-venv; or pass one: make run PYTHON=python3.12)" >&2
    exit 2
  fi
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || version=unknown
  if ! "$python" -c "import sys; sys.exit(sys.version_info[:2] < tuple(map(int, '$BRAX_BRIDGE_MIN_PYTHON'.split('.'))))" \
      2>/dev/null; then
    echo "error: PYTHON=$python is Python $version; brax-bridge needs Python >= $BRAX_BRIDGE_MIN_PYTHON: install" \
      "a newer one (Debian/Ubuntu: sudo apt install python3.11 python3.11-venv) and pass it, e.g." \
      "make run PYTHON=python3.11" >&2
    exit 2
  fi
  # Debian and Ubuntu ship `venv` without ensurepip (and so without pip in new virtualenvs) unless python3-venv
  # is installed; `python -m venv` would then fail halfway with a longer message.
  if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "error: PYTHON=$python (Python $version) cannot make a virtualenv with pip: its venv or ensurepip module" \
      "is missing; install it (Debian/Ubuntu: sudo apt install python$version-venv) and run this again" >&2
    exit 2
  fi
}
