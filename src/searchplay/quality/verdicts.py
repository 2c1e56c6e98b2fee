"""Passed verdicts of the data-quality gates, kept by content, so a gate that saw these rows pass does not
import Great Expectations again.

Every evaluation stage validates the same benchmark rows (the suite checks the loaded set, not the sample), and
Great Expectations costs a process 1.3 s to import on an AVX512-BF16 EPYC and 7.6 s on a slower fp32 one; a
verdict is a pure function of the rows, the suite and the Great Expectations version, so a second look is the
first one's answer. Only a pass is kept: a failure runs the suite again, so its report (rows, values) is always
Great Expectations' own. A verdict lives in ``$SEARCHPLAY_HOME/quality/<key>.json`` (or the folder
``SEARCHPLAY_QUALITY_VERDICTS`` names); deleting it only costs the next gate its import.
``SEARCHPLAY_QUALITY_VERDICTS=off`` turns the lookup off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

VERDICTS_ENV = "SEARCHPLAY_QUALITY_VERDICTS"
KEY_VERSION = 1  # bump when what a key covers changes


@dataclass(frozen=True)
class Expect:
    """One Great Expectations expectation as plain data: its class in ``great_expectations.expectations`` and
    its arguments, so a suite can be named (and its verdict looked up) before Great Expectations is imported.

    >>> Expect("ExpectColumnValuesToBeUnique", {"column": "id"}).describe()
    ['ExpectColumnValuesToBeUnique', {'column': 'id'}]
    """

    kind: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> list[Any]:
        return [self.kind, self.kwargs]

    def build(self) -> Any:
        import great_expectations.expectations as gxe

        return getattr(gxe, self.kind)(**self.kwargs)


def verdicts_dir() -> Path:
    """``$SEARCHPLAY_QUALITY_VERDICTS`` where it names a folder, else ``$SEARCHPLAY_HOME/quality``."""
    from searchplay.assets import home

    chosen = os.environ.get(VERDICTS_ENV, "")
    return Path(chosen).expanduser() if chosen not in ("", "off") else home() / "quality"


def _rows_digest(df: Any) -> bytes:
    """The rows' content: column names and dtypes, then every value with its index (pandas' own row hash; the
    CSV text where a column holds unhashable values such as lists)."""
    import pandas as pd

    head = json.dumps([[str(c), str(t)] for c, t in df.dtypes.items()]).encode()
    try:
        body = pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes()
    except TypeError:
        body = df.to_csv().encode()
    return hashlib.sha256(head + body).digest()


def verdict_key(df: Any, expectations: Sequence[Any], name: str) -> str | None:
    """The key of this suite on these rows, or None where an expectation is a Great Expectations object (whose
    configuration would need the import this saves)."""
    if os.environ.get(VERDICTS_ENV, "on") == "off" or not all(isinstance(e, Expect) for e in expectations):
        return None
    suite = json.dumps([KEY_VERSION, version("great_expectations"), name, [e.describe() for e in expectations]],
                       sort_keys=True, default=str)
    return hashlib.sha256(suite.encode() + _rows_digest(df)).hexdigest()


def read_verdict(key: str) -> dict[str, Any] | None:
    """A kept passed verdict (``QualityReport.to_dict``), or None; an unreadable file counts as none."""
    path = verdicts_dir() / f"{key}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def keep_verdict(key: str, report: dict[str, Any]) -> None:
    """Keep a passed verdict; a folder that cannot be written costs only the next lookup (logged, not raised)."""
    from searchplay.io import atomic_write

    try:
        verdicts_dir().mkdir(parents=True, exist_ok=True)
        with atomic_write(verdicts_dir() / f"{key}.json") as handle:
            json.dump(report, handle)
    except OSError as exc:
        log.info("data-quality verdict not kept (%s): the next gate on these rows runs the suite again", exc)
