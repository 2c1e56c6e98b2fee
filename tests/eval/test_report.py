"""Reports show where a score comes from: each score with its Wilson interval and n, models ordered
base, warm-start, variants, and kg_heldout's majority baseline in the tables and in compare.png."""

from __future__ import annotations

import json
import shutil

import pytest

from searchplay.eval.intervals import percent_interval
from searchplay.eval.report import (
    compare_variants,
    detail_table,
    model_order,
    read_variant_metrics,
    reading_notes,
    score_cell,
)

BENCHMARKS = ["nq", "bamboogle", "kg_heldout"]


def _metrics(correct: int, n: int = 5) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for name in BENCHMARKS:
        low, high = percent_interval(correct, n)
        metrics.update({f"{name}.n": n, f"{name}.f1": 0.0, f"{name}.sub_em": 0.0})
        for score in ("judge_acc", "em"):
            metrics.update({f"{name}.{score}": 100 * correct / n, f"{name}.{score}_ci_low": low,
                            f"{name}.{score}_ci_high": high})
    metrics["kg_heldout.majority_baseline_em"] = 40.0
    metrics["avg.judge_acc"] = 100 * correct / n
    return metrics


def _eval_dir(tmp_path, models: dict[str, int]):
    for name, correct in models.items():
        folder = tmp_path / "eval" / name
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(_metrics(correct)))
        (folder / "run.json").write_text(json.dumps({"judge": "exact-match", "kg_heldout_majority_answer": "Europe"}))
    return tmp_path / "eval"


def test_models_are_ordered_base_warmstart_then_variants(tmp_path):
    assert model_order(["ssp", "kg_wcr"]) == ["kg_wcr", "ssp"]
    eval_dir = _eval_dir(tmp_path, {"ssp": 1, "kg_wcr": 2, "warmstart": 0, "base": 1})
    assert list(read_variant_metrics(eval_dir)) == ["base", "warmstart", "kg_wcr", "ssp"]


def test_the_comparison_reads_only_the_models_it_is_given(tmp_path, caplog):
    """The pipeline's report compares its params' models; a folder another profile left (the main job's gdcr
    beside a quick run) is neither a row nor a self-play curve of it."""
    eval_dir = _eval_dir(tmp_path, {"base": 1, "warmstart": 0, "kg_wcr": 2, "gdcr": 5})
    for run in ("kg_wcr", "gdcr", "gdcr_phase_a"):
        (tmp_path / "selfplay" / run).mkdir(parents=True)
        (tmp_path / "selfplay" / run / "history.csv").write_text("iteration,solver/accuracy\n1,0.5\n")
    with caplog.at_level("INFO", logger="searchplay.eval.report"):
        compare_variants(eval_dir, tmp_path / "compare", tmp_path / "selfplay", models=["base", "warmstart", "kg_wcr"])
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert {key.split(".")[0] for key in merged if key.endswith(".nq.em")} == {"base", "warmstart", "kg_wcr"}
    assert "models: base, warmstart, kg_wcr (" in (tmp_path / "compare" / "compare.md").read_text()
    assert "not models of these params: gdcr" in caplog.text
    compare_variants(eval_dir, tmp_path / "every", tmp_path / "selfplay")
    assert "models: base, warmstart, gdcr, kg_wcr (" in (tmp_path / "every" / "compare.md").read_text()


def test_the_report_command_compares_the_params_models_unless_told_otherwise(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from searchplay.cli import app

    eval_dir = _eval_dir(tmp_path, {"base": 1, "warmstart": 0, "kg_wcr": 2, "left_behind": 5})
    monkeypatch.chdir(tmp_path)  # no params.yaml: the defaults' references and variants
    for models, out in ((None, "default"), ("base,left_behind", "chosen"), ("all", "every")):
        args = ["report", "--eval-dir", str(eval_dir), "--out", str(tmp_path / out), "--no-track",
                "--selfplay-dir", str(tmp_path / "none"), *(["--models", models] if models else [])]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    shown = {out: (tmp_path / out / "compare.md").read_text().splitlines()[2] for out in ("default", "chosen", "every")}
    assert shown["default"].startswith("models: base, warmstart, kg_wcr (")
    assert shown["chosen"].startswith("models: base, left_behind (")
    assert shown["every"].startswith("models: base, warmstart, kg_wcr, left_behind (")


def test_a_cell_shows_the_interval_and_n_or_the_bare_score():
    assert score_cell(_metrics(1), "nq", "em") == "20.0 [3.6, 62.4] (n=5)"
    assert score_cell({"avg.em": 12.5}, "avg", "em") == 12.5
    assert score_cell({}, "nq", "em") is None


def test_comparison_shows_intervals_baseline_and_n(tmp_path):
    eval_dir = _eval_dir(tmp_path, {"ssp": 1, "kg_wcr": 5, "warmstart": 0, "base": 1})
    written = compare_variants(eval_dir, tmp_path / "compare")
    table = (tmp_path / "compare" / "compare.md").read_text()
    judge = table.split("## EM")[0]
    assert judge.index("| base | 20.0 [3.6, 62.4] (n=5)") < judge.index("| warmstart | 0.0 [0.0, 43.4] (n=5)")
    assert judge.index("| warmstart |") < judge.index("| kg_wcr | 100.0 [56.6, 100.0] (n=5)") < judge.index("| ssp |")
    assert "| kg_heldout majority baseline (always 'Europe'; EM, not judged) | – | – | 40.0 |" in judge
    assert "Wilson 95% interval" in judge
    assert "20.0 [3.6, 62.4] (n=5)" in (tmp_path / "compare" / "compare.html").read_text()
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert merged["base.nq.em_ci_high"] == percent_interval(1, 5)[1]
    assert (tmp_path / "compare" / "compare.png").read_bytes()[:4] == b"\x89PNG" and len(written) == 6


def test_retrieval_recall_gets_its_own_table_note_and_chart(tmp_path):
    eval_dir = _eval_dir(tmp_path, {"base": 0, "warmstart": 1})
    folder = eval_dir / "warmstart"
    metrics = json.loads((folder / "metrics.json").read_text())
    low, high = percent_interval(3, 5)
    metrics.update({"nq.retrieval_recall": 60.0, "nq.retrieval_recall_ci_low": low,
                    "nq.retrieval_recall_ci_high": high, "nq.question_search_recall": 20.0})
    (folder / "metrics.json").write_text(json.dumps(metrics))
    written = compare_variants(eval_dir, tmp_path / "compare")
    table = (tmp_path / "compare" / "compare.md").read_text().split("## Answer retrieved by the model's searches")[1]
    assert "| warmstart | 60.0 [23.1, 88.2] (n=5) |" in table and "retrieval recall" in table
    assert "| one search with the question itself (reference, top-k) | 20.0 | – | – |" in table
    assert (tmp_path / "compare" / "retrieval.png").read_bytes()[:4] == b"\x89PNG" and len(written) == 7
    plain = compare_variants(_eval_dir(tmp_path / "plain", {"base": 0, "warmstart": 1}), tmp_path / "plain" / "out")
    assert len(plain) == 6 and not (tmp_path / "plain" / "out" / "retrieval.png").exists()  # no recall, no chart


def test_detail_table_carries_intervals_and_the_baseline():
    per = {"kg_heldout": {key.split(".", 1)[1]: value for key, value in _metrics(1).items()
                          if key.startswith("kg_heldout.")}}
    per["kg_heldout"].update({"judge_errors": 0, "valid_rate": 100.0, "mean_searches": 1.0})
    table = detail_table(per, "exact-match", "Europe")
    assert table.rows[0][:5] == ["KG held-out", 5, "20.0 [3.6, 62.4]", 0, "20.0 [3.6, 62.4]"]
    assert any("always answering 'Europe'" in note and "EM 40.0" in note for note in table.notes)


def test_a_partial_average_is_labelled_and_never_beside_the_papers_average(tmp_path):
    from searchplay.eval.report import comparison_table, group_cell

    two_of_seven = {**_metrics(1), "avg.num_benchmarks": 2, "general_qa.judge_acc": 20.0,
                    "general_qa.num_benchmarks": 1}
    assert group_cell(two_of_seven, "avg", "judge_acc") == "20.0 (2 of 7)"
    assert group_cell(two_of_seven, "general_qa", "judge_acc") == "20.0 (1 of 3)"
    assert group_cell({"avg.judge_acc": 30.0, "avg.num_benchmarks": 7}, "avg", "judge_acc") == 30.0
    table = comparison_table("this run", two_of_seven, "Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct",
                             "exact-match")
    paper_rows = [row for row in table.rows if row[0] != "this run"]
    assert paper_rows and all(row[-1] is None for row in paper_rows)
    assert any("not comparable" in note for note in table.notes)
    full = {**_metrics(1), "avg.num_benchmarks": 7}
    table = comparison_table("this run", full, "Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct", "exact-match")
    assert any(row[-1] is not None for row in table.rows if row[0] != "this run")


def _scored(correct: dict[str, tuple[int, int]]) -> dict[str, float]:
    """metrics.json keys for benchmark -> (correct, n), with Wilson intervals."""
    metrics: dict[str, float] = {}
    for name, (right, n) in correct.items():
        low, high = percent_interval(right, n)
        metrics.update({f"{name}.em": 100 * right / n, f"{name}.em_ci_low": low, f"{name}.em_ci_high": high,
                        f"{name}.n": n})
    return metrics


def test_reading_notes_say_which_columns_rank_nothing_and_which_do_not_separate_the_models():
    models = {"base": _scored({"nq": (0, 5), "popqa": (0, 5), "kg_heldout": (0, 23)}),
              "ssp": _scored({"nq": (0, 5), "popqa": (1, 5), "kg_heldout": (8, 23)}),
              "kg_wcr": _scored({"nq": (0, 5), "popqa": (0, 5), "kg_heldout": (7, 23)})}
    notes = reading_notes(models, ["nq", "popqa", "kg_heldout"], "em")
    assert notes[0].startswith("NQ: every model scored 0 (n=5; 95% interval up to 43.4)")
    assert any(note.startswith("PopQA: the scores differ, but every model's interval overlaps") for note in notes)
    assert not any(note.startswith("KG held-out") for note in notes)  # 0 of 23 against 8 of 23: separated
    models["base"] = _scored({"nq": (0, 5), "popqa": (0, 5), "kg_heldout": (6, 23)})
    notes = reading_notes(models, ["kg_heldout"], "em")
    overlap = next(note for note in notes if note.startswith("KG held-out: the scores differ"))
    # overlapping intervals do not show the models equal: 10 discordant questions all one way give p = 0.002
    assert "paired tests" in overlap and "no model is shown better" not in overlap


# --- paired comparisons (exact McNemar) and the self-play budget ----------------------------------------------


def _predictions(eval_dir, model: str, verdicts: dict[str, list[bool]], searches: int = 1) -> None:
    """``<model>/predictions/<benchmark>.jsonl`` with one record per verdict (ids 0, 1, ...), each question
    searched ``searches`` times; its searches returned a gold answer where it is right."""
    folder = eval_dir / model / "predictions"
    folder.mkdir(parents=True, exist_ok=True)
    for benchmark, rights in verdicts.items():
        records = [{"id": str(i), "benchmark": benchmark, "judge_correct": right, "em": float(right),
                    "golden_answers": ["x"], "prediction": "x" if right else "y", "num_searches": searches,
                    "answer_retrieved": right}
                   for i, right in enumerate(rights)]
        (folder / f"{benchmark}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _paired_eval_dir(tmp_path):
    """base wrong everywhere; warmstart right on kg 0-5; kg_wcr also on kg 6 and nq 0; gdcr as warmstart; ssp
    wrong everywhere; eve evaluated, but not the checkpoint it started from."""
    eval_dir = _eval_dir(tmp_path, {"base": 0, "warmstart": 1, "kg_wcr": 2, "gdcr": 1, "ssp": 0, "eve": 1})
    warmstart = {"kg_heldout": [i < 6 for i in range(10)], "nq": [False] * 5}
    for model in ("base", "ssp", "eve"):
        _predictions(eval_dir, model, {"kg_heldout": [False] * 10, "nq": [False] * 5})
    _predictions(eval_dir, "warmstart", warmstart)
    _predictions(eval_dir, "gdcr", warmstart)
    _predictions(eval_dir, "kg_wcr", {"kg_heldout": [i < 7 for i in range(10)], "nq": [True] + [False] * 4},
                 searches=2)
    return eval_dir


def test_paired_comparisons_follow_the_judge_table_with_counts_p_and_plain_notes(tmp_path):
    eval_dir = _paired_eval_dir(tmp_path)
    compare_variants(eval_dir, tmp_path / "compare")
    text = (tmp_path / "compare" / "compare.md").read_text()
    assert text.index("## Judge accuracy") < text.index("## Paired comparisons (exact McNemar)") < text.index("## EM")
    paired = text.split("## Paired comparisons (exact McNemar)")[1].split("## EM")[0]
    assert ("| comparison (A vs B) | scope | n | both right | only A right | only B right | both wrong | "
            "exact McNemar p |") in paired
    assert "| warmstart vs base | KG held-out | 10 | 0 | 6 | 0 | 4 | 0.031 |" in paired
    assert "| warmstart vs base | all benchmarks pooled (2 benchmarks) | 15 | 0 | 6 | 0 | 9 | 0.031 |" in paired
    assert "| kg_wcr vs warmstart | all benchmarks pooled (2 benchmarks) | 15 | 6 | 2 | 0 | 7 | 0.5 |" in paired
    assert "| kg_wcr vs ssp | KG held-out | 10 | 0 | 7 | 0 | 3 | 0.016 |" in paired
    assert ("- ssp vs warmstart on KG held-out: 0 questions turned right, 6 turned wrong, p = 0.031: warmstart is "
            "better (paired, exact McNemar).") in paired
    assert ("- kg_wcr vs warmstart on KG held-out: 1 question turned right, 0 turned wrong, p = 1: no evidence of "
            "a difference.") in paired
    assert ("- kg_wcr vs ssp on KG held-out: kg_wcr alone right on 7 questions, ssp alone right on 0, p = 0.016: "
            "kg_wcr is better (paired, exact McNemar).") in paired
    assert "- gdcr vs warmstart on KG held-out: no answer differs in correctness (6 both right" in paired
    assert "eve: not set against warmstart_eve, the checkpoint it started from" in paired
    assert "does not mean there is no difference" in paired and "eve vs" not in paired
    page = (tmp_path / "compare" / "compare.html").read_text()
    assert "<h2>Paired comparisons (exact McNemar)</h2>" in page and "<td>kg_wcr vs ssp</td>" in page
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert merged["paired.kg_wcr_vs_ssp.kg_heldout.only_a"] == 7 and merged["paired.kg_wcr_vs_ssp.kg_heldout.n"] == 10
    assert merged["paired.kg_wcr_vs_ssp.kg_heldout.p"] == 2 / 2**7
    assert merged["paired.warmstart_vs_base.pooled.both_wrong"] == 9 and merged["base.nq.n"] == 5
    assert not any(key.startswith("paired.eve_vs") for key in merged)


def test_what_training_changed_follows_the_paired_comparisons_with_answers_searches_and_a_sign_test(tmp_path):
    eval_dir = _paired_eval_dir(tmp_path)
    compare_variants(eval_dir, tmp_path / "compare")
    text = (tmp_path / "compare" / "compare.md").read_text()
    assert text.index("## Paired comparisons") < text.index("## What training changed (paired)") < text.index("## EM")
    changed = text.split("## What training changed (paired)")[1].split("## EM")[0]
    assert ("| comparison (A vs B) | scope | n | answers changed | A searched more | A searched less | "
            "searches per question (A / B) | sign test p |") in changed
    assert "| kg_wcr vs warmstart | KG held-out | 10 | 1 | 10 | 0 | 2.00 / 1.00 | 0.002 |" in changed
    assert "| gdcr vs warmstart | all benchmarks pooled (2 benchmarks) | 15 | 0 | 0 | 0 | 1.00 / 1.00 | 1 |" in changed
    assert ("- kg_wcr vs warmstart on KG held-out: 1 of 10 answers changed; kg_wcr searched more on 10 questions "
            "and less on 0 (2.00 vs 1.00 searches per question), p = 0.002: kg_wcr searches more (paired, exact "
            "sign test).") in changed
    assert "- gdcr vs warmstart on KG held-out: no answer and no search count changed" in changed
    assert (tmp_path / "compare" / "behaviour.png").read_bytes().startswith(b"\x89PNG")
    assert "![behaviour](behaviour.png)" in text
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert merged["behaviour.kg_wcr_vs_warmstart.kg_heldout.more_searches"] == 10
    assert merged["behaviour.kg_wcr_vs_ssp.pooled.answers_changed"] == 8


def test_a_pair_asked_for_gets_every_paired_table_and_its_metrics(tmp_path):
    eval_dir = _paired_eval_dir(tmp_path)
    compare_variants(eval_dir, tmp_path / "compare", pairs=[("kg_wcr", "gdcr")])
    text = (tmp_path / "compare" / "compare.md").read_text()
    assert "| kg_wcr vs gdcr | 10 | 1 / 0 (p = 1) | 10 / 0 (p = 0.002) |" in text.split("## Judge accuracy")[0]
    paired = text.split("## Paired comparisons (exact McNemar)")[1].split("## EM")[0]
    assert "| kg_wcr vs gdcr | KG held-out | 10 | 6 | 1 | 0 | 3 | 1 |" in paired
    assert "| kg_wcr vs gdcr | KG held-out | 10 | 1 | 10 | 0 | 2.00 / 1.00 | 0.002 |" in paired
    metrics = {"paired.kg_wcr_vs_gdcr.kg_heldout.only_a": 1, "behaviour.kg_wcr_vs_gdcr.kg_heldout.more_searches": 10}
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert {key: merged.get(key) for key in metrics} == metrics


def test_a_cut_input_or_a_mistyped_model_is_named_not_blamed_on_pair(tmp_path):
    from typer.testing import CliRunner

    from searchplay.cli import app

    eval_dir = _paired_eval_dir(tmp_path)
    args = ["report", "--eval-dir", str(eval_dir), "--out", str(tmp_path / "compare"), "--no-track"]

    def output(*more: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, [*args, *more])
        return result.exit_code, " ".join(result.output.split())  # rich wraps long lines

    code, said = output("--models", "kg_wcr,gdrc")
    assert code == 2 and "--models: no gdrc/metrics.json under" in said
    metrics = eval_dir / "kg_wcr" / "metrics.json"
    metrics.write_text(metrics.read_text()[:40])
    code, said = output("--models", "all")
    assert code == 2 and "report error:" in said and "kg_wcr/metrics.json: not valid JSON" in said
    assert "--pair" not in said and not (tmp_path / "compare").exists()
    metrics.write_text("[]")
    code, said = output("--models", "all")
    assert code == 2 and "kg_wcr/metrics.json: not a JSON object of metrics" in said and "Traceback" not in said
    code, said = output("--eval-dir", str(tmp_path / "nothing evaluated"))  # exit 2: a retry finds the same
    assert code == 2 and "report error: no <variant>/metrics.json under" in said


def test_a_pair_compares_its_models_though_the_params_do_not_name_them(tmp_path):
    eval_dir = _paired_eval_dir(tmp_path)
    shutil.copytree(eval_dir / "kg_wcr", eval_dir / "kg_wcr_seed1")  # a second seed, copied beside the others
    compare_variants(eval_dir, tmp_path / "compare", pairs=[("kg_wcr_seed1", "kg_wcr")], models=["warmstart"])
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert {key.split(".")[0] for key in merged if not key.startswith(("paired", "behaviour", "coverage"))} >= \
        {"warmstart", "kg_wcr", "kg_wcr_seed1"}
    assert "| kg_wcr_seed1 vs kg_wcr |" in (tmp_path / "compare" / "compare.md").read_text()


def test_a_pair_naming_a_model_not_evaluated_or_itself_is_an_error_not_a_silent_gap(tmp_path):
    from typer.testing import CliRunner

    from searchplay.cli import app

    eval_dir = _paired_eval_dir(tmp_path)
    with pytest.raises(ValueError, match=r"no kg_wcr_seed1/metrics\.json under"):
        compare_variants(eval_dir, tmp_path / "compare", pairs=[("kg_wcr_seed1", "kg_wcr")], models=["kg_wcr"])
    with pytest.raises(ValueError, match="compares a model with itself"):
        compare_variants(eval_dir, tmp_path / "compare", pairs=[("kg_wcr", "kg_wcr")])
    assert not (tmp_path / "compare").exists()
    args = ["report", "--eval-dir", str(eval_dir), "--out", str(tmp_path / "compare"), "--no-track"]
    for pair in ("kg_wcr", "kg_wcr:", "kg_wcr:gdcr:ssp", "kg_wcr:nope"):
        result = CliRunner().invoke(app, [*args, "--pair", pair])
        assert result.exit_code == 2 and "--pair" in result.output, pair
    assert CliRunner().invoke(app, [*args, "--pair", "kg_wcr:gdcr", "--pair", "gdcr:ssp"]).exit_code == 0
    assert "| gdcr vs ssp |" in (tmp_path / "compare" / "compare.md").read_text()


def test_the_eve_start_is_compared_once_it_is_evaluated(tmp_path):
    eval_dir = _paired_eval_dir(tmp_path)
    start = eval_dir / "warmstart_eve"
    start.mkdir()
    (start / "metrics.json").write_text(json.dumps(_metrics(1)))
    _predictions(eval_dir, "warmstart_eve", {"kg_heldout": [i < 6 for i in range(10)], "nq": [False] * 5})
    compare_variants(eval_dir, tmp_path / "compare")
    paired = (tmp_path / "compare" / "compare.md").read_text().split("## EM")[0]
    assert "| eve vs warmstart_eve | KG held-out | 10 | 0 | 0 | 6 | 4 | 0.031 |" in paired
    assert "| warmstart_eve vs warmstart | KG held-out | 10 | 6 | 0 | 0 | 4 | 1 |" in paired
    assert "eve: not set against" not in paired
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert merged["paired.eve_vs_warmstart_eve.pooled.only_b"] == 6


def test_a_comparison_across_two_judges_says_so():
    from searchplay.eval.paired import PairedComparison
    from searchplay.eval.report import paired_note

    comparison = PairedComparison("kg_wcr", "ssp", "kg_heldout", 5, 1, 1, 1, 2, 1.0)
    note = paired_note(comparison, "KG held-out", {"kg_wcr": "exact-match", "ssp": "llm"})
    assert note.startswith("kg_wcr vs ssp on KG held-out: kg_wcr alone right on 1 question, ssp alone right on 1")
    assert "Judged differently (kg_wcr: exact-match; ssp: llm)" in note


def _budget_history(folder, header: list[str], rows: list[list[str]]) -> None:
    folder.mkdir(parents=True)
    (folder / "history.csv").write_text("\n".join(",".join(line) for line in [header, *rows]) + "\n")


def test_the_selfplay_budget_sums_each_history_and_reads_missing_columns_as_a_dash(tmp_path):
    eval_dir = _eval_dir(tmp_path, {"warmstart": 1, "ssp": 1})
    selfplay = tmp_path / "selfplay"
    full = ["iteration", "solver/rollouts", "train/groups", "train/tokens", "train/optimizer_steps"]
    _budget_history(selfplay / "ssp", full, [["1", "15", "3", "909", "3"], ["2", "15", "", "1200", "3"]])
    _budget_history(selfplay / "eve", full, [["1", "15", "3", "1608", "2"]])
    _budget_history(selfplay / "eve_phase_a", ["iteration", "solver/rollouts", "train/groups"], [["1", "5", "3"]])
    compare_variants(eval_dir, tmp_path / "compare", selfplay)
    text = (tmp_path / "compare" / "compare.md").read_text()
    assert "Paired comparisons" not in text  # no predictions: nothing to pair
    assert (tmp_path / "compare" / "behaviour.png").is_file()  # a DVC plot of the stage: drawn, saying so
    assert text.index("## Judge accuracy") < text.index("## Self-play budget") < text.index("## EM")
    budget = text.split("## Self-play budget")[1].split("## EM")[0]
    assert ("| self-play run | iterations | groups trained | Solver rollouts | optimizer steps | trained tokens |"
            in budget)
    assert "| eve (Phase A) | 1 | 3 | 5 | – | – |\n| eve | 1 | 3 | 15 | 2 | 1,608 |" in budget
    assert "| ssp | 2 | 3 | 30 | 6 | 2,109 |" in budget
    assert "its budget from its start is the eve (Phase A) row and the eve row together" in budget
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert merged["budget.ssp.tokens"] == 2109 and merged["budget.ssp.iterations"] == 2
    assert merged["budget.eve_phase_a.rollouts"] == 5 and "budget.eve_phase_a.tokens" not in merged


def test_report_logs_to_mlflow_unless_told_not_to(tmp_path, monkeypatch):
    import mlflow
    from typer.testing import CliRunner

    import searchplay.eval.report as report
    import searchplay.eval.report_tracking as report_tracking
    from searchplay.cli import app

    logged, compared = [], []
    monkeypatch.setattr(report_tracking, "log_comparison", lambda out: logged.append((mlflow.get_tracking_uri(), out)))
    compare = report.compare_variants  # the run is open while the comparison runs: it spans the work
    monkeypatch.setattr(report, "compare_variants", lambda *a: compared.append(mlflow.active_run()) or compare(*a))
    eval_dir = _paired_eval_dir(tmp_path)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(f"tracking:\n  uri: sqlite:///{tmp_path / 'mlflow.db'}\n")
    args = ["--params", str(params_file), "report", "--eval-dir", str(eval_dir), "--out", str(tmp_path / "compare"),
            "--selfplay-dir", str(tmp_path / "none")]
    assert CliRunner().invoke(app, [*args, "--no-track"]).exit_code == 0 and logged == [] and compared == [None]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and "chart view of the comparison, glance.png" in result.output
    assert "compareRunsMode=CHART" in result.output.split("glance.png")[-1]  # the report experiment's own view
    assert "evaluations" not in result.output and "None" not in result.output  # this store holds no evaluation
    assert logged == [(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "compare")]
    assert compared[-1] is not None and compared[-1].info.run_name == "compare"
    run = mlflow.MlflowClient().get_run(compared[-1].info.run_id)
    assert run.data.params == {}  # as its DVC stage, which depends on no param: the image cards show charts


def test_kg_heldout_accuracy_by_hop_count_is_a_table_with_n_per_column():
    from searchplay.eval.report import hops_table

    variants = {"warmstart": {"kg_heldout.hops_3_n": 60.0, "kg_heldout.hops_3_judge_acc": 10.0,
                              "kg_heldout.hops_4_n": 50.0, "kg_heldout.hops_4_judge_acc": 4.0},
                "kg_wcr": {"kg_heldout.hops_3_n": 60.0, "kg_heldout.hops_3_judge_acc": 15.0,
                           "kg_heldout.hops_4_n": 50.0, "kg_heldout.hops_4_judge_acc": 2.0}}
    table = hops_table(variants)
    assert table.header == ["model", "3 hops (n=60)", "4 hops (n=50)"]
    assert table.rows == [["warmstart", 10.0, 4.0], ["kg_wcr", 15.0, 2.0]]
    assert hops_table({"base": {"nq.n": 5.0}}) is None
    variants["kg_wcr"]["kg_heldout.hops_3_n"] = 64.0  # an ad-hoc evaluation asked other questions
    assert hops_table(variants).header == ["model", "3 hops (n=60-64)", "4 hops (n=50)"]


def test_what_the_sample_fixes_is_shown_only_where_the_models_share_it():
    """The majority baseline and the question-as-query recall belong to a sample: where the models were asked other
    questions they differ, and no one model's value stands for the others'."""
    from searchplay.eval.report import majority_baseline, question_search_recalls

    same = {"a": {"kg_heldout.majority_baseline_em": 10.0, "nq.question_search_recall": 40.0},
            "b": {"kg_heldout.majority_baseline_em": 10.0, "nq.question_search_recall": 40.0}, "c": {}}
    assert majority_baseline(same) == 10.0 and question_search_recalls(same, ["nq", "popqa"]) == [40.0, None]
    same["b"] = {"kg_heldout.majority_baseline_em": 0.0, "nq.question_search_recall": 20.0}
    assert majority_baseline(same) is None and question_search_recalls(same, ["nq"]) == [None]


def test_a_model_has_one_colour_in_every_chart_and_the_references_their_own():
    from searchplay.colors import MODEL_COLORS, model_color

    assert len(set(MODEL_COLORS.values())) == len(MODEL_COLORS)  # no two models share a colour
    assert model_color("kg_wcr") != model_color("eve") != model_color("gdcr")
    assert model_color("some_new_variant") == "#c5b0d5"  # an unknown name: the same colour in every process
    assert model_color("another_variant") == "#ffbb78"  # (a salted hash() would change between runs)


def test_the_learning_table_pools_fresh_accuracy_and_tests_the_last_part_against_the_first():
    from searchplay.eval.report import learning_table
    from searchplay.selfplay.metrics import fresh_accuracy_trend

    def it(i, acc, n=20.0, **more):
        return {"iteration": float(i), "solver/fresh_accuracy": acc, "solver/fresh_rollouts": n, **more}

    histories = {"kg_wcr": [it(1, 0.1, **{"filter/gold_checked_rate": 0.5}),
                            it(2, float("nan"), 0.0, **{"filter/gold_checked_rate": float("nan")}),
                            it(3, 0.3, **{"filter/gold_checked_rate": 1.0})],
                 "gdcr": [it(1, 0.0, 15.0, **{"filter/valid_rate_rule": 0.1, "proposer/proposals": 20.0}),
                          it(2, 0.2, 15.0, **{"filter/valid_rate_rule": 0.6, "proposer/proposals": 10.0})],
                 "ssp": [it(1, 0.05)]}
    rows = {row[0]: row for row in learning_table(histories).rows}
    trend = fresh_accuracy_trend(histories["kg_wcr"])  # the loop's own test: the same thirds and p
    assert rows["kg_wcr"][:5] == ["kg_wcr", 3, "20.0% [10.5, 34.8] (n = 40)", "10.0% (it. 1, n = 20)",
                                  "30.0% (it. 3, n = 20)"]
    assert rows["kg_wcr"][5] == f"{trend['trend/fresh_accuracy_p']:.3f}" and rows["kg_wcr"][6:] == [None, "75.0%"]
    assert rows["gdcr"][3:6] == ["0.0% (it. 1, n = 15)", "20.0% (it. 2, n = 15)", "0.112"]  # two iterations
    # the Proposer's rule filter: 2 of 20 questions passed, then 6 of 10 (one-sided Fisher p = 0.0072)
    assert rows["gdcr"][6] == "10.0% (n = 20) → 60.0% (n = 10), p = 0.007"
    assert rows["ssp"] == ["ssp", 1, "5.0% [0.9, 23.6] (n = 20)", None, None, None, None, None]
    assert learning_table({}) is None


def test_held_out_waypoint_coverage_is_paired_when_the_kg_pool_is_given(tmp_path):
    eval_dir = _paired_eval_dir(tmp_path)
    pool = tmp_path / "subgraphs.jsonl"
    pool.write_text("".join(json.dumps({"id": str(i), "split": "kg_heldout", "answer": "x", "num_hops": 2,
                                        "path": [{"id": "Q1", "label": "Bern"}, {"id": "Q2", "label": "Aare"},
                                                 {"id": "Q3", "label": "x"}],
                                        "relations": [{"id": "P1", "label": "river"}, {"id": "P2", "label": "mouth"}],
                                        "waypoints": ["Bern", "Aare"]}) + "\n" for i in range(10)))
    for model, think in (("warmstart", "Bern"), ("kg_wcr", "Bern and the Aare")):
        path = eval_dir / model / "predictions" / "kg_heldout.jsonl"
        records = [json.loads(line) | {"output": f"<think>{think}</think>"} for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    compare_variants(eval_dir, tmp_path / "without")
    assert "Waypoint coverage" not in (tmp_path / "without" / "compare.md").read_text()
    compare_variants(eval_dir, tmp_path / "compare", kg_pool=pool)
    text = (tmp_path / "compare" / "compare.md").read_text()
    section = text.split("## Waypoint coverage on KG held-out (paired)")[1].split("\n## ")[0]
    assert "| kg_wcr vs warmstart | 10 | 10 | 0 | 1.000 / 0.500 | 0.002 | 10 / 0 of 10 | 10 / 0 | 0.002 |" in section
    assert "kg_wcr names more of the path in its reasoning (paired, exact sign test)" in section
    assert text.index("## What training changed") < text.index("## Waypoint coverage")
    merged = json.loads((tmp_path / "compare" / "metrics.json").read_text())
    assert merged["coverage.kg_wcr_vs_warmstart.kg_heldout.more"] == 10


def test_the_report_opens_on_one_row_of_paired_tests_per_pair(tmp_path):
    compare_variants(_paired_eval_dir(tmp_path), tmp_path / "compare")
    text = (tmp_path / "compare" / "compare.md").read_text()
    assert text.index("## At a glance: paired tests on KG held-out") < text.index("## Judge accuracy")
    glance = text.split("## At a glance")[1].split("## Judge accuracy")[0]
    assert ("| warmstart vs base | 10 | 6 / 0 (p = 0.031) | 0 / 0 (p = 1) | 6 / 0 (p = 0.031) | – | more right "
            "answers; its searches find the answer more often |") in glance
    assert ("| kg_wcr vs warmstart | 10 | 1 / 0 (p = 1) | 10 / 0 (p = 0.002) | 1 / 0 (p = 1) | – | searches more; "
            "correctness: no difference shown |") in glance
    assert "| gdcr vs warmstart | 10 | 0 / 0 (p = 1) | 0 / 0 (p = 1) | 0 / 0 (p = 1) | – | no difference shown by " \
        "any of the 3 tests |" in glance
    assert "eve vs" not in glance  # its start was not evaluated
    assert (tmp_path / "compare" / "glance.png").read_bytes().startswith(b"\x89PNG")
    assert "![glance](glance.png)" in text
