"""The Great Expectations suite every retrieval corpus passes before it is indexed."""

from __future__ import annotations

from typing import Any

from searchplay.quality.verdicts import Expect


def passage_expectations() -> list[Any]:
    """Unique ids; non-null, non-blank id, title and text."""
    expectations: list[Any] = [Expect("ExpectColumnValuesToBeUnique", {"column": "id"})]
    for column in ("id", "title", "text"):
        expectations += [Expect("ExpectColumnValuesToNotBeNull", {"column": column}),
                         Expect("ExpectColumnValuesToMatchRegex", {"column": column, "regex": r"\S"})]
    return expectations


def validate_passages(df: Any, name: str = "corpus_passages"):
    """Validate a passages DataFrame (id, title, text); raises ``DataQualityError`` on failure."""
    from searchplay.quality import validate_dataframe

    return validate_dataframe(df, passage_expectations(), name)
