"""Data-quality gates: Great Expectations suites for every dataset that crosses a stage boundary.

``validate_dataframe(df, expectations, name)`` runs a list of GE 1.x expectations on a pandas
DataFrame in an ephemeral context (nothing written to disk) and returns a ``QualityReport``; when
any expectation fails it raises ``DataQualityError`` whose message names each failed expectation,
its column and a few offending rows, e.g.::

    data quality check 'kg_subgraphs' failed: 1 of 5 expectations
      - expect_column_values_to_be_between(column='num_hops', min_value=3, max_value=7):
        2 of 120 rows unexpected; rows [4, 17]; values [2, 9]

Great Expectations is imported lazily (its import costs 1.3-7.6 s), and only where no passed verdict on the
same rows is kept (``searchplay.quality.verdicts``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Great Expectations logs ~140 INFO lines per validation, many at import time (before any gate runs):
# quiet it as soon as this package is imported, unless the run asked for debug logging (--verbose).
QUIET_GX = logging.getLogger().getEffectiveLevel() > logging.DEBUG
# Its modules that set their own logger to INFO on import (each ephemeral context says where its docs would go).
GX_LOUD_MODULES = ("great_expectations.data_context.types.base",)
if QUIET_GX:
    logging.getLogger("great_expectations").setLevel(logging.WARNING)

log = logging.getLogger(__name__)

MAX_SHOWN = 10  # offending rows / values listed per failed expectation


@dataclass
class ExpectationOutcome:
    """One expectation's result in plain data."""

    expectation: str
    kwargs: dict[str, Any]
    success: bool
    unexpected_count: int = 0
    unexpected_rows: list[int] = field(default_factory=list)
    unexpected_values: list[Any] = field(default_factory=list)

    def describe(self, num_rows: int) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        head = f"{self.expectation}({args})"
        if self.success:
            return f"{head}: ok"
        detail = f"{self.unexpected_count} of {num_rows} rows unexpected"
        if self.unexpected_rows:
            detail += f"; rows {self.unexpected_rows[:MAX_SHOWN]}"
        if self.unexpected_values:
            detail += f"; values {self.unexpected_values[:MAX_SHOWN]}"
        return f"{head}:\n    {detail}"


@dataclass
class QualityReport:
    """The outcome of one suite on one DataFrame."""

    name: str
    num_rows: int
    outcomes: list[ExpectationOutcome]

    @property
    def success(self) -> bool:
        return all(outcome.success for outcome in self.outcomes)

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [outcome for outcome in self.outcomes if not outcome.success]

    def __str__(self) -> str:
        if self.success:
            return f"data quality check {self.name!r} passed: {len(self.outcomes)} expectations on {self.num_rows} rows"
        lines = [f"data quality check {self.name!r} failed: {len(self.failed)} of {len(self.outcomes)} expectations"]
        lines += [f"  - {outcome.describe(self.num_rows)}" for outcome in self.failed]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "num_rows": self.num_rows, "success": self.success,
                "expectations": [vars(outcome) for outcome in self.outcomes]}


class DataQualityError(ValueError):
    """A dataset failed its expectation suite; ``report`` holds the details, ``str()`` is readable."""

    def __init__(self, report: QualityReport):
        super().__init__(str(report))
        self.report = report


def _outcome(result: Any) -> ExpectationOutcome:
    config = result.expectation_config
    kwargs = {k: v for k, v in dict(config.kwargs).items() if k not in {"batch_id", "result_format"}}
    details = result.result or {}
    return ExpectationOutcome(
        expectation=config.type, kwargs=kwargs, success=bool(result.success),
        unexpected_count=int(details.get("unexpected_count") or 0),
        unexpected_rows=[int(i) for i in details.get("unexpected_index_list") or [] if isinstance(i, int | float)],
        unexpected_values=list(details.get("partial_unexpected_list") or []),
    )


def _from_dict(kept: dict[str, Any]) -> QualityReport:
    return QualityReport(name=kept["name"], num_rows=kept["num_rows"],
                         outcomes=[ExpectationOutcome(**outcome) for outcome in kept["expectations"]])


def validate_dataframe(df: Any, expectations: Sequence[Any], name: str, raise_on_failure: bool = True) -> QualityReport:
    """Run GE expectations on ``df``; raise ``DataQualityError`` (readable report) if any fails.

    ``expectations`` are ``Expect`` specs (``searchplay.quality.verdicts``; a pass on the same rows is then
    looked up instead of run again) or GE 1.x expectation objects, e.g.
    ``great_expectations.expectations.ExpectColumnValuesToBeUnique(column="id")``.
    """
    from searchplay.quality.verdicts import Expect, keep_verdict, read_verdict, verdict_key

    key = verdict_key(df, expectations, name)
    if key is not None and (kept := read_verdict(key)) is not None:
        log.info("data quality check %r: these %d rows passed it before (kept verdict)", name, len(df))
        return _from_dict(kept)
    report = _run_suite(df, [e.build() if isinstance(e, Expect) else e.copy() for e in expectations], name)
    if key is not None and report.success:
        keep_verdict(key, report.to_dict())
    if raise_on_failure and not report.success:
        raise DataQualityError(report)
    return report


def _run_suite(df: Any, expectations: list[Any], name: str) -> QualityReport:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    if QUIET_GX:
        for module in GX_LOUD_MODULES:
            logging.getLogger(module).setLevel(logging.WARNING)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = (context.data_sources.add_pandas(f"{name}_source")
             .add_dataframe_asset(name=name)
             .add_batch_definition_whole_dataframe("all")
             .get_batch(batch_parameters={"dataframe": df}))
    suite = gx.ExpectationSuite(name=f"{name}_suite", expectations=expectations)
    result = batch.validate(suite, result_format={"result_format": "COMPLETE"})
    return QualityReport(name=name, num_rows=len(df), outcomes=[_outcome(r) for r in result.results])
