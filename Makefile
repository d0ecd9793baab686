# Two commands on a fresh machine:  `make demo`  and  `make test`.
# Everything they need is installed here, from the lock file and Debian packages.

# pyenv honours .python-version (3.13); fall back to whatever python3.13 is on PATH.
PYTHON ?= $(shell pyenv which python 2>/dev/null || command -v python3.13 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
# Debian packages the tests use: a real Prometheus (and promtool), Chromium (rendered reports), redis-server (shared state).
APT_PACKAGES ?= prometheus chromium redis-server

.PHONY: demo test lint bench setup bytecode system-deps node-deps lock clean

demo: setup bytecode
	$(VENV)/bin/brownout demo

# Three workers on two cores (many tests wait on subprocesses, scrapes and timed phases: a run with two
# workers used 1.2 cores on average), whole files each (module fixtures run once); files with slow tests start first.
# A failed test runs once more (many of them time real processes, sockets and timers on a shared two-core
# machine); the summary names every rerun (R), so a flaky test is seen, and one that fails twice fails the run.
test: setup system-deps node-deps lint bytecode
	$(PY) -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder --reruns 1 --reruns-delay 1 -rfER --durations=20

# ruff (lint, format) and mypy, as configured in pyproject.toml. mypy cannot follow setuptools'
# package-dir mapping, so it checks the brownout.* namespace through a tree of links to the folders.
PACKAGE_DIRS = $(shell $(PY) -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml','rb'))['tool']['setuptools']['package-dir'].values()))")
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	rm -rf build/typecheck && mkdir -p build/typecheck/brownout
	for d in $(PACKAGE_DIRS); do ln -s ../../../$$d build/typecheck/brownout/$$d; done
	cd build/typecheck && ../../$(PY) -m mypy -p brownout --config-file ../../pyproject.toml

bench: setup
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk) || echo "wrk unavailable: the Python load generator is used"
	$(PY) bench/run.py
	$(PY) bench/bodies.py

setup: $(STAMP)

# The editable install runs the sources in place. Compiled once here, they load as bytecode in every process
# the suite starts (a few hundred: proxies, agents, CLIs), instead of being compiled again in each: where
# PYTHONDONTWRITEBYTECODE is set, as on many CI images, Python never caches them itself. A second run
# compiles only what changed.
bytecode: setup
	$(PY) -m compileall -q -j 0 $(PACKAGE_DIRS) tests bench

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	rm -f $(VENV)/.installed-* && touch $@

# The reference MCP servers (npm, pinned by the lock file) that the mcp-stdio tests start through npx.
NODE_DIR   := tests/e2e/npm
NODE_STAMP := $(NODE_DIR)/node_modules/.installed-$(shell cat $(NODE_DIR)/package-lock.json | cksum | cut -d' ' -f1)

node-deps: $(NODE_STAMP)

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	@command -v npm >/dev/null || (echo "npm is needed for the MCP server tests (Debian: apt-get install nodejs npm)" && false)
	npm ci --prefix $(NODE_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error
	rm -f $(NODE_DIR)/node_modules/.installed-* && touch $@

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# Re-resolve the pinned dependencies (needs uv: `pip install uv`).
lock:
	$(VENV)/bin/uv pip compile pyproject.toml --extra test -p $(PY) -o requirements.lock

clean:
	rm -rf $(VENV) build *.egg-info $(NODE_DIR)/node_modules
