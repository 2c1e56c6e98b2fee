"""`searchplay status`: runs left RUNNING by a killed stage are ended KILLED and listed; resume points are shown."""

from __future__ import annotations

import json
import os
import socket
import subprocess

from typer.testing import CliRunner

from searchplay.cli import app
from searchplay.config import Params
from searchplay.status import collect


def _overrides(tmp_path) -> dict[str, object]:
    return {"tracking": {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
            "selfplay": {"checkpoint_dir": str(tmp_path / "checkpoints")},
            "warmstart": {"out_dir": str(tmp_path / "checkpoints" / "warmstart")},
            "eve": {"warmstart_out_dir": str(tmp_path / "checkpoints" / "warmstart_eve")},
            "evaluate": {"out_dir": str(tmp_path / "eval")}}


def _params(tmp_path) -> Params:
    return Params.model_validate(_overrides(tmp_path))


def _status(tmp_path) -> str:
    sets = [arg for section, values in _overrides(tmp_path).items() for key, value in values.items()
            for arg in ("--set", f"{section}.{key}={value}")]
    result = CliRunner().invoke(app, [*sets, "status"])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_status_ends_a_sigkilled_stages_run_and_lists_what_a_rerun_resumes_from(tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("searchplay-selfplay")
    gone = subprocess.Popen(["true"])
    gone.wait()

    def running(name: str, pid: int) -> str:
        tags = {"process.host": socket.gethostname(), "process.pid": str(pid), "mlflow.runName": name}
        return client.create_run(experiment, tags=tags).info.run_id

    killed, alive = running("kg_wcr", gone.pid), running("ssp", os.getpid())
    checkpoint = tmp_path / "checkpoints" / "kg_wcr" / "resume" / "iter_000003"
    checkpoint.mkdir(parents=True)
    (checkpoint / "state.json").write_text(json.dumps({"iteration": 3}))
    (checkpoint.with_name("iter_000004.partial")).mkdir()
    (tmp_path / "checkpoints" / "warmstart" / "resume").mkdir(parents=True)

    runs, points = collect(_params(tmp_path))
    assert client.get_run(killed).info.status == "KILLED" and client.get_run(alive).info.status == "RUNNING"
    assert {(r.name, r.pid, r.ended_now) for r in runs} == {("kg_wcr", str(gone.pid), True),
                                                             ("ssp", str(os.getpid()), False)}
    assert [(p.stage, p.path.name) for p in points] == [("warmstart", "resume"), ("selfplay@kg_wcr", "iter_000003")]
    assert points[1].detail.startswith("iteration 3 (an unfinished .partial")
    output = _status(tmp_path)  # the CLI shows the same (the stale run is already ended: now only RUNNING ones)
    assert "ssp" in output and "selfplay@kg_wcr" in output and "SFT state saved" in output


def test_status_of_a_fresh_clone_creates_no_store(tmp_path):
    output = _status(tmp_path)
    assert "no run left RUNNING" in output and "nothing to resume" in output
    assert not (tmp_path / "mlflow.db").exists()


def test_status_outside_a_project_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["status"])
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "nothing to resume" in said
    assert f"no params.yaml in {tmp_path}" in said and "the project's folder" in said


def test_a_store_that_cannot_be_opened_is_one_line_exit_2_and_left_as_it_was(tmp_path):
    store = tmp_path / "mlflow.db"
    store.write_bytes(b"not a database\n" * 100)  # e.g. a file copied over it, or cut mid-write
    sets = [arg for section, values in _overrides(tmp_path).items() for key, value in values.items()
            for arg in ("--set", f"{section}.{key}={value}")]
    result = CliRunner().invoke(app, [*sets, "status"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    text = " ".join(result.output.split())
    assert f"tracking store: {store} cannot be opened as an MLflow store (file is not a database)" in text
    assert "move it away" in text and store.read_bytes() == b"not a database\n" * 100

    result = CliRunner().invoke(app, ["--set", "tracking.uri=bogus://user:secret@host/x", "status"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "tracking store: bogus://***@host/x:" in text and "unsupported URI" in text and "secret" not in text


def test_status_lists_an_evaluation_that_saved_answers_and_stopped_before_its_scores(tmp_path):
    from searchplay.io import write_jsonl

    finished, stopped = tmp_path / "eval" / "base", tmp_path / "eval" / "kg_wcr"
    for folder, answered in ((finished, 3), (stopped, 2)):
        write_jsonl(folder / "predictions" / "nq.jsonl", [{"id": str(i)} for i in range(answered)])
        write_jsonl(folder / "predictions" / "bamboogle.jsonl", [{"id": "b"}])
    (finished / "sample.json").write_text(json.dumps({"ids": {"nq": ["0", "1", "2"], "bamboogle": ["b"]}}))
    (stopped / "metrics.json").write_text(json.dumps({"nq.n": 3, "bamboogle.n": 1}))  # an earlier evaluation's
    write_jsonl(finished / "predictions" / "popqa.jsonl", [{"id": "p"}])  # by hand, --benchmarks nq,bamboogle later
    first = tmp_path / "eval" / "warmstart"  # killed in its first evaluation: answers, no scores at all
    write_jsonl(first / "predictions" / "nq.jsonl", [{"id": "0"}])
    _, points = collect(_params(tmp_path))
    assert [(p.stage, p.path, p.detail) for p in points] == [
        ("evaluate@kg_wcr", stopped / "predictions", "3 answers saved, no scores since"),
        ("evaluate_reference@warmstart", first / "predictions", "1 answer saved, no scores since")]
    assert "evaluate@kg_wcr" in _status(tmp_path) and "3 answers saved" in _status(tmp_path)
