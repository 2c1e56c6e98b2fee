"""Great Expectations suite for the KG subgraph pool.

Checks: hops within [min_hops, max_hops], answer present, len(waypoints) == num_hops, unique ids,
no answer among the waypoints, and every record in exactly one of the three splits (self-play,
warm-start, kg_heldout): one split value per unique id makes the splits disjoint by construction,
and the suite checks that each value is a known split. A failure raises ``DataQualityError``
naming expectation and rows.
"""

from __future__ import annotations

from typing import Any

from searchplay.quality import QualityReport, validate_dataframe
from searchplay.quality.verdicts import Expect
from searchplay.split import SPLITS


def subgraph_frame(records: list[dict[str, Any]]):
    """One row per subgraph with the derived columns the suite checks."""
    import pandas as pd

    rows = [{"id": r["id"], "answer": r["answer"], "num_hops": r["num_hops"],
             "waypoints_match_hops": len(r["waypoints"]) == r["num_hops"],
             "answer_in_waypoints": str(r["answer"]).casefold() in {w.casefold() for w in r["waypoints"]},
             "num_nodes": r["num_nodes"], "split": r.get("split")} for r in records]
    return pd.DataFrame(rows, columns=["id", "answer", "num_hops", "waypoints_match_hops", "answer_in_waypoints",
                                       "num_nodes", "split"])


def validate_subgraphs(records: list[dict[str, Any]], min_hops: int = 3, max_hops: int = 7) -> QualityReport:
    """Run the pool suite; raises ``DataQualityError`` with a readable report on any failure."""
    expectations = [
        Expect("ExpectTableRowCountToBeBetween", {"min_value": 1}),
        Expect("ExpectColumnValuesToBeBetween", {"column": "num_hops", "min_value": min_hops, "max_value": max_hops}),
        Expect("ExpectColumnValuesToNotBeNull", {"column": "answer"}),
        Expect("ExpectColumnValueLengthsToBeBetween", {"column": "answer", "min_value": 1}),
        Expect("ExpectColumnValuesToBeInSet", {"column": "waypoints_match_hops", "value_set": [True]}),
        Expect("ExpectColumnValuesToBeUnique", {"column": "id"}),
        Expect("ExpectColumnValuesToBeInSet", {"column": "answer_in_waypoints", "value_set": [False]}),
        Expect("ExpectColumnValuesToNotBeNull", {"column": "split"}),
        Expect("ExpectColumnValuesToBeInSet", {"column": "split", "value_set": list(SPLITS)}),
    ]
    return validate_dataframe(subgraph_frame(records), expectations, "kg_subgraphs")
