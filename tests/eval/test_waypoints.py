import json

from searchplay.eval.waypoints import (
    Coverage,
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
    assert coverage == {"kg_wcr": {"h1": Coverage(0.75, 2, 3), "h2": Coverage(0.0, 0, 3)}}


def test_the_head_the_question_names_is_no_bridge_entity():
    from searchplay.eval.waypoints import answer_coverage

    assert answer_coverage("I need the country of Sigmund Freud", PATH) == Coverage(0.25, 0, 3)
    assert answer_coverage("Sigmund Freud, Vienna", PATH) == Coverage(0.5, 1, 3)
    assert answer_coverage("x", ["Bern", "Aare", "Bern"]) == Coverage(0.0, 0, 1)  # a title counts once, the head never


def test_pairs_count_more_and_less_coverage_and_bridges_with_sign_tests():
    start = {str(i): Coverage(0.25, 0, 3) for i in range(8)}
    trained = {str(i): Coverage(0.5, 1, 3) for i in range(7)} | {"7": Coverage(0.0, 0, 3)}
    [comparison] = compare_coverages({"warmstart": start, "kg_wcr": trained})
    assert (comparison.label, comparison.n, comparison.more, comparison.less) == ("kg_wcr vs warmstart", 8, 7, 1)
    assert comparison.p == 18 / 2**8 and comparison.mean_a == 3.5 / 8 and comparison.mean_b == 0.25
    assert (comparison.bridges_a, comparison.bridges_b, comparison.bridges) == (7, 0, 24)
    assert (comparison.more_bridges, comparison.fewer_bridges, comparison.bridges_p) == (7, 0, 2 / 2**7)
    metrics = coverage_metrics(comparison)
    assert metrics["coverage.kg_wcr_vs_warmstart.kg_heldout.more"] == 7
    assert metrics["coverage.kg_wcr_vs_warmstart.kg_heldout.p"] == comparison.p
    assert metrics["coverage.kg_wcr_vs_warmstart.kg_heldout.more_bridges"] == 7
    note = coverage_note(comparison)
    assert "no evidence that kg_wcr covers more or less of the path than warmstart" in note
    assert note.endswith("kg_wcr names more of the entities between the question's and the answer.")


def test_no_shared_question_is_no_comparison_and_no_change_is_named():
    assert compare_coverages({"warmstart": {"1": Coverage(0.5, 1, 2)}, "kg_wcr": {"2": Coverage(0.5, 1, 2)}}) == []
    same = compare_coverage("ssp", {"1": Coverage(0.5, 1, 2)}, "warmstart", {"1": Coverage(0.5, 1, 2)})
    assert same.p == 1.0 and "no question's coverage changed" in coverage_note(same)
    assert coverage_note(CoverageComparison("a", "b", 30, 0, 9, 0.1, 0.3)).endswith(
        "a names less of the path in its reasoning (paired, exact sign test).")
