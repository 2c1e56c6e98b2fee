import pytest

from searchplay.colors import model_color
from searchplay.config import Params
from searchplay.tracking import flat_params, git_commit, start_run


def test_flat_params_are_strings_of_bounded_length():
    flat = flat_params(Params())
    assert flat["wcr.alpha"] == "0.3"
    assert all(isinstance(v, str) and len(v) <= 500 for v in flat.values())


def test_no_credential_in_an_endpoint_url_reaches_mlflow(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.chdir(tmp_path)
    params = Params.model_validate({"tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
                                    "judge": {"endpoint": "http://user:s3cret@judge.example:8000/v1"}})
    assert flat_params(params)["judge.endpoint"] == "http://***@judge.example:8000/v1"
    with start_run(params, "evaluate", "kg_wcr") as run:
        pass
    stored = mlflow.get_run(run.info.run_id)
    assert stored.data.params["judge.endpoint"] == "http://***@judge.example:8000/v1"
    assert not any("s3cret" in value for value in [*stored.data.params.values(), *stored.data.tags.values()])


def test_git_commit_outside_a_repository(tmp_path):
    assert git_commit(tmp_path) == "unknown"


@pytest.mark.slow
def test_run_logs_params_and_provenance_tags(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.chdir(tmp_path)
    params = Params.model_validate({"tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"}})
    with start_run(params, "selfplay", "kg_wcr") as run:
        mlflow.log_metric("solver_reward", 0.5, step=0)
    stored = mlflow.get_run(run.info.run_id)
    assert stored.data.params["wcr.alpha"] == "0.3"
    assert stored.data.tags["params_hash"] == params.digest()
    assert "git_commit" in stored.data.tags
    experiment = mlflow.get_experiment(run.info.experiment_id)
    assert experiment.name == "searchplay-selfplay"
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # the UI's classic view of runs
    assert stored.data.tags["mlflow.runColor"] == model_color("kg_wcr")  # as in every chart the project draws


@pytest.mark.slow
def test_register_model_records_variant_and_scores(tmp_path, monkeypatch):
    import mlflow
    from mlflow import MlflowClient

    from searchplay.tracking import register_model

    monkeypatch.chdir(tmp_path)
    params = Params.model_validate({"tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"}})
    model_dir = tmp_path / "checkpoints" / "kg_wcr" / "model"
    model_dir.mkdir(parents=True)
    with start_run(params, "evaluate", "kg_wcr") as run:
        mlflow.log_metric("judge_accuracy", 0.25)
    first = register_model(run.info.run_id, model_dir, "kg_wcr", {"judge_accuracy": 0.25}, params)
    second = register_model(run.info.run_id, model_dir, "kg_wcr", {"judge_accuracy": 0.3}, params)
    assert (first, second) == ("1", "2")
    version = MlflowClient().get_model_version("searchplay-kg_wcr", "2")
    assert version.tags["variant"] == "kg_wcr" and version.tags["score.judge_accuracy"] == "0.3000"
    assert version.source == str(model_dir.resolve())


@pytest.mark.slow
def test_an_evaluation_run_again_on_the_same_checkpoint_adds_no_version(tmp_path, monkeypatch):
    """A `dvc repro` that evaluates an unchanged checkpoint again (its answers kept, the same scores) reuses the
    version; new weights, or other scores, are a new one."""
    from mlflow import MlflowClient

    from searchplay.tracking import register_model

    monkeypatch.chdir(tmp_path)
    params = Params.model_validate({"tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"}})
    model_dir = tmp_path / "checkpoints" / "kg_wcr" / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "model.safetensors").write_bytes(b"weights of iteration 1")
    runs = []
    for _ in range(3):
        with start_run(params, "evaluate", "kg_wcr") as run:
            runs.append(run.info.run_id)
    assert register_model(runs[0], model_dir, "kg_wcr", {"avg.judge_acc": 20.0}, params) == "1"
    assert register_model(runs[1], model_dir, "kg_wcr", {"avg.judge_acc": 20.0}, params) == "1"
    assert register_model(runs[1], model_dir, "kg_wcr", {"avg.judge_acc": 25.0}, params) == "2"
    (model_dir / "model.safetensors").write_bytes(b"weights of iteration 2")
    assert register_model(runs[2], model_dir, "kg_wcr", {"avg.judge_acc": 20.0}, params) == "3"
    versions = MlflowClient().search_model_versions("name = 'searchplay-kg_wcr'")
    assert len({version.tags["checkpoint.digest"] for version in versions}) == 2


def test_flat_params_keep_only_the_stage_params_when_named():
    flat = flat_params(Params(), only=["models.policy", "agent"])
    assert flat and all(key == "models.policy" or key.startswith("agent.") for key in flat)
    assert "agent.max_turns" in flat and not any(key.startswith("selfplay.") for key in flat)


@pytest.mark.slow
def test_registry_versions_carry_coverage_and_only_full_evaluations_take_the_champion_alias(tmp_path, monkeypatch):
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from searchplay.tracking import PAPER_BENCHMARKS, EvaluationCoverage, register_model

    monkeypatch.chdir(tmp_path)
    params = Params.model_validate({"tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"}})
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    with start_run(params, "evaluate", "ssp") as run:
        pass
    every = [*PAPER_BENCHMARKS, "kg_heldout"]
    full = EvaluationCoverage(every, "exact-match", {b: 5 for b in every})
    partial = EvaluationCoverage(["bamboogle"], "exact-match", {"bamboogle": 5})
    client = MlflowClient()

    def champion():
        try:
            return str(client.get_model_version_by_alias("searchplay-ssp", "champion").version)
        except MlflowException:
            return None

    assert register_model(run.info.run_id, model_dir, "ssp", {"avg.judge_acc": 90.0}, params, partial) == "1"
    assert champion() is None  # a 5-question Bamboogle score is never the champion
    version = client.get_model_version("searchplay-ssp", "1")
    assert version.tags["coverage.full"] == "false" and version.tags["coverage.n"] == "bamboogle=5"
    assert version.tags["coverage.judge"] == "exact-match"
    register_model(run.info.run_id, model_dir, "ssp", {"avg.judge_acc": 10.0}, params, full)
    assert champion() == "2"
    register_model(run.info.run_id, model_dir, "ssp", {"avg.judge_acc": 5.0}, params, full)
    assert champion() == "2"  # worse: the alias stays
    register_model(run.info.run_id, model_dir, "ssp", {"avg.judge_acc": 12.5}, params, full)
    assert champion() == "4"

    def killed(*args):  # the run dies between its new version and the alias that version earned
        raise KeyboardInterrupt

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(MlflowClient, "set_registered_model_alias", killed)
        register_model(run.info.run_id, model_dir, "ssp", {"avg.judge_acc": 20.0}, params, full)
    assert champion() == "4"
    assert register_model(run.info.run_id, model_dir, "ssp", {"avg.judge_acc": 20.0}, params, full) == "5"
    assert champion() == "5"  # the rerun finds its version and gives it the alias it earned


def tracked_params(tmp_path, **tracking) -> Params:
    return Params.model_validate({"tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db", **tracking}})


@pytest.mark.slow
def test_an_interrupted_run_ends_killed_and_a_failed_one_failed(tmp_path, monkeypatch):
    """SIGTERM and Ctrl-C end the run KILLED, an exception FAILED; none stays RUNNING."""
    import os
    import signal
    import time

    from mlflow import MlflowClient

    monkeypatch.chdir(tmp_path)
    params = tracked_params(tmp_path)
    ids = {}
    with pytest.raises(SystemExit) as exited, start_run(params, "warmstart", "warmstart") as run:
        ids["sigterm"] = run.info.run_id
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL, "SIGTERM would end the process, the run RUNNING"
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at the next bytecode; never reached
    assert exited.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # restored after the run
    with pytest.raises(KeyboardInterrupt), start_run(params, "warmstart", "warmstart") as run:
        ids["ctrl-c"] = run.info.run_id
        raise KeyboardInterrupt
    with pytest.raises(ValueError), start_run(params, "warmstart", "warmstart") as run:
        ids["error"] = run.info.run_id
        raise ValueError("a stage failure")
    client = MlflowClient(params.tracking.uri)
    assert {name: client.get_run(run_id).info.status for name, run_id in ids.items()} == {
        "sigterm": "KILLED", "ctrl-c": "KILLED", "error": "FAILED"}
    assert client.get_run(ids["error"]).data.tags["process.pid"] == str(os.getpid())


@pytest.mark.slow
def test_a_new_run_ends_runs_left_running_by_dead_processes_on_this_host(tmp_path, monkeypatch):
    """a SIGKILLed stage leaves its run RUNNING; the next run of the experiment ends it KILLED."""
    import os
    import socket
    import subprocess

    from mlflow import MlflowClient

    monkeypatch.chdir(tmp_path)
    params = tracked_params(tmp_path)
    client = MlflowClient(params.tracking.uri)
    experiment = client.create_experiment("searchplay-evaluate")
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = socket.gethostname()

    def running(host: str, pid: int) -> str:
        return client.create_run(experiment, tags={"process.host": host, "process.pid": str(pid)}).info.run_id

    stale, alive, elsewhere = running(host, gone.pid), running(host, os.getpid()), running("another-host", gone.pid)
    with start_run(params, "evaluate", "kg_wcr"):
        pass
    assert [client.get_run(r).info.status for r in (stale, alive, elsewhere)] == ["KILLED", "RUNNING", "RUNNING"]


@pytest.mark.slow
def test_only_a_run_of_the_same_params_and_experiment_is_resumable(tmp_path, monkeypatch):
    from searchplay.tracking import resumable_run

    monkeypatch.chdir(tmp_path)
    params = tracked_params(tmp_path)
    with start_run(params, "selfplay", "kg_wcr") as run:
        pass
    assert resumable_run(params, "selfplay", run.info.run_id) == run.info.run_id
    assert resumable_run(params, "evaluate", run.info.run_id) is None
    assert resumable_run(tracked_params(tmp_path, experiment_prefix="other"), "selfplay", run.info.run_id) is None
    assert resumable_run(params, "selfplay", "0" * 32) is None
    other = Params.model_validate({**params.model_dump(), "wcr": {"alpha": 0.5}})
    assert resumable_run(other, "selfplay", run.info.run_id) is None  # MLflow refuses to change a logged param
    with start_run(params, "selfplay", "kg_wcr", run_id=run.info.run_id) as continued:
        assert continued.info.run_id == run.info.run_id


def test_the_default_store_is_relative_outside_dvc_and_at_the_project_root_inside(tmp_path, monkeypatch):
    from searchplay.tracking import tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert tracking_uri(Params()) == "sqlite:///mlflow.db"
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    assert tracking_uri(Params()) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.internal:5000")
    assert tracking_uri(Params()) == "http://mlflow.internal:5000"


@pytest.mark.slow
def test_a_stage_of_a_temporary_dvc_experiment_logs_to_the_projects_store(tmp_path, monkeypatch):
    """`dvc exp run --temp` runs a stage in a copy under .dvc/tmp/exps that DVC deletes; DVC_ROOT names the project."""
    import mlflow
    from mlflow import MlflowClient

    from searchplay.tracking import register_model

    project, copy = tmp_path / "project", tmp_path / "project/.dvc/tmp/exps/tmp123"
    copy.mkdir(parents=True)
    monkeypatch.chdir(copy)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("DVC_ROOT", str(project))
    monkeypatch.setenv("DVC_EXP_NAME", "tipsy-alpha")
    monkeypatch.setenv("DVC_EXP_BASELINE_REV", "0" * 40)
    params = Params()
    with start_run(params, "selfplay", "kg_wcr") as run:
        mlflow.log_text("{}", "undefined/iter_000001.json")
    register_model(run.info.run_id, copy / "checkpoints/kg_wcr/model", "kg_wcr", {"judge_accuracy": 0.1}, params)
    assert (project / "mlflow.db").is_file() and not (copy / "mlflow.db").exists()
    assert (project / "mlruns").is_dir() and not (copy / "mlruns").exists()
    client = MlflowClient(f"sqlite:///{project.resolve()}/mlflow.db")
    stored = client.get_run(run.info.run_id)
    assert stored.data.tags["dvc.exp_name"] == "tipsy-alpha"
    assert stored.data.tags["dvc.exp_baseline"] == "0" * 40
    assert client.get_model_version("searchplay-kg_wcr", "1").tags["dvc.exp_name"] == "tipsy-alpha"


def test_a_store_is_set_up_once_per_process_under_its_lock(tmp_path, monkeypatch):
    import fcntl

    import mlflow

    from searchplay import tracking

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    held = []

    class Client:
        def __init__(self, tracking_uri: str):
            assert tracking_uri == uri

        def search_experiments(self, max_results: int) -> list:
            with (tmp_path / ".mlflow.db.lock").open("a") as handle, pytest.raises(BlockingIOError):
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(True)
            return []

    monkeypatch.setattr(mlflow, "MlflowClient", Client)
    monkeypatch.setattr(tracking, "_READY_STORES", set())
    tracking.use_store(uri)
    tracking.use_store(uri)
    assert held == [True]
    assert mlflow.get_tracking_uri() == uri


@pytest.mark.slow
def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path):
    import subprocess
    import sys
    import time

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    go = tmp_path / "go"
    script = ("import pathlib, time, mlflow\n"
              "from searchplay.tracking import use_store\n"
              f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.01)\n"
              f"use_store({uri!r})\n"
              "mlflow.MlflowClient().search_experiments()\n")
    workers = [subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True) for _ in range(4)]
    time.sleep(8)  # every worker has imported mlflow and waits
    go.touch()
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err[-2000:]


def test_a_locked_store_is_not_called_unopenable(tmp_path, monkeypatch):
    """A store another process holds ("database is locked") may free up: the error stays the library's (exit 1,
    which a flow retries), not the one-line TrackingStoreError (exit 2, never retried)."""
    import sqlite3

    import mlflow
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import OperationalError

    from searchplay import tracking

    raw = OperationalError("SELECT ...", {}, sqlite3.OperationalError("database is locked"))

    def locked(self, *args, **kwargs):
        raise raw

    def wrapped(self, *args, **kwargs):  # what MLflow's sqlite store raises for it (store/db/utils.py)
        raise MlflowException(message=raw, error_code="TEMPORARILY_UNAVAILABLE") from raw

    for fails, raised in ((locked, OperationalError), (wrapped, MlflowException)):
        monkeypatch.setattr(mlflow.MlflowClient, "search_experiments", fails)
        with pytest.raises(raised, match="database is locked"):
            tracking.use_store(f"sqlite:///{tmp_path / 'mlflow.db'}")


def test_a_folder_where_the_store_belongs_is_named_at_once_not_retried(tmp_path):
    """sqlite cannot open a folder, and MLflow retried that for minutes before an error."""
    from searchplay.io import TrackingStoreError
    from searchplay.tracking import use_store

    (tmp_path / "mlflow.db").mkdir()
    with pytest.raises(TrackingStoreError, match=r"mlflow\.db is a folder, not an MLflow store; move it away"):
        use_store(f"sqlite:///{tmp_path / 'mlflow.db'}")
