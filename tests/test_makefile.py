"""`make setup`: the torch build it installs (the CPU build on Linux without an NVIDIA driver, PyPI's CUDA build
with one, the development machines' local wheels where they have them), read from the command `make -n` prints;
and the errors that stop it before a broken venv (an older Python, a failed `python -m venv`, a venv folder
without Python or pip), run for real."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
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
    assert "run make again with TORCH_BACKEND= for PyPI's torch" in command  # where PyTorch's index is blocked


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
    assert "TORCH_BACKEND=" not in command


def older_python() -> str | None:
    """An interpreter older than 3.11 on this machine (on the PATH or under pyenv), or None."""
    candidates = [shutil.which(f"python3.{minor}") for minor in (10, 9, 8)]
    candidates += sorted(str(p) for p in (Path.home() / ".pyenv" / "versions").glob("3.1[0-9]*/bin/python3.1[0-9]"))
    for path in filter(None, candidates):
        probe = subprocess.run([path, "-c", "import sys; print(sys.version_info < (3, 11))"], capture_output=True,
                               text=True, timeout=60)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return path
    return None


def make_install(venv: Path, **variables: str) -> subprocess.CompletedProcess:
    overrides = [f"{name}={value}" for name, value in variables.items()]
    return subprocess.run(["make", "--no-print-directory", f"VENV={venv}", *overrides, f"{venv}/.installed"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def old_python() -> str:
    path = older_python()
    if path is None:
        pytest.skip("no Python older than 3.11 on this machine")
    return path


def test_an_older_python_stops_the_setup_before_a_venv_is_made(tmp_path, old_python):
    result = make_install(tmp_path / "venv", PYTHON=old_python)
    assert result.returncode != 0
    assert "searchplay needs Python 3.11 or newer" in result.stderr
    assert "run make again with PYTHON=python3.11" in result.stderr
    assert not (tmp_path / "venv").exists()


def test_a_venv_of_an_older_python_is_named_not_reused(tmp_path, old_python):
    subprocess.run([old_python, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120)
    result = make_install(tmp_path / "venv", PYTHON=sys.executable)
    assert result.returncode != 0
    assert f"remove {tmp_path / 'venv'}, then run make again" in result.stderr
    assert not (tmp_path / "venv" / ".installed").exists()


def test_a_failed_venv_leaves_no_folder_and_says_what_to_install(tmp_path):
    """Debian's and Ubuntu's Python without python3-venv: `python -m venv` makes the folder, then fails."""
    python = tmp_path / "python-without-ensurepip"
    python.write_text(f"#!/bin/sh\nif [ \"$1\" = -m ] && [ \"$2\" = venv ]; then shift 2; {sys.executable} -m venv "
                      "--without-pip \"$@\"; echo 'ensurepip is not available' >&2; exit 1; fi\n"
                      f"exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    result = make_install(tmp_path / "venv", PYTHON=str(python))
    assert result.returncode != 0
    assert "install python3-venv for this Python), then run make again" in result.stderr
    assert not (tmp_path / "venv").exists()  # so the next call makes it again


def test_a_venv_folder_without_python_or_pip_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    result = make_install(tmp_path / "empty", PYTHON=sys.executable)
    assert result.returncode != 0 and "exists but holds no Python" in result.stderr
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=120)
    result = make_install(tmp_path / "bare", PYTHON=sys.executable)
    assert result.returncode != 0 and "has no pip" in result.stderr
    assert not (tmp_path / "bare" / ".installed").exists()
