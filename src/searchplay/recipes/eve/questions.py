"""The question pool's gate on EVE's rows (source 'eve'): EVE's validity filter, not SSP's rule filter.

Registered into ``searchplay.quality.questions.SOURCE_GATES`` by ``searchplay.recipes.eve``; the pool's other rows
keep SSP's gate.
"""

from __future__ import annotations

from typing import Any

from searchplay.quality.questions import SourceGate
from searchplay.quality.verdicts import Expect
from searchplay.recipes.eve.rewards import eve_valid


def eve_question_expectations() -> list[Any]:
    """EVE's validity filter (q and a non-empty, Norm(a) not inside Norm(q); EVE §3.1): no length rule."""
    return [
        Expect("ExpectColumnValuesToMatchRegex", {"column": "question", "regex": r"\S"}),
        Expect("ExpectColumnValuesToMatchRegex", {"column": "answer", "regex": r"\S"}),
        Expect("ExpectColumnValuesToBeInSet", {"column": "eve_answer_in_question", "value_set": [False]}),
        Expect("ExpectColumnValuesToBeBetween", {"column": "solver_accuracy", "min_value": 0.0, "max_value": 1.0}),
    ]


def eve_question_columns(frame: Any) -> None:
    """``eve_answer_in_question``: the row fails EVE's validity filter (``eve_valid``, EVE §3.1)."""
    frame["eve_answer_in_question"] = [not eve_valid(str(q), str(a)) for q, a in
                                       zip(frame["question"], frame["answer"], strict=True)]


EVE_GATE = SourceGate(expectations=eve_question_expectations, columns=eve_question_columns)
