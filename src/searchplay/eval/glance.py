"""The report's first table and chart: each model pair with its four paired tests side by side.

``pair_tests`` joins, per model pair, what the comparison report tests separately on the same questions:
correctness (exact McNemar, ``searchplay.eval.paired``), search counts (exact sign test,
``searchplay.eval.behaviour``), whether the model's own searches returned a gold answer (exact McNemar,
``searchplay.eval.behaviour``) and waypoint coverage g_i of KG-paths Eq. 5 (exact sign test,
``searchplay.eval.waypoints``). ``glance_rows`` writes them as table rows and says in words which moved at
p < ``SIGNIFICANCE``; ``searchplay.eval.glance_chart`` draws them; ``glance_summary`` reads the table back out of
a written ``compare.md`` as lines for a terminal (``searchplay pipeline`` ends with them).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from searchplay.eval.behaviour import BehaviourComparison
from searchplay.eval.paired import SIGNIFICANCE, PairedComparison, called_direction, p_phrase
from searchplay.eval.waypoints import CoverageComparison

TESTS = ("correct", "searches", "found", "coverage")  # the paired tests, in the table's and the chart's order
TEST_WORDS = {"correct": ("more right answers", "fewer right answers"), "searches": ("searches more", "searches less"),
              "found": ("its searches find the answer more often", "its searches find the answer less often"),
              "coverage": ("names more of the path", "names less of the path")}
GLANCE_HEADER = ["comparison (A vs B)", "n", "correct: only A / only B (McNemar p)",
                 "searches: A more / A fewer (sign p)", "answer found by its searches: only A / only B (McNemar p)",
                 "path coverage: A more / A less (sign p)", f"A against B, where p < {SIGNIFICANCE}"]
MISSING = "–"


@dataclass(frozen=True)
class Counted:
    """One paired test: the questions where A did more, those where it did less, and the exact test's p."""

    more: int
    less: int
    p: float

    @property
    def sign(self) -> int:
        """+1 or -1 when the test calls a difference (A more or A less), else 0."""
        return called_direction(self.more, self.less, self.p)

    def cell(self) -> str:
        """``3 / 5 (p = 0.73)``."""
        return f"{self.more} / {self.less} ({p_phrase(self.p)})"


@dataclass(frozen=True)
class PairTests:
    """Model A against model B on the same questions: each of ``TESTS`` that was run (None: not run)."""

    model_a: str
    model_b: str
    n: int
    tests: dict[str, Counted | None]

    @property
    def label(self) -> str:
        return f"{self.model_a} vs {self.model_b}"

    def verdict(self) -> str:
        """What moved, in words, with A as the subject; correctness is always named.

        >>> PairTests("kg_wcr", "warmstart", 161, {"correct": Counted(3, 5, 0.73),
        ...           "searches": Counted(25, 1, 1e-6), "found": None, "coverage": None}).verdict()
        'searches more; correctness: no difference shown'
        """
        run = {name: test for name, test in self.tests.items() if test is not None}
        moved = [TEST_WORDS[name][0 if test.sign > 0 else 1] for name, test in run.items() if test.sign]
        if not moved:
            return f"no difference shown by any of the {len(run)} tests" if len(run) > 1 else "no difference shown"
        if not run["correct"].sign:
            moved.append("correctness: no difference shown")
        return "; ".join(moved)


def pair_tests(comparisons: list[PairedComparison], behaviours: list[BehaviourComparison],
               coverages: list[CoverageComparison], scope: str) -> list[PairTests]:
    """One ``PairTests`` per model pair compared in ``scope`` (a benchmark's name or ``POOLED``), in order."""
    scoped = [b for b in behaviours if b.scope == scope]
    searches = {(b.model_a, b.model_b): Counted(b.more_searches, b.fewer_searches, b.searches_p) for b in scoped}
    found = {(b.model_a, b.model_b): Counted(b.found_only_a, b.found_only_b, b.found_p) for b in scoped}
    covered = {(c.model_a, c.model_b): Counted(c.more, c.less, c.p) for c in coverages}
    return [PairTests(c.model_a, c.model_b, c.n, {"correct": Counted(c.only_a, c.only_b, c.p),
                                                   "searches": searches.get((c.model_a, c.model_b)),
                                                   "found": found.get((c.model_a, c.model_b)),
                                                   "coverage": covered.get((c.model_a, c.model_b))})
            for c in comparisons if c.scope == scope]


def glance_rows(pairs: list[PairTests]) -> list[list[object]]:
    """The "At a glance" table's rows: counts and p of each test, then the verdict."""
    return [[pair.label, pair.n, *[test.cell() if test else MISSING for test in map(pair.tests.get, TESTS)],
             pair.verdict()] for pair in pairs]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def glance_summary(markdown: str) -> list[str]:
    """The "At a glance" table of a written ``compare.md``, for a terminal: a line per pair with its verdict, then
    a line with its tests; [] where the report has no such table, or one of another layout.

    >>> glance_summary("## At a glance: paired tests on KG held-out\\n\\n| " + " | ".join(GLANCE_HEADER) + " |\\n"
    ...                "|---|\\n| kg_wcr vs warmstart | 161 | 3 / 5 (p = 0.73) | 25 / 1 (p < 0.001) | – | "
    ...                "10 / 1 (p = 0.012) | searches more; names more of the path |\\n")[1:]
    ['  kg_wcr vs warmstart, 161 questions: searches more; names more of the path', \
'    correct: only A / only B 3 / 5 (p = 0.73); searches: A more / A fewer 25 / 1 (p < 0.001); \
path coverage: A more / A less 10 / 1 (p = 0.012)']
    """
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## At a glance")), None)
    if start is None:
        return []
    section = itertools.takewhile(lambda line: not line.startswith("## "), lines[start + 1:])
    table = [_cells(line) for line in section if line.startswith("| ")]  # the |---| row has no space
    if not table or table[0] != GLANCE_HEADER or any(len(row) != len(GLANCE_HEADER) for row in table):
        return []
    names = [name.rsplit(" (", 1)[0] for name in GLANCE_HEADER[2:-1]]  # the table's own words, less "(sign p)"
    summary = [f"{lines[start].removeprefix('## ')} (counts: A / B, with the exact test's p)"]
    for label, n, *cells, verdict in table[1:]:
        tests = [f"{name} {cell}" for name, cell in zip(names, cells, strict=True) if cell != MISSING]
        summary += [f"  {label}, {n} questions: {verdict}", "    " + "; ".join(tests)]
    return summary
