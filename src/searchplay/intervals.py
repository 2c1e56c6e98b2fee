"""The Wilson score interval of a proportion: shared by evaluation (scores) and self-play (per-iteration accuracy).

A low-level module so that every stage may import it (the stage packages may not import each other,
``tests/test_layers.py``). Pure function over counts.
"""

from __future__ import annotations

from math import sqrt

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
    half = z / denominator * sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends, free of rounding
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high
