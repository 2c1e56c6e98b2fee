"""What training changed in a model's answers, question by question, beside whether they turned right.

The exact McNemar test (``searchplay.eval.paired``) reads only the questions whose correctness differs. A
self-play run can change much more than that: other answers, more or fewer searches. This module pairs two
models' predictions on the same questions and counts

- **answers changed**: the normalized final answer differs (the evaluation's ``evaluate.normalization``, as EM);
- **searches**: how many questions A searched more often than B, fewer times, as often; with the exact
  two-sided sign test of more against fewer (ties left out), the same binomial test as McNemar's;
- **answer found**: whether a document the model's own searches returned holds a gold answer (the record's
  ``answer_retrieved``, FlashRAG's retrieval recall per question): the questions where only A's searches found
  it and those where only B's did, with exact McNemar. It separates finding the answer from reading it out. A
  record without the field (written before it existed) says nothing: its question is left out of this count.

A run whose answers did not change did not learn anything an evaluation can see; a run whose searches moved
one way, beyond the sign test's noise, changed its behaviour, whether or not correctness followed. Pure
functions over prediction records; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchplay.answers import normalize_answer
from searchplay.eval.paired import (
    POOLED,
    Question,
    called_direction,
    comparison_pairs,
    in_benchmark,
    mcnemar_exact,
    p_phrase,
    questions_phrase,
)
from searchplay.io import read_json, read_jsonl


@dataclass(frozen=True)
class Answer:
    """One prediction record reduced to what the behaviour comparison reads."""

    answer: str  # normalized final answer ('' when the model gave none)
    searches: int
    found: bool | None = None  # a document its own searches returned holds a gold answer (None: not recorded)


@dataclass(frozen=True)
class BehaviourComparison:
    """Model A against model B on the questions both answered, in one scope: a benchmark's name, or ``POOLED``."""

    model_a: str
    model_b: str
    scope: str
    n: int
    answers_changed: int
    more_searches: int  # questions A searched more often than B
    fewer_searches: int
    mean_searches_a: float
    mean_searches_b: float
    found_only_a: int  # questions where A's searches returned a gold answer and B's did not
    found_only_b: int
    found_a: int  # questions where A's searches returned a gold answer
    found_b: int
    found_n: int | None = None  # questions whose records both say whether a search found it (None: all n)

    @property
    def label(self) -> str:
        return f"{self.model_a} vs {self.model_b}"

    @property
    def searches_p(self) -> float:
        """Exact two-sided sign test of more against fewer searches (1.0 when no question's count differs)."""
        return mcnemar_exact(self.more_searches, self.fewer_searches)

    @property
    def found_of(self) -> int:
        """The questions the answer-found counts are of: ``found_n``, or every question paired."""
        return self.n if self.found_n is None else self.found_n

    @property
    def found_p(self) -> float:
        """Exact McNemar of the questions only A's searches found the answer for against those only B's did."""
        return mcnemar_exact(self.found_only_a, self.found_only_b)


def answer_of(record: Mapping[str, Any], normalization: str = "squad") -> Answer:
    """The prediction normalized as its EM was (``normalization``), search count and answer-found flag (None
    where the record does not say) of one prediction record."""
    found = record.get("answer_retrieved")
    return Answer(normalize_answer(record.get("prediction") or "", normalization),
                  int(record.get("num_searches") or 0), None if found is None else bool(found))


def evaluated_records(eval_dir: str | Path, model: str) -> Iterator[tuple[Question, dict[str, Any]]]:
    """(benchmark, id) and record of each answer of the evaluation ``<eval_dir>/<model>/`` reports: its
    ``predictions/*.jsonl`` records of the questions ``sample.json`` names, by the model revision ``run.json``
    names (where they say). A file of a benchmark no longer asked, or answers of a later run that stopped before
    its scores (another model, another sample), are not that evaluation's, and pair with nothing."""
    folder = Path(eval_dir) / model
    sample, run = folder / "sample.json", folder / "run.json"
    ids = read_json(sample).get("ids") if sample.is_file() else None
    asked = {(name, str(i)) for name, listed in ids.items() for i in listed} if isinstance(ids, dict) else None
    revision = read_json(run).get("model_revision") if run.is_file() else None
    for path in sorted((folder / "predictions").glob("*.jsonl")):
        for record in read_jsonl(path):
            if "id" not in record:
                continue
            question = (record.get("benchmark", path.stem), str(record["id"]))
            if asked is not None and question not in asked:
                continue
            if revision is not None and record.get("model_revision", revision) != revision:
                continue
            yield question, record


def read_answers(eval_dir: str | Path, models: Iterable[str]) -> dict[str, dict[Question, Answer]]:
    """Per model, (benchmark, id) -> its answer, of the evaluation its folder reports (``evaluated_records``); a
    model without predictions is left out."""
    answers = {}
    for model in models:
        run = Path(eval_dir) / model / "run.json"
        normalization = read_json(run).get("normalization", "squad") if run.is_file() else "squad"
        found = {question: answer_of(record, normalization) for question, record in evaluated_records(eval_dir, model)}
        if found:
            answers[model] = found
    return answers


def compare_behaviour(model_a: str, answers_a: Mapping[Question, Answer], model_b: str,
                      answers_b: Mapping[Question, Answer], scope: str) -> BehaviourComparison:
    """Pair two models' answers on the questions both answered (the intersection only).

    >>> a = {("kg", "1"): Answer("europe", 2, True), ("kg", "2"): Answer("china", 3, False),
    ...      ("kg", "3"): Answer("asia", 1)}
    >>> b = {("kg", "1"): Answer("europe", 1, False), ("kg", "2"): Answer("beijing", 1, False),
    ...      ("kg", "3"): Answer("asia", 1, False)}
    >>> c = compare_behaviour("a", a, "b", b, "kg")
    >>> (c.n, c.answers_changed, c.more_searches, c.fewer_searches, c.mean_searches_a, c.searches_p)
    (3, 1, 2, 0, 2.0, 0.5)
    >>> (c.found_only_a, c.found_only_b, c.found_a, c.found_b, c.found_n, c.found_p)  # "3": a's record does not say
    (1, 0, 1, 0, 2, 1.0)
    """
    pairs = [(answers_a[q], answers_b[q]) for q in answers_a.keys() & answers_b.keys()]
    known = [(a, b) for a, b in pairs if a.found is not None and b.found is not None]
    n = len(pairs)
    return BehaviourComparison(
        model_a, model_b, scope, n=n,
        answers_changed=sum(a.answer != b.answer for a, b in pairs),
        more_searches=sum(a.searches > b.searches for a, b in pairs),
        fewer_searches=sum(a.searches < b.searches for a, b in pairs),
        mean_searches_a=sum(a.searches for a, _ in pairs) / n if n else float("nan"),
        mean_searches_b=sum(b.searches for _, b in pairs) / n if n else float("nan"),
        found_only_a=sum(a.found and not b.found for a, b in known),
        found_only_b=sum(b.found and not a.found for a, b in known),
        found_a=sum(bool(a.found) for a, _ in known), found_b=sum(bool(b.found) for _, b in known), found_n=len(known))


def compare_behaviours(answers: Mapping[str, Mapping[Question, Answer]], benchmark: str,
                       extra: Iterable[tuple[str, str]] = ()) -> list[BehaviourComparison]:
    """Each of ``comparison_pairs(answers, extra)`` on ``benchmark`` alone, then on every benchmark pooled; a
    scope with no question both models answered is left out."""
    comparisons = []
    for model_a, model_b in comparison_pairs(answers, extra):
        scoped = compare_behaviour(model_a, in_benchmark(answers[model_a], benchmark), model_b,
                                   in_benchmark(answers[model_b], benchmark), benchmark)
        pooled = compare_behaviour(model_a, answers[model_a], model_b, answers[model_b], POOLED)
        comparisons += [comparison for comparison in (scoped, pooled) if comparison.n]
    return comparisons


def behaviour_metrics(comparison: BehaviourComparison) -> dict[str, float]:
    """Flat ``behaviour.<A>_vs_<B>.<scope>.<field>`` entries (names MLflow accepts as metric keys).

    >>> sorted(behaviour_metrics(BehaviourComparison("a", "b", "pooled", 2, 1, 1, 0, 2.0, 1.0, 1, 0, 1, 0)))[0]
    'behaviour.a_vs_b.pooled.answers_changed'
    """
    prefix = f"behaviour.{comparison.model_a}_vs_{comparison.model_b}.{comparison.scope}"
    fields = {"n": comparison.n, "answers_changed": comparison.answers_changed,
              "more_searches": comparison.more_searches, "fewer_searches": comparison.fewer_searches,
              "mean_searches_a": comparison.mean_searches_a, "mean_searches_b": comparison.mean_searches_b,
              "searches_p": comparison.searches_p, "found_only_a": comparison.found_only_a,
              "found_only_b": comparison.found_only_b, "found_a": comparison.found_a, "found_b": comparison.found_b,
              "found_n": comparison.found_of, "found_p": comparison.found_p}
    return {f"{prefix}.{name}": value for name, value in fields.items()}


def behaviour_note(comparison: BehaviourComparison, scope: str) -> str:
    """One comparison in plain words.

    >>> behaviour_note(BehaviourComparison("kg_wcr", "warmstart", "kg", 161, 0, 0, 0, 1.0, 1.0, 0, 0, 9, 9),
    ...                "KG held-out")
    'kg_wcr vs warmstart on KG held-out: no answer and no search count changed: training left nothing an \
evaluation can see.'
    >>> print(behaviour_note(BehaviourComparison("kg_wcr", "warmstart", "kg", 161, 40, 30, 5, 2.1, 1.5, 7, 0, 44, 37),
    ...                      "KG held-out"))
    kg_wcr vs warmstart on KG held-out: 40 of 161 answers changed; kg_wcr searched more on 30 questions and \
less on 5 (2.10 vs 1.50 searches per question), p < 0.001: kg_wcr searches more (paired, exact sign test). \
Its searches found a gold answer on 7 questions where warmstart's did not and missed it on 0 where they did \
(44 vs 37 of 161), p = 0.016: kg_wcr's searches find the answer more often (paired, exact McNemar).
    """
    a, b = comparison.model_a, comparison.model_b
    head = f"{comparison.label} on {scope}: "
    if not (comparison.answers_changed or comparison.more_searches or comparison.fewer_searches
            or comparison.found_only_a or comparison.found_only_b):
        return f"{head}no answer and no search count changed: training left nothing an evaluation can see."
    searches = (f"{a} searched more on {questions_phrase(comparison.more_searches)} and less on "
                f"{comparison.fewer_searches} ({comparison.mean_searches_a:.2f} vs {comparison.mean_searches_b:.2f} "
                f"searches per question), {p_phrase(comparison.searches_p)}")
    if direction := called_direction(comparison.more_searches, comparison.fewer_searches, comparison.searches_p):
        verdict = f"{a} searches {'more' if direction > 0 else 'less'} (paired, exact sign test)"
    else:
        verdict = f"no evidence that {a} searches more or less than {b}"
    return (f"{head}{comparison.answers_changed} of {comparison.n} answers changed; {searches}: {verdict}."
            f"{found_note(comparison)}")


def found_note(comparison: BehaviourComparison) -> str:
    """The answer-found comparison as a sentence (with a leading space), or '' when neither model's searches
    ever returned a gold answer."""
    a, b = comparison.model_a, comparison.model_b
    if not (comparison.found_a or comparison.found_b):
        return ""
    unrecorded = f"; not recorded for {comparison.n - comparison.found_of} of {comparison.n}" \
        if comparison.found_of < comparison.n else ""
    if not (comparison.found_only_a or comparison.found_only_b):
        return f" Both models' searches found a gold answer on the same {questions_phrase(comparison.found_a)}."
    head = (f" Its searches found a gold answer on {questions_phrase(comparison.found_only_a)} where {b}'s did not "
            f"and missed it on {comparison.found_only_b} where they did ({comparison.found_a} vs {comparison.found_b} "
            f"of {comparison.found_of}{unrecorded}), {p_phrase(comparison.found_p)}")
    if direction := called_direction(comparison.found_only_a, comparison.found_only_b, comparison.found_p):
        return f"{head}: {a}'s searches find the answer {'more' if direction > 0 else 'less'} often (paired, exact " \
            "McNemar)."
    return f"{head}: no evidence that {a}'s searches find the answer more or less often than {b}'s."
