"""Process-wide defaults, set before heavy libraries import: running offline and quietly (no progress bar
for work under a second: ``hide_short_progress_bars``), how OpenMP threads wait on a machine that is already
busy (``choose_thread_wait``), glibc's malloc kept from handing large blocks back to the kernel
(``keep_freed_memory``) and rare full garbage collections (``tune_garbage_collection``); and torch's math
kernels run once before a model's first forward (``warm_math_kernels``)."""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

MALLOC_TUNING_ENV = "SEARCHPLAY_MALLOC_TUNING"  # "0": leave glibc's malloc as it is
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4  # mallopt parameters, glibc <malloc.h>

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


PROGRESS_BAR_DELAY_S = 1.0  # a tqdm bar shows once its work has lasted this long


def hide_short_progress_bars(delay_s: float = PROGRESS_BAR_DELAY_S) -> None:
    """Every tqdm bar of this process and its children shows only after ``delay_s`` seconds of work.

    transformers draws a bar for each model it loads ("Loading weights") or saves ("Writing model shards"):
    useful for a 7B model, while a 135M one loads in a tenth of a second and its bars are a tenth of a quick
    run's log. tqdm reads ``TQDM_DELAY`` when it is imported, so this runs before it is; a bar's own ``delay``
    and a ``TQDM_DELAY`` the user set win.
    """
    os.environ.setdefault("TQDM_DELAY", str(delay_s))


THREAD_WAIT_ENV = "SEARCHPLAY_THREAD_WAIT"  # auto (default) | spin | passive
SET_BY_US_ENV = "SEARCHPLAY_SET_OMP_WAIT_POLICY"  # "1": a searchplay process set it, so a child decides anew
BUSY_CORES_FOR_PASSIVE = 0.5  # other processes' load at the start that makes threads wait passively
PROC_STAT = "/proc/stat"


def _cpu_ticks(path: str = PROC_STAT) -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from the aggregate ``cpu`` line of /proc/stat; None where there is none."""
    try:
        with open(path, encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = ticks[3] + ticks[4]
    return sum(ticks) - idle, sum(ticks)


def busy_cores(window_s: float = 0.2, ticks: Callable[[], tuple[int, int] | None] = _cpu_ticks) -> float | None:
    """How many cores other processes kept busy over the next ``window_s`` seconds (this process sleeps
    meanwhile); None where /proc/stat cannot be read (macOS, Windows)."""
    first = ticks()
    time.sleep(window_s)
    second = ticks()
    if first is None or second is None or second[1] <= first[1]:
        return None
    return (second[0] - first[0]) / (second[1] - first[1]) * (os.cpu_count() or 1)


def choose_thread_wait(environ: MutableMapping[str, str] = os.environ,
                       measure: Callable[[], float | None] = busy_cores) -> str:
    """Let OpenMP's threads sleep at once (``OMP_WAIT_POLICY=PASSIVE``) when other processes keep at least
    ``BUSY_CORES_FOR_PASSIVE`` cores busy as this command starts; otherwise leave torch's spinning default.

    Spinning threads are fastest on an idle machine, but beside a busy process they wait at every barrier for
    a thread the scheduler parked: torch's default then keeps 26-42% of its idle speed, passive waiting 66-80%,
    while passive costs 25-37% of idle speed in decoding (docs/benchmarks.md, "Beside another process"). How
    threads wait changes no result. Must run before torch loads (OpenMP reads the setting once). A user's own
    ``OMP_WAIT_POLICY`` wins (one a parent searchplay command set does not: each DVC stage decides at its own
    start); ``SEARCHPLAY_THREAD_WAIT`` = ``spin`` or ``passive`` fixes the choice. Returns the choice: ``user``,
    ``spin`` or ``passive``.
    """
    if "OMP_WAIT_POLICY" in environ and environ.get(SET_BY_US_ENV) != "1":
        return "user"
    environ.pop("OMP_WAIT_POLICY", None)  # set by a parent searchplay (``pipeline`` runs each stage as a child)
    environ.pop(SET_BY_US_ENV, None)
    wanted = environ.get(THREAD_WAIT_ENV, "auto").lower()
    if wanted == "auto":
        busy = measure()
        wanted = "passive" if busy is not None and busy >= BUSY_CORES_FOR_PASSIVE else "spin"
        if wanted == "passive":
            log.info("%.1f of %d cores were busy at the start: threads wait passively (OMP_WAIT_POLICY=PASSIVE; "
                     "%s=spin keeps torch's default)", busy, os.cpu_count() or 1, THREAD_WAIT_ENV)
    if wanted == "passive":
        environ["OMP_WAIT_POLICY"] = "PASSIVE"
        environ[SET_BY_US_ENV] = "1"
    elif wanted != "spin":
        raise ValueError(f"{THREAD_WAIT_ENV}={wanted!r}: expected auto, spin or passive")
    return wanted


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
    global _freed_memory_kept
    _freed_memory_kept = applied
    return applied


_freed_memory_kept = False  # keep_freed_memory applied in this process


GC_TUNING_ENV = "SEARCHPLAY_GC_TUNING"  # "0": leave Python's garbage collector as it is
FULL_COLLECTION_EVERY = 1000  # young (generation-1) collections between full ones; CPython's default: 10
_gc_tuned = False


# Triton (vLLM imports it) is built with nanobind, which at exit prints every object of its types still alive:
# frozen, they all are (about 25 lines of "nanobind: leaked 514 functions!" at the end of each vLLM stage)
LEAK_CHECKED = ("triton",)


def freeze_unless_leak_checked() -> None:
    """``gc.freeze()`` at exit (no collection of what is about to be freed), unless a ``LEAK_CHECKED`` module is
    loaded: its objects must be collected first, as CPython's exit does, or it reports them as leaks."""
    import gc

    if not any(name in sys.modules for name in LEAK_CHECKED):
        gc.freeze()


def tune_garbage_collection() -> bool:
    """Make CPython's full garbage collections rare, and skip the one at exit (``gc.freeze`` in an exit
    handler that runs after those the heavy imports register).

    A command imports torch, transformers, sentence-transformers, MLflow and LanceDB: about a million objects
    that live until it ends, each of which every full collection visits again. With CPython's defaults an
    evaluation stage ran 11 full collections (2.0 s) and spent 2.0 s more at exit collecting what is about to
    be freed anyway, of its 17 s (docs/benchmarks.md, "Garbage collection"). Reference counting still frees
    everything outside cycles at once and the young collections still find new cycles; a full collection comes
    after ``FULL_COLLECTION_EVERY`` young ones. What a command computes does not change. Exit handlers (MLflow's,
    atexit's own) still run before the freeze. Where a module that checks for leaked objects at exit is loaded
    (``LEAK_CHECKED``), the exit collects as CPython's default does instead. Returns whether it applied: not with
    ``SEARCHPLAY_GC_TUNING=0``; once a process.
    """
    import atexit
    import gc

    global _gc_tuned
    if os.environ.get(GC_TUNING_ENV, "1") == "0" or _gc_tuned:
        return False
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
    atexit.register(freeze_unless_leak_checked)  # before the heavy imports register theirs: runs after them (LIFO)
    _gc_tuned = True
    return True


@contextmanager
def large_blocks_mapped(threshold: int = 4 << 20) -> Iterator[None]:
    """Within the block, blocks of ``threshold`` bytes or more are mapped and unmapped again when freed, as
    glibc does by default; outside it, ``keep_freed_memory`` holds. For generation: its batch caches (tens of
    MB a layer, a few allocations a call) then never enter the heap that training reuses, so they leave no
    holes there. On entry the heap's free pages go back to the system (``malloc_trim(0)``): the mapped blocks
    cannot reuse them, so a generation right after an update would otherwise stack its caches on the memory
    the update freed. A no-op where ``keep_freed_memory`` did not apply."""
    if not _freed_memory_kept:
        yield
        return
    return_free_heap()
    mallopt = ctypes.CDLL(None).mallopt
    mallopt(M_MMAP_THRESHOLD, threshold)
    mallopt(M_MMAP_MAX, 1 << 16)
    try:
        yield
    finally:
        mallopt(M_MMAP_MAX, 0)


def return_free_heap() -> None:
    """Give the heap's free pages back to the system now (glibc's ``malloc_trim(0)``); a no-op where
    ``keep_freed_memory`` did not apply.

    For memory freed in the middle of the heap that what comes next cannot reuse: the heap an update freed
    before a generation's mapped caches (``large_blocks_mapped``), and each row a prefill runs on the heap
    (about a megabyte a layer, under that threshold) once it is copied into the mapped batch cache.
    """
    if _freed_memory_kept:
        ctypes.CDLL(None).malloc_trim(0)


def zeros_paged_on_write(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    """A tensor of zeros that takes memory only where it is written: on a CPU, a private anonymous mapping (with
    4 KiB pages), whose untouched pages read as the kernel's zero page and are not resident; elsewhere
    ``torch.zeros``. ``torch.zeros`` writes every page, so a batch cache laid out at its final size would hold
    its rows' left padding and its unused room in memory although nothing is ever stored there.
    """
    import math
    import mmap

    import torch

    device = torch.device(device)
    nbytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
    anonymous = getattr(mmap, "MAP_ANONYMOUS", None)
    if device.type != "cpu" or anonymous is None or nbytes == 0:
        return torch.zeros(shape, dtype=dtype, device=device)
    mapping = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | anonymous)  # unmapped when the tensor is freed
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # a huge page would make one write resident 2 MiB at a time
        mapping.madvise(mmap.MADV_NOHUGEPAGE)
    return torch.frombuffer(mapping, dtype=dtype).view(shape)


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
             f" (largest child process: {children:.2f} GiB, pages shared at a fork included)" if children > 0.01
             else "")


WARMED_KERNELS = ("cos", "sin", "exp", "log", "tanh", "erf")  # element-wise ops a transformer's forward calls
PARALLEL_ELEMENTS = 1 << 17  # above ATen's grain size (32,768 elements), so every intra-op thread takes a part


@functools.cache
def warm_math_kernels() -> None:
    """Run torch's element-wise math kernels once, on one thread and then on all, results discarded; once per
    process, before a model's first forward (``searchplay.llm.weights.load_causal_lm`` calls it).

    A process's first ``cos`` was not always exact: on the development Xeon (2 threads, torch 2.13) about a
    quarter of the warm-up check's processes computed the second intra-op thread's half of it differently, and
    every later call in the same process was exact. The model's first forward is where that first ``cos`` fell:
    the rotary embedding of the base model's first prompt batch, whose bf16 cos then took the other neighbouring
    bf16 value at 354 of 39,936 entries. Its logits moved by a few bf16 steps, and the sampled Proposer text of
    the warm-up checks differed between reruns of the same code and seed (docs/benchmarks.md, "What a rerun with
    the same code and seed changes"). Taking that first call here stopped the drift (0 of 14 runs, 9 of 39
    before); about 10 ms.
    """
    import torch

    for name in WARMED_KERNELS:
        for size in (16, PARALLEL_ELEMENTS):
            getattr(torch, name)(torch.linspace(0.5, 100.0, size))
