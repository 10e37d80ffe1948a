# chaoskraft: `make setup`, `make run`, `make test`.
# setup installs what the project needs: Debian packages (mmdebstrap to build the
# base image, a Java runtime for Spark, headless Chromium for the browser tests, a C
# compiler and Python's headers for the native checker), the virtual environment (which
# builds checkers/_wgl.c), and the images.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-packages images run sim sim-nightly nightly test bench clean cleanup

setup: system-packages $(STAMP) images

system-packages:
	@missing=""; \
	command -v mmdebstrap >/dev/null || missing="$$missing mmdebstrap"; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	$(PYTHON) -c "import ensurepip, venv" 2>/dev/null || missing="$$missing python3-venv"; \
	command -v cc >/dev/null || missing="$$missing gcc"; \
	$(PYTHON) -c "import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" 2>/dev/null || missing="$$missing python3-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get -o DPkg::Lock::Timeout=600 update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq $$missing; \
	fi
	@command -v docker >/dev/null || { echo "Docker is required (the engine and its CLI)"; exit 1; }

# setup.py builds the native checker kernel (checkers/_wgl.c) into the source tree.
$(STAMP): pyproject.toml setup.py checkers/_wgl.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

images: $(STAMP)
	$(BIN)/chaoskraft image build

# The main job: the default campaign against a local 5-node Docker cluster.
run: setup
	$(BIN)/chaoskraft run

# The simulator: many seeds of simulated clusters under faults.
SEEDS ?= 0-19
sim: $(STAMP)
	$(BIN)/chaoskraft sim --seeds $(SEEDS) --duration-s 120

# The nightly simulator sweep: 200 seeds of each workload (CI runs a chunk of them).
sim-nightly: $(STAMP)
	$(BIN)/chaoskraft sim --seeds 0-199 --duration-s 120
	$(BIN)/chaoskraft sim --workload queue --seeds 0-199 --duration-s 120

test: setup
	$(BIN)/python -m pytest -n 4 --dist loadgroup -q -rs --durations=25

# The long sweeps CI leaves out (DESIGN section 9): the test suite with every seed of its
# sweeps (200 simulator seeds of each workload, every planted bug swept from seed 0, every
# Docker seed of a cell), then the Docker detection table of every planted bug over SEEDS
# (two campaigns side by side), printed and kept in results/matrix.
NIGHTLY_SEEDS ?= 1-10
nightly: setup
	CHAOSKRAFT_NIGHTLY=1 $(BIN)/python -m pytest -n 4 --dist loadgroup -q -rs --durations=25
	$(BIN)/chaoskraft matrix --bugs docker --seeds $(NIGHTLY_SEEDS) -j 2

bench: $(STAMP)
	$(BIN)/python bench/sim_speed.py
	$(BIN)/python bench/real_cluster.py
	$(BIN)/python bench/checker_corpus.py
	$(BIN)/python bench/timeline_load.py

cleanup: $(STAMP)
	$(BIN)/chaoskraft cleanup

clean:
	rm -rf $(VENV) build *.egg-info
