# The README's two commands: `make run` (the main job) and `make test` (install checks, then the test suite).
# torch is pinned before the package so pip takes the CPU build instead of several GB of CUDA wheels.
PYTHON ?= python3
PIP = $(PYTHON) -m pip install --disable-pip-version-check -q
OUT ?= runs/compare_inverted_pendulum
# `make test` builds this virtualenv afresh each time, as a user's first install would be.
TEST_VENV ?= .venv-test
EXTRAS ?= torchrl gymnasium sb3 rsl-rl export playground tensorboard wandb docs

.PHONY: install run test install-check pytest test-slow lint bench docs

install:
	$(PIP) torch==2.13.0
	$(PIP) torch==2.13.0 -e ".[test,torchrl,gymnasium,sb3,rsl-rl,export,playground,tensorboard,wandb,docs]"

run: install
	$(PYTHON) -m brax_bridge_app.cli compare --env inverted_pendulum --out $(OUT)

# A fresh virtualenv, the package installed from a wheel of the checkout with no extras, then each extra added
# with a check of what it brings; then the whole suite in that virtualenv.
test:
	PYTHON=$(PYTHON) TEST_VENV=$(TEST_VENV) EXTRAS="$(EXTRAS)" bash tests/fresh_install.sh

# The install checks alone (no test suite).
install-check:
	PYTHON=$(PYTHON) TEST_VENV=$(TEST_VENV) EXTRAS="$(EXTRAS)" SUITE=0 bash tests/fresh_install.sh

# The suite in the current environment (after `make install`), for quick iterations.
pytest:
	$(PYTHON) -m pytest -q -n 2 --dist worksteal

# The slow tier in the current environment (after `make install`): the tests marked `slow`, which the default selection
# (`-m 'not slow'` in pyproject.toml) and so `make test` leave out: long training runs, every env with both trainers,
# the two-process runs.
test-slow:
	$(PYTHON) -m pytest -q -m slow -n 2 --dist worksteal

lint:
	$(PYTHON) -m ruff check .

bench: install
	$(PYTHON) -m brax_bridge_app.cli bench

# The documentation site into site/ (the `docs` extra; `mkdocs serve` previews it). --strict: a broken link or an
# unknown API reference fails the build. NO_MKDOCS_2_WARNING silences a notice of the theme about its own future.
docs:
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict
