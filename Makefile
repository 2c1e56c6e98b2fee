# searchplay: `make run` sets up and runs the main job; `make test` sets up and runs the tests.
# Both are idempotent: a second call re-installs nothing and re-runs only what changed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SP := $(VENV)/bin/searchplay
# This machine keeps a CPU build of torch in /opt/wheels; elsewhere uv takes torch from PyPI.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export MLFLOW_DISABLE_TELEMETRY ?= true
export DO_NOT_TRACK ?= true
export DVC_NO_ANALYTICS ?= 1
export GX_ANALYTICS_ENABLED ?= false
export LANCEDB_LOG ?= error
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120

.PHONY: setup assets run run-quick test test-fast lint clean

# --compile-bytecode: every stage is a new process; where PYTHONDONTWRITEBYTECODE is set (as on CI) each
# one would compile its imports again (measured: 22 s of imports per process, 9.5 s with the .pyc files).
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv==0.13.8
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) $(FIND_LINKS) -e '.[dev]'
	touch $@

setup: $(VENV)/.installed assets

assets: $(VENV)/.installed
	$(SP) assets

run: setup
	$(SP) pipeline

run-quick: setup
	$(SP) pipeline --quick

test: setup
	SEARCHPLAY_REQUIRE_ASSETS=1 $(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests flows tasks benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
