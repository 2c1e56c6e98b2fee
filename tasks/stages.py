"""One Prefect task per DVC stage run: ``dvc repro --single-item <stage>``, streamed into the task log.

Running stages through DVC (rather than calling the CLI directly) keeps every output versioned in
dvc.lock and skips a stage whose inputs did not change. Transient failures (a killed worker, an
unreachable endpoint) are retried; deterministic ones (bad params: exit 2, a failed data-quality
gate: exit 3) are not, because a retry would fail the same way.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from searchplay.pipeline import stage_environment, stream

NOT_RETRIED_EXIT_CODES = {2, 3}  # configuration error or an unusable input, failed data-quality gate
STAGE_EXIT = re.compile(r"failed to run: .*, exited with (-?\d+)$")  # DVC's line; DVC itself exits 255
ITERATION_LINE = re.compile(r"iteration\s+(\d+)\s*/\s*(\d+)", re.IGNORECASE)


def retry_unless_deterministic(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retry condition: retry everything but bad params and failed data-quality gates."""
    error = state.data if isinstance(state.data, BaseException) else None
    return not (isinstance(error, subprocess.CalledProcessError) and error.returncode in NOT_RETRIED_EXIT_CODES)


def stage_exit_code(lines: list[str], dvc_code: int) -> int:
    """The stage command's own exit code from DVC's ``failed to run: <cmd>, exited with N`` line: ``dvc repro``
    exits 255 whatever the stage's code, which would make every failure look retryable. ``dvc_code`` where no
    such line is (DVC failed before the command, say)."""
    for line in reversed(lines):
        if match := STAGE_EXIT.search(line):
            return int(match.group(1))
    return dvc_code


def dvc_executable() -> str:
    return str(Path(sys.executable).parent / "dvc")


def repro_command(stage: str, force: bool = False) -> list[str]:
    """``dvc repro --single-item <stage>``; ``force`` re-runs it although nothing changed."""
    return [dvc_executable(), "repro", "--single-item", *(["--force"] if force else []), stage]


def remove_saved_answers(stage: str, root: Path) -> list[Path]:
    """Remove an evaluation stage's predictions (its resume log, a ``persist: true`` output, which DVC keeps even
    under ``--force``), so that a forced evaluation answers every question again instead of reusing them. Other
    persisted outputs (a warm-start's folder, a self-play question pool) are left alone. Returns what it removed."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        found = repo.stage.collect(f"{Path(root).resolve() / 'dvc.yaml'}:{stage}")  # not relative to the cwd
        paths = [Path(out.fs_path) for one in found for out in one.outs
                 if out.persist and Path(out.def_path).name == "predictions"]
    removed = [path for path in paths if path.exists()]
    for path in removed:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return removed


@task(retries=2, retry_delay_seconds=[30, 120], retry_condition_fn=retry_unless_deterministic,
      task_run_name="dvc repro {stage}")
def reproduce_stage(stage: str, root: str = ".", force: bool = False) -> list[str]:
    """Reproduce one DVC stage; returns the log lines that say which stages ran or were skipped. A failure is a
    ``CalledProcessError`` with the stage command's own exit code (``stage_exit_code``), which the retry
    condition reads.

    Self-play prints ``iteration i/n`` lines; they drive a Prefect progress artifact so the UI shows
    how far a long retrain has got.
    """
    logger = get_run_logger()
    progress_id = None
    summary, lines = [], []
    try:
        for line in stream(repro_command(stage, force), Path(root), stage_environment()):
            logger.info(line)
            lines = [*lines[-49:], line]
            if line.startswith(("Running stage", "Stage '")):
                summary.append(line)
            match = ITERATION_LINE.search(line)
            if match:
                done, total = int(match.group(1)), int(match.group(2))
                percent = 100.0 * done / max(total, 1)
                if progress_id is None:
                    progress_id = create_progress_artifact(progress=percent, description=f"{stage}: iterations")
                else:
                    update_progress_artifact(progress_id, progress=percent)
    except subprocess.CalledProcessError as error:
        raise subprocess.CalledProcessError(stage_exit_code(lines, error.returncode), error.cmd) from None
    return summary
