"""`make setup` takes torch's CPU build on Linux without an NVIDIA driver, PyPI's CUDA build with one, and the
development machines' local wheels where they have them: the install command `make` would run, read with
`make -n`."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def install_command(venv: Path, **variables: str) -> str:
    """The `uv pip install` line `make setup` runs for the package into ``venv``, with these make variables."""
    overrides = [f"{name}={value}" for name, value in variables.items()]
    result = subprocess.run(["make", "-n", "-B", "--no-print-directory", f"VENV={venv}", *overrides,
                             f"{venv}/.installed"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if "uv pip install" in line]
    assert len(lines) == 1, result.stdout
    return lines[0]


@pytest.mark.skipif(platform.system() != "Linux", reason="the CPU build is chosen on Linux only")
def test_linux_without_an_nvidia_driver_takes_the_cpu_build(tmp_path):
    command = install_command(tmp_path / "venv", WHEELS=str(tmp_path / "no-wheels"), NVIDIA_DRIVER="")
    assert "--torch-backend cpu" in command
    assert "--find-links" not in command


def test_a_machine_with_an_nvidia_driver_takes_pypis_cuda_build(tmp_path):
    command = install_command(tmp_path / "venv", WHEELS=str(tmp_path / "no-wheels"),
                              NVIDIA_DRIVER="/usr/bin/nvidia-smi")
    assert "--torch-backend" not in command and "--find-links" not in command


def test_torch_backend_chooses_the_build(tmp_path):
    command = install_command(tmp_path / "venv", WHEELS=str(tmp_path / "no-wheels"), NVIDIA_DRIVER="",
                              TORCH_BACKEND="cu130")
    assert "--torch-backend cu130" in command
    assert "--torch-backend" not in install_command(tmp_path / "venv", WHEELS=str(tmp_path / "no-wheels"),
                                                    TORCH_BACKEND="")


def test_local_wheels_serve_torch_where_they_exist(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    command = install_command(tmp_path / "venv", WHEELS=str(wheels), NVIDIA_DRIVER="")
    assert f"--find-links {wheels}" in command
    assert "--torch-backend" not in command  # uv would take torch from PyTorch's index instead of the folder
