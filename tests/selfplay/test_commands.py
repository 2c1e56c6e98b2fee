"""``searchplay selfplay`` as a real process under ``dvc repro``: killed mid-iteration with SIGKILL, then a
second ``dvc repro`` finishes the same number of iterations from the last complete checkpoint, with no lost
checkpoint and the final weights of an uninterrupted run. As in dvc.yaml, the exported final model is the stage's
output and the resume state beside it is none. A tiny random-init model is ``models.policy`` and a
tiny real LanceDB index is the search tool: nothing is faked inside the process."""

import csv
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from searchplay.selfplay.checkpoint import CheckpointManager, read_state
from tests.selfplay.selfplay_fakes import write_kg_pool, write_tiny_index

pytestmark = pytest.mark.slow  # two CLI processes (torch + transformers + mlflow imports)

ITERATIONS = 3
STARTUP_TIMEOUT_S = 600


BIN = Path(sys.executable).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "DVC_NO_ANALYTICS": "1",
       "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
SELFPLAY = ["searchplay", "--params", "params.yaml", "selfplay", "--variant", "kg_wcr", "--iterations",
            str(ITERATIONS)]
STAGE = {"stages": {"selfplay": {"cmd": " ".join([*SELFPLAY, "--resume-if-unchanged"]), "deps": ["params.yaml"],
                                 "outs": ["checkpoints/kg_wcr/model"]}}}


def dvc_repro(folder) -> subprocess.Popen:
    """``dvc repro`` in its own process group, so a SIGKILL reaches DVC and the stage it runs."""
    return subprocess.Popen([str(BIN / "dvc"), "repro"], cwd=folder, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def write_project(folder, tiny_model_dir, kg_dir, index) -> None:
    """A git+DVC project whose one stage is a self-play run on the tiny model."""
    folder.mkdir()
    (folder / "params.yaml").write_text(yaml.safe_dump({
        "models": {"policy": str(tiny_model_dir), "device": "cpu"},
        "kg": {"out_dir": str(kg_dir)},
        "index": {"dir": str(index)},
        "search": {"mode": "fts"},
        "agent": {"max_turns": 2, "max_turn_tokens": 16, "max_response_tokens": 256},
        # A random model writes no valid question, so every advantage is 0: at lr 1e-3 the weight decay moves the
        # weights from the first step and the KL term then gives Adam gradients, so a resume that lost the
        # optimizer's state or the schedule's step ends elsewhere (at the default 1e-5 nothing moved).
        "selfplay": {"batch_size": 2, "group_size": 2, "micro_batch_size": 1, "keep_checkpoints": ITERATIONS,
                     "lr": 1e-3, "weight_decay": 0.1, "checkpoint_dir": "checkpoints", "reports_dir": "reports"},
        "warmstart": {"enabled": False},
        "tracking": {"uri": f"sqlite:///{folder / 'mlflow.db'}"},
    }))
    (folder / "dvc.yaml").write_text(yaml.safe_dump(STAGE))
    for command in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"]):
        subprocess.run(command, cwd=folder, env=ENV, check=True)


def weights_digest(run_dir) -> str:
    """The digest of a run's exported final model (``<checkpoint_dir>/<run>/model``)."""
    return hashlib.sha256((run_dir / "model" / "model.safetensors").read_bytes()).hexdigest()


def moved_tensors(start_dir, run_dir) -> list[str]:
    """Names of the tensors whose values differ between a start model and a run's exported final model."""
    from safetensors.torch import load_file

    start = {k: v for f in Path(start_dir).glob("*.safetensors") for k, v in load_file(str(f)).items()}
    end = load_file(str(run_dir / "model" / "model.safetensors"))
    return [name for name, tensor in end.items() if not start[name].float().equal(tensor.float())]


def read_until(process: subprocess.Popen, marker: str) -> list[str]:
    """Lines of the process's output up to and including the first one containing ``marker``."""
    lines, deadline = [], time.monotonic() + STARTUP_TIMEOUT_S
    for line in process.stdout:
        lines.append(line)
        if marker in line or time.monotonic() > deadline:
            break
    assert any(marker in line for line in lines), "".join(lines[-30:])
    return lines


def test_dvc_repro_after_a_kill_resumes_to_the_weights_of_an_unbroken_run(tmp_path, tokenizer, tiny_model_dir):
    records = write_kg_pool(tmp_path / "kg", 6)
    index = write_tiny_index(tmp_path / "retrieval", records)
    unbroken, project = tmp_path / "unbroken", tmp_path / "project"
    for folder in (unbroken, project):
        write_project(folder, tiny_model_dir, tmp_path / "kg", index)
    reference = subprocess.run(SELFPLAY, cwd=unbroken, env=ENV, capture_output=True, text=True,
                               timeout=STARTUP_TIMEOUT_S)
    assert reference.returncode == 0, (reference.stdout + reference.stderr)[-3000:]
    assert moved_tensors(tiny_model_dir, unbroken / "checkpoints" / "kg_wcr")  # else the comparison below is moot
    manager = CheckpointManager(project / "checkpoints" / "kg_wcr" / "resume", keep=ITERATIONS)

    first = dvc_repro(project)
    read_until(first, f"selfplay iteration 1/{ITERATIONS}")  # checkpoint 1 is complete; iteration 2 runs
    assert first.poll() is None, "the run finished before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=60)
    assert first.returncode == -signal.SIGKILL
    done_before = [i for i, _ in manager.complete()]
    assert done_before[0] == 1 and done_before[-1] < ITERATIONS
    assert not (project / "checkpoints" / "kg_wcr" / "model").exists()  # exported only when the run ends

    second = dvc_repro(project)
    output, _ = second.communicate(timeout=STARTUP_TIMEOUT_S)
    assert second.returncode == 0, output[-3000:]
    assert "holds checkpoints of this run" in output and "resumed kg_wcr" in output
    assert f"selfplay iteration {ITERATIONS}/{ITERATIONS}" in output and "selfplay iteration 1/" not in output
    assert weights_digest(project / "checkpoints" / "kg_wcr") == weights_digest(unbroken / "checkpoints" / "kg_wcr")

    assert [i for i, _ in manager.complete()] == list(range(1, ITERATIONS + 1))
    assert not list(manager.root.glob("*.partial")) and manager.latest().name == f"iter_{ITERATIONS:06d}"
    from transformers import AutoModelForCausalLM

    for iteration, folder in manager.complete():
        state = read_state(folder)
        assert state["iteration"] == iteration and len(state["history"]) == iteration
        assert state["cursor"] == 2 * iteration  # the curriculum continued where the kill left it
        assert (folder / "trainer" / "trainer_state.json").is_file() and not (folder / "model").exists()
    AutoModelForCausalLM.from_pretrained(project / "checkpoints" / "kg_wcr" / "model")  # the export loads
    with (project / "reports" / "kg_wcr" / "history.csv").open() as handle:
        assert [row["iteration"] for row in csv.DictReader(handle)] == ["1.0", "2.0", "3.0"]
    from mlflow import MlflowClient  # the SIGKILLed run is continued, not left RUNNING

    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("searchplay-selfplay").experiment_id])
    assert [run.info.status for run in runs] == ["FINISHED"]
    steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, "metrics/undefined")]
    assert sorted(steps) == list(range(1, ITERATIONS + 1))


def stage_on_two_processes(tmp_path, tiny_model_dir, **sections) -> tuple[Path, subprocess.CompletedProcess]:
    """The command dvc.yaml runs for ``selfplay@kg_wcr``, with ``pipeline.launch.processes: 2`` and ``sections``'
    keys set in the project's params.yaml."""
    import shlex

    records = write_kg_pool(tmp_path / "kg", 6)
    index = write_tiny_index(tmp_path / "retrieval", records)
    project = tmp_path / "project"
    write_project(project, tiny_model_dir, tmp_path / "kg", index)
    params = yaml.safe_load((project / "params.yaml").read_text())
    for section, keys in sections.items():
        params[section].update(keys)
    params["pipeline"] = {"launch": {"processes": 2}}
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    stage = yaml.safe_load((Path(__file__).resolve().parents[2] / "dvc.yaml").read_text())["stages"]["selfplay"]
    command = stage["do"]["cmd"].replace("${key}", "kg_wcr").replace("${item.phase}", "all")
    return project, subprocess.run(shlex.split(command), cwd=project, env=ENV, capture_output=True, text=True,
                                   timeout=STARTUP_TIMEOUT_S)


def test_the_stage_command_with_two_processes_trains_both_ranks_to_a_checkpoint(tmp_path, tiny_model_dir):
    """``pipeline.launch.processes: 2``: the command dvc.yaml runs for ``selfplay@kg_wcr`` starts itself again under
    torchrun (gloo on CPU); both ranks train the iteration and the main one writes the checkpoint."""
    project, result = stage_on_two_processes(tmp_path, tiny_model_dir, selfplay={"iterations": 1})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "torchrun --standalone --nproc_per_node 2 -m searchplay selfplay --variant kg_wcr" in output
    assert "self-play process 0 of 2" in output and "self-play process 1 of 2" in output
    manager = CheckpointManager(project / "checkpoints" / "kg_wcr" / "resume")
    assert [i for i, _ in manager.complete()] == [1] and not list(manager.root.glob("*.partial"))
    assert (project / "checkpoints" / "kg_wcr" / "model" / "config.json").is_file()  # both ranks took part


def test_a_bad_input_on_two_processes_exits_2_not_the_launchers_1(tmp_path, tiny_model_dir):
    """torchrun exits 1 whatever its processes exited with; the stage exits with their 2 (a missing KG pool), so a
    Prefect task does not retry what would fail the same way."""
    _, result = stage_on_two_processes(tmp_path, tiny_model_dir, kg={"out_dir": str(tmp_path / "no-kg")})
    output = result.stdout + result.stderr
    assert "no KG subgraph pool" in output and "torchrun" in output, output[-3000:]
    assert result.returncode == 2, output[-3000:]
