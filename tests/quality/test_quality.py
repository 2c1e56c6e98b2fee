"""The shared validate_dataframe helper: a passing suite reports, a failing one raises readably."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from searchplay.quality import DataQualityError, validate_dataframe


@pytest.fixture(scope="module")
def gxe():
    import great_expectations.expectations as gxe

    return gxe


def test_passing_suite_returns_report(gxe):
    df = pd.DataFrame({"id": ["a", "b"], "n": [3, 4]})
    report = validate_dataframe(df, [gxe.ExpectColumnValuesToBeUnique(column="id")], "ok_frame")
    assert report.success and report.num_rows == 2
    assert "passed" in str(report)


def test_failing_suite_names_expectation_rows_and_values(gxe):
    df = pd.DataFrame({"id": ["a", "b", "c"], "n": [3, 9, 2]})
    expectations = [gxe.ExpectColumnValuesToBeBetween(column="n", min_value=3, max_value=7),
                    gxe.ExpectColumnValuesToBeUnique(column="id")]
    with pytest.raises(DataQualityError) as info:
        validate_dataframe(df, expectations, "bad_frame")
    message = str(info.value)
    assert "bad_frame" in message and "expect_column_values_to_be_between" in message
    assert "2 of 3 rows" in message and "[1, 2]" in message
    assert len(info.value.report.failed) == 1


def test_no_raise_mode_returns_failed_report(gxe):
    df = pd.DataFrame({"id": ["a", "a"]})
    report = validate_dataframe(df, [gxe.ExpectColumnValuesToBeUnique(column="id")], "dups", raise_on_failure=False)
    assert not report.success and report.failed[0].unexpected_count == 2



SCRIPT = """
import logging
logging.basicConfig(level=logging.{level})
import pandas as pd
import searchplay.quality.corpus
import great_expectations.expectations as gxe
from searchplay.quality import validate_dataframe
validate_dataframe(pd.DataFrame({{"id": ["a"]}}), [gxe.ExpectColumnValuesToBeUnique(column="id")], "one")
"""


def ge_lines(level: str) -> int:
    environment = {**os.environ, "SEARCHPLAY_QUALITY_VERDICTS": "off"}  # the suite runs, no kept verdict
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(level=level)], capture_output=True, text=True,
                            env=environment)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stderr.count("great_expectations")


@pytest.mark.slow  # two fresh interpreters import Great Expectations
def test_great_expectations_logs_only_under_debug():
    """Its import and a validation log dozens of INFO lines (one module sets its own logger to INFO: each
    ephemeral context says where its docs would go); quiet at INFO, heard under --verbose (debug)."""
    assert ge_lines("INFO") == 0
    assert ge_lines("DEBUG") > 0
