"""The KG pool suite: each rule fails with a report naming the expectation and the rows."""

from __future__ import annotations

import copy

import pytest

from searchplay.quality import DataQualityError
from searchplay.quality.kg import validate_subgraphs

GOOD = {"id": "Q1-3h", "answer": "Paris", "num_hops": 3, "num_nodes": 5,
        "waypoints": ["Albert Einstein", "Ulm", "Germany"], "split": "selfplay"}


def _pool(**changes):
    records = [dict(GOOD, id=f"Q{i}") for i in range(4)]
    bad = copy.deepcopy(GOOD) | changes
    return [*records, bad]


def test_valid_pool_passes():
    assert validate_subgraphs(_pool()).success


@pytest.mark.parametrize(("changes", "expectation"), [
    ({"num_hops": 8, "waypoints": ["a"] * 8}, "expect_column_values_to_be_between"),
    ({"answer": ""}, "expect_column_value_lengths_to_be_between"),
    ({"waypoints": ["a", "b"]}, "expect_column_values_to_be_in_set"),
    ({"id": "Q0"}, "expect_column_values_to_be_unique"),
    ({"waypoints": ["Paris", "b", "c"]}, "expect_column_values_to_be_in_set"),
    ({"split": "train"}, "expect_column_values_to_be_in_set"),
    ({"split": None}, "expect_column_values_to_not_be_null"),
])
def test_each_rule_fails_readably(changes, expectation):
    with pytest.raises(DataQualityError) as info:
        validate_subgraphs(_pool(**changes))
    message = str(info.value)
    assert "kg_subgraphs" in message and expectation in message and "rows" in message
