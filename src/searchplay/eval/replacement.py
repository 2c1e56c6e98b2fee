"""An ad-hoc evaluation never silently replaces a larger one in the same folder.

``searchplay evaluate --benchmarks kg_heldout --variant kg_wcr`` writes to ``reports/eval/kg_wcr/``, where
the main job's evaluation of every benchmark lives; those files are not in DVC's cache (``cache: false``),
so replacing them loses hours of work. Before anything loads, the run compares the most it can ask of each
benchmark (``evaluate.n``; kg_heldout's ``evaluate.kg_heldout_n``) with what the folder's ``sample.json``
(or, without one, ``metrics.json``) says was asked, and stops if a benchmark would go or shrink, unless
``--replace`` says to. A DVC stage is not checked: the params decide what it evaluates, and DVC removes its
``metrics.json`` and ``sample.json`` before it runs (the predictions, a ``persist`` output, stay).
"""

from __future__ import annotations

import json
from pathlib import Path

N_SUFFIX = ".n"  # metrics.json's question count of a benchmark: "<benchmark>.n"


class ReportWouldShrinkError(Exception):
    """The evaluation would replace one of more benchmarks or more questions; the message says what and how."""


def asked_before(out_dir: Path) -> dict[str, int]:
    """Questions per benchmark of the evaluation in ``out_dir``: sample.json's ids, else metrics.json's
    ``<benchmark>.n``; empty when there is none or its files cannot be read (nothing there to keep)."""
    for name in ("sample.json", "metrics.json"):
        try:
            record = json.loads((out_dir / name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(record, dict):
            continue
        if name == "sample.json" and isinstance(ids := record.get("ids"), dict):
            return {bench: len(items) for bench, items in ids.items() if isinstance(items, list)}
        if name == "metrics.json":
            return {key.removesuffix(N_SUFFIX): int(value) for key, value in record.items()
                    if key.endswith(N_SUFFIX) and "." not in key.removesuffix(N_SUFFIX)
                    and isinstance(value, int | float)}
    return {}


def check_replacement(out_dir: Path, asked: dict[str, int]) -> None:
    """Raise ReportWouldShrinkError if the evaluation in ``out_dir`` holds a benchmark that ``asked`` (the
    most questions per benchmark this run can ask) leaves out or asks fewer questions of."""
    before = asked_before(out_dir)
    lost = [f"{bench} ({count} questions; " + (f"this run at most {asked[bench]})" if bench in asked
                                               else "not in this run)")
            for bench, count in before.items() if asked.get(bench, 0) < count]
    if lost:
        raise ReportWouldShrinkError(
            f"{out_dir}/ holds an evaluation this run would replace with a smaller one: {', '.join(lost)}. "
            "Write this one elsewhere (--out DIR, results in DIR/<variant>/), or pass --replace to replace it")
