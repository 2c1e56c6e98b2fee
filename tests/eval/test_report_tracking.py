"""The comparison report in MLflow: glance.png and the other charts as images of run ``compare``, the paired
tests and budgets as one table each, and no scalar metrics (one run's scalars chart as single bars)."""

from __future__ import annotations

import json
import re

import pytest

from searchplay.eval.report import compare_variants
from searchplay.eval.report_tracking import budget_rows, columns, paired_test_rows
from tests.eval.test_report import _budget_history, _paired_eval_dir


def test_each_pair_and_scope_is_one_row_with_every_test_beside_the_others(tmp_path):
    compare_variants(_paired_eval_dir(tmp_path), tmp_path / "compare")
    metrics = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    rows = paired_test_rows(metrics)
    text = (tmp_path / "compare" / "compare.md").read_text()
    paired = text.split("## Paired comparisons (exact McNemar)")[1].split("\n## ")[0]
    table_rows = [line for line in paired.splitlines() if line.startswith("| ") and " vs " in line][1:]  # no header
    assert len(rows) == len(table_rows) == 10
    row = next(r for r in rows if (r["comparison"], r["scope"]) == ("kg_wcr vs ssp", "kg_heldout"))
    assert (row["paired/only_a"], row["paired/only_b"], row["paired/p"]) == (7, 0, 2 / 2**7)
    assert row["behaviour/more_searches"] == 10 and "coverage/more" not in row  # no KG pool: not measured
    table = columns(rows)
    assert table["comparison"][0] == "warmstart vs base" and all(len(v) == len(rows) for v in table.values())
    assert not any("." in name for name in table)  # MLflow's table view reads a dotted name as a path: empty cells


def test_budget_rows_and_columns_fill_what_a_run_lacks_with_none():
    rows = budget_rows({"budget.ssp.tokens": 909.0, "budget.eve_phase_a.rollouts": 5.0, "ssp.nq.n": 5})
    assert rows == [{"self-play run": "ssp", "tokens": 909.0}, {"self-play run": "eve_phase_a", "rollouts": 5.0}]
    assert columns(rows) == {"self-play run": ["ssp", "eve_phase_a"], "tokens": [909.0, None],
                             "rollouts": [None, 5.0]}


@pytest.mark.slow
def test_the_compare_run_shows_glance_png_and_one_table_of_the_paired_tests(tmp_path, monkeypatch):
    import mlflow

    from searchplay.config import Params
    from searchplay.eval.report_tracking import log_comparison
    from searchplay.tracking import start_run

    monkeypatch.chdir(tmp_path)
    _budget_history(tmp_path / "selfplay" / "ssp", ["iteration", "train/tokens"], [["1", "909"]])
    compare_variants(_paired_eval_dir(tmp_path), tmp_path / "compare", tmp_path / "selfplay")
    params = Params.model_validate({"tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"}})
    with start_run(params, "report", "compare"):
        log_comparison(tmp_path / "compare")
    experiment = mlflow.get_experiment_by_name("searchplay-report")
    [run] = mlflow.search_runs([experiment.experiment_id], output_format="list")
    client = mlflow.MlflowClient()
    images = [item.path.removeprefix("images/") for item in client.list_artifacts(run.info.run_id, "images")]
    keys = {re.sub("[^a-z_]", "/", path.split("+step+")[0]) for path in images if path.endswith(".png")}  # key's
    assert keys == {"glance/paired_tests", "report/behaviour", "report/compare", "report/selfplay"}  # "/" saved as "~"
    assert "compare/glance.png" in [item.path for item in client.list_artifacts(run.info.run_id, "compare")]
    paired = mlflow.load_table("paired_tests.json", run_ids=[run.info.run_id])
    metrics = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert len(paired) == len(paired_test_rows(metrics)) > 0
    row = paired[(paired["comparison"] == "kg_wcr vs ssp") & (paired["scope"] == "kg_heldout")].iloc[0]
    assert row["paired/only_a"] == 7 and row["behaviour/more_searches"] == 10
    budget = mlflow.load_table("selfplay_budget.json", run_ids=[run.info.run_id])
    assert budget.loc[0, "self-play run"] == "ssp" and budget.loc[0, "tokens"] == 909
    assert run.data.metrics == {}  # the numbers are in the tables and metrics.json, not 300-odd single bars
