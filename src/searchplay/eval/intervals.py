"""Confidence intervals for the scores: every score is a proportion of n questions, shown with its 95% interval.

A 5-question score of 20 is "somewhere between 4 and 62"; the interval says so where a bare number
would not (docs/decisions/eval.md, "Score intervals"). Pure functions over counts.
"""

from __future__ import annotations

from searchplay.intervals import Z_95, wilson_interval  # defined low, for self-play too

__all__ = ["Z_95", "percent_interval", "wilson_interval"]


def percent_interval(successes: int, n: int) -> tuple[float, float]:
    """``wilson_interval`` on the reports' 0-100 scale.

    >>> [round(x, 1) for x in percent_interval(1, 5)]
    [3.6, 62.4]
    """
    low, high = wilson_interval(successes, n)
    return 100 * low, 100 * high
