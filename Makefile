# The README's two commands: `make run` (the main job) and `make test` (install checks, then the test suite).
# Everything is installed into a virtualenv of the checkout's own ($(VENV)), made with $(PYTHON) on first use and
# reused after: distribution Pythons refuse `pip install` outside one (PEP 668). torch==2.13.0 goes in before the
# package (scripts/venv.sh); TORCH_INDEX=https://download.pytorch.org/whl/cpu takes PyTorch's CPU build from its own
# index instead of PyPI's CUDA build on Linux.
PYTHON ?= python3
VENV ?= .venv
VENV_PYTHON = $(VENV)/bin/python
TORCH_INDEX ?=
OUT ?= runs/compare_inverted_pendulum
# Extra flags of the main job (`make run RUN_ARGS="--seeds 0,1"`).
RUN_ARGS ?=
ALL_EXTRAS = test,torchrl,gymnasium,sb3,rsl-rl,export,playground,tensorboard,wandb,docs
# A virtualenv made by another Python is made again only when PYTHON is given on the command line.
PYTHON_EXPLICIT = $(if $(filter command line,$(origin PYTHON)),1,0)
VENV_SCRIPT = PYTHON="$(PYTHON)" PYTHON_EXPLICIT=$(PYTHON_EXPLICIT) VENV="$(VENV)" TORCH_INDEX="$(TORCH_INDEX)" \
	bash scripts/venv.sh
# `make test` builds this virtualenv afresh each time, as a user's first install would be.
TEST_VENV ?= .venv-test
EXTRAS ?= torchrl gymnasium sb3 rsl-rl export playground tensorboard wandb docs

.PHONY: install run test install-check pytest test-slow lint bench docs

# The package with every extra the tests and docs use, into $(VENV).
install:
	@EXTRAS=$(ALL_EXTRAS) $(VENV_SCRIPT)

# The main job in $(VENV), which needs no extra (made and installed on first use, reused after).
run:
	@EXTRAS= $(VENV_SCRIPT)
	$(VENV_PYTHON) -m brax_bridge_app.cli compare --env inverted_pendulum --out $(OUT) $(RUN_ARGS)
	@echo "== brax-bridge is installed in the virtualenv $(VENV): 'source $(VENV)/bin/activate' gives the brax-bridge command"

# A fresh virtualenv, the package installed from a wheel of the checkout with no extras, then each extra added
# with a check of what it brings; then the whole suite in that virtualenv.
test:
	PYTHON=$(PYTHON) TEST_VENV=$(TEST_VENV) EXTRAS="$(EXTRAS)" bash tests/fresh_install.sh

# The install checks alone (no test suite).
install-check:
	PYTHON=$(PYTHON) TEST_VENV=$(TEST_VENV) EXTRAS="$(EXTRAS)" SUITE=0 bash tests/fresh_install.sh

# The suite in $(VENV) (after `make install`), for quick iterations.
pytest:
	$(VENV_PYTHON) -m pytest -q -n 2 --dist worksteal

# The slow tier in $(VENV) (after `make install`): the tests marked `slow`, which the default selection
# (`-m 'not slow'` in pyproject.toml) and so `make test` leave out: long training runs, every env with both trainers,
# the two-process runs.
test-slow:
	$(VENV_PYTHON) -m pytest -q -m slow -n 2 --dist worksteal

lint:
	$(VENV_PYTHON) -m ruff check .

bench:
	@EXTRAS= $(VENV_SCRIPT)
	$(VENV_PYTHON) -m brax_bridge_app.cli bench

# The documentation site into site/ (the `docs` extra; `mkdocs serve` previews it). --strict: a broken link or an
# unknown API reference fails the build. NO_MKDOCS_2_WARNING silences a notice of the theme about its own future.
docs:
	NO_MKDOCS_2_WARNING=1 $(VENV_PYTHON) -m mkdocs build --strict
