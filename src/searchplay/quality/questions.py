"""The Great Expectations gate on the self-play question pool (``reports/selfplay/<variant>/questions.jsonl``).

Every question that reached the Solver passed SSP's rule filter and RAG verification; the gate
re-checks the filter's invariants where the pool leaves the stage, so a regression in the loop
stops the run with the failing rows instead of training on (and publishing) broken questions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from searchplay.quality.verdicts import Expect

QUESTION_SOURCES = ["fresh", "replay", "replicate"]  # SSP's rule filter governs these; a recipe adds a SourceGate


@dataclass(frozen=True)
class SourceGate:
    """The gate of the rows of one question source that SSP's rule filter does not govern (a recipe's own filter)."""

    expectations: Callable[[], list[Any]]  # the source's Great Expectations
    columns: Callable[[Any], None]  # adds the derived columns its expectations read to the rows' DataFrame


SOURCE_GATES: dict[str, SourceGate] = {}  # 'source' value -> its gate; recipes add theirs (register_source_gate)


def register_source_gate(source: str, gate: SourceGate) -> None:
    """Hold the pool's rows of ``source`` to ``gate`` instead of SSP's rule filter (a recipe's, at import)."""
    if SOURCE_GATES.get(source, gate) is not gate:
        raise ValueError(f"question source {source!r} already has a gate")
    SOURCE_GATES[source] = gate


def question_pool_expectations() -> list[Any]:
    from searchplay.question_rules import MAX_QUESTION_CHARS, MIN_QUESTION_CHARS, MIN_QUESTION_WORDS

    return [
        Expect("ExpectColumnValuesToNotBeNull", {"column": "question"}),
        Expect("ExpectColumnValueLengthsToBeBetween", {"column": "question", "min_value": MIN_QUESTION_CHARS,
                                                       "max_value": MAX_QUESTION_CHARS}),
        Expect("ExpectColumnValuesToBeBetween", {"column": "question_words", "min_value": MIN_QUESTION_WORDS}),
        Expect("ExpectColumnValuesToMatchRegex", {"column": "answer", "regex": r"\S"}),
        Expect("ExpectColumnValuesToBeInSet", {"column": "answer_in_question", "value_set": [False]}),
        Expect("ExpectColumnValuesToBeInSet", {"column": "source", "value_set": [*QUESTION_SOURCES, *SOURCE_GATES]}),
        Expect("ExpectColumnValuesToBeBetween", {"column": "solver_accuracy", "min_value": 0.0, "max_value": 1.0}),
    ]


def validate_question_pool(rows: list[dict[str, Any]], name: str = "selfplay_question_pool"):
    """Validate one iteration's Solver questions; raises ``DataQualityError`` naming rows and rules.

    Rows of a source with a registered gate (``SOURCE_GATES``, a recipe's) are held to that gate; the others to
    SSP's rule filter.
    """
    if not rows:
        return None  # an iteration without a valid question is legal (and common with a 135M model)
    import pandas as pd

    from searchplay.quality import validate_dataframe
    from searchplay.question_rules import answer_in_question

    for source, gate in SOURCE_GATES.items():
        own = [row for row in rows if row.get("source") == source]
        if own:
            frame = pd.DataFrame(own)
            gate.columns(frame)
            validate_dataframe(frame, gate.expectations(), f"{name}_{source}")
            rows = [row for row in rows if row.get("source") != source]
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    frame["question_words"] = frame["question"].map(lambda q: len(str(q).split()))
    frame["answer_in_question"] = [answer_in_question(str(a), str(q)) for a, q in zip(frame["answer"],
                                                                                       frame["question"], strict=True)]
    return validate_dataframe(frame, question_pool_expectations(), name)
