"""Paired comparisons: the exact McNemar p-value, pairing on the questions both models answered, and which
models are set against which (each trained model against its start, and kg_wcr against ssp)."""

from __future__ import annotations

from math import comb

import pytest

from searchplay.eval.paired import (
    STARTED_FROM,
    PairedComparison,
    compare_models,
    compare_paired,
    comparison_metrics,
    comparison_pairs,
    mcnemar_exact,
)


def doubled_tail(only_a: int, only_b: int) -> float:
    """min(1, 2 P(X <= min(b, c))), X ~ Bin(b + c, 1/2), by counting."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n)


@pytest.mark.parametrize(("only_a", "only_b", "p"), [(6, 0, 0.03125), (0, 6, 0.03125), (0, 0, 1.0),
                                                     (1, 5, 0.21875), (5, 1, 0.21875), (3, 3, 1.0),
                                                     (1, 0, 1.0), (10, 0, 2 / 1024)])
def test_known_exact_mcnemar_values(only_a, only_b, p):
    assert mcnemar_exact(only_a, only_b) == pytest.approx(p, rel=1e-12)


def test_mcnemar_is_the_doubled_binomial_tail_for_every_small_count():
    for only_a in range(26):
        for only_b in range(26):
            assert mcnemar_exact(only_a, only_b) == pytest.approx(doubled_tail(only_a, only_b), rel=1e-9, abs=1e-15)


def test_negative_counts_are_refused():
    with pytest.raises(ValueError, match="must be >= 0"):
        mcnemar_exact(-1, 2)


def test_pairing_uses_only_the_questions_both_models_answered():
    a = {("kg_heldout", str(i)): True for i in range(8)} | {("nq", "x"): True}
    b = {("kg_heldout", str(i)): i < 2 for i in range(10)}  # 8 and 9 were not asked of a
    found = compare_paired("kg_wcr", a, "warmstart", b, "kg_heldout")
    assert (found.n, found.both_right, found.only_a, found.only_b, found.both_wrong) == (8, 2, 6, 0, 0)
    assert found.p == pytest.approx(0.03125)
    assert found.significant and found.better == "kg_wcr" and found.label == "kg_wcr vs warmstart"
    reverse = compare_paired("warmstart", b, "kg_wcr", a, "kg_heldout")
    assert (reverse.only_a, reverse.only_b, reverse.better) == (0, 6, "kg_wcr")


def test_no_discordant_question_is_no_evidence():
    same = {("nq", "1"): True, ("nq", "2"): False}
    found = compare_paired("ssp", same, "warmstart", same, "pooled")
    assert (found.n, found.discordant, found.p, found.significant, found.better) == (2, 0, 1.0, False, None)


def test_pairs_need_both_models_evaluated():
    without_eve_start = comparison_pairs(["base", "warmstart", "eve", "gdcr", "kg_wcr", "ssp"])
    assert without_eve_start == [("warmstart", "base"), ("ssp", "warmstart"), ("kg_wcr", "warmstart"),
                                 ("gdcr", "warmstart"), ("kg_wcr", "ssp")]
    with_eve_start = comparison_pairs(["base", "warmstart", "eve", "warmstart_eve"])
    assert with_eve_start == [("warmstart", "base"), ("warmstart_eve", "warmstart"), ("eve", "warmstart_eve")]
    assert comparison_pairs(["kg_wcr"]) == []
    assert STARTED_FROM["eve"] == "warmstart_eve" and STARTED_FROM["kg_wcr"] == "warmstart"


def test_extra_pairs_come_last_once_and_only_where_both_models_were_evaluated():
    models = ["warmstart", "kg_wcr", "kg_wcr_seed1", "ssp"]
    extra = [("kg_wcr_seed1", "kg_wcr"), ("kg_wcr", "ssp"), ("kg_wcr_seed1", "gdcr")]
    assert comparison_pairs(models, extra) == [("ssp", "warmstart"), ("kg_wcr", "warmstart"),
                                               ("kg_wcr_seed1", "warmstart"), ("kg_wcr", "ssp"),
                                               ("kg_wcr_seed1", "kg_wcr")]


def test_each_pair_is_compared_on_the_benchmark_and_pooled_and_an_empty_scope_is_left_out():
    warmstart = {("kg_heldout", "1"): False, ("kg_heldout", "2"): True, ("nq", "1"): False}
    kg_wcr = {("kg_heldout", "1"): True, ("kg_heldout", "2"): True, ("nq", "1"): True}
    found = compare_models({"warmstart": warmstart, "kg_wcr": kg_wcr}, "kg_heldout")
    assert [(c.scope, c.n, c.only_a, c.only_b) for c in found] == [("kg_heldout", 2, 1, 0), ("pooled", 3, 2, 0)]
    only_nq = compare_models({"warmstart": {("nq", "1"): False}, "kg_wcr": {("nq", "1"): True}}, "kg_heldout")
    assert [c.scope for c in only_nq] == ["pooled"]


def test_metric_names_are_flat_and_valid_for_mlflow():
    from mlflow.utils.validation import _validate_metric_name

    metrics = comparison_metrics(PairedComparison("kg_wcr", "ssp", "kg_heldout", 23, 5, 3, 1, 14, 0.625))
    assert metrics == {"paired.kg_wcr_vs_ssp.kg_heldout.n": 23, "paired.kg_wcr_vs_ssp.kg_heldout.both_right": 5,
                       "paired.kg_wcr_vs_ssp.kg_heldout.only_a": 3, "paired.kg_wcr_vs_ssp.kg_heldout.only_b": 1,
                       "paired.kg_wcr_vs_ssp.kg_heldout.both_wrong": 14, "paired.kg_wcr_vs_ssp.kg_heldout.p": 0.625}
    for key in metrics:
        _validate_metric_name(key)
