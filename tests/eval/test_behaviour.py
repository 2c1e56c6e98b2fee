import json

from searchplay.eval.behaviour import (
    Answer,
    BehaviourComparison,
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
        {"id": 1, "benchmark": "kg_heldout", "prediction": "The Europe.", "num_searches": 2},
        {"id": 2, "benchmark": "kg_heldout", "prediction": None},  # no answer, no search count
        {"benchmark": "kg_heldout", "prediction": "x"},  # no id: not pairable
    ])
    answers = read_answers(tmp_path, ["kg_wcr", "ssp"])
    assert answers == {"kg_wcr": {("kg_heldout", "1"): Answer("europe", 2), ("kg_heldout", "2"): Answer("", 0)}}


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
    tie = BehaviourComparison("gdcr", "warmstart", "kg", 10, 4, 3, 3, 1.2, 1.2)
    assert behaviour_note(tie, "KG held-out").endswith(
        "p = 1: no evidence that gdcr searches more or less than warmstart.")
