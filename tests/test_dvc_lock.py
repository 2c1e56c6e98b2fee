"""The committed dvc.lock matches the committed code and params.

A stale lock makes a fresh clone's ``dvc repro`` redo every stage from ``kg`` on, and makes the committed
reports look as if they came from other code. Outputs are not checked (a clone has none); code and params
are: every ``src/`` dependency and every params key must hash as the lock says.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DVC = Path(sys.executable).parent / "dvc"


def stale_entries(status: dict) -> list[str]:
    """Stage: path entries whose code or params changed since the lock was written."""
    stale = []
    for stage, changes in status.items():
        for change in changes:
            if not isinstance(change, dict):
                continue
            for path, state in change.get("changed deps", {}).items():
                if path.startswith("src/") or path == "params.yaml":
                    stale.append(f"{stage}: {path} {state}")
    return stale


def test_stale_entries_reads_dvc_status():
    status = {"kg": [{"changed deps": {"src/searchplay/kg": "modified", "data/kg/store": "deleted"}},
                     {"changed outs": {"data/kg/subgraphs.jsonl": "deleted"}}],
              "index": [{"changed deps": {"params.yaml": {"index.fts": "modified"}}}], "report": ["always changed"]}
    assert stale_entries(status) == ["kg: src/searchplay/kg modified", "index: params.yaml {'index.fts': 'modified'}"]


@pytest.mark.skipif(not DVC.exists() or not (ROOT / ".dvc").is_dir(), reason="needs dvc and the repository's .dvc")
def test_committed_lock_matches_the_code_and_params():
    result = subprocess.run([str(DVC), "status", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    stale = stale_entries(json.loads(result.stdout or "{}"))
    assert not stale, ("dvc.lock is stale: re-run the changed stages (`dvc repro`), or `dvc commit` them where "
                       f"only code that does not change their outputs moved: {stale}")
