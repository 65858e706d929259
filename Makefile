# hetlb: the two commands of the README.
#   make demo   set up a virtual environment and run the demo (table + plot in out/)
#   make test   set up a virtual environment, check the code (ruff lint and format, mypy), run the
#               test suite with the doctests (the tests that are not live on every core with
#               pytest-xdist, then the live ones, also in parallel), then the kernels as plain Python
#               (NUMBA_DISABLE_JIT=1); .ci/run runs this
# For development:
#   make lint       only the checks of the code
#   make docs       the documentation site into site/ (mkdocs build --strict), as make test builds it
#   make test-fast  the test suite without the tests marked slow or live, on every core
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast lint docs bench setup

# the modules that define compiled functions (hetlb.jit.compiled_sources, whose hash names numba's
# cache directory): an edit of one of them fills the cache again
KERNEL_SOURCES := $(shell grep -rl njit src/hetlb --include='*.py')

$(BIN)/hetlb: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,docs]'
	touch $(BIN)/hetlb

$(VENV)/compiled: $(BIN)/hetlb $(KERNEL_SOURCES)
	-$(BIN)/hetlb compile --quiet
	touch $(VENV)/compiled

setup: $(BIN)/hetlb $(VENV)/compiled

demo: setup
	$(BIN)/hetlb demo --out out

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# the documentation site (mkdocs.yml) into site/, warnings as errors; open site/index.html
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# the tests marked live (tests/conftest.py) run real processes and compare live timings with the
# simulator's: they run after the others, so that they never share the cores with a CPU-bound test;
# both phases run on every core (pytest-xdist, a file per worker)
WORKERS ?= auto

test: setup
	$(MAKE) --no-print-directory -j2 lint docs
	$(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile -m "not soak and not live"
	$(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile -m "live and not soak"
	NUMBA_DISABLE_JIT=1 $(BIN)/python -m pytest -q -n $(WORKERS) -m jit_off

test-fast: setup
	$(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile -m "not slow and not soak and not live"

bench: setup
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/run_benchmarks.py
