"""Timings apart from results: the split, and DVC ignoring timings.json wherever a stage writes it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from searchplay.timings import is_timing, split_timings, timing_rows, write_timings

ROOT = Path(__file__).resolve().parents[1]


def test_durations_and_rates_are_timings_and_results_are_not():
    timings = ["time/propose_s", "time/iteration_s", "train/seconds", "train/tokens_per_s", "throughput/tokens_per_s",
               "time_total_s", "elapsed_s", "tokens_per_s"]
    results = ["solver/accuracy", "train/loss", "tokens", "trained_tokens", "kg_heldout_em", "iteration", "steps"]
    assert all(is_timing(k) for k in timings)
    assert not any(is_timing(k) for k in results)


def test_split_keeps_order_and_rows_keep_their_index(tmp_path):
    results, timings = split_timings({"loss": 1.0, "time_train_s": 3.0, "tokens": 5})
    assert list(results) == ["loss", "tokens"] and timings == {"time_train_s": 3.0}
    rows = timing_rows([{"step": 1.0, "loss": 2.0, "elapsed_s": 4.5}], "step")
    assert rows == [{"step": 1.0, "elapsed_s": 4.5}]
    assert write_timings(tmp_path, timings).name == "timings.json"


@pytest.mark.skipif(shutil.which("dvc") is None and not (Path(sys.executable).parent / "dvc").exists(),
                    reason="dvc is not installed")
@pytest.mark.parametrize("path", ["reports/eval/kg_wcr/timings.json", "reports/selfplay/ssp/timings.json",
                                  "reports/warmstart/timings.json",
                                  "checkpoints/kg_wcr/resume/iter_000002/run_state.json",
                                  "checkpoints/kg_wcr/resume/iter_000002/trainer/random_states_0.pkl"])
def test_dvc_ignores_every_stages_timings(path):
    dvc = shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")
    found = subprocess.run([dvc, "check-ignore", "--non-matching", "--details", path], cwd=ROOT,
                           capture_output=True, text=True, check=False)
    assert found.returncode == 0 and ".dvcignore" in found.stdout, found.stdout + found.stderr
    pattern = found.stdout.split("\t")[0].split(":", 2)[2]  # ".dvcignore:10:timings.json\tpath"
    assert not pattern.startswith("!"), found.stdout  # a negated pattern matches too, and un-ignores
