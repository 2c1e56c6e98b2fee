"""Kept verdicts of the data-quality gates: a pass on the same rows is looked up, anything else runs the suite."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

import searchplay.quality as quality
from searchplay.quality import DataQualityError, validate_dataframe
from searchplay.quality.verdicts import VERDICTS_ENV, Expect, verdict_key

UNIQUE_IDS = [Expect("ExpectColumnValuesToBeUnique", {"column": "id"}),
              Expect("ExpectColumnValuesToBeBetween", {"column": "n", "min_value": 1})]


@pytest.fixture
def suite_runs(monkeypatch, tmp_path) -> list[str]:
    """The names of the frames Great Expectations validated, with the verdicts kept under tmp_path."""
    monkeypatch.setenv(VERDICTS_ENV, str(tmp_path / "verdicts"))
    runs: list[str] = []
    real = quality._run_suite

    def counting(df, expectations, name):
        runs.append(name)
        return real(df, expectations, name)

    monkeypatch.setattr(quality, "_run_suite", counting)
    return runs


def frame(**changes) -> pd.DataFrame:
    return pd.DataFrame({"id": ["a", "b", "c"], "n": [1, 2, 3], **changes})


def test_a_pass_is_kept_and_the_same_rows_are_not_validated_again(suite_runs):
    first = validate_dataframe(frame(), UNIQUE_IDS, "ok")
    second = validate_dataframe(frame(), UNIQUE_IDS, "ok")
    assert suite_runs == ["ok"] and first.success
    assert second.to_dict() == first.to_dict()


def test_other_rows_another_suite_or_name_run_it_again(suite_runs):
    validate_dataframe(frame(), UNIQUE_IDS, "ok")
    validate_dataframe(frame(n=[1, 2, 4]), UNIQUE_IDS, "ok")
    validate_dataframe(frame(), UNIQUE_IDS[:1], "ok")
    validate_dataframe(frame(), UNIQUE_IDS, "other")
    assert suite_runs == ["ok", "ok", "ok", "other"]


def test_a_failure_is_never_kept(suite_runs):
    for _ in range(2):
        with pytest.raises(DataQualityError, match="expect_column_values_to_be_unique"):
            validate_dataframe(frame(id=["a", "a", "c"]), UNIQUE_IDS, "dups")
    assert suite_runs == ["dups", "dups"]


def test_ge_objects_and_the_off_switch_always_run_the_suite(suite_runs, monkeypatch):
    import great_expectations.expectations as gxe

    for _ in range(2):
        validate_dataframe(frame(), [gxe.ExpectColumnValuesToBeUnique(column="id")], "objects")
    monkeypatch.setenv(VERDICTS_ENV, "off")
    for _ in range(2):
        validate_dataframe(frame(), UNIQUE_IDS, "off")
    assert suite_runs == ["objects"] * 2 + ["off"] * 2


def test_an_unreadable_verdict_runs_the_suite(suite_runs, tmp_path):
    validate_dataframe(frame(), UNIQUE_IDS, "ok")
    (kept,) = (tmp_path / "verdicts").glob("*.json")
    kept.write_text("{torn")
    validate_dataframe(frame(), UNIQUE_IDS, "ok")
    assert suite_runs == ["ok", "ok"]


def test_rows_holding_lists_have_a_key_too():
    rows = frame(waypoints=[["x"], ["y", "z"], []])
    assert verdict_key(rows, UNIQUE_IDS, "lists") != verdict_key(frame(waypoints=[["x"], ["y"], []]), UNIQUE_IDS,
                                                                   "lists")


SCRIPT = """
import sys
import pandas as pd
from searchplay.quality import validate_dataframe
from searchplay.quality.verdicts import Expect
validate_dataframe(pd.DataFrame({"id": ["a", "b"]}), [Expect("ExpectColumnValuesToBeUnique", {"column": "id"})], "x")
print("great_expectations" in sys.modules)
"""


@pytest.mark.slow  # one fresh interpreter imports Great Expectations
def test_a_second_process_on_the_same_rows_does_not_import_great_expectations(tmp_path):
    env = {**os.environ, VERDICTS_ENV: str(tmp_path)}
    seen = [subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                           timeout=300).stdout.strip() for _ in range(2)]
    assert seen == ["True", "False"]
