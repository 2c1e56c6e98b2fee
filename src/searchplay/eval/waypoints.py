"""Held-out waypoint coverage: did self-play move what WCR rewards, on questions it never trained on?

WCR (KG-paths paper §3.3, Eq. 5-6) pays a Solver rollout for naming the KG path's waypoint titles inside its
``<think>`` spans. Every ``kg_heldout`` question comes from a held-out path, so it has waypoints too. This
module scores each evaluated answer's think text against them (g_i of Eq. 5: exact substrings, as the paper)
and pairs two models question by question: how many questions A covered more of than B, how many less, the
mean coverage of each, and the exact two-sided sign test of more against less (ties left out), the binomial
test the McNemar and search-count tables use. Correctness can stay flat while coverage moves: this is the
quantity the KG variants' Solver reward optimizes, measured where no training happened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from searchplay.eval.benchmarks import KG_HELDOUT, load_kg_heldout
from searchplay.eval.paired import comparison_pairs, format_p, mcnemar_exact, questions_phrase
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

    @property
    def label(self) -> str:
        return f"{self.model_a} vs {self.model_b}"

    @property
    def p(self) -> float:
        """Exact two-sided sign test of more against less coverage (1.0 when no question's coverage differs)."""
        return mcnemar_exact(self.more, self.less)


def heldout_waypoints(pool_path: str | Path) -> dict[str, list[str]]:
    """Question id -> waypoint titles of every ``kg_heldout`` question of the KG pool (``subgraphs.jsonl``)."""
    loaded = load_kg_heldout(pool_path)
    return {item.id: list(item.metadata.get("waypoints") or []) for item in loaded.items}


def read_coverage(eval_dir: str | Path, models: Iterable[str],
                  waypoints: Mapping[str, list[str]]) -> dict[str, dict[str, float]]:
    """Per model, question id -> waypoint coverage g_i of its answer to that ``kg_heldout`` question, from
    ``<eval_dir>/<model>/predictions/kg_heldout.jsonl``; questions without waypoints and models without that
    file are left out."""
    coverage = {}
    for model in models:
        path = Path(eval_dir) / model / "predictions" / f"{KG_HELDOUT}.jsonl"
        if not path.exists():
            continue
        found = {str(record["id"]): waypoint_coverage(extract_think_text(record.get("output") or ""),
                                                      waypoints[str(record["id"])])
                 for record in read_jsonl(path) if waypoints.get(str(record.get("id")))}
        if found:
            coverage[model] = found
    return coverage


def compare_coverage(model_a: str, coverage_a: Mapping[str, float], model_b: str,
                     coverage_b: Mapping[str, float]) -> CoverageComparison:
    """Pair two models' coverage on the questions both answered.

    >>> c = compare_coverage("kg_wcr", {"1": 0.5, "2": 0.25, "3": 0.0}, "warmstart", {"1": 0.25, "2": 0.25, "4": 1.0})
    >>> (c.n, c.more, c.less, c.mean_a, c.mean_b, c.p)
    (2, 1, 0, 0.375, 0.25, 1.0)
    """
    pairs = [(coverage_a[q], coverage_b[q]) for q in coverage_a.keys() & coverage_b.keys()]
    n = len(pairs)
    return CoverageComparison(model_a, model_b, n, more=sum(a > b for a, b in pairs), less=sum(a < b for a, b in pairs),
                              mean_a=sum(a for a, _ in pairs) / n if n else float("nan"),
                              mean_b=sum(b for _, b in pairs) / n if n else float("nan"))


def compare_coverages(coverage: Mapping[str, Mapping[str, float]]) -> list[CoverageComparison]:
    """Each of ``comparison_pairs`` (every trained model against its start, and the head-to-head pairs) that
    shares a question."""
    comparisons = [compare_coverage(a, coverage[a], b, coverage[b]) for a, b in comparison_pairs(coverage)]
    return [comparison for comparison in comparisons if comparison.n]


def coverage_metrics(comparison: CoverageComparison) -> dict[str, float]:
    """Flat ``coverage.<A>_vs_<B>.kg_heldout.<field>`` entries (names MLflow accepts as metric keys).

    >>> sorted(coverage_metrics(CoverageComparison("a", "b", 2, 1, 0, 0.5, 0.25)))[0]
    'coverage.a_vs_b.kg_heldout.less'
    """
    prefix = f"coverage.{comparison.model_a}_vs_{comparison.model_b}.{KG_HELDOUT}"
    fields = {"n": comparison.n, "more": comparison.more, "less": comparison.less, "mean_a": comparison.mean_a,
              "mean_b": comparison.mean_b, "p": comparison.p}
    return {f"{prefix}.{name}": value for name, value in fields.items()}


def coverage_note(comparison: CoverageComparison) -> str:
    """One comparison in plain words.

    >>> coverage_note(CoverageComparison("kg_wcr", "warmstart", 161, 10, 1, 0.301, 0.286))
    'kg_wcr vs warmstart: kg_wcr covered more waypoints on 10 questions and fewer on 1 (mean 0.301 vs 0.286), \
p = 0.012: kg_wcr names more of the path in its reasoning (paired, exact sign test).'
    """
    a, b = comparison.model_a, comparison.model_b
    if not (comparison.more or comparison.less):
        return (f"{comparison.label}: no question's coverage changed (mean {comparison.mean_a:.3f}): nothing to "
                "compare, p = 1.")
    p = format_p(comparison.p)
    head = (f"{comparison.label}: {a} covered more waypoints on {questions_phrase(comparison.more)} and fewer on "
            f"{comparison.less} (mean {comparison.mean_a:.3f} vs {comparison.mean_b:.3f}), "
            f"{'p ' + p if p.startswith('<') else 'p = ' + p}")
    if comparison.p < 0.05 and comparison.more != comparison.less:
        direction = "more" if comparison.more > comparison.less else "less"
        return f"{head}: {a} names {direction} of the path in its reasoning (paired, exact sign test)."
    return f"{head}: no evidence that {a} covers more or less of the path than {b}."
