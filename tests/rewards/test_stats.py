import math

import pytest

from searchplay.rewards import accuracy_by_coverage, coverage_correctness_spearman, mean_coverage_by_outcome


def test_spearman_matches_scipy_and_is_nan_when_constant():
    rho, p = coverage_correctness_spearman([0.0, 0.2, 0.5, 1.0, 0.4], [0, 0, 1, 1, 1])
    assert rho > 0 and 0 <= p <= 1
    assert all(math.isnan(x) for x in coverage_correctness_spearman([0.5, 0.5], [1, 0]))
    assert all(math.isnan(x) for x in coverage_correctness_spearman([0.1, 0.5], [1, 1]))


def test_accuracy_by_coverage_bins_close_the_last_edge():
    rows = accuracy_by_coverage([0.0, 0.3, 0.3, 1.0], [0, 1, 0, 1])
    assert [r["n"] for r in rows] == [1, 2, 0, 1]
    assert rows[1]["accuracy"] == 0.5 and math.isnan(rows[2]["accuracy"]) and rows[3]["accuracy"] == 1.0
    with pytest.raises(ValueError, match="increasing"):
        accuracy_by_coverage([0.1], [1], bins=(0.5, 0.1))


def test_mean_coverage_by_outcome():
    out = mean_coverage_by_outcome([1.0, 0.5, 0.0], [1, 0, 0])
    assert out == {"correct": 1.0, "incorrect": 0.25}
    assert math.isnan(mean_coverage_by_outcome([0.2], [0])["correct"])
