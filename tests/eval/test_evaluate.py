"""The evaluate stage end to end with a scripted Solver: outputs, the papers' columns, charts, MLflow,
other variants side by side, and the cross-variant ``report``."""

from __future__ import annotations

import json

import pytest

from searchplay.config import Params
from searchplay.eval import evaluate as stage
from searchplay.eval import runner
from searchplay.eval.report import compare_variants, paper_rows


@pytest.fixture
def scripted(monkeypatch, fake_trajectory):
    """A Solver that answers every question with its first golden answer on even positions."""
    def solve(items, backend, search_tool, config, top_k):
        return [fake_trajectory(item.golden_answers[0] if i % 2 == 0 else "no idea") for i, item in enumerate(items)]
    monkeypatch.setattr(runner, "solve_batch", solve)
    monkeypatch.setattr(stage, "rollout_config", lambda params: None)


def _params(tmp_path, benchmarks_dir, **evaluate):
    return Params.model_validate({
        "evaluate": {"data_dir": str(benchmarks_dir), "benchmarks": ["bamboogle", "nq"], "n": 4,
                     "out_dir": str(tmp_path / "eval"), "batch_size": 2, **evaluate},
        "selfplay": {"checkpoint_dir": str(tmp_path / "checkpoints")},
        "tracking": {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}})


@pytest.mark.slow  # MLflow + matplotlib imports: ~20 s alone on 2 cores
def test_stage_writes_metrics_report_charts_and_tracks(tmp_path, benchmarks_dir, scripted, fake_judge):
    params = _params(tmp_path, benchmarks_dir)
    stage.evaluate(params, "ssp", backend=object(), search_tool=object(), judge=fake_judge, track=False,
                   progress=False)
    result = stage.evaluate(params, "kg_wcr", backend=object(), search_tool=object(), judge=fake_judge,
                            progress=False)
    out = tmp_path / "eval" / "kg_wcr"
    metrics = json.loads((out / "metrics.json").read_text())
    assert all(isinstance(v, int | float) for v in metrics.values())
    assert metrics["bamboogle.n"] == 4 and metrics["bamboogle.judge_acc"] == 50.0 and metrics["avg.judge_acc"] == 50.0
    sample = json.loads((out / "sample.json").read_text())
    assert sample["seed"] == 0 and len(sample["ids"]["nq"]) == 4
    predictions = [json.loads(line) for line in (out / "predictions" / "nq.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predictions] == sample["ids"]["nq"]
    report = (out / "report.md").read_text()
    assert "judge: fake-judge" in report and "variant ssp" in report
    assert "Qwen2.5-7B-Instruct + KG+WCR (Ours) [kg_wcr_table1] | 53.8" in report
    assert "Qwen2.5-7B-Instruct + SSP [ssp_table1] | 54.8" in report
    assert "a different model, for reference only" in report
    assert "<table>" in (out / "report.html").read_text()
    for name in ("bamboogle", "nq"):
        assert (out / "charts" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    run = json.loads((out / "run.json").read_text())
    assert run["model_source"] == "models.policy" and run["judge"] == "fake-judge"

    import mlflow

    runs = mlflow.search_runs(experiment_names=["searchplay-evaluate"])
    assert runs["tags.mlflow.runName"].tolist() == ["kg_wcr"] and runs["tags.judge"][0] == "fake-judge"
    assert runs["metrics.avg.judge_acc"][0] == 50.0

    written = compare_variants(tmp_path / "eval", tmp_path / "compare")
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert merged["ssp.nq.judge_acc"] == metrics["nq.judge_acc"]
    assert "fake-judge" in (tmp_path / "compare" / "compare.md").read_text()
    assert (tmp_path / "compare" / "compare.png").read_bytes()[:4] == b"\x89PNG" and len(written) == 4
    assert result.times.questions == 8


def test_model_resolution_prefers_latest_checkpoint(tmp_path):
    params = Params.model_validate({"selfplay": {"checkpoint_dir": str(tmp_path)}})
    assert stage.latest_checkpoint(params, "kg_wcr") is None
    for iteration in (1, 2):  # the self-play layout: iter_NNNNNN/{model/, state.json}
        folder = tmp_path / "kg_wcr" / f"iter_{iteration:06d}"
        (folder / "model").mkdir(parents=True)
        (folder / "model" / "config.json").write_text("{}")
        (folder / "state.json").write_text("{}")
    (tmp_path / "kg_wcr" / "iter_000003.partial" / "model").mkdir(parents=True)  # a killed save is ignored
    model = (tmp_path / "kg_wcr" / "iter_000002" / "model").resolve()
    assert stage.resolve_model(params, "kg_wcr") == (str(model), "checkpoint")
    explicit = Params.model_validate({"evaluate": {"model": "Qwen/Qwen2.5-7B-Instruct"}})
    assert stage.resolve_model(explicit, "kg_wcr") == ("Qwen/Qwen2.5-7B-Instruct", "evaluate.model")


def test_paper_rows_match_the_same_model():
    rows, same = paper_rows("Qwen/Qwen2.5-7B-Instruct", "LLaMA-3.1-8B")
    assert same and len(rows) == 5  # KG Table 1: base, SSP, Ours; SSP Table 1: base, SSP
    rows, same = paper_rows("/x/smollm2-135m-instruct", "LLaMA-3.1-8B")
    assert not same and all(label.startswith("LLaMA-3.1-8B") for label, _ in rows)


def test_report_without_any_variant_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="searchplay evaluate"):
        compare_variants(tmp_path, tmp_path / "out")
