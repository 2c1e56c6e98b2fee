"""The comparison report in MLflow: its figures as images, its paired tests and budgets as two tables.

``searchplay report`` runs inside run ``compare`` of ``<prefix>-report``. That run gets the report's charts as
images, which the MLflow UI shows in the experiment's chart view: section ``glance`` first (``glance.png``, the
"At a glance" comparison with its four paired tests per model pair), then section ``report``; and the numbers
behind them as tables (``mlflow.log_table``), which its
artifact view shows as tables: ``paired_tests.json``, one row per model pair and scope, and
``selfplay_budget.json``, one row per self-play run. The run logs no scalar metrics: one run's scalars are
single-bar charts, hundreds of them; the same numbers stay in ``metrics.json`` (a DVC metrics file) and the
tables (docs/usage.md, "Compare variants in MLflow").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# the report's charts by MLflow image key: the part before "/" names the chart view's section, "glance" first
IMAGES = {"glance": "glance/paired_tests", "behaviour": "report/behaviour", "compare": "report/compare",
          "retrieval": "report/retrieval", "selfplay": "report/selfplay"}
TEST_FAMILIES = ("paired", "behaviour", "coverage")  # metrics.json prefixes of the paired tests
PAIRED_TESTS_TABLE = "paired_tests.json"
BUDGET_TABLE = "selfplay_budget.json"


def paired_test_rows(metrics: dict[str, float]) -> list[dict[str, Any]]:
    """One row per model pair and scope from ``metrics.json``'s ``<family>.<A>_vs_<B>.<scope>.<field>`` keys, with
    a ``<family>/<field>`` column per test field (None where that test was not run for the pair), in the order of
    the report's tables. Not a dot: MLflow's table view reads a dotted column name as a path into the row and
    shows its cells empty.

    >>> paired_test_rows({"paired.a_vs_b.pooled.p": 0.5, "behaviour.a_vs_b.pooled.n": 3, "a.nq.em": 1.0})
    [{'comparison': 'a vs b', 'scope': 'pooled', 'paired/p': 0.5, 'behaviour/n': 3}]
    """
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for key, value in metrics.items():
        parts = key.split(".")
        if parts[0] not in TEST_FAMILIES or len(parts) < 4:
            continue
        family, *pair, scope, name = parts
        label = ".".join(pair).replace("_vs_", " vs ", 1)
        row = rows.setdefault((label, scope), {"comparison": label, "scope": scope})
        row[f"{family}/{name}"] = value
    return list(rows.values())


def budget_rows(metrics: dict[str, float]) -> list[dict[str, Any]]:
    """One row per self-play run from ``metrics.json``'s ``budget.<run>.<name>`` keys.

    >>> budget_rows({"budget.ssp.iterations": 2.0, "budget.ssp.tokens": 909.0})
    [{'self-play run': 'ssp', 'iterations': 2.0, 'tokens': 909.0}]
    """
    rows: dict[str, dict[str, Any]] = {}
    for key, value in metrics.items():
        parts = key.split(".")
        if parts[0] == "budget" and len(parts) >= 3:
            label = ".".join(parts[1:-1])
            rows.setdefault(label, {"self-play run": label})[parts[-1]] = value
    return list(rows.values())


def columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Rows as the column dict ``mlflow.log_table`` takes, every column as long as the rows (None where missing)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {name: [row.get(name) for row in rows] for name in names}


def log_comparison(out: str | Path) -> None:
    """Log the report under ``out`` to the active MLflow run (the report's, which spans the comparison): its
    charts as images, its paired tests and self-play budgets as tables, and every report file as an artifact."""
    import mlflow

    out = Path(out)
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    for name, key in IMAGES.items():
        if (out / f"{name}.png").is_file():
            mlflow.log_image(mlflow.Image(str(out / f"{name}.png")), key=key)
    for rows, artifact in ((paired_test_rows(metrics), PAIRED_TESTS_TABLE), (budget_rows(metrics), BUDGET_TABLE)):
        if rows:
            mlflow.log_table(columns(rows), artifact_file=artifact)
    mlflow.log_artifacts(str(out), artifact_path="compare")
