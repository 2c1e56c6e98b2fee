"""Paired comparisons of two models on the same questions: the exact McNemar test.

Two models answered the same sampled questions, so their scores are not independent: a question both get
right (or both wrong) says nothing about which is better; only the discordant questions do, the ones one
model gets right and the other wrong. Under "no difference" each discordant question is equally likely to
go either way, so the count of one kind is Binomial(discordant, 1/2): the exact McNemar test. Wilson
intervals of two models overlapping does not mean no difference; this test is the one to read
(docs/decisions/eval.md, "Paired comparisons"). Pure functions over counts and correctness maps; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar


class StartedFrom(Mapping[str, str]):
    """Each trained model -> the model it started from, the comparison a training step is judged by, as the
    registries say: a warm-start's ``started_from`` (warmstart from base), a self-play variant's warm-start
    (``Variant.warmstart``); read live, so a recipe registered later is in it."""

    def _table(self) -> dict[str, str]:
        from searchplay.model_paths import selfplay_variants, started_from, warmstart_models

        models = [*warmstart_models(), *selfplay_variants()]
        return {model: start for model in models if (start := started_from(model)) is not None}

    def __getitem__(self, model: str) -> str:
        return self._table()[model]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


STARTED_FROM: Mapping[str, str] = StartedFrom()
DEFAULT_START = "warmstart"  # a self-play variant not named above starts from the shared warm-start
# Head-to-head comparisons beside those: the headline method against the SSP baseline.
HEAD_TO_HEAD: tuple[tuple[str, str], ...] = (("kg_wcr", "ssp"),)
SIGNIFICANCE = 0.05  # the two-sided level at which a paired difference is called a difference
POOLED = "pooled"  # the scope of every benchmark both models answered, questions paired by (benchmark, id)

Question = tuple[str, str]  # (benchmark, question id)
V = TypeVar("V")


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts: min(1, 2 P(X <= min(b, c))), X ~ Bin(b+c, 1/2).

    1.0 when no answer differs (b + c = 0): there is nothing to compare.

    >>> mcnemar_exact(6, 0)
    0.03125
    >>> mcnemar_exact(1, 5)
    0.21875
    >>> mcnemar_exact(0, 0)
    1.0
    """
    if only_a < 0 or only_b < 0:
        raise ValueError(f"mcnemar_exact: counts must be >= 0, got only_a={only_a}, only_b={only_b}")
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    from scipy.stats import binomtest  # p = 1/2 is symmetric: SciPy's two-sided p is the doubled tail

    return min(1.0, float(binomtest(min(only_a, only_b), discordant, 0.5).pvalue))


def called_direction(more: int, less: int, p: float) -> int:
    """+1 (A more) or -1 (A less) when the exact test of ``more`` against ``less`` calls a difference at
    ``SIGNIFICANCE``, else 0.

    >>> called_direction(7, 0, 0.016), called_direction(0, 6, 0.031), called_direction(5, 0, 0.0625)
    (1, -1, 0)
    """
    if more == less or p >= SIGNIFICANCE:
        return 0
    return 1 if more > less else -1


@dataclass(frozen=True)
class PairedComparison:
    """Model A against model B on the questions both answered, in one scope: a benchmark's name, or ``POOLED``."""

    model_a: str
    model_b: str
    scope: str
    n: int
    both_right: int
    only_a: int
    only_b: int
    both_wrong: int
    p: float

    @property
    def label(self) -> str:
        return f"{self.model_a} vs {self.model_b}"

    @property
    def discordant(self) -> int:
        """Questions one model got right and the other wrong: the only ones the test reads."""
        return self.only_a + self.only_b

    @property
    def significant(self) -> bool:
        return self.discordant > 0 and self.p < SIGNIFICANCE

    @property
    def better(self) -> str | None:
        """The model shown better (paired, exact McNemar at ``SIGNIFICANCE``), or None."""
        if not self.significant:
            return None
        return self.model_a if self.only_a > self.only_b else self.model_b


def compare_paired(model_a: str, correct_a: Mapping[Question, bool], model_b: str,
                   correct_b: Mapping[Question, bool], scope: str) -> PairedComparison:
    """Pair two models' per-question correctness on the questions both answered (the intersection only).

    >>> a = {("nq", "1"): True, ("nq", "2"): True, ("nq", "3"): False, ("nq", "9"): True}
    >>> b = {("nq", "1"): True, ("nq", "2"): False, ("nq", "3"): False}
    >>> c = compare_paired("a", a, "b", b, "nq")
    >>> (c.n, c.both_right, c.only_a, c.only_b, c.both_wrong, c.p)
    (3, 1, 1, 0, 1, 1.0)
    """
    shared = correct_a.keys() & correct_b.keys()
    pairs = [(bool(correct_a[q]), bool(correct_b[q])) for q in shared]
    only_a = sum(a and not b for a, b in pairs)
    only_b = sum(b and not a for a, b in pairs)
    return PairedComparison(model_a, model_b, scope, n=len(pairs), both_right=sum(a and b for a, b in pairs),
                            only_a=only_a, only_b=only_b, both_wrong=sum(not (a or b) for a, b in pairs),
                            p=mcnemar_exact(only_a, only_b))


def in_benchmark(by_question: Mapping[Question, V], benchmark: str) -> dict[Question, V]:
    """The questions of one benchmark (with whatever each maps to: correctness, an answer)."""
    return {question: value for question, value in by_question.items() if question[0] == benchmark}


def questions_phrase(count: int) -> str:
    """'1 question', '2 questions'."""
    return f"{count} question{'' if count == 1 else 's'}"


def shared_benchmarks(correct_a: Mapping[Question, bool], correct_b: Mapping[Question, bool]) -> list[str]:
    """The benchmarks with at least one question both models answered, sorted."""
    return sorted({benchmark for benchmark, _ in correct_a.keys() & correct_b.keys()})


def comparison_pairs(models: Iterable[str], extra: Iterable[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """(A, B) pairs among ``models``: each trained model against its start (a model ``STARTED_FROM`` does not
    name against ``DEFAULT_START``), then ``HEAD_TO_HEAD``, then the ``extra`` pairs a user asked for (e.g. two
    seeds of one variant); a pair is left out unless both models are present, and a pair is never repeated.

    >>> comparison_pairs(["base", "warmstart", "kg_wcr", "ssp", "kg_new"])
    [('warmstart', 'base'), ('ssp', 'warmstart'), ('kg_wcr', 'warmstart'), ('kg_new', 'warmstart'), ('kg_wcr', 'ssp')]
    >>> comparison_pairs(["warmstart", "kg_wcr", "kg_new"], extra=[("kg_new", "kg_wcr"), ("kg_wcr", "warmstart")])
    [('kg_wcr', 'warmstart'), ('kg_new', 'warmstart'), ('kg_new', 'kg_wcr')]
    """
    present = list(models)
    known = dict(STARTED_FROM)
    starts = {**known, **{m: DEFAULT_START for m in present if m not in (*known, "base")}}
    pairs = [(model, start) for model, start in starts.items() if model in present and start in present]
    for pair in (*HEAD_TO_HEAD, *extra):
        if pair[0] in present and pair[1] in present and pair not in pairs:
            pairs.append(pair)
    return pairs


def format_p(p: float) -> str:
    """A p-value in two significant digits (``0.031``), ``1`` at 1, ``< 0.001`` below it.

    >>> [format_p(p) for p in (0.03125, 0.21875, 1.0, 0.0004)]
    ['0.031', '0.22', '1', '< 0.001']
    """
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def p_phrase(p: float) -> str:
    """``format_p`` as a sentence writes it.

    >>> [p_phrase(p) for p in (0.03125, 0.0004)]
    ['p = 0.031', 'p < 0.001']
    """
    shown = format_p(p)
    return f"p {shown}" if shown.startswith("<") else f"p = {shown}"


def comparison_metrics(comparison: PairedComparison) -> dict[str, float]:
    """Flat ``paired.<A>_vs_<B>.<scope>.<field>`` entries (names MLflow accepts as metric keys).

    >>> sorted(comparison_metrics(PairedComparison("a", "b", "pooled", 2, 1, 1, 0, 0, 1.0)))[:2]
    ['paired.a_vs_b.pooled.both_right', 'paired.a_vs_b.pooled.both_wrong']
    """
    prefix = f"paired.{comparison.model_a}_vs_{comparison.model_b}.{comparison.scope}"
    fields = {"n": comparison.n, "both_right": comparison.both_right, "only_a": comparison.only_a,
              "only_b": comparison.only_b, "both_wrong": comparison.both_wrong, "p": comparison.p}
    return {f"{prefix}.{name}": value for name, value in fields.items()}


def compare_models(correct: Mapping[str, Mapping[Question, bool]], benchmark: str,
                   extra: Iterable[tuple[str, str]] = ()) -> list[PairedComparison]:
    """Each of ``comparison_pairs(correct, extra)`` on ``benchmark`` alone, then on every benchmark pooled; a
    scope with no question both models answered is left out.

    >>> right, wrong = {("kg", "1"): True, ("nq", "1"): True}, {("kg", "1"): False, ("nq", "1"): True}
    >>> [(c.label, c.scope, c.n, c.only_a) for c in compare_models({"warmstart": wrong, "ssp": right}, "kg")]
    [('ssp vs warmstart', 'kg', 1, 1), ('ssp vs warmstart', 'pooled', 2, 1)]
    """
    comparisons = []
    for model_a, model_b in comparison_pairs(correct, extra):
        scoped = compare_paired(model_a, in_benchmark(correct[model_a], benchmark), model_b,
                                in_benchmark(correct[model_b], benchmark), benchmark)
        pooled = compare_paired(model_a, correct[model_a], model_b, correct[model_b], POOLED)
        comparisons += [comparison for comparison in (scoped, pooled) if comparison.n]
    return comparisons
