# chaoskraft: `make setup`, `make run`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The main job: a campaign of simulated clusters under faults (see README).
SEEDS ?= 0-19
DURATION_S ?= 120
run: setup
	$(BIN)/chaoskraft sim --seeds $(SEEDS) --duration-s $(DURATION_S)

test: setup
	$(BIN)/python -m pytest -n 2 -q -rs

bench: setup
	$(BIN)/python bench/sim_speed.py
	$(BIN)/python bench/real_cluster.py

clean:
	rm -rf $(VENV) build *.egg-info
