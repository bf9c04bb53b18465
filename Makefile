# The README's two commands: `make run` (the main job) and `make test` (the test suite).
# torch is pinned before the package so pip takes the CPU build instead of several GB of CUDA wheels.
PYTHON ?= python3
PIP = $(PYTHON) -m pip install --disable-pip-version-check -q
OUT ?= runs/compare_inverted_pendulum

.PHONY: install run test lint bench

install:
	$(PIP) torch==2.13.0
	$(PIP) torch==2.13.0 -e ".[test,torchrl,gymnasium,sb3,rsl-rl,export,playground]"

run: install
	$(PYTHON) -m brax_bridge.cli compare --env inverted_pendulum --out $(OUT)

test: install
	$(PYTHON) -m pytest -q -n 2 --dist worksteal

lint:
	$(PYTHON) -m ruff check .

bench: install
	$(PYTHON) -m brax_bridge.cli bench
