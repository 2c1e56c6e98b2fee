import json

from searchplay.eval.behaviour import (
    Answer,
    BehaviourComparison,
    behaviour_metrics,
    behaviour_note,
    compare_behaviour,
    compare_behaviours,
    read_answers,
)
from searchplay.eval.paired import POOLED


def _write(eval_dir, model: str, benchmark: str, records: list[dict]) -> None:
    folder = eval_dir / model / "predictions"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{benchmark}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_answers_are_read_normalized_with_their_search_counts_and_a_model_without_predictions_is_left_out(tmp_path):
    _write(tmp_path, "kg_wcr", "kg_heldout", [
        {"id": 1, "benchmark": "kg_heldout", "prediction": "The Europe.", "num_searches": 2, "answer_retrieved": True},
        {"id": 2, "benchmark": "kg_heldout", "prediction": None},  # no answer, no search count
        {"benchmark": "kg_heldout", "prediction": "x"},  # no id: not pairable
    ])
    answers = read_answers(tmp_path, ["kg_wcr", "ssp"])
    assert answers == {"kg_wcr": {("kg_heldout", "1"): Answer("europe", 2, True), ("kg_heldout", "2"): Answer("", 0)}}


def test_only_the_answers_of_the_evaluation_the_folder_reports_are_read(tmp_path):
    """A benchmark file no longer asked (an evaluation of fewer benchmarks outside DVC), a question outside the
    sample, and answers of another model revision (a later run that stopped before its scores) pair with nothing;
    the report's correctness and the behaviour tables read the same records."""
    from searchplay.eval.report import read_correctness

    _write(tmp_path, "kg_wcr", "kg_heldout", [
        {"id": 1, "benchmark": "kg_heldout", "prediction": "Europe", "judge_correct": True, "model_revision": "new"},
        {"id": 2, "benchmark": "kg_heldout", "prediction": "Asia", "judge_correct": True, "model_revision": "old"},
        {"id": 3, "benchmark": "kg_heldout", "prediction": "Asia", "judge_correct": False, "model_revision": "new"},
    ])
    _write(tmp_path, "kg_wcr", "nq", [{"id": 9, "benchmark": "nq", "prediction": "x", "judge_correct": True,
                                       "model_revision": "old"}])
    folder = tmp_path / "kg_wcr"
    (folder / "sample.json").write_text(json.dumps({"seed": 0, "n": 2, "ids": {"kg_heldout": ["1", "2"]}}))
    (folder / "run.json").write_text(json.dumps({"model_revision": "new"}))
    assert read_correctness(tmp_path, ["kg_wcr"]) == {"kg_wcr": {("kg_heldout", "1"): True}}
    assert read_answers(tmp_path, ["kg_wcr"]) == {"kg_wcr": {("kg_heldout", "1"): Answer("europe", 0)}}
    (folder / "sample.json").unlink()  # a folder of an older version: every record, by the revision it names
    (folder / "run.json").unlink()
    assert len(read_correctness(tmp_path, ["kg_wcr"])["kg_wcr"]) == 4


def test_only_the_questions_both_answered_are_paired_per_benchmark_and_pooled():
    start = {("kg_heldout", str(i)): Answer("china", 1) for i in range(6)} | {("nq", "0"): Answer("x", 1)}
    trained = {("kg_heldout", str(i)): Answer("china" if i < 3 else "asia", 1 + (i < 5)) for i in range(5)}
    trained[("nq", "0")] = Answer("x", 0)
    [scoped, pooled] = compare_behaviours({"warmstart": start, "kg_wcr": trained}, "kg_heldout")
    assert (scoped.label, scoped.scope, scoped.n) == ("kg_wcr vs warmstart", "kg_heldout", 5)
    assert (scoped.answers_changed, scoped.more_searches, scoped.fewer_searches) == (2, 5, 0)
    assert scoped.searches_p == 2 / 2**5 and scoped.mean_searches_a == 2.0 and scoped.mean_searches_b == 1.0
    assert (pooled.scope, pooled.n, pooled.more_searches, pooled.fewer_searches) == (POOLED, 6, 5, 1)


def test_a_model_that_changed_nothing_is_named_as_such_and_a_tie_is_no_direction():
    same = {("kg", "1"): Answer("europe", 1)}
    unchanged = compare_behaviour("ssp", same, "warmstart", same, "kg")
    assert unchanged.searches_p == 1.0
    assert "no answer and no search count changed" in behaviour_note(unchanged, "KG held-out")
    tie = BehaviourComparison("gdcr", "warmstart", "kg", 10, 4, 3, 3, 1.2, 1.2, 0, 0, 0, 0)
    assert behaviour_note(tie, "KG held-out").endswith(
        "p = 1: no evidence that gdcr searches more or less than warmstart.")
    same_found = BehaviourComparison("gdcr", "warmstart", "kg", 10, 4, 3, 3, 1.2, 1.2, 0, 0, 2, 2)
    assert behaviour_note(same_found, "KG held-out").endswith(
        "Both models' searches found a gold answer on the same 2 questions.")


def test_answer_found_is_paired_by_question_not_by_totals():
    """Equal totals can hide opposite changes: only the questions where one model's searches found a gold
    answer and the other's did not enter exact McNemar."""
    start = {("kg", str(i)): Answer("x", 1, found=i < 6) for i in range(20)}
    trained = {("kg", str(i)): Answer("x", 2, found=i >= 3 and i < 12) for i in range(20)}
    [scoped, _] = compare_behaviours({"warmstart": start, "kg_wcr": trained}, "kg")
    assert (scoped.found_a, scoped.found_b, scoped.found_only_a, scoped.found_only_b) == (9, 6, 6, 3)
    assert round(scoped.found_p, 4) == 0.5078
    assert "no evidence that kg_wcr's searches find the answer more or less often" in behaviour_note(scoped, "KG")
    gained = {("kg", str(i)): Answer("x", 2, found=i < 13) for i in range(20)}
    [scoped, _] = compare_behaviours({"warmstart": start, "kg_wcr": gained}, "kg")
    assert (scoped.found_only_a, scoped.found_only_b, scoped.found_p) == (7, 0, 2 / 2**7)
    assert behaviour_note(scoped, "KG").endswith(
        "kg_wcr's searches find the answer more often (paired, exact McNemar).")


def test_a_record_that_does_not_say_whether_its_search_found_the_answer_is_left_out_of_that_count(tmp_path):
    """Records written before ``answer_retrieved`` existed say nothing: pairing them as "not found" against a
    newer evaluation's would invent a significant difference."""
    _write(tmp_path, "kg_wcr", "kg", [{"id": i, "prediction": "x", "answer_retrieved": True} for i in range(8)])
    _write(tmp_path, "warmstart", "kg", [{"id": i, "prediction": "x"} for i in range(6)]
           + [{"id": i, "prediction": "x", "answer_retrieved": False} for i in (6, 7)])
    [scoped, _] = compare_behaviours(read_answers(tmp_path, ["kg_wcr", "warmstart"]), "kg")
    assert (scoped.n, scoped.found_n, scoped.found_only_a, scoped.found_only_b, scoped.found_p) == (8, 2, 2, 0, 0.5)
    assert "(2 vs 0 of 2; not recorded for 6 of 8), p = 0.5: no evidence" in behaviour_note(scoped, "KG")
    assert behaviour_metrics(scoped)["behaviour.kg_wcr_vs_warmstart.kg.found_n"] == 2


def test_answers_changed_reads_each_evaluations_own_normalization(tmp_path):
    """Under ``evaluate.normalization: unicode`` EM scores "Gödel" and "Godel" alike: so does "answers changed"."""
    for model, answer in (("kg_wcr", "Gödel"), ("warmstart", "Godel")):
        _write(tmp_path, model, "kg", [{"id": 1, "prediction": answer}])
        (tmp_path / model / "run.json").write_text(json.dumps({"normalization": "unicode"}))
    [scoped, _] = compare_behaviours(read_answers(tmp_path, ["kg_wcr", "warmstart"]), "kg")
    assert scoped.answers_changed == 0
    (tmp_path / "kg_wcr" / "run.json").write_text(json.dumps({"normalization": "squad"}))
    [scoped, _] = compare_behaviours(read_answers(tmp_path, ["kg_wcr", "warmstart"]), "kg")
    assert scoped.answers_changed == 1
