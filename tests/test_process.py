"""Process-wide settings: offline defaults, how threads wait on a busy machine (``choose_thread_wait``) and
glibc's malloc tuning (``keep_freed_memory``)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from searchplay import process


class FakeLibc:
    """Records ``mallopt(parameter, value)`` calls and answers ``result`` (glibc: 1 on success)."""

    def __init__(self, result: int = 1):
        self.calls: list[tuple[int, int]] = []
        self.result = result

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return self.result

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("trim", pad))
        return 1


@pytest.fixture(autouse=True)
def _restore_malloc_state(monkeypatch):
    """keep_freed_memory records whether it applied; these tests call it with fake C libraries."""
    monkeypatch.setattr(process, "_freed_memory_kept", process._freed_memory_kept)


def test_generation_maps_its_large_blocks_and_the_heap_tuning_returns_after(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(process.ctypes, "CDLL", lambda name: libc)
    monkeypatch.setattr(process, "_freed_memory_kept", True)
    with pytest.raises(RuntimeError), process.large_blocks_mapped():  # the heap's free pages go back first
        assert libc.calls == [("trim", 0), (process.M_MMAP_THRESHOLD, 4 << 20), (process.M_MMAP_MAX, 1 << 16)]
        raise RuntimeError("a generation that fails")
    assert libc.calls[-1] == (process.M_MMAP_MAX, 0)  # back to keeping freed memory in the heap
    monkeypatch.setattr(process, "_freed_memory_kept", False)  # tuning off: glibc's defaults hold throughout
    libc.calls.clear()
    with process.large_blocks_mapped():
        pass
    assert libc.calls == []


def test_free_heap_pages_go_back_only_where_the_heap_keeps_them(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(process.ctypes, "CDLL", lambda name: libc)
    monkeypatch.setattr(process, "_freed_memory_kept", True)
    process.return_free_heap()
    assert libc.calls == [("trim", 0)]
    monkeypatch.setattr(process, "_freed_memory_kept", False)  # glibc's defaults, or no glibc: nothing to do
    process.return_free_heap()
    assert libc.calls == [("trim", 0)]


def test_malloc_tuning_keeps_large_blocks_in_the_heap(monkeypatch):
    libc = FakeLibc()
    monkeypatch.delenv(process.MALLOC_TUNING_ENV, raising=False)
    monkeypatch.setattr(process.ctypes, "CDLL", lambda name: libc)
    assert process.keep_freed_memory() is True
    assert libc.calls == [(process.M_TRIM_THRESHOLD, 1 << 30), (process.M_MMAP_MAX, 0)]


def test_malloc_tuning_is_off_with_the_switch_or_without_mallopt(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(process.ctypes, "CDLL", lambda name: libc)
    monkeypatch.setenv(process.MALLOC_TUNING_ENV, "0")
    assert process.keep_freed_memory() is False and libc.calls == []
    monkeypatch.delenv(process.MALLOC_TUNING_ENV)
    monkeypatch.setattr(process.ctypes, "CDLL", lambda name: object())  # a C library without mallopt (macOS, musl)
    assert process.keep_freed_memory() is False
    monkeypatch.setattr(process.ctypes, "CDLL", lambda name: FakeLibc(result=0))  # mallopt refused
    assert process.keep_freed_memory() is False

    def no_library(name):
        raise OSError("no C library")

    monkeypatch.setattr(process.ctypes, "CDLL", no_library)
    assert process.keep_freed_memory() is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's; this platform's C library is "
                    f"{platform.libc_ver()[0] or 'not glibc'}")
def test_malloc_tuning_applies_on_glibc():
    code = "from searchplay.process import keep_freed_memory; print(keep_freed_memory())"
    env = {key: value for key, value in os.environ.items() if key != process.MALLOC_TUNING_ENV}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert result.stdout.strip() == "True"


@pytest.mark.parametrize("tuning", ["keep_freed_memory", "tune_garbage_collection", "hide_short_progress_bars"])
def test_every_command_runs_with_the_process_tuning(monkeypatch, tmp_path, tuning):
    from searchplay import cli

    called = []
    monkeypatch.setattr(cli, tuning, lambda: called.append(True) or True)
    monkeypatch.setenv("SEARCHPLAY_HOME", str(tmp_path))
    CliRunner().invoke(cli.app, ["assets", "--check"])
    assert called == [True]


def _bar_output(work_s: float, delay_s: float, user_delay: str | None = None) -> str:
    """What transformers' weight-loading bar writes, in a fresh interpreter, over ``work_s`` seconds of work."""
    code = ("import sys, time\n"
            "from searchplay.process import hide_short_progress_bars\n"
            f"hide_short_progress_bars({delay_s})\n"
            "from transformers.utils.logging import tqdm\n"
            f"for _ in tqdm(range(4), desc='Loading weights', file=sys.stdout): time.sleep({work_s} / 4)\n")
    env = {key: value for key, value in os.environ.items() if key != "TQDM_DELAY"}
    if user_delay is not None:
        env["TQDM_DELAY"] = user_delay
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout


def test_progress_bars_show_only_for_work_that_lasts():
    assert _bar_output(work_s=0.0, delay_s=1.0) == ""  # a 135M model's weights load in a tenth of a second
    assert "Loading weights: 100%" in _bar_output(work_s=0.6, delay_s=0.2)  # a large model's still show
    assert "Loading weights: 100%" in _bar_output(work_s=0.0, delay_s=1.0, user_delay="0")  # the user's wins


def _gc_probe(env_value: str | None) -> list[str]:
    """Run the tuning in a fresh interpreter; it prints the thresholds, then, from an exit handler registered
    after the tuning (which runs first) and once every handler ran, whether the tuning's freeze has run."""
    code = ("import atexit, gc; start = gc.get_freeze_count()  # Python 3.12 starts with objects frozen\n"
            "from searchplay.process import tune_garbage_collection as tune\n"
            "print(tune(), tune(), gc.get_threshold()[2])\n"
            "atexit.register(lambda: print('frozen before my handler:', gc.get_freeze_count() > start))\n"
            "atexit._run_exitfuncs(); print('frozen after the handlers:', gc.get_freeze_count() > start)\n")
    env = {key: value for key, value in os.environ.items() if key != process.GC_TUNING_ENV}
    if env_value is not None:
        env[process.GC_TUNING_ENV] = env_value
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return result.stdout.splitlines()[:3]


def test_gc_tuning_makes_full_collections_rare_and_freezes_last_at_exit():
    applied, again, full_every = _gc_probe(None)[0].split()
    assert (applied, again, int(full_every)) == ("True", "False", process.FULL_COLLECTION_EVERY)  # once a process
    assert _gc_probe(None)[1:] == ["frozen before my handler: False", "frozen after the handlers: True"]


def test_gc_tuning_is_off_with_the_switch():
    assert _gc_probe("0") == ["False False 10", "frozen before my handler: False",  # CPython's defaults stay
                              "frozen after the handlers: False"]


def test_peak_memory_counts_what_this_process_touched():
    from searchplay.process import peak_memory_gib

    block = bytearray(300 * 2**20)  # 300 MiB, written so its pages are resident
    block[::4096] = b"x" * len(block[::4096])
    own, children = peak_memory_gib()
    assert own >= 0.29 and children >= 0.0


def _resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm (Linux) to read RSS")
def test_zeros_paged_on_write_hold_only_the_pages_written():
    import torch

    from searchplay.process import zeros_paged_on_write

    before = _resident_mib()
    cache = zeros_paged_on_write((16, 4, 4096, 64), torch.float32, "cpu")  # 64 MiB
    assert cache.shape == (16, 4, 4096, 64) and cache.dtype == torch.float32 and cache.is_contiguous()
    cache[:, :, 4000:] = 1.0  # the last 96 positions of each row and head: 1.5 MiB
    grown = _resident_mib() - before
    # Read after the measure: a reduction's temporaries (16 MiB for any() here) stay in the heap once another
    # test in this process applied keep_freed_memory.
    assert not cache[:, :, :4000].any()  # the pages never written read as zero
    assert cache.sum().item() == 16 * 4 * 96 * 64
    assert grown < 16  # not the 64 MiB torch.zeros would have written
    del cache  # unmapped with the tensor: a second one is as lean
    before = _resident_mib()
    again = zeros_paged_on_write((16, 4, 4096, 64), torch.bfloat16, torch.device("cpu"))
    again[:, :, 4000:] = 1.0
    assert _resident_mib() - before < 16
    assert again.dtype == torch.bfloat16 and not again[:, :, :4000].any()  # last: reading it all allocates


def test_zeros_paged_on_write_are_plain_zeros_off_the_cpu():
    import torch

    from searchplay.process import zeros_paged_on_write

    tensor = zeros_paged_on_write((2, 3), torch.float32, "meta")
    assert tensor.device.type == "meta" and tensor.shape == (2, 3)
    assert zeros_paged_on_write((0, 3), torch.float32, "cpu").shape == (0, 3)


def test_a_command_that_ends_well_logs_its_peak_memory_and_a_failed_one_only_its_error(caplog, tmp_path):
    import logging

    from typer.testing import CliRunner

    from searchplay.cli import app

    sets = ["--set", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}", "--set", f"selfplay.checkpoint_dir={tmp_path}",
            "--set", f"warmstart.out_dir={tmp_path / 'ws'}", "--set", f"eve.warmstart_out_dir={tmp_path / 'wse'}"]
    with caplog.at_level(logging.INFO, logger="searchplay.process"):
        result = CliRunner().invoke(app, [*sets, "status"])
        failed = CliRunner().invoke(app, ["--set", "selfplay.iterations=many", "status"])
    lines = [r.getMessage() for r in caplog.records if r.name == "searchplay.process"]
    assert result.exit_code == 0 and failed.exit_code == 2
    assert len(lines) == 1 and lines[0].startswith("peak memory of `searchplay status")



def test_threads_wait_passively_only_where_the_machine_is_busy_at_the_start():
    assert process.choose_thread_wait(environ := {}, measure=lambda: 1.2) == "passive"
    assert environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert process.choose_thread_wait(environ, measure=lambda: 0.1) == "spin"  # a child stage, machine now idle
    assert environ == {}
    assert process.choose_thread_wait(environ := {}, measure=lambda: 0.1) == "spin" and environ == {}
    assert process.choose_thread_wait(environ := {}, measure=lambda: None) == "spin" and environ == {}  # no /proc


def test_the_users_setting_wins_over_the_load_check():
    def never():
        raise AssertionError("measured although the choice was made")

    assert process.choose_thread_wait(environ := {"OMP_WAIT_POLICY": "ACTIVE"}, measure=never) == "user"
    assert environ == {"OMP_WAIT_POLICY": "ACTIVE"}
    assert process.choose_thread_wait(environ := {process.THREAD_WAIT_ENV: "passive"}, measure=never) == "passive"
    assert environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert process.choose_thread_wait(environ := {process.THREAD_WAIT_ENV: "spin"}, measure=never) == "spin"
    with pytest.raises(ValueError, match="expected auto, spin or passive"):
        process.choose_thread_wait({process.THREAD_WAIT_ENV: "fast"}, measure=never)


def test_busy_cores_reads_the_other_processes_share_of_the_window(monkeypatch):
    readings = iter([(100, 1000), (100 + 150, 1000 + 200)])  # 150 of 200 jiffies busy over the window
    monkeypatch.setattr(process.os, "cpu_count", lambda: 2)
    assert process.busy_cores(0.0, ticks=lambda: next(readings)) == pytest.approx(1.5)
    assert process.busy_cores(0.0, ticks=lambda: None) is None


def test_cpu_ticks_reads_the_aggregate_line(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 1 5 80 4 0 0 0 0 0\ncpu0 5 0 2 40 2 0 0 0 0 0\n")
    assert process._cpu_ticks(str(stat)) == (16, 100)
    assert process._cpu_ticks(str(tmp_path / "none")) is None


@pytest.mark.skipif(not os.path.exists(process.PROC_STAT), reason="no /proc/stat on this platform")
def test_busy_cores_measures_this_machine():
    assert 0.0 <= process.busy_cores(0.1) <= (os.cpu_count() or 1) + 0.01


def test_a_bad_thread_wait_setting_is_a_configuration_error(monkeypatch):
    from searchplay import cli

    monkeypatch.setenv(process.THREAD_WAIT_ENV, "fast")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    result = CliRunner().invoke(cli.app, ["assets", "--check"])
    assert result.exit_code == 2 and "expected auto, spin or passive" in result.output


def test_math_kernels_are_warmed_on_one_thread_then_on_all(monkeypatch):
    import torch

    calls: list[tuple[str, int]] = []
    for name in process.WARMED_KERNELS:
        monkeypatch.setattr(torch, name, lambda x, name=name: calls.append((name, x.numel())))
    process.warm_math_kernels.__wrapped__()
    assert {name for name, _ in calls} >= {"cos", "sin"}  # the rotary embedding's
    assert calls == [(name, size) for name in process.WARMED_KERNELS for size in (16, process.PARALLEL_ELEMENTS)]
    assert process.PARALLEL_ELEMENTS > 32_768  # ATen's grain size: a smaller tensor runs on the calling thread alone


def test_math_kernels_are_warmed_once_per_process():
    process.warm_math_kernels()
    before = process.warm_math_kernels.cache_info().hits
    process.warm_math_kernels()
    assert process.warm_math_kernels.cache_info().hits == before + 1


def test_the_exit_collects_where_a_module_reports_leaks_and_freezes_elsewhere():
    pytest.importorskip("triton", reason="triton comes with vLLM (make setup-vllm) or PyPI's CUDA torch")
    tuned_then = ("from searchplay.process import tune_garbage_collection\n"
                  "tune_garbage_collection()\n")
    leaks = subprocess.run([sys.executable, "-c", tuned_then + "import triton._C.libtriton\n"],
                           capture_output=True, text=True, check=True)
    assert "nanobind: leaked" not in leaks.stderr, leaks.stderr[-600:]  # 25 lines of it with a freeze at exit
    code = (tuned_then + "import atexit, gc\nstart = gc.get_freeze_count()\n"
            "atexit._run_exitfuncs(); print(gc.get_freeze_count() > start)\n")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "True"  # no triton: the freeze stays
