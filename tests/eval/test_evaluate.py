"""The evaluate stage end to end with a scripted Solver: outputs, the papers' columns, charts, MLflow,
a variant's report independent of the others on disk, the cross-variant ``report``; which model each
variant names (base, warm-start, a self-play checkpoint); kg_heldout's majority baseline; no machine
paths in any output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from searchplay.colors import model_color
from searchplay.config import Params
from searchplay.eval import evaluate as stage
from searchplay.eval import runner
from searchplay.eval.report import compare_variants, paper_rows


@pytest.fixture
def scripted(monkeypatch, fake_trajectory):
    """A Solver that answers every question with its first golden answer on even positions."""
    def solve(items, backend, search_tool, config, top_k, evidence=False):
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
def test_stage_writes_metrics_report_charts_and_tracks(tmp_path, monkeypatch, benchmarks_dir, scripted, fake_judge,
                                                      fake_backend, fake_search):
    params = _params(tmp_path, benchmarks_dir)
    harsh = type(fake_judge)()  # ssp's answers all judged wrong, so its columns differ from kg_wcr's
    harsh.judge_many = lambda items: [SimpleNamespace(correct=False, method="exact", judge_model=harsh.name)
                                      for _ in items]
    stage.evaluate(params, "ssp", backend=fake_backend, search_tool=fake_search, judge=harsh, track=False,
                   progress=False, allow_base=True)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))  # as a DVC stage runs it
    result = stage.evaluate(params, "kg_wcr", backend=fake_backend, search_tool=fake_search, judge=fake_judge,
                            progress=False, allow_base=True)
    out = tmp_path / "eval" / "kg_wcr"
    metrics = json.loads((out / "metrics.json").read_text())
    assert all(isinstance(v, int | float) for v in metrics.values())
    assert metrics["bamboogle.n"] == 4 and metrics["bamboogle.judge_acc"] == 50.0 and metrics["avg.judge_acc"] == 50.0
    sample = json.loads((out / "sample.json").read_text())
    assert sample["seed"] == 0 and len(sample["ids"]["nq"]) == 4
    predictions = [json.loads(line) for line in (out / "predictions" / "nq.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predictions] == sample["ids"]["nq"]
    report = (out / "report.md").read_text()
    assert "judge: fake-judge" in report and "compare report" in report
    assert "ssp |" not in report.split("Qwen2.5-7B-Instruct")[0]  # no neighbour read from disk: see below
    assert "Qwen2.5-7B-Instruct + KG+WCR (Ours) [kg_wcr_table1] | 53.8" in report
    assert "Qwen2.5-7B-Instruct + SSP [ssp_table1] | 54.8" in report
    assert "a different model, for reference only" in report
    assert "<table>" in (out / "report.html").read_text()
    for name in ("bamboogle", "nq"):
        assert (out / "charts" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    run = json.loads((out / "run.json").read_text())
    assert run["model_source"] == stage.BASE_FALLBACK and run["judge"] == "fake-judge"
    assert "NOT a kg_wcr checkpoint" in report  # the base model stood in (--allow-base), and the report says so
    headline = json.loads((out / "headline.json").read_text())  # the few numbers, nested
    assert headline["eval"]["avg_judge_acc"] == 50.0 and headline["eval"]["valid_rate"] == 100.0
    assert "selfplay" not in headline  # models.policy: no self-play history to report

    import mlflow

    runs = mlflow.search_runs(experiment_names=["searchplay-evaluate"])
    assert runs["tags.mlflow.runName"].tolist() == ["kg_wcr"] and runs["tags.judge"][0] == "fake-judge"
    assert runs["metrics.avg.judge_acc"][0] == 50.0 and runs["tags.run_kind"][0] == "pipeline"
    assert runs["metrics.headline/avg_judge_acc"][0] == 50.0  # the chart view's first section
    assert runs["tags.mlflow.runColor"][0] == model_color("kg_wcr")
    assert "params.judge.backend" in runs and not any(c.startswith("params.selfplay.") for c in runs)  # no self-play
    started = runs["start_time"][0].timestamp()  # the run opens before the work: sample.json is written after
    assert started <= (out / "sample.json").stat().st_mtime <= runs["end_time"][0].timestamp()

    from searchplay.tracking import chart_view_url

    url = chart_view_url(params)
    assert url.endswith(f"/#/experiments/{runs['experiment_id'][0]}/runs?compareRunsMode=CHART")

    shutil.move(tmp_path / "eval" / "ssp", tmp_path / "aside")  # another evaluation gone: this report is the same
    stage.evaluate(params, "kg_wcr", backend=fake_backend, search_tool=fake_search, judge=fake_judge, track=False,
                   progress=False, allow_base=True)
    assert (out / "report.md").read_text() == report
    shutil.move(tmp_path / "aside", tmp_path / "eval" / "ssp")

    monkeypatch.delenv("DVC_ROOT")
    stage.evaluate(params, "kg_wcr", backend=fake_backend, search_tool=fake_search, judge=fake_judge,
                   progress=False, allow_base=True)
    adhoc = mlflow.search_runs(experiment_names=["searchplay-evaluate-adhoc"])
    assert adhoc["tags.run_kind"].tolist() == ["adhoc"]
    assert len(mlflow.search_runs(experiment_names=["searchplay-evaluate"])) == 1  # the pipeline's stay apart

    written = compare_variants(tmp_path / "eval", tmp_path / "compare")
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert merged["ssp.nq.judge_acc"] == 0.0 and merged["kg_wcr.nq.judge_acc"] == metrics["nq.judge_acc"] == 50.0
    assert "fake-judge" in (tmp_path / "compare" / "compare.md").read_text()
    assert (tmp_path / "compare" / "compare.png").read_bytes()[:4] == b"\x89PNG"
    assert [path.name for path in written][3:] == ["glance.png", "compare.png", "retrieval.png", "behaviour.png"]
    assert (tmp_path / "compare" / "retrieval.png").read_bytes()[:4] == b"\x89PNG"
    assert result.times.questions == 8


def test_under_a_local_judge_each_model_judges_itself_under_its_own_name(fake_backend):
    """So the comparison sees that its models were judged by different judges (it warns where judges differ)."""
    params = Params.model_validate({"judge": {"backend": "local"}})
    judges = {model: stage._load_tools(params, stage.ModelChoice(model, "unused", "checkpoint"), object(),
                                       fake_backend, None)[2] for model in ("warmstart", "kg_wcr")}
    assert {model: judge.name for model, judge in judges.items()} == {
        "warmstart": "local-policy (warmstart)", "kg_wcr": "local-policy (kg_wcr)"}
    assert judges["kg_wcr"].llm.backend is fake_backend


def test_a_model_that_fails_to_load_leaves_the_last_evaluation_as_it_was(tmp_path, benchmarks_dir, monkeypatch):
    from searchplay.llm.weights import ModelLoadError

    params = _params(tmp_path, benchmarks_dir)
    out = tmp_path / "eval" / "kg_wcr"
    out.mkdir(parents=True)
    for name in ("sample.json", "metrics.json"):
        (out / name).write_text('{"n": 1}')

    def no_model(*args, **kwargs):
        raise ModelLoadError("checkpoints/x: the model cannot be loaded")

    monkeypatch.setattr(stage, "_load_tools", no_model)
    with pytest.raises(ModelLoadError):
        stage.evaluate(params, "kg_wcr", track=False, progress=False, allow_base=True)
    assert [(out / name).read_text() for name in ("sample.json", "metrics.json")] == ['{"n": 1}'] * 2


def test_a_variant_is_scored_on_the_model_its_run_exported_not_on_a_checkpoint(tmp_path):
    params = Params.model_validate({"selfplay": {"checkpoint_dir": str(tmp_path)}})
    assert stage.final_model(params, "kg_wcr") is None
    for iteration in (1, 2):  # the resume state (iter_NNNNNN/{trainer/, state.json}) is not a model to score
        folder = tmp_path / "kg_wcr" / "resume" / f"iter_{iteration:06d}"
        (folder / "trainer").mkdir(parents=True)
        (folder / "state.json").write_text("{}")
    assert stage.final_model(params, "kg_wcr") is None
    model = _checkpoint(tmp_path).resolve()
    assert stage.resolve_model(params, "kg_wcr") == stage.ModelChoice(str(model), str(model), "checkpoint")
    explicit = Params.model_validate({"evaluate": {"model": "Qwen/Qwen2.5-7B-Instruct"}})
    assert stage.resolve_model(explicit, "kg_wcr") == stage.ModelChoice("Qwen/Qwen2.5-7B-Instruct",
                                                                        "Qwen/Qwen2.5-7B-Instruct", "evaluate.model")


def test_a_variant_without_a_checkpoint_is_an_error_unless_the_base_model_is_asked_for(tmp_path, monkeypatch):
    monkeypatch.setattr("searchplay.assets.resolve", lambda value: f"/somewhere/{value}")
    params = Params.model_validate({"selfplay": {"checkpoint_dir": str(tmp_path)}})
    with pytest.raises(stage.ModelNotFoundError, match=f"{tmp_path / 'kg_wcr' / 'model'}.*--allow-base"):
        stage.resolve_model(params, "kg_wcr")
    fallback = stage.resolve_model(params, "kg_wcr", allow_base=True)
    assert fallback == stage.ModelChoice("bundled:smollm2", "/somewhere/bundled:smollm2", stage.BASE_FALLBACK)


def test_evaluate_refuses_a_variant_name_that_is_not_a_plain_folder_name_before_writing_anything(tmp_path):
    params = Params.model_validate({"evaluate": {"out_dir": str(tmp_path / "out")}})
    for name in ("../../evil", "a/b", "", ".hidden"):
        with pytest.raises(ValueError, match="plain folder name"):
            stage.evaluate(params, name, track=False)
    with pytest.raises(stage.ModelNotFoundError):
        stage.evaluate(Params.model_validate({"evaluate": {"out_dir": str(tmp_path / "out")},
                                              "selfplay": {"checkpoint_dir": str(tmp_path / "none")}}),
                       "kg_wcr", track=False)
    assert not (tmp_path / "out").exists()


def _checkpoint(root, variant="kg_wcr"):
    """A self-play run's exported final model (``<checkpoint_dir>/<variant>/model``)."""
    folder = root / variant / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def test_a_checkpoint_inside_the_repo_is_named_relative_to_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _checkpoint(tmp_path / "checkpoints")
    choice = stage.resolve_model(Params(), "kg_wcr")
    assert choice.id == "checkpoints/kg_wcr/model" and choice.source == "checkpoint"
    assert choice.path == str(tmp_path.resolve() / choice.id)


def test_base_is_the_policy_by_its_params_id(monkeypatch):
    monkeypatch.setattr("searchplay.assets.resolve", lambda value: f"/somewhere/{value}")
    choice = stage.resolve_model(Params(), "base")
    assert choice == stage.ModelChoice("bundled:smollm2", "/somewhere/bundled:smollm2", "models.policy")


def test_warmstart_is_its_checkpoint_or_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stage, "warmstart_model",
                        lambda params, model: tmp_path / "checkpoints" / "warmstart" / "model")
    with pytest.raises(stage.ModelNotFoundError, match="run `searchplay warmstart` first"):
        stage.resolve_model(Params(), "warmstart")
    folder = tmp_path / "checkpoints" / "warmstart" / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    assert stage.resolve_model(Params(), "warmstart") == stage.ModelChoice("checkpoints/warmstart/model",
                                                                           str(folder), "warmstart")


def test_the_eve_warmstart_is_its_own_checkpoint_or_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(stage.ModelNotFoundError, match="run `searchplay warmstart --eve` first"):
        stage.resolve_model(Params(), "warmstart_eve")
    folder = tmp_path / "checkpoints" / "warmstart_eve" / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    choice = stage.resolve_model(Params(), "warmstart_eve")
    assert (choice.id, choice.source) == ("checkpoints/warmstart_eve/model", "warmstart")


def test_warmstart_folder_follows_warmstart_out_dir(tmp_path):
    pytest.importorskip("searchplay.model_paths")
    params = Params.model_validate({"warmstart": {"out_dir": str(tmp_path / "ws")}})
    assert stage.warmstart_model(params, "warmstart") == tmp_path / "ws" / "model"
    assert stage.warmstart_model(Params(), "warmstart").as_posix().endswith("checkpoints/warmstart/model")
    assert stage.warmstart_model(Params(), "warmstart_eve").as_posix().endswith("checkpoints/warmstart_eve/model")
    with pytest.raises(ValueError, match="not a registered warm-start"):
        stage.warmstart_model(Params(), "kg_wcr")


def test_model_revision_changes_with_the_weights(tmp_path):
    folder = _checkpoint(tmp_path)
    before = stage.model_revision(folder)
    (folder / "model.safetensors").write_bytes(b"new weights")
    assert stage.model_revision(folder) not in (None, before)
    assert stage.model_revision("Qwen/Qwen2.5-7B-Instruct") is None
    weights = stage.model_revision(folder)
    (folder / "chat_template.jinja").write_text("{{ messages }}")  # writes every prompt: another model's answers
    assert stage.model_revision(folder) != weights


def test_model_revision_is_the_same_for_the_same_weights_written_again(tmp_path):
    """A rerun that writes identical weights (new file times) keeps the revision, so its predictions do not
    change; optimizer and RNG states beside the weights do not count."""
    import os

    folder = _checkpoint(tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(b"weights")
    before = stage.model_revision(folder)
    weights.write_bytes(b"weights")
    os.utime(weights, ns=(1, 1))
    (folder / "optimizer.bin").write_bytes(b"another optimizer state")
    assert stage.model_revision(folder) == before


def test_a_kg_heldout_smaller_than_asked_says_so_and_names_the_setting(tmp_path, monkeypatch, caplog):
    from searchplay.io import write_jsonl

    monkeypatch.chdir(tmp_path)
    subgraph = {"path": [{"label": "Lima"}], "relations": [{"label": "capital of"}], "num_hops": 1, "waypoints": []}
    write_jsonl(tmp_path / "data" / "kg" / "subgraphs.jsonl",
                [{**subgraph, "id": f"sg-{i}", "split": split, "answer": answer}
                 for i, (split, answer) in enumerate(KG_POOL)])
    params = Params.model_validate({"evaluate": {"benchmarks": ["kg_heldout"], "kg_heldout_n": 150}})
    with caplog.at_level("WARNING"):
        sampled, _ = stage.load_and_sample(params, ["kg_heldout"])
    assert len(sampled["kg_heldout"]) == 3
    assert "kg_heldout has 3 questions, fewer than evaluate.kg_heldout_n=150" in caplog.text
    assert "kg.heldout_share" in caplog.text


def test_portable_names():
    root = stage.Path("/repo")
    assert stage.portable_name("/repo/data/benchmarks/nq/test.jsonl", root) == "data/benchmarks/nq/test.jsonl"
    assert stage.portable_name("/elsewhere/model", root) == "/elsewhere/model"  # named by the user; kept
    assert stage.portable_name("data/benchmarks/nq/test.jsonl", root) == "data/benchmarks/nq/test.jsonl"


KG_POOL = [("kg_heldout", "Paris"), ("kg_heldout", "Europe"), ("kg_heldout", "Lima"), ("selfplay", "Europe"),
           ("warmstart", "Europe"), ("selfplay", "Asia")]


@pytest.mark.slow  # three evaluations with the quality gate, charts and the comparison: ~9 s
def test_outputs_hold_no_machine_paths_and_kg_heldout_has_its_baseline(tmp_path, monkeypatch, benchmarks_dir,
                                                                         scripted, fake_judge, fake_backend,
                                                                         fake_search):
    """A base, a warm-start and a self-play checkpoint evaluated from the repository root: every file
    written names models and files by params id or repo-relative path, never this machine's."""
    from searchplay.io import write_jsonl

    monkeypatch.chdir(tmp_path)
    shutil.copytree(benchmarks_dir / "bamboogle", tmp_path / "data" / "benchmarks" / "bamboogle")
    subgraph = {"path": [{"label": "Lima"}], "relations": [{"label": "capital of"}], "num_hops": 1, "waypoints": []}
    write_jsonl(tmp_path / "data" / "kg" / "subgraphs.jsonl",
                [{**subgraph, "id": f"sg-{i}", "split": split, "answer": answer}
                 for i, (split, answer) in enumerate(KG_POOL)])
    monkeypatch.setattr("searchplay.assets.resolve", lambda value: str(tmp_path / "home" / value))
    monkeypatch.setattr(stage, "warmstart_model",
                        lambda params, model: tmp_path / "checkpoints" / "warmstart" / "model")
    (tmp_path / "checkpoints" / "warmstart" / "model").mkdir(parents=True)
    (tmp_path / "checkpoints" / "warmstart" / "model" / "config.json").write_text("{}")
    _checkpoint(tmp_path / "checkpoints")
    params = Params.model_validate({"evaluate": {"benchmarks": ["bamboogle", "kg_heldout"], "n": 4, "batch_size": 2}})
    models = {}
    for variant in ("base", "warmstart", "kg_wcr"):
        result = stage.evaluate(params, variant, backend=fake_backend, search_tool=fake_search, judge=fake_judge,
                                track=False, progress=False)
        models[variant] = result.run["model"]
    assert models == {"base": "bundled:smollm2", "warmstart": "checkpoints/warmstart/model",
                      "kg_wcr": "checkpoints/kg_wcr/model"}
    run = json.loads((tmp_path / "reports" / "eval" / "base" / "run.json").read_text())
    assert run["sources"] == {"bamboogle": "data/benchmarks/bamboogle/test.jsonl",
                              "kg_heldout": "data/kg/subgraphs.jsonl"}
    assert run["kg_heldout_majority_answer"] == "Europe"
    metrics = json.loads((tmp_path / "reports" / "eval" / "base" / "metrics.json").read_text())
    assert metrics["kg_heldout.n"] == 3 and metrics["kg_heldout.majority_baseline_em"] == pytest.approx(33.3333)
    assert metrics["kg_heldout.hops_1_n"] == 3 and "kg_heldout.hops_1_judge_acc" in metrics
    # every question's one search finds the Lima document: only kg_heldout's 'Lima' answers are found by it
    assert metrics["bamboogle.question_search_recall"] == 0.0
    assert metrics["kg_heldout.question_search_recall"] == pytest.approx(33.3333)
    assert metrics["bamboogle.retrieval_recall"] == 0.0  # the scripted Solver never searches
    assert metrics["bamboogle.em_ci_low"] < metrics["bamboogle.em"] < metrics["bamboogle.em_ci_high"]
    predictions = (tmp_path / "reports" / "eval" / "base" / "predictions" / "kg_heldout.jsonl").read_text()
    assert "<information>" in json.loads(predictions.splitlines()[0])["output"]

    compare_variants(tmp_path / "reports" / "eval", tmp_path / "reports" / "compare")
    table = (tmp_path / "reports" / "compare" / "compare.md").read_text()
    assert table.index("| base |") < table.index("| warmstart |") < table.index("| kg_wcr |")
    assert "kg_heldout majority baseline (always 'Europe'" in table and "(n=3)" in table
    written = [p for p in (tmp_path / "reports").rglob("*") if p.is_file() and p.suffix != ".png"]
    assert len(written) > 10
    forbidden = {str(tmp_path), str(tmp_path.resolve()), str(Path.home()), "/root"}
    for path in written:
        text = path.read_text()
        assert not [f for f in forbidden if f in text], f"{path} holds a machine-specific path"


def test_paper_rows_match_the_same_model():
    rows, same = paper_rows("Qwen/Qwen2.5-7B-Instruct", "LLaMA-3.1-8B")
    assert same and len(rows) == 5  # KG Table 1: base, SSP, Ours; SSP Table 1: base, SSP
    rows, same = paper_rows("/x/smollm2-135m-instruct", "LLaMA-3.1-8B")
    assert not same and all(label.startswith("LLaMA-3.1-8B") for label, _ in rows)


def test_report_without_any_variant_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="searchplay evaluate"):
        compare_variants(tmp_path, tmp_path / "out")


def test_a_failing_reference_search_leaves_the_reference_out(caplog):
    from searchplay.eval.benchmarks import QAItem

    class Down:
        def search(self, queries, top_k=3):
            raise ConnectionError("retrieval server unreachable")

    sampled = {"nq": [QAItem("a", "Capital of Peru?", ["Lima"], "nq")]}
    assert stage.question_searches(Down(), sampled, 3, "squad") == {}
    assert "retrieval reference" in caplog.text and "unreachable" in caplog.text


def _evaluated_before(out, counts):
    """A folder as a finished evaluation leaves it: sample.json with ``counts`` ids per benchmark, metrics.json."""
    out.mkdir(parents=True)
    files = {"sample.json": json.dumps({"seed": 0, "n": 3, "ids": {b: [str(i) for i in range(c)]
                                                                     for b, c in counts.items()}}),
             "metrics.json": json.dumps({f"{b}.n": c for b, c in counts.items()})}
    for name, text in files.items():
        (out / name).write_text(text)
    return files


def _no_model_loads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model loaded")
    monkeypatch.setattr(stage, "_load_tools", refuse)
    monkeypatch.setattr(stage, "load_and_sample", refuse)


@pytest.mark.parametrize(("asked", "lost"), [
    ({"benchmarks": ["nq"]}, "bamboogle (4 questions; not in this run)"),
    ({"n": 2}, "nq (4 questions; this run at most 2)"),
    ({"benchmarks": ["kg_heldout"], "kg_heldout_n": 3}, "kg_heldout (161 questions; this run at most 3)")])
def test_an_adhoc_evaluation_never_replaces_a_larger_one(tmp_path, benchmarks_dir, monkeypatch, asked, lost):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    out = tmp_path / "eval" / "kg_wcr"
    files = _evaluated_before(out, {"bamboogle": 4, "nq": 4, "kg_heldout": 161} if "kg_heldout_n" in asked
                              else {"bamboogle": 4, "nq": 4})
    _no_model_loads(monkeypatch)
    from searchplay.eval.replacement import ReportWouldShrinkError

    with pytest.raises(ReportWouldShrinkError, match="--replace") as error:
        stage.evaluate(_params(tmp_path, benchmarks_dir, **asked), "kg_wcr", track=False, progress=False,
                       allow_base=True)
    assert lost in str(error.value) and "--out DIR" in str(error.value)
    assert {name: (out / name).read_text() for name in files} == files


def test_replace_a_dvc_stage_or_a_run_that_asks_as_much_goes_ahead(tmp_path, benchmarks_dir, monkeypatch):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    _evaluated_before(tmp_path / "eval" / "kg_wcr", {"bamboogle": 4, "nq": 3})
    _no_model_loads(monkeypatch)  # the check passed when the run reaches the loading
    runs = [({"benchmarks": ["nq"]}, {"replace": True}), ({"n": 4}, {}), ({"n": 500}, {}),
            ({"benchmarks": ["bamboogle", "nq", "kg_heldout"]}, {})]
    for asked, flags in runs:
        with pytest.raises(AssertionError, match="the model loaded"):
            stage.evaluate(_params(tmp_path, benchmarks_dir, **asked), "kg_wcr", track=False, progress=False,
                           allow_base=True, **flags)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))  # the params decide; DVC removed the outputs before the stage
    with pytest.raises(AssertionError, match="the model loaded"):
        stage.evaluate(_params(tmp_path, benchmarks_dir, benchmarks=["nq"]), "kg_wcr", track=False, progress=False,
                       allow_base=True)


def test_what_an_evaluation_asked_is_read_from_its_sample_or_its_metrics(tmp_path):
    from searchplay.eval.replacement import asked_before

    _evaluated_before(tmp_path / "a", {"nq": 3, "kg_heldout": 161})
    assert asked_before(tmp_path / "a") == {"nq": 3, "kg_heldout": 161}
    (tmp_path / "a" / "sample.json").unlink()  # an older layout: metrics.json alone (its nested counts ignored)
    (tmp_path / "a" / "metrics.json").write_text('{"nq.n": 3, "kg_heldout.n": 161, "kg_heldout.hops_2.n": 80}')
    assert asked_before(tmp_path / "a") == {"nq": 3, "kg_heldout": 161}
    (tmp_path / "a" / "metrics.json").write_text('{"nq.n": 3,')  # cut: nothing readable to keep
    assert asked_before(tmp_path / "a") == {} == asked_before(tmp_path / "nothing")


def test_the_resume_log_keeps_only_this_models_answers_and_in_a_stage_only_its_benchmarks(tmp_path, monkeypatch,
                                                                                          caplog):
    from searchplay.io import write_jsonl

    folder = tmp_path / "predictions"
    mine, retrained = {"model": "m", "model_revision": "r2"}, {"model": "m", "model_revision": "r1"}
    write_jsonl(folder / "nq.jsonl", [{"id": "1", **mine}, {"id": "2", **retrained}])
    write_jsonl(folder / "bamboogle.jsonl", [{"id": "3", **mine}])
    write_jsonl(folder / "triviaqa.jsonl", [{"id": "4", **mine}])  # a benchmark no longer asked
    paths = {"nq": folder / "nq.jsonl", "bamboogle": folder / "bamboogle.jsonl"}
    monkeypatch.delenv("DVC_ROOT", raising=False)
    stage.prepare_resume_log(paths, "m", "r2")  # by hand: warned, other benchmarks' files left alone
    assert [json.loads(line)["id"] for line in paths["nq"].read_text().splitlines()] == ["1"]
    assert caplog.records[-1].levelname == "WARNING" and "another model or revision dropped (nq 1)" in caplog.text
    assert (folder / "triviaqa.jsonl").exists() and (folder / "bamboogle.jsonl").read_text().count("\n") == 1

    monkeypatch.setenv("DVC_ROOT", str(tmp_path))  # a DVC stage: its output holds this run's benchmarks alone
    (folder / ".nq.jsonl.k3j2.tmp").write_text("{")  # a rewrite killed half-way
    stage.prepare_resume_log(paths, "m", "r2")
    assert sorted(p.name for p in folder.iterdir()) == ["bamboogle.jsonl", "nq.jsonl"]
