import pytest

from searchplay.config import Params
from searchplay.tracking import flat_params, git_commit, start_run


def test_flat_params_are_strings_of_bounded_length():
    flat = flat_params(Params())
    assert flat["selfplay.wcr_alpha"] == "0.3"
    assert all(isinstance(v, str) and len(v) <= 500 for v in flat.values())


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
    assert stored.data.params["selfplay.wcr_alpha"] == "0.3"
    assert stored.data.tags["params_hash"] == params.digest()
    assert "git_commit" in stored.data.tags
    assert mlflow.get_experiment(run.info.experiment_id).name == "searchplay-selfplay"


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


def test_dvc_stage_hash_tags_are_valid_mlflow_keys(tmp_path):
    from mlflow.utils.validation import _validate_tag_name

    from searchplay.tracking import dvc_stage_hashes

    lock = tmp_path / "dvc.lock"
    lock.write_text("schema: '2.0'\nstages:\n  selfplay@kg_wcr:\n    cmd: searchplay selfplay --variant kg_wcr\n")
    tags = dvc_stage_hashes(lock)
    assert list(tags) == ["dvc.stage.selfplay/kg_wcr"]
    for key in tags:
        _validate_tag_name(key)


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
