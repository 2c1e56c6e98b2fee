"""Great Expectations gate on evaluation benchmarks (after loading, before any question is asked).

The loaders already skip and count malformed records; this suite checks the set that will be
evaluated, whatever its source (local JSONL, HF hub, FanOutQA, KG held-out): ids present and
unique, questions non-empty, at least one non-empty gold answer per question.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchplay.quality import QualityReport, validate_dataframe
from searchplay.quality.verdicts import Expect


def benchmark_frame(items: Sequence[Any]) -> Any:
    """A pandas DataFrame of ``QAItem``s with the derived columns the suite checks."""
    import pandas as pd

    return pd.DataFrame({
        "id": [item.id for item in items],
        "question": [item.question for item in items],
        "num_golden_answers": [len(item.golden_answers) for item in items],
        "shortest_golden_answer": [min((len(g.strip()) for g in item.golden_answers), default=0) for item in items],
    })


def benchmark_expectations() -> list[Any]:
    return [
        Expect("ExpectColumnValuesToNotBeNull", {"column": "id"}),
        Expect("ExpectColumnValuesToBeUnique", {"column": "id"}),
        Expect("ExpectColumnValuesToNotBeNull", {"column": "question"}),
        Expect("ExpectColumnValuesToMatchRegex", {"column": "question", "regex": r"\S"}),
        Expect("ExpectColumnValuesToBeBetween", {"column": "num_golden_answers", "min_value": 1}),
        Expect("ExpectColumnValuesToBeBetween", {"column": "shortest_golden_answer", "min_value": 1}),
    ]


def validate_benchmark(items: Sequence[Any], name: str) -> QualityReport:
    """Run the suite on one benchmark's items; raises ``DataQualityError`` naming the failed rows."""
    if not items:
        from searchplay.quality import DataQualityError, ExpectationOutcome

        raise DataQualityError(QualityReport(name=f"benchmark_{name}", num_rows=0, outcomes=[
            ExpectationOutcome("expect_table_row_count_to_be_between", {"min_value": 1}, success=False)]))
    return validate_dataframe(benchmark_frame(items), benchmark_expectations(), f"benchmark_{name}")
