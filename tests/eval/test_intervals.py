"""Wilson 95% intervals: the edge cases (n = 0, none and all correct), known values, and agreement with
SciPy's implementation over every count up to n = 60."""

from __future__ import annotations

import pytest

from searchplay.eval.intervals import percent_interval, wilson_interval


def test_no_questions_means_nothing_is_known():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert percent_interval(0, 0) == (0.0, 100.0)


def test_none_correct_starts_at_zero_and_is_not_empty():
    low, high = wilson_interval(0, 5)
    assert low == 0.0 and high == pytest.approx(0.4345, abs=1e-4)  # z^2 / (n + z^2)


def test_all_correct_ends_at_one_and_is_not_empty():
    low, high = wilson_interval(5, 5)
    assert high == 1.0 and low == pytest.approx(0.5655, abs=1e-4)  # n / (n + z^2)


@pytest.mark.parametrize(("successes", "n", "expected"), [
    (1, 5, (3.62, 62.45)),     # the embedded default's 5 questions: 20.0 reads as "4 to 62"
    (50, 100, (40.38, 59.62)),
    (250, 500, (45.64, 54.36)),  # the papers' 500 questions
    (1, 1, (20.65, 100.0)),
])
def test_known_values(successes, n, expected):
    low, high = percent_interval(successes, n)
    assert (low, high) == pytest.approx(expected, abs=0.01)


def test_interval_holds_the_estimate_and_narrows_with_n():
    for n in range(1, 40):
        for k in range(n + 1):
            low, high = wilson_interval(k, n)
            assert 0.0 <= low <= k / n <= high <= 1.0
    assert wilson_interval(50, 100)[1] - wilson_interval(50, 100)[0] < wilson_interval(5, 10)[1] - wilson_interval(
        5, 10)[0]


def test_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    for n in range(1, 61):
        for k in range(n + 1):
            ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
            assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


@pytest.mark.parametrize(("successes", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_impossible_counts_are_errors(successes, n):
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(successes, n)


def test_fresh_accuracy_pools_iterations_and_tests_the_last_against_the_first():
    import math

    from searchplay.intervals import first_against_last, pooled_fresh_accuracy

    rows = [{"solver/fresh_accuracy": a, "solver/fresh_rollouts": n} for a, n in ((0.0, 15.0), (0.2, 15.0))]
    assert pooled_fresh_accuracy(rows).hits == 3 and pooled_fresh_accuracy(rows).n == 30
    first, last, p = first_against_last(rows, 1)
    assert (first.hits, first.n, last.hits, last.n) == (0, 15, 3, 15) and p == pytest.approx(0.1121, abs=1e-4)
    assert math.isnan(pooled_fresh_accuracy([]).rate)
    empty = [{"solver/fresh_accuracy": math.nan, "solver/fresh_rollouts": 0.0}, rows[1]]
    assert math.isnan(first_against_last(empty, 1)[2])  # no fresh rollout in the first part: no test
    with pytest.raises(ValueError, match="need at least 4"):
        first_against_last(rows, 2)
