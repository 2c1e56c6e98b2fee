"""Timings live apart from results, so a rerun that changes nothing leaves ``git status`` clean.

Wall-clock seconds and throughput differ on every run, even when every answer and weight is the same. A
stage therefore writes them to ``timings.json`` beside its reports (``reports/warmstart/timings.json``,
``reports/selfplay/<variant>/timings.json``, ``reports/eval/<variant>/timings.json``) and keeps them out of
the ``metrics.json``, ``history.csv`` and ``run.json`` files that DVC hashes and compares. ``.dvcignore``
lists ``timings.json``, so DVC neither hashes it as part of a directory nor sees a stage as changed when only
its timings moved; git tracks the files, and MLflow still gets every timing as a metric.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from searchplay.io import write_json

TIMINGS_FILE = "timings.json"
_PREFIXES = ("time/", "throughput/")
_SUFFIXES = ("seconds", "_s")  # durations (``elapsed_s``) and rates (``tokens_per_s``) alike


def is_timing(key: str) -> bool:
    """Whether a metric or column name is a duration or a rate, i.e. machine-dependent. By name: a result
    column must therefore not end in ``_s``.

    >>> [is_timing(k) for k in ("time/solve_s", "train/seconds", "tokens_per_s", "elapsed_s", "train/loss")]
    [True, True, True, True, False]
    """
    return key.startswith(_PREFIXES) or key.rsplit("/", 1)[-1].endswith(_SUFFIXES)


def split_timings(metrics: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results, timings): ``metrics`` cut by ``is_timing``, each keeping its order."""
    results = {k: v for k, v in metrics.items() if not is_timing(k)}
    return results, {k: v for k, v in metrics.items() if is_timing(k)}


def timing_rows(rows: Iterable[Mapping[str, Any]], index: str) -> list[dict[str, Any]]:
    """Each row's ``index`` (e.g. ``iteration``) and its timing columns."""
    return [{index: row.get(index), **split_timings(row)[1]} for row in rows]


def write_timings(folder: str | Path, timings: Mapping[str, Any]) -> Path:
    """Write ``<folder>/timings.json`` (the file ``.dvcignore`` keeps out of DVC's hashes)."""
    path = Path(folder) / TIMINGS_FILE
    write_json(path, dict(timings))
    return path


def read_timings(folder: str | Path) -> dict[str, Any]:
    """``<folder>/timings.json`` as written, or {} where there is none."""
    path = Path(folder) / TIMINGS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
