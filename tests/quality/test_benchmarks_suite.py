"""Great Expectations gate on evaluation benchmarks: real files pass, bad sets fail with named rows."""

from __future__ import annotations

import pytest

from searchplay.config import Params
from searchplay.eval.benchmarks import QAItem, load_benchmark
from searchplay.quality import DataQualityError
from searchplay.quality.benchmarks import validate_benchmark


def test_real_bamboogle_passes(benchmarks_dir):
    items = load_benchmark("bamboogle", Params.model_validate({"evaluate": {"data_dir": str(benchmarks_dir)}})).items
    assert validate_benchmark(items, "bamboogle").success


def test_duplicates_and_empty_answers_fail_by_name():
    items = [QAItem("a", "Q?", ["x"], "nq"), QAItem("a", "Q?", ["x"], "nq"), QAItem("b", "Q?", [], "nq"),
             QAItem("c", " ", [" "], "nq")]
    with pytest.raises(DataQualityError) as info:
        validate_benchmark(items, "nq")
    message = str(info.value)
    for expectation in ("expect_column_values_to_be_unique", "num_golden_answers", "shortest_golden_answer",
                        "expect_column_values_to_match_regex"):
        assert expectation in message


def test_empty_benchmark_fails():
    with pytest.raises(DataQualityError, match="row_count"):
        validate_benchmark([], "nq")
