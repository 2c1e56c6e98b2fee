"""The report's first table: each paired comparison in one row, with the three paired tests side by side.

``glance_rows`` joins, per model pair, what the comparison report tests separately on the same questions:
correctness (exact McNemar, ``searchplay.eval.paired``), search counts (exact sign test,
``searchplay.eval.behaviour``) and waypoint coverage g_i of KG-paths Eq. 5 (exact sign test,
``searchplay.eval.waypoints``), and says in words which of them moved at p < ``SIGNIFICANCE``.
"""

from __future__ import annotations

from searchplay.eval.behaviour import BehaviourComparison
from searchplay.eval.paired import SIGNIFICANCE, PairedComparison, format_p
from searchplay.eval.waypoints import CoverageComparison

GLANCE_HEADER = ["comparison (A vs B)", "n", "correct: only A / only B (McNemar p)",
                 "searches: A more / A fewer (sign p)", "path coverage: A more / A less (sign p)",
                 f"A against B, where p < {SIGNIFICANCE}"]
MISSING = "–"


def _cell(more: int, less: int, p: float) -> str:
    """``3 / 5 (p = 0.73)``."""
    shown = format_p(p)
    return f"{more} / {less} (p {shown})" if shown.startswith("<") else f"{more} / {less} (p = {shown})"


def _moved(more: int, less: int, p: float) -> int:
    """+1 or -1 when the paired test calls a difference (A more or A less), else 0."""
    if more + less == 0 or p >= SIGNIFICANCE:
        return 0
    return 1 if more > less else -1


def verdict(comparison: PairedComparison, behaviour: BehaviourComparison | None,
            coverage: CoverageComparison | None) -> str:
    """What moved, in words, with A as the subject; correctness is always named.

    >>> verdict(PairedComparison("kg_wcr", "warmstart", "kg_heldout", 161, 11, 3, 5, 142, 0.73),
    ...         BehaviourComparison("kg_wcr", "warmstart", "kg_heldout", 161, 29, 25, 1, 1.16, 1.01), None)
    'searches more; correctness: no difference shown'
    """
    tests = [(comparison.only_a, comparison.only_b, comparison.p, ("more right answers", "fewer right answers"))]
    if behaviour is not None:
        tests.append((behaviour.more_searches, behaviour.fewer_searches, behaviour.searches_p,
                      ("searches more", "searches less")))
    if coverage is not None:
        tests.append((coverage.more, coverage.less, coverage.p, ("names more of the path", "names less of the path")))
    signs = [_moved(more, less, p) for more, less, p, _ in tests]
    moved = [words[0] if sign > 0 else words[1] for sign, (*_, words) in zip(signs, tests, strict=True) if sign]
    if not moved:
        return f"no difference shown by any of the {len(tests)} tests" if len(tests) > 1 else "no difference shown"
    if not signs[0]:
        moved.append("correctness: no difference shown")
    return "; ".join(moved)


def glance_rows(comparisons: list[PairedComparison], behaviours: list[BehaviourComparison],
                coverages: list[CoverageComparison], scope: str) -> list[list[object]]:
    """One row per model pair compared in ``scope`` (a benchmark's name or ``POOLED``), in the order given."""
    by_pair = {(b.model_a, b.model_b): b for b in behaviours if b.scope == scope}
    coverage_by_pair = {(c.model_a, c.model_b): c for c in coverages}
    rows = []
    for comparison in (c for c in comparisons if c.scope == scope):
        pair = (comparison.model_a, comparison.model_b)
        behaviour, coverage = by_pair.get(pair), coverage_by_pair.get(pair)
        rows.append([
            comparison.label, comparison.n, _cell(comparison.only_a, comparison.only_b, comparison.p),
            _cell(behaviour.more_searches, behaviour.fewer_searches, behaviour.searches_p) if behaviour else MISSING,
            _cell(coverage.more, coverage.less, coverage.p) if coverage else MISSING,
            verdict(comparison, behaviour, coverage)])
    return rows
