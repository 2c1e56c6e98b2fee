"""Process-wide settings: offline defaults and glibc's malloc tuning (``keep_freed_memory``)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from searchplay import runtime


class FakeLibc:
    """Records ``mallopt(parameter, value)`` calls and answers ``result`` (glibc: 1 on success)."""

    def __init__(self, result: int = 1):
        self.calls: list[tuple[int, int]] = []
        self.result = result

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return self.result


def test_malloc_tuning_keeps_large_blocks_in_the_heap(monkeypatch):
    libc = FakeLibc()
    monkeypatch.delenv(runtime.MALLOC_TUNING_ENV, raising=False)
    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: libc)
    assert runtime.keep_freed_memory() is True
    assert libc.calls == [(runtime.M_TRIM_THRESHOLD, 1 << 30), (runtime.M_MMAP_MAX, 0)]


def test_malloc_tuning_is_off_with_the_switch_or_without_mallopt(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: libc)
    monkeypatch.setenv(runtime.MALLOC_TUNING_ENV, "0")
    assert runtime.keep_freed_memory() is False and libc.calls == []
    monkeypatch.delenv(runtime.MALLOC_TUNING_ENV)
    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: object())  # a C library without mallopt (macOS, musl)
    assert runtime.keep_freed_memory() is False
    monkeypatch.setattr(runtime.ctypes, "CDLL", lambda name: FakeLibc(result=0))  # mallopt refused
    assert runtime.keep_freed_memory() is False

    def no_library(name):
        raise OSError("no C library")

    monkeypatch.setattr(runtime.ctypes, "CDLL", no_library)
    assert runtime.keep_freed_memory() is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's; this platform's C library is "
                    f"{platform.libc_ver()[0] or 'not glibc'}")
def test_malloc_tuning_applies_on_glibc():
    code = "from searchplay.runtime import keep_freed_memory; print(keep_freed_memory())"
    env = {key: value for key, value in os.environ.items() if key != runtime.MALLOC_TUNING_ENV}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert result.stdout.strip() == "True"


def test_every_command_runs_with_the_malloc_tuning(monkeypatch, tmp_path):
    from searchplay import cli

    called = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: called.append(True) or True)
    monkeypatch.setenv("SEARCHPLAY_HOME", str(tmp_path))
    CliRunner().invoke(cli.app, ["assets", "--check"])
    assert called == [True]


def test_peak_memory_counts_what_this_process_touched():
    from searchplay.runtime import peak_memory_gib

    block = bytearray(300 * 2**20)  # 300 MiB, written so its pages are resident
    block[::4096] = b"x" * len(block[::4096])
    own, children = peak_memory_gib()
    assert own >= 0.29 and children >= 0.0


def test_a_command_that_ends_well_logs_its_peak_memory_and_a_failed_one_only_its_error(caplog, tmp_path):
    import logging

    from typer.testing import CliRunner

    from searchplay.cli import app

    sets = ["--set", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}", "--set", f"selfplay.checkpoint_dir={tmp_path}",
            "--set", f"warmstart.out_dir={tmp_path / 'ws'}", "--set", f"warmstart.eve_out_dir={tmp_path / 'wse'}"]
    with caplog.at_level(logging.INFO, logger="searchplay.runtime"):
        result = CliRunner().invoke(app, [*sets, "status"])
        failed = CliRunner().invoke(app, ["--set", "selfplay.iterations=many", "status"])
    lines = [r.getMessage() for r in caplog.records if r.name == "searchplay.runtime"]
    assert result.exit_code == 0 and failed.exit_code == 2
    assert len(lines) == 1 and lines[0].startswith("peak memory of `searchplay status")

