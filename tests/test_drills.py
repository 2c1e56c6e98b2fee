"""The fault drills (benchmarks/drills.py): every drill holds.

The script runs once (about 70 s on 2 shared cores: real CLI subprocesses, a server on 127.0.0.1,
MLflow on sqlite) and each drill's row of its table is one test case.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "drills.py"


def load_drills():
    """benchmarks/drills.py as a module (registered first: its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location("searchplay_drills", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DRILL_NAMES = [drill.name for drill in load_drills().DRILLS]
def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def drill_table() -> dict[str, list[str]]:
    """drill name -> its row's cells (expected, observed, data lost, held), from one run of the whole script."""
    result = run_script()
    rows = [line.strip().strip("|").split(" | ") for line in result.stdout.splitlines() if line.startswith("| ")]
    table = {cells[0].strip(): [cell.strip() for cell in cells[1:]] for cells in rows[1:]}  # rows[0]: the header
    assert set(table) == set(DRILL_NAMES), result.stdout + result.stderr
    held = sum(cells[3] == "yes" for cells in table.values())
    assert f"{held} of {len(DRILL_NAMES)} drills held" in result.stdout
    assert result.returncode == (0 if held == len(DRILL_NAMES) else 1)
    return table


@pytest.mark.slow
@pytest.mark.parametrize("name", DRILL_NAMES)
def test_drill_holds(drill_table, name):
    expected, observed, data_lost, held = drill_table[name]
    assert data_lost == "no", f"{name}: {observed}"
    assert held == "yes", f"{name}: expected {expected}; observed {observed}"


def test_list_and_unknown_names():
    listed = run_script("--list")
    assert listed.returncode == 0 and [line.split()[0] for line in listed.stdout.splitlines()] == DRILL_NAMES
    unknown = run_script("--only", "no-such-drill")
    assert unknown.returncode == 2 and "unknown drill(s) no-such-drill" in unknown.stderr
