"""Proportions shared by evaluation and self-play: the Wilson score interval (scores, per-iteration accuracy),
and the Solver's accuracy on fresh questions pooled over a run's iterations, with its first iterations tested
against its last (the loop's ``trend/*`` metrics and the comparison report's "Self-play learning" table).

A low-level module so that every stage may import it (the stage packages may not import each other,
``tests/test_layers.py``). Pure functions over counts and history rows; the rows are those
``searchplay.selfplay.metrics.fresh_accuracy`` writes (``solver/fresh_accuracy``, ``solver/fresh_rollouts``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z_95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927; Brown, Cai & DasGupta 2001), in [0, 1].

    With p = successes / n:
    centre = (p + z^2 / 2n) / (1 + z^2 / n),
    half-width = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2).
    Unlike the normal (Wald) interval it stays inside [0, 1] and is not empty at p = 0 or 1, which
    matters at the embedded default's n = 5. n = 0 gives (0, 1): nothing is known.

    >>> [round(x, 4) for x in wilson_interval(1, 5)]
    [0.0362, 0.6245]
    >>> wilson_interval(0, 0)
    (0.0, 1.0)
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: expected 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends, free of rounding
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Pooled:
    """Correct fresh rollouts ``hits`` of ``n``, pooled over some iterations."""

    hits: int
    n: int

    @property
    def rate(self) -> float:
        return self.hits / self.n if self.n else math.nan


FRESH_ACCURACY = ("solver/fresh_accuracy", "solver/fresh_rollouts")  # (rate, count) history columns
RULE_VALID = ("filter/valid_rate_rule", "proposer/proposals")  # the Proposer's questions passing the rule filter


def pooled_share(rows: Sequence[dict[str, float]], columns: tuple[str, str] = FRESH_ACCURACY) -> Pooled:
    """The rate column of ``rows`` pooled over its count column; an iteration whose rate is NaN (no fresh
    rollout, no proposal) adds nothing.

    >>> pooled_share([{"solver/fresh_accuracy": 0.2, "solver/fresh_rollouts": 15.0},
    ...               {"solver/fresh_accuracy": float("nan"), "solver/fresh_rollouts": 0.0}])
    Pooled(hits=3, n=15)
    >>> pooled_share([{"filter/valid_rate_rule": 0.25, "proposer/proposals": 8.0}], RULE_VALID)
    Pooled(hits=2, n=8)
    """
    rate, count = columns
    counted = [r for r in rows if math.isfinite(r.get(count, math.nan)) and math.isfinite(r.get(rate, math.nan))]
    return Pooled(round(sum(r[rate] * r[count] for r in counted)), sum(int(r[count]) for r in counted))


def pooled_fresh_accuracy(rows: Sequence[dict[str, float]]) -> Pooled:
    """The fresh rollouts of ``rows`` pooled (``pooled_share`` of the Solver's fresh accuracy)."""
    return pooled_share(rows, FRESH_ACCURACY)


def first_against_last(history: Sequence[dict[str, float]], part: int,
                       columns: tuple[str, str] = FRESH_ACCURACY) -> tuple[Pooled, Pooled, float]:
    """The first ``part`` iterations and the last ``part``, pooled (``pooled_share`` of ``columns``: by default
    the Solver's fresh accuracy), and the one-sided Fisher exact p that the last part's share is higher (NaN
    when either part counts nothing). The rollouts of one question are not independent, so the p is optimistic.

    >>> rows = [{"solver/fresh_accuracy": a, "solver/fresh_rollouts": 20.0} for a in (0.1, 0.6)]
    >>> first, last, p = first_against_last(rows, 1)
    >>> first.rate, last.rate, round(p, 4)
    (0.1, 0.6, 0.0011)
    """
    from scipy.stats import fisher_exact

    if part < 1 or 2 * part > len(history):
        raise ValueError(f"first_against_last: {part} iterations per part need at least {2 * part}, "
                         f"got {len(history)}")
    first, last = pooled_share(history[:part], columns), pooled_share(history[-part:], columns)
    if not (first.n and last.n):
        return first, last, math.nan
    _, p = fisher_exact([[last.hits, last.n - last.hits], [first.hits, first.n - first.hits]], alternative="greater")
    return first, last, float(p)
