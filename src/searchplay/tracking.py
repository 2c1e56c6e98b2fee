"""MLflow helpers: experiment per stage, run per variant, flat params, provenance tags.

The tracking store defaults to a sqlite file in the working directory (MLflow's file store is in
maintenance mode and raises); ``MLFLOW_TRACKING_URI`` or ``tracking.uri`` in params overrides it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from searchplay.config import Params

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
MAX_PARAM_LENGTH = 500  # MLflow rejects longer param values


def tracking_uri(params: Params) -> str:
    import os

    return params.tracking.uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def git_commit(cwd: str | Path = ".") -> str:
    """The checked-out commit, suffixed ``-dirty`` when the tree has changes; 'unknown' outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def dvc_stage_hashes(lock_file: str | Path = "dvc.lock") -> dict[str, str]:
    """``dvc.stage.<name>`` -> md5 of the stage's recorded command+deps, from dvc.lock (if any)."""
    import hashlib
    import json

    import yaml

    path = Path(lock_file)
    if not path.exists():
        return {}
    stages = (yaml.safe_load(path.read_text()) or {}).get("stages", {})
    # MLflow tag keys allow letters, digits, '_-./ ' only: selfplay@kg_wcr -> dvc.stage.selfplay/kg_wcr
    return {f"dvc.stage.{name.replace('@', '/')}":
            hashlib.md5(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
            for name, body in stages.items()}


def flat_params(params: Params) -> dict[str, str]:
    return {key: str(value)[:MAX_PARAM_LENGTH] for key, value in params.flat().items()}


@contextmanager
def start_run(params: Params, stage: str, run_name: str, tags: dict[str, Any] | None = None,
              nested: bool = False) -> Iterator[Any]:
    """Open an MLflow run in experiment ``<prefix>-<stage>`` with params and provenance tags."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri(params))
    mlflow.set_experiment(f"{params.tracking.experiment_prefix}-{stage}")
    with mlflow.start_run(run_name=run_name, nested=nested) as run:
        if not nested:
            mlflow.log_params(flat_params(params))
        mlflow.set_tags({"git_commit": git_commit(), "params_hash": params.digest(), "stage": stage,
                         **dvc_stage_hashes(), **(tags or {})})
        yield run


def register_model(run_id: str, model_dir: str | Path, variant: str, scores: dict[str, float],
                   params: Params) -> str:
    """Register an evaluated checkpoint as a version of ``searchplay-<variant>`` in the model registry.

    The version's source is the checkpoint folder itself (no copy of hundreds of MB into the artifact
    store); its tags carry the variant, the scores and the judge, so the registry answers "which
    checkpoint scored what". Returns the version number.
    """
    import mlflow
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    mlflow.set_tracking_uri(tracking_uri(params))
    client = MlflowClient()
    name = f"{params.tracking.experiment_prefix}-{variant}"
    try:
        client.create_registered_model(name, description=f"searchplay policy trained with the {variant} variant")
    except MlflowException as exc:
        if "RESOURCE_ALREADY_EXISTS" not in str(exc.error_code):
            raise
    tags = {"variant": variant, **{f"score.{k}": f"{v:.4f}" for k, v in scores.items()}}
    version = client.create_model_version(name, source=str(Path(model_dir).resolve()), run_id=run_id, tags=tags)
    return str(version.version)
