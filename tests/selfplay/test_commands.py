"""``searchplay selfplay`` as a real process: killed mid-iteration with SIGKILL, then ``--resume`` finishes
the same number of iterations with no lost checkpoint. A tiny random-init model is ``models.policy`` and a
tiny real LanceDB index is the search tool: nothing is faked inside the process."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from searchplay.selfplay.checkpoint import CheckpointManager, read_state
from tests.selfplay.selfplay_fakes import write_kg_pool, write_tiny_index

pytestmark = pytest.mark.slow  # two CLI processes (torch + transformers + mlflow imports)

ITERATIONS = 3
STARTUP_TIMEOUT_S = 600


def selfplay_cli(tmp_path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "searchplay", "--params", str(tmp_path / "params.yaml"), "selfplay",
               "--variant", "kg_wcr", "--iterations", str(ITERATIONS), *extra]
    return subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def read_until(process: subprocess.Popen, marker: str) -> list[str]:
    """Lines of the process's output up to and including the first one containing ``marker``."""
    lines, deadline = [], time.monotonic() + STARTUP_TIMEOUT_S
    for line in process.stdout:
        lines.append(line)
        if marker in line or time.monotonic() > deadline:
            break
    assert any(marker in line for line in lines), "".join(lines[-30:])
    return lines


def test_a_run_killed_mid_iteration_resumes_to_the_same_iteration_count(tmp_path, tokenizer, tiny_model_dir):
    records = write_kg_pool(tmp_path / "kg", 6)
    index = write_tiny_index(tmp_path / "retrieval", records)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "models": {"policy": str(tiny_model_dir), "device": "cpu"},
        "kg": {"out_dir": str(tmp_path / "kg")},
        "index": {"dir": str(index)},
        "search": {"mode": "fts"},
        "agent": {"max_turns": 2, "max_turn_tokens": 16, "max_response_tokens": 256},
        "selfplay": {"batch_size": 2, "group_size": 2, "micro_batch_size": 1, "keep_checkpoints": ITERATIONS,
                     "checkpoint_dir": str(tmp_path / "checkpoints"), "reports_dir": str(tmp_path / "reports")},
        "warmstart": {"enabled": False},
        "tracking": {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    }))
    manager = CheckpointManager(tmp_path / "checkpoints" / "kg_wcr", keep=ITERATIONS)

    first = selfplay_cli(tmp_path)
    read_until(first, f"selfplay iteration 1/{ITERATIONS}")  # checkpoint 1 is complete; iteration 2 runs
    assert first.poll() is None, "the run finished before it could be killed"
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    assert first.returncode == -signal.SIGKILL
    done_before = [i for i, _ in manager.complete()]
    assert done_before[0] == 1 and done_before[-1] < ITERATIONS

    second = selfplay_cli(tmp_path, "--resume")
    output, _ = second.communicate(timeout=STARTUP_TIMEOUT_S)
    assert second.returncode == 0, output[-3000:]
    assert f"selfplay iteration {ITERATIONS}/{ITERATIONS}" in output and "selfplay iteration 1/" not in output

    assert [i for i, _ in manager.complete()] == list(range(1, ITERATIONS + 1))
    assert not list(manager.root.glob("*.partial")) and manager.latest().name == f"iter_{ITERATIONS:06d}"
    from transformers import AutoModelForCausalLM

    for iteration, folder in manager.complete():
        state = read_state(folder)
        assert state["iteration"] == iteration and len(state["history"]) == iteration
        assert state["cursor"] == 2 * iteration  # the curriculum continued where the kill left it
        AutoModelForCausalLM.from_pretrained(folder / "model")  # every checkpoint loads
    with (tmp_path / "reports" / "kg_wcr" / "history.csv").open() as handle:
        assert [row["iteration"] for row in csv.DictReader(handle)] == ["1.0", "2.0", "3.0"]
    from mlflow import MlflowClient  # the SIGKILLed run is continued, not left RUNNING

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("searchplay-selfplay").experiment_id])
    assert [run.info.status for run in runs] == ["FINISHED"]
    steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, "metrics/undefined")]
    assert sorted(steps) == list(range(1, ITERATIONS + 1))
