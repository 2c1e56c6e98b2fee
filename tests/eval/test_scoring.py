"""Scoring: judge errors fail closed and are counted; GeneralQA / Multi-HopQA / overall averages."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from searchplay.eval.benchmarks import QAItem
from searchplay.eval.scoring import benchmark_scores, flat_metrics, group_scores, score_question

ITEM = QAItem(id="1", question="Who?", golden_answers=["Ada Lovelace"], benchmark="nq")


def verdict(correct, method):
    return SimpleNamespace(correct=correct, method=method, judge_model="judge-x")


def test_judge_error_is_not_correct_and_flagged():
    scores = score_question(ITEM, "Ada", verdict(True, "error"))
    assert scores["judge_correct"] is False and scores["judge_error"] is True
    assert scores["f1"] == pytest.approx(2 / 3)


def test_benchmark_scores_count_errors_beside_accuracy():
    records = [score_question(ITEM, "Ada Lovelace", verdict(True, "exact")),
               score_question(ITEM, "Countess of Lovelace", verdict(True, "llm")),
               score_question(ITEM, "Ada", verdict(False, "error")),
               score_question(ITEM, "", verdict(False, "exact"))]
    scores = benchmark_scores(records)
    assert scores["judge_acc"] == 50.0 and scores["judge_errors"] == 1 and scores["judged_by_llm"] == 1
    assert scores["em"] == 25.0 and scores["n"] == 4


def test_group_averages_are_unweighted_means_over_present_members():
    per = {name: {"n": 10, "judge_acc": acc, "em": 0.0, "f1": 0.0, "sub_em": 0.0, "judge_errors": 1}
           for name, acc in [("nq", 30.0), ("triviaqa", 60.0), ("bamboogle", 40.0), ("fanoutqa", 99.0)]}
    groups = group_scores(per)
    assert groups["general_qa"]["judge_acc"] == 45.0 and groups["general_qa"]["num_benchmarks"] == 2
    assert groups["multihop_qa"]["judge_acc"] == 40.0
    assert groups["avg"]["judge_acc"] == pytest.approx(130 / 3)  # the smoke set is not in the papers' average
    flat = flat_metrics(per, groups)
    assert flat["avg.judge_errors"] == 3 and flat["nq.judge_acc"] == 30.0
    assert all(isinstance(v, float) for v in flat.values())
