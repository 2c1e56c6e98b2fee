"""Statistics that test whether coverage tracks correctness (the review of the KG-paths paper, 001).

Pure functions over per-rollout raw coverage g_i (Eq. 5, before group normalization) and c_i.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

# Accuracy-by-coverage bins: [0, 0.25), [0.25, 0.5), [0.5, 0.75), [0.75, 1.0] (like Fig. 4c).
DEFAULT_COVERAGE_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)


def coverage_correctness_spearman(coverage: Sequence[float], correct: Sequence[bool]) -> tuple[float, float]:
    """Spearman rank correlation (rho, p-value) between coverage and correctness (KG-paths Fig. 4b).

    NaN for both when either side is constant or there are fewer than 2 rollouts.

    >>> round(coverage_correctness_spearman([0.0, 0.2, 0.5, 1.0], [False, False, True, True])[0], 3)
    0.894
    """
    from scipy.stats import spearmanr

    _check(coverage, correct)
    if len(coverage) < 2 or len(set(coverage)) < 2 or len({bool(c) for c in correct}) < 2:
        return math.nan, math.nan
    result = spearmanr(list(coverage), [float(bool(c)) for c in correct])
    return float(result.statistic), float(result.pvalue)


def accuracy_by_coverage(coverage: Sequence[float], correct: Sequence[bool],
                         bins: Sequence[float] = DEFAULT_COVERAGE_BINS) -> list[dict[str, float]]:
    """Accuracy of rollouts per coverage bin [lo, hi) (last bin closed) (KG-paths Fig. 4c).

    >>> accuracy_by_coverage([0.0, 0.1, 0.6, 1.0], [False, True, True, True], bins=(0.0, 0.5, 1.0))
    [{'lo': 0.0, 'hi': 0.5, 'n': 2, 'accuracy': 0.5}, {'lo': 0.5, 'hi': 1.0, 'n': 2, 'accuracy': 1.0}]
    """
    _check(coverage, correct)
    if len(bins) < 2 or any(b >= a for a, b in zip(bins[1:], bins[:-1], strict=True)):
        raise ValueError(f"bins must be at least 2 increasing edges; got {list(bins)}")
    rows = []
    for k, (lo, hi) in enumerate(itertools.pairwise(bins)):
        last = k == len(bins) - 2
        members = [bool(c) for g, c in zip(coverage, correct, strict=True) if lo <= g < hi or (last and g == hi)]
        accuracy = sum(members) / len(members) if members else math.nan
        rows.append({"lo": float(lo), "hi": float(hi), "n": len(members), "accuracy": accuracy})
    return rows


def mean_coverage_by_outcome(coverage: Sequence[float], correct: Sequence[bool]) -> dict[str, float]:
    """Mean raw coverage of correct and of incorrect rollouts (NaN when a side is empty).

    >>> mean_coverage_by_outcome([1.0, 0.5, 0.0], [True, False, False])
    {'correct': 1.0, 'incorrect': 0.25}
    """
    _check(coverage, correct)
    sides = {"correct": [g for g, c in zip(coverage, correct, strict=True) if c],
             "incorrect": [g for g, c in zip(coverage, correct, strict=True) if not c]}
    return {name: sum(values) / len(values) if values else math.nan for name, values in sides.items()}


def _check(coverage: Sequence[float], correct: Sequence[bool]) -> None:
    if len(coverage) != len(correct):
        raise ValueError(f"one coverage per rollout expected: {len(coverage)} coverages, {len(correct)} verdicts")
