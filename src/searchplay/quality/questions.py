"""The Great Expectations gate on the self-play question pool (``reports/selfplay/<variant>/questions.jsonl``).

Every question that reached the Solver passed SSP's rule filter and RAG verification; the gate
re-checks the filter's invariants where the pool leaves the stage, so a regression in the loop
stops the run with the failing rows instead of training on (and publishing) broken questions.
"""

from __future__ import annotations

from typing import Any

QUESTION_SOURCES = ["fresh", "replay", "replicate", "eve"]


def question_pool_expectations() -> list[Any]:
    import great_expectations.expectations as gxe

    from searchplay.question_rules import MAX_QUESTION_CHARS, MIN_QUESTION_CHARS, MIN_QUESTION_WORDS

    return [
        gxe.ExpectColumnValuesToNotBeNull(column="question"),
        gxe.ExpectColumnValueLengthsToBeBetween(column="question", min_value=MIN_QUESTION_CHARS,
                                                max_value=MAX_QUESTION_CHARS),
        gxe.ExpectColumnValuesToBeBetween(column="question_words", min_value=MIN_QUESTION_WORDS),
        gxe.ExpectColumnValuesToMatchRegex(column="answer", regex=r"\S"),
        gxe.ExpectColumnValuesToBeInSet(column="answer_in_question", value_set=[False]),
        gxe.ExpectColumnValuesToBeInSet(column="source", value_set=QUESTION_SOURCES),
        gxe.ExpectColumnValuesToBeBetween(column="solver_accuracy", min_value=0.0, max_value=1.0),
    ]


def eve_question_expectations() -> list[Any]:
    """EVE's validity filter (q and a non-empty, Norm(a) not inside Norm(q); EVE §3.1): no length rule."""
    import great_expectations.expectations as gxe

    return [
        gxe.ExpectColumnValuesToMatchRegex(column="question", regex=r"\S"),
        gxe.ExpectColumnValuesToMatchRegex(column="answer", regex=r"\S"),
        gxe.ExpectColumnValuesToBeInSet(column="eve_answer_in_question", value_set=[False]),
        gxe.ExpectColumnValuesToBeBetween(column="solver_accuracy", min_value=0.0, max_value=1.0),
    ]


def validate_question_pool(rows: list[dict[str, Any]], name: str = "selfplay_question_pool"):
    """Validate one iteration's Solver questions; raises ``DataQualityError`` naming rows and rules.

    Rows of source 'eve' (the EVE variant) are held to EVE's validity filter; the others to SSP's rule filter.
    """
    if not rows:
        return None  # an iteration without a valid question is legal (and common with a 135M model)
    eve = [row for row in rows if row.get("source") == "eve"]
    if eve:
        import pandas as pd

        from searchplay.quality import validate_dataframe
        from searchplay.rewards.eve import eve_valid

        frame = pd.DataFrame(eve)
        frame["eve_answer_in_question"] = [not eve_valid(str(q), str(a)) for q, a in
                                           zip(frame["question"], frame["answer"], strict=True)]
        validate_dataframe(frame, eve_question_expectations(), f"{name}_eve")
        rows = [row for row in rows if row.get("source") != "eve"]
        if not rows:
            return None
    import pandas as pd

    from searchplay.quality import validate_dataframe
    from searchplay.question_rules import answer_in_question

    frame = pd.DataFrame(rows)
    frame["question_words"] = frame["question"].map(lambda q: len(str(q).split()))
    frame["answer_in_question"] = [answer_in_question(str(a), str(q)) for a, q in zip(frame["answer"],
                                                                                       frame["question"], strict=True)]
    return validate_dataframe(frame, question_pool_expectations(), name)
