"""The ``evaluate`` flow: evaluation of the reference models and each variant's latest checkpoint, then the
comparison report."""

from __future__ import annotations

import sys
from pathlib import Path

from prefect import flow

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # Prefect loads this file by path; make `flows`/`tasks` importable

from flows.retrain import one_flow_at_a_time, reference_stages, selected_variants  # noqa: E402
from tasks.stages import remove_saved_answers, reproduce_stage  # noqa: E402


def evaluation_stages(root: Path, variants: list[str] | None) -> list[str]:
    """The stages the flow re-runs, in order: the reference models' evaluations, so that a forced
    re-evaluation re-scores every row the report compares, then ``evaluate@<variant>`` per chosen variant."""
    return reference_stages(root) + [f"evaluate@{v}" for v in selected_variants(root, variants)]


@flow(name="evaluate", log_prints=True)
def evaluate(variants: list[str] | None = None, root: str = str(REPO_ROOT), force: bool = False,
             ) -> dict[str, list[str]]:
    """Re-run the evaluation stages and the ``report`` stage: skipped when nothing changed, unless ``force``,
    which evaluates every question again (e.g. after a change the stage's dependencies do not see, such
    as a new judge endpoint behind the same params)."""
    with one_flow_at_a_time(Path(root), "evaluate"):
        stages = evaluation_stages(Path(root), variants)
        if force:  # once, before the tasks: a retry of a forced task keeps what its failed attempt answered
            for path in (p for stage in stages for p in remove_saved_answers(stage, Path(root))):
                print(f"forced: removed {path} (DVC keeps it under --force), so every question is asked again")
        ran = {stage: reproduce_stage(stage, root, force) for stage in stages}
        ran["report"] = reproduce_stage("report", root, force)
    return ran


if __name__ == "__main__":
    evaluate()
