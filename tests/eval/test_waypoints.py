import json

from searchplay.eval.waypoints import (
    CoverageComparison,
    compare_coverage,
    compare_coverages,
    coverage_metrics,
    coverage_note,
    heldout_waypoints,
    read_coverage,
)

PATH = ["Sigmund Freud", "University of Vienna", "Vienna", "Austria"]  # waypoint titles of one held-out path


def _pool(tmp_path, ids_and_splits) -> str:
    """A KG pool (subgraphs.jsonl) whose records share one path; only the kg_heldout ones are asked."""
    records = [{"id": qid, "split": split, "answer": "Europe", "answers": ["Europe"], "num_hops": 4,
                "path": [{"id": f"Q{i}", "label": label, "description": ""} for i, label in enumerate(PATH)],
                "relations": [{"id": "P69", "label": "educated at"}, {"id": "P131", "label": "located in"},
                              {"id": "P17", "label": "country"}, {"id": "P30", "label": "continent"}],
                "waypoints": PATH} for qid, split in ids_and_splits]
    path = tmp_path / "subgraphs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _predict(eval_dir, model: str, outputs: dict[str, str]) -> None:
    folder = eval_dir / model / "predictions"
    folder.mkdir(parents=True, exist_ok=True)
    records = [{"id": qid, "benchmark": "kg_heldout", "output": text} for qid, text in outputs.items()]
    (folder / "kg_heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_only_held_out_paths_give_waypoints(tmp_path):
    pool = _pool(tmp_path, [("h1", "kg_heldout"), ("s1", "selfplay"), ("h2", "kg_heldout")])
    assert heldout_waypoints(pool) == {"h1": PATH, "h2": PATH}


def test_coverage_reads_only_the_think_text_of_each_answer(tmp_path):
    pool = _pool(tmp_path, [("h1", "kg_heldout"), ("h2", "kg_heldout")])
    _predict(tmp_path, "kg_wcr", {
        "h1": "<think>Sigmund Freud studied at the University of Vienna</think><search>Vienna Austria</search>"
              "<information>Vienna is in Austria</information><answer>Austria</answer>",
        "h2": "<think>Freud</think>",  # a partial title is no match (exact substrings, Eq. 5)
        "x9": "<think>Vienna</think>",  # not a held-out question: left out
    })
    coverage = read_coverage(tmp_path, ["kg_wcr", "ssp"], heldout_waypoints(pool))
    # h1: "Vienna" is inside "University of Vienna"; "Austria" only outside <think>. ssp has no predictions.
    assert coverage == {"kg_wcr": {"h1": 0.75, "h2": 0.0}}


def test_pairs_count_more_and_less_coverage_with_a_sign_test():
    start = {str(i): 0.25 for i in range(8)}
    trained = {str(i): 0.5 for i in range(7)} | {"7": 0.0}
    [comparison] = compare_coverages({"warmstart": start, "kg_wcr": trained})
    assert (comparison.label, comparison.n, comparison.more, comparison.less) == ("kg_wcr vs warmstart", 8, 7, 1)
    assert comparison.p == 18 / 2**8 and comparison.mean_a == 3.5 / 8 and comparison.mean_b == 0.25
    metrics = coverage_metrics(comparison)
    assert metrics["coverage.kg_wcr_vs_warmstart.kg_heldout.more"] == 7
    assert metrics["coverage.kg_wcr_vs_warmstart.kg_heldout.p"] == comparison.p
    assert "no evidence that kg_wcr covers more or less of the path than warmstart" in coverage_note(comparison)


def test_no_shared_question_is_no_comparison_and_no_change_is_named():
    assert compare_coverages({"warmstart": {"1": 0.5}, "kg_wcr": {"2": 0.5}}) == []
    same = compare_coverage("ssp", {"1": 0.5}, "warmstart", {"1": 0.5})
    assert same.p == 1.0 and "no question's coverage changed" in coverage_note(same)
    assert coverage_note(CoverageComparison("a", "b", 30, 0, 9, 0.1, 0.3)).endswith(
        "a names less of the path in its reasoning (paired, exact sign test).")
