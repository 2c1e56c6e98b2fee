"""Held-out waypoint coverage: did self-play move what WCR rewards, on questions it never trained on?

WCR (KG-paths paper §3.3, Eq. 5-6) pays a Solver rollout for naming the KG path's waypoint titles inside its
``<think>`` spans. Every ``kg_heldout`` question comes from a held-out path, so it has waypoints too. This
module scores each evaluated answer's think text against them (g_i of Eq. 5: exact substrings, as the paper)
and pairs two models question by question: how many questions A covered more of than B, how many less, the
mean coverage of each, and the exact two-sided sign test of more against less (ties left out), the binomial
test the McNemar and search-count tables use. Correctness can stay flat while coverage moves: this is the
quantity the KG variants' Solver reward optimizes, measured where no training happened.

The first waypoint is the path's head, which the template question itself names, so restating the question
covers it. The **bridge entities** (every later waypoint: the path's intermediate nodes, which the question
does not name) are counted apart, with their own sign test: naming them is reasoning through the path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from searchplay.eval.benchmarks import KG_HELDOUT, load_kg_heldout
from searchplay.eval.paired import called_direction, comparison_pairs, mcnemar_exact, p_phrase, questions_phrase
from searchplay.io import read_jsonl
from searchplay.rewards.coverage import extract_think_text, waypoint_coverage


@dataclass(frozen=True)
class CoverageComparison:
    """Model A against model B on the ``kg_heldout`` questions both answered."""

    model_a: str
    model_b: str
    n: int
    more: int  # questions whose waypoints A's think text covers more of than B's
    less: int
    mean_a: float
    mean_b: float
    bridges_a: int = 0  # bridge entities (waypoints after the head) A's think texts name, summed over questions
    bridges_b: int = 0
    bridges: int = 0  # bridge entities of these questions in all
    more_bridges: int = 0  # questions where A names more of them than B
    fewer_bridges: int = 0

    @property
    def label(self) -> str:
        return f"{self.model_a} vs {self.model_b}"

    @property
    def p(self) -> float:
        """Exact two-sided sign test of more against less coverage (1.0 when no question's coverage differs)."""
        return mcnemar_exact(self.more, self.less)

    @property
    def bridges_p(self) -> float:
        """The same test for the bridge entities named."""
        return mcnemar_exact(self.more_bridges, self.fewer_bridges)


@dataclass(frozen=True)
class Coverage:
    """One answer against its question's path: g_i (Eq. 5) and the bridge entities its think text names."""

    g: float
    bridges_named: int
    bridges: int


def answer_coverage(think_text: str, waypoints: list[str]) -> Coverage:
    """g_i of ``think_text`` over ``waypoints`` (as WCR computes it) and how many bridge entities it names.

    >>> answer_coverage("Freud studied in Vienna, Austria", ["Freud", "University of Vienna", "Vienna", "Austria"])
    Coverage(g=0.75, bridges_named=2, bridges=3)
    """
    bridges = [title for title in dict.fromkeys(waypoints[1:]) if title != waypoints[0]]
    return Coverage(waypoint_coverage(think_text, waypoints), sum(title in think_text for title in bridges),
                    len(bridges))


def heldout_waypoints(pool_path: str | Path) -> dict[str, list[str]]:
    """Question id -> waypoint titles of every ``kg_heldout`` question of the KG pool (``subgraphs.jsonl``)."""
    loaded = load_kg_heldout(pool_path)
    return {item.id: list(item.metadata.get("waypoints") or []) for item in loaded.items}


def read_coverage(eval_dir: str | Path, models: Iterable[str],
                  waypoints: Mapping[str, list[str]]) -> dict[str, dict[str, Coverage]]:
    """Per model, question id -> the coverage of its answer to that ``kg_heldout`` question, from
    ``<eval_dir>/<model>/predictions/kg_heldout.jsonl``; questions without waypoints and models without that
    file are left out."""
    coverage = {}
    for model in models:
        path = Path(eval_dir) / model / "predictions" / f"{KG_HELDOUT}.jsonl"
        if not path.exists():
            continue
        found = {str(record["id"]): answer_coverage(extract_think_text(record.get("output") or ""),
                                                    waypoints[str(record["id"])])
                 for record in read_jsonl(path) if waypoints.get(str(record.get("id")))}
        if found:
            coverage[model] = found
    return coverage


def compare_coverage(model_a: str, coverage_a: Mapping[str, Coverage], model_b: str,
                     coverage_b: Mapping[str, Coverage]) -> CoverageComparison:
    """Pair two models' coverage on the questions both answered.

    >>> a = {"1": Coverage(0.5, 1, 3), "2": Coverage(0.25, 0, 3), "3": Coverage(0.0, 0, 3)}
    >>> b = {"1": Coverage(0.25, 0, 3), "2": Coverage(0.25, 0, 3), "4": Coverage(1.0, 3, 3)}
    >>> c = compare_coverage("kg_wcr", a, "warmstart", b)
    >>> (c.n, c.more, c.less, c.mean_a, c.mean_b, c.p, c.bridges_a, c.bridges_b, c.bridges, c.more_bridges)
    (2, 1, 0, 0.375, 0.25, 1.0, 1, 0, 6, 1)
    """
    pairs = [(coverage_a[q], coverage_b[q]) for q in sorted(coverage_a.keys() & coverage_b.keys())]  # sorted: the
    # float means then sum in one order, whatever the process's string hashing
    n = len(pairs)
    return CoverageComparison(
        model_a, model_b, n, more=sum(a.g > b.g for a, b in pairs), less=sum(a.g < b.g for a, b in pairs),
        mean_a=sum(a.g for a, _ in pairs) / n if n else float("nan"),
        mean_b=sum(b.g for _, b in pairs) / n if n else float("nan"),
        bridges_a=sum(a.bridges_named for a, _ in pairs), bridges_b=sum(b.bridges_named for _, b in pairs),
        bridges=sum(a.bridges for a, _ in pairs),
        more_bridges=sum(a.bridges_named > b.bridges_named for a, b in pairs),
        fewer_bridges=sum(a.bridges_named < b.bridges_named for a, b in pairs))


def compare_coverages(coverage: Mapping[str, Mapping[str, Coverage]],
                      extra: Iterable[tuple[str, str]] = ()) -> list[CoverageComparison]:
    """Each of ``comparison_pairs(coverage, extra)`` (every trained model against its start, the head-to-head
    pairs and the ``extra`` ones) that shares a question."""
    comparisons = [compare_coverage(a, coverage[a], b, coverage[b]) for a, b in comparison_pairs(coverage, extra)]
    return [comparison for comparison in comparisons if comparison.n]


def coverage_metrics(comparison: CoverageComparison) -> dict[str, float]:
    """Flat ``coverage.<A>_vs_<B>.kg_heldout.<field>`` entries (names MLflow accepts as metric keys).

    >>> sorted(coverage_metrics(CoverageComparison("a", "b", 2, 1, 0, 0.5, 0.25)))[0]
    'coverage.a_vs_b.kg_heldout.bridges'
    """
    prefix = f"coverage.{comparison.model_a}_vs_{comparison.model_b}.{KG_HELDOUT}"
    fields = {"n": comparison.n, "more": comparison.more, "less": comparison.less, "mean_a": comparison.mean_a,
              "mean_b": comparison.mean_b, "p": comparison.p, "bridges_a": comparison.bridges_a,
              "bridges_b": comparison.bridges_b, "bridges": comparison.bridges,
              "more_bridges": comparison.more_bridges, "fewer_bridges": comparison.fewer_bridges,
              "bridges_p": comparison.bridges_p}
    return {f"{prefix}.{name}": value for name, value in fields.items()}


def coverage_note(comparison: CoverageComparison) -> str:
    """One comparison in plain words: the coverage, then the bridge entities.

    >>> coverage_note(CoverageComparison("kg_wcr", "warmstart", 161, 10, 1, 0.301, 0.286, 63, 57, 474, 7, 1))
    'kg_wcr vs warmstart: kg_wcr covered more waypoints on 10 questions and fewer on 1 (mean 0.301 vs 0.286), \
p = 0.012: kg_wcr names more of the path in its reasoning (paired, exact sign test). Bridge entities: more on 7 \
questions, fewer on 1 (63 vs 57 named of 474), p = 0.07: no evidence of a difference.'
    """
    a, b = comparison.model_a, comparison.model_b
    if not (comparison.more or comparison.less):
        head = (f"{comparison.label}: no question's coverage changed (mean {comparison.mean_a:.3f}): nothing to "
                "compare, p = 1.")
    elif direction := called_direction(comparison.more, comparison.less, comparison.p):
        head = (f"{_coverage_counts(comparison)}: {a} names {'more' if direction > 0 else 'less'} of the path in its "
                "reasoning (paired, exact sign test).")
    else:
        head = f"{_coverage_counts(comparison)}: no evidence that {a} covers more or less of the path than {b}."
    if not (comparison.more_bridges or comparison.fewer_bridges):
        return head
    bridges = (f"Bridge entities: more on {questions_phrase(comparison.more_bridges)}, fewer on "
               f"{comparison.fewer_bridges} ({comparison.bridges_a} vs {comparison.bridges_b} named of "
               f"{comparison.bridges}), {p_phrase(comparison.bridges_p)}")
    if direction := called_direction(comparison.more_bridges, comparison.fewer_bridges, comparison.bridges_p):
        return (f"{head} {bridges}: {a} names {'more' if direction > 0 else 'fewer'} of the entities between the "
                "question's and the answer.")
    return f"{head} {bridges}: no evidence of a difference."


def _coverage_counts(comparison: CoverageComparison) -> str:
    return (f"{comparison.label}: {comparison.model_a} covered more waypoints on {questions_phrase(comparison.more)} "
            f"and fewer on {comparison.less} (mean {comparison.mean_a:.3f} vs {comparison.mean_b:.3f}), "
            f"{p_phrase(comparison.p)}")
