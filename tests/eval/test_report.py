"""Reports show where a score comes from: each score with its Wilson interval and n, models ordered
base, warm-start, variants, and kg_heldout's majority baseline in the tables and in compare.png."""

from __future__ import annotations

import json

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
    assert (tmp_path / "compare" / "compare.png").read_bytes()[:4] == b"\x89PNG" and len(written) == 4


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
    assert (tmp_path / "compare" / "retrieval.png").read_bytes()[:4] == b"\x89PNG" and len(written) == 5
    assert not (tmp_path / "plain" / "retrieval.png").exists()


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
    table = comparison_table("this run", two_of_seven, {}, "Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct",
                             "exact-match")
    paper_rows = [row for row in table.rows if row[0] != "this run"]
    assert paper_rows and all(row[-1] is None for row in paper_rows)
    assert any("not comparable" in note for note in table.notes)
    full = {**_metrics(1), "avg.num_benchmarks": 7}
    table = comparison_table("this run", full, {}, "Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct", "exact-match")
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
    assert any(note.startswith("KG held-out: the scores differ") for note in notes)
