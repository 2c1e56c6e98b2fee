"""Helpers for tests that start several processes (torchrun on 127.0.0.1)."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now (for torchrun's --master_port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(command: list[str], timeout_s: int = 900) -> None:
    """Run ``command``; fail the test with the tail of its output when it exits non-zero."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
