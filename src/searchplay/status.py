"""``searchplay status``: what a recovery needs to know, in one screen. Entry point: ``collect``.

- **MLflow runs still RUNNING.** A stage killed by SIGKILL or the out-of-memory killer cannot end its run; the
  next start of a run in the same experiment ends it KILLED. ``status`` does that sweep now, for every
  ``<prefix>-*`` experiment, and lists what it ended and what is still running (with its pid and host).
- **What a re-run resumes from.** The warm-starts' resume states (``<out_dir>/resume/``) and each self-play
  variant's newest complete checkpoint (``<selfplay.checkpoint_dir>/<variant>/resume/iter_NNNNNN``); a re-run of
  the stage (``dvc repro`` or the stage's own command) continues from there; and each evaluation that saved
  answers and did not finish (``<evaluate.out_dir>/<model>/predictions/`` holding other counts than its last
  scores), which a re-run of the same model, settings and code does not ask again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from searchplay.config import Params
from searchplay.model_paths import RESUME_DIR, WARMSTARTS, complete_checkpoints, selfplay_variants, warmstart_out_dir


@dataclass
class OpenRun:
    """An MLflow run that was RUNNING when ``status`` looked."""

    experiment: str
    name: str
    run_id: str
    host: str
    pid: str
    ended_now: bool  # its process was gone: ended KILLED by this call


@dataclass
class ResumePoint:
    """A state a re-run of ``stage`` continues from."""

    stage: str
    path: Path
    detail: str


def open_runs(params: Params) -> list[OpenRun]:
    """Every RUNNING run of this project's experiments, after ending KILLED those whose process is gone."""
    from mlflow import MlflowClient

    from searchplay.tracking import HOST_TAG, PID_TAG, end_stale_runs, tracking_uri, use_store

    uri = tracking_uri(params)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        return []  # no store yet: nothing ran here (opening it would create an empty one)
    use_store(uri)
    client = MlflowClient()
    prefix = f"{params.tracking.experiment_prefix}-"
    found = []
    for experiment in client.search_experiments():
        if not experiment.name.startswith(prefix):
            continue
        ended = set(end_stale_runs(experiment.experiment_id))
        for run_id in sorted(ended):
            run = client.get_run(run_id)
            found.append(OpenRun(experiment.name, run.info.run_name, run_id, run.data.tags.get(HOST_TAG, "?"),
                                 run.data.tags.get(PID_TAG, "?"), ended_now=True))
        for run in client.search_runs([experiment.experiment_id], "attributes.status = 'RUNNING'", max_results=1000):
            found.append(OpenRun(experiment.name, run.info.run_name, run.info.run_id, run.data.tags.get(HOST_TAG, "?"),
                                 run.data.tags.get(PID_TAG, "?"), ended_now=False))
    return found


def resume_points(params: Params) -> list[ResumePoint]:
    """The warm-start resume states and each self-play variant's newest complete checkpoint."""
    points = []
    for name, warmstart in WARMSTARTS.items():  # the shared one and the recipes' (their stage: their model name)
        state = warmstart_out_dir(params, name) / "resume"
        if state.is_dir():
            age = time.time() - state.stat().st_mtime
            points.append(ResumePoint(warmstart.model, state, f"SFT state saved {age / 60:.0f} min ago"))
    root = Path(params.selfplay.checkpoint_dir)
    for variant in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        complete = complete_checkpoints(variant / RESUME_DIR)
        if complete:
            iteration, path = complete[-1]
            partial = " (an unfinished .partial beside it is dropped on resume)" if any(
                (variant / RESUME_DIR).glob("iter_*.partial")) else ""
            points.append(ResumePoint(f"selfplay@{variant.name}", path, f"iteration {iteration}{partial}"))
    return points + unfinished_evaluations(Path(params.evaluate.out_dir))


def unfinished_evaluations(out_dir: Path) -> list[ResumePoint]:
    """Each ``<model>/predictions/`` with answers and no scores, or whose answers to a benchmark its last scores
    counted (``sample.json``, else ``metrics.json``) are not that count (a finished evaluation rewrites each file to
    exactly its questions): answers of an evaluation that stopped before its scores, which its re-run reuses."""
    from searchplay.eval.replacement import asked_before

    points = []
    for model in sorted(p for p in out_dir.iterdir() if p.is_dir()) if out_dir.is_dir() else []:
        saved = {f.stem: sum(1 for line in f.open(encoding="utf-8") if line.strip())
                 for f in sorted((model / "predictions").glob("*.jsonl"))}
        scored = asked_before(model)  # a by-hand run of fewer benchmarks leaves the others' files: not compared
        if not saved or (scored and all(scored[bench] == saved.get(bench) for bench in scored)):
            continue
        answers = sum(saved.values())
        stage = f"evaluate@{model.name}" if model.name in selfplay_variants() else f"evaluate_reference@{model.name}"
        saved_text = f"{answers} answer{'' if answers == 1 else 's'} saved, no scores since"
        points.append(ResumePoint(stage, model / "predictions", saved_text))
    return points


def collect(params: Params) -> tuple[list[OpenRun], list[ResumePoint]]:
    return open_runs(params), resume_points(params)
