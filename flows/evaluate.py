"""The ``evaluate`` flow: evaluation of each variant's latest checkpoint and the comparison report."""

from __future__ import annotations

import sys
from pathlib import Path

from prefect import flow

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # Prefect loads this file by path; make `flows`/`tasks` importable

from flows.retrain import selected_variants  # noqa: E402
from tasks.stages import reproduce_stage  # noqa: E402


@flow(name="evaluate", log_prints=True)
def evaluate(variants: list[str] | None = None, root: str = str(REPO_ROOT), force: bool = False,
             ) -> dict[str, list[str]]:
    """Re-run ``evaluate@<variant>`` and the ``report`` stage: skipped when nothing changed, unless ``force``,
    which evaluates every question again (e.g. after a change the stage's dependencies do not see, such
    as a new judge endpoint behind the same params)."""
    ran = {f"evaluate@{v}": reproduce_stage(f"evaluate@{v}", root, force)
           for v in selected_variants(Path(root), variants)}
    ran["report"] = reproduce_stage("report", root, force)
    return ran


if __name__ == "__main__":
    evaluate()
