# hetlb: the two commands of the README.
#   make demo   set up a virtual environment and run the demo (table + plot in out/)
#   make test   set up a virtual environment and run the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test bench setup

$(BIN)/hetlb: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/hetlb

setup: $(BIN)/hetlb

demo: setup
	$(BIN)/hetlb demo --out out

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/run_benchmarks.py
