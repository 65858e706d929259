# hetlb: the two commands of the README.
#   make demo   set up a virtual environment and run the demo (table + plot in out/)
#   make test   set up a virtual environment, check the code (ruff lint and format, mypy), run the
#               test suite with the doctests, then the kernels as plain Python (NUMBA_DISABLE_JIT=1);
#               .ci/run runs this
# For development:
#   make lint       only the checks of the code
#   make test-fast  the test suite without the tests marked slow
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast lint bench setup

$(BIN)/hetlb: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	-$(BIN)/hetlb compile --quiet
	touch $(BIN)/hetlb

setup: $(BIN)/hetlb

demo: setup
	$(BIN)/hetlb demo --out out

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q
	NUMBA_DISABLE_JIT=1 $(BIN)/python -m pytest -q -m jit_off

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

bench: setup
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/run_benchmarks.py
