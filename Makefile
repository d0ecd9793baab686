# Two commands on a fresh machine:  `make demo`  and  `make test`.
# Everything they need is installed here, from the lock file and Debian packages.

# pyenv honours .python-version (3.13); fall back to whatever python3.13 is on PATH.
PYTHON ?= $(shell pyenv which python 2>/dev/null || command -v python3.13 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
# Debian packages the tests use (a real Prometheus server and promtool).
APT_PACKAGES ?= prometheus

.PHONY: demo test bench setup system-deps lock clean

demo: setup
	$(VENV)/bin/brownout demo

test: setup system-deps
	$(PY) -m pytest -q

bench: setup
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk) || echo "wrk unavailable: the Python load generator is used"
	$(PY) bench/run.py

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	rm -f $(VENV)/.installed-* && touch $@

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
	rm -rf $(VENV) build *.egg-info
