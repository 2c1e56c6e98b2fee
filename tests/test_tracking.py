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
