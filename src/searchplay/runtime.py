"""Process-wide defaults: running offline and quietly (set before heavy libraries import), and glibc's
malloc kept from handing large blocks back to the kernel (``keep_freed_memory``)."""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

MALLOC_TUNING_ENV = "SEARCHPLAY_MALLOC_TUNING"  # "0": leave glibc's malloc as it is
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # mallopt parameters, glibc <malloc.h>

OFFLINE_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    "DO_NOT_TRACK": "true",
    "DVC_NO_ANALYTICS": "1",
    "GX_ANALYTICS_ENABLED": "false",
    "LANCEDB_LOG": "error",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}


def apply_offline_defaults(online: bool = False) -> None:
    """Set each default unless the user already set it; ``online`` leaves the hub reachable."""
    for key, value in OFFLINE_DEFAULTS.items():
        if online and key in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}:
            continue
        os.environ.setdefault(key, value)


def keep_freed_memory(trim_threshold: int = 1 << 30) -> bool:
    """Have glibc's malloc serve large blocks from its heap and keep up to ``trim_threshold`` bytes of freed
    memory there (``mallopt(M_MMAP_MAX, 0)``, ``mallopt(M_TRIM_THRESHOLD, …)``).

    By default each block over the mmap threshold (128 KiB, rising to at most 32 MiB) is mapped fresh and
    unmapped when freed, so a PyTorch CPU tensor of that size faults in and zeroes its pages again on every
    allocation. Training allocates such activations and gradients at every step: three self-play update
    steps took 36.6 s against 47.2 s without this, every loss the same (``benchmarks/rl_trainer.py
    --compare-malloc``, docs/decisions.md "Foundation"). Freed memory is reused by the process instead of
    returned to the system.
    Returns whether it applied: not where the C library has no ``mallopt`` (macOS, musl), nor with
    ``SEARCHPLAY_MALLOC_TUNING=0``.
    """
    if os.environ.get(MALLOC_TUNING_ENV, "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, the C library's among them
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    applied = bool(mallopt(M_TRIM_THRESHOLD, trim_threshold)) and bool(mallopt(M_MMAP_MAX, 0))
    if not applied:
        log.debug("mallopt refused the malloc tuning; glibc's defaults stay")
    return applied


def peak_memory_gib() -> tuple[float, float]:
    """The largest resident set so far, in GiB: of this process, and of the largest finished child process
    (DVC runs each stage as one process; ingestion and the retrieval server start children)."""
    import resource
    import sys

    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * unit
    return own / 2**30, children / 2**30


def log_peak_memory(command: str) -> None:
    """One log line at the end of a command that ended well: its peak memory (a failed one prints its one-line
    error alone)."""
    own, children = peak_memory_gib()
    log.info("peak memory of `searchplay %s`: %.2f GiB%s", command, own,
             f" (largest child process: {children:.2f} GiB)" if children > 0.01 else "")
