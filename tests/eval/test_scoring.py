"""Scoring: judge errors fail closed and are counted; intervals and n; the majority baseline;
GeneralQA / Multi-HopQA / overall averages."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from searchplay.eval.benchmarks import QAItem
from searchplay.eval.scoring import benchmark_scores, flat_metrics, group_scores, majority_baseline_em, score_question

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
    assert (scores["em_ci_low"], scores["em_ci_high"]) == pytest.approx((4.56, 69.94), abs=0.01)  # Wilson, 1 of 4
    assert (scores["judge_acc_ci_low"], scores["judge_acc_ci_high"]) == pytest.approx((15.0, 85.0), abs=0.01)


def test_empty_benchmark_has_only_its_n():
    assert benchmark_scores([]) == {"n": 0}


def test_interval_keys_reach_the_flat_metrics():
    records = [score_question(ITEM, "Ada Lovelace", verdict(True, "exact"))] * 5
    flat = flat_metrics({"nq": benchmark_scores(records)}, {})
    assert flat["nq.n"] == 5 and flat["nq.em"] == 100.0 and flat["nq.em_ci_high"] == 100.0
    assert flat["nq.em_ci_low"] == pytest.approx(56.55, abs=0.01)


def test_majority_baseline_em():
    items = [QAItem(str(i), "q?", [gold], "kg_heldout") for i, gold in enumerate(["Europe", "the Europe", "Asia"])]
    assert majority_baseline_em(items, "Europe") == pytest.approx(200 / 3)  # SQuAD normalization drops "the"
    assert majority_baseline_em(items, "Africa") == 0.0
    assert majority_baseline_em(items, None) == 0.0 and majority_baseline_em([], "Europe") == 0.0
    accented = [QAItem("a", "q?", ["São Paulo"], "kg_heldout")]  # the normalization the models' EM is scored by
    assert majority_baseline_em(accented, "Sao Paulo") == 0.0
    assert majority_baseline_em(accented, "Sao Paulo", "unicode") == 100.0


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


def test_headline_nests_the_averages_kg_baseline_and_the_last_self_play_iteration():
    from searchplay.eval.scoring import headline_metrics

    metrics = {"avg.judge_acc": 10.0, "avg.em": 8.0, "avg.f1": 12.5, "avg.num_benchmarks": 7.0, "nq.valid_rate": 100.0,
               "kg_heldout.valid_rate": 90.0, "kg_heldout.em": 17.4, "kg_heldout.majority_baseline_em": 21.7}
    last = {"iteration": 2.0, "solver/reward_mean": 0.1, "solver/accuracy": 0.07, "proposer/reward_mean": 0.9,
            "filter/valid_rate_rule": 1.0, "train/groups_nonzero_advantage": 1.0, "coverage/spearman_rho": None}
    headline = headline_metrics(metrics, last)
    assert headline["eval"] == {"avg_judge_acc": 10.0, "avg_em": 8.0, "avg_f1": 12.5, "avg_num_benchmarks": 7.0,
                                "kg_heldout_em": 17.4, "kg_heldout_majority_baseline_em": 21.7, "valid_rate": 95.0}
    assert headline["selfplay"] == {"iterations": 2.0, "solver_reward": 0.1, "solver_accuracy": 0.07,
                                    "proposer_reward": 0.9, "valid_rate_rule": 1.0, "groups_with_signal": 1.0}


def test_retrieval_recall_counts_questions_whose_searches_found_a_gold_answer():
    found = {**score_question(ITEM, "Ada", verdict(False, "exact")), "answer_retrieved": True}
    missed = {**score_question(ITEM, "", verdict(False, "exact")), "answer_retrieved": False}
    scores = benchmark_scores([found, missed, missed, missed])
    assert scores["retrieval_recall"] == 25.0 and scores["em"] == 0.0
    assert (scores["retrieval_recall_ci_low"], scores["retrieval_recall_ci_high"]) == pytest.approx((4.56, 69.94),
                                                                                                   abs=0.01)
    assert "retrieval_recall" not in benchmark_scores([found, score_question(ITEM, "", verdict(False, "exact"))])
    groups = group_scores({"nq": scores, "popqa": {**scores, "retrieval_recall": 75.0}})
    assert groups["general_qa"]["retrieval_recall"] == 50.0
    older = benchmark_scores([score_question(ITEM, "", verdict(False, "exact"))])  # written before the key existed
    assert "retrieval_recall" not in group_scores({"nq": scores, "triviaqa": older})["general_qa"]
