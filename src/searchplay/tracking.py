"""MLflow helpers: experiment per stage, run per variant, flat params, provenance tags.

The tracking store defaults to ``mlflow.db``, a sqlite file (MLflow's file store is in maintenance mode
and raises), at the DVC project root; ``MLFLOW_TRACKING_URI`` or ``tracking.uri`` in params overrides it.
A ``dvc exp run --temp`` or ``--queue`` experiment runs its stages in a copy under ``.dvc/tmp/exps`` that
DVC deletes afterwards; DVC names the project it came from in ``DVC_ROOT``, so those runs (and their
artifacts) land in the project's store, tagged with the experiment's name (``dvc.exp_name``).

No run stays RUNNING after its process is gone (docs/decisions/selfplay.md, "Run states"): an exception
ends it FAILED, Ctrl-C or SIGTERM ends it KILLED, and a run whose process was SIGKILLed is ended KILLED
by the next ``start_run`` of its experiment on the same host (runs are tagged with host and pid).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchplay.colors import model_color
from searchplay.config import Params
from searchplay.io import TrackingStoreError, exclusive_outputs, process_alive
from searchplay.redaction import redact_credentials

log = logging.getLogger(__name__)

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
MAX_PARAM_LENGTH = 500  # MLflow rejects longer param values
PAPER_BENCHMARKS = ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
CHAMPION = "champion"  # registry alias of the best version evaluated on all seven paper benchmarks
CHAMPION_SCORE = "avg.judge_acc"  # the papers' average over the seven benchmarks
CHECKPOINT_DIGEST = "checkpoint.digest"  # registry tag: its weights and configs (llm.weights.model_digest)
HOST_TAG, PID_TAG = "process.host", "process.pid"  # who runs a run: the stale-run sweep checks the pid
KILLED, FAILED = "KILLED", "FAILED"  # MLflow run states of a run that did not finish
RUN_COLOR_TAG = "mlflow.runColor"  # the colour the MLflow UI draws a run in: the model's colour in our charts


@dataclass
class EvaluationCoverage:
    """What an evaluation covered: a registered version is only comparable to another of the same coverage."""

    benchmarks: list[str]
    judge: str
    n: dict[str, int] = field(default_factory=dict)  # questions scored per benchmark

    @property
    def full(self) -> bool:
        """All seven paper benchmarks with at least one question each (the basis of the papers' average)."""
        return all(self.n.get(b, 0) > 0 for b in PAPER_BENCHMARKS)

    def tags(self) -> dict[str, str]:
        return {"coverage.benchmarks": ",".join(self.benchmarks), "coverage.judge": self.judge,
                "coverage.n": ",".join(f"{b}={self.n.get(b, 0)}" for b in self.benchmarks),
                "coverage.full": str(self.full).lower()}


def tracking_uri(params: Params) -> str:
    """``tracking.uri``, else ``MLFLOW_TRACKING_URI``, else ``mlflow.db`` at ``DVC_ROOT`` (set by DVC), else here."""
    return params.tracking.uri or os.environ.get("MLFLOW_TRACKING_URI") or _project_default()[0]


def _project_default() -> tuple[str, str | None]:
    """The default store and, inside a DVC stage, the artifact folder beside it (None: MLflow's default)."""
    root = os.environ.get("DVC_ROOT")
    if not root:
        return DEFAULT_TRACKING_URI, None
    return f"sqlite:///{Path(root).resolve() / 'mlflow.db'}", (Path(root).resolve() / "mlruns").as_uri()


_READY_STORES: set[str] = set()  # stores this process has opened (their tables exist)


def use_store(uri: str) -> None:
    """``mlflow.set_tracking_uri(uri)``, a sqlite store's tables made first under a lock beside its file.

    MLflow creates (or migrates) a sqlite store's tables when a process first opens it. Two processes that
    open a new ``mlflow.db`` at once both run that migration, and one fails on a table the other is making
    ("table _alembic_tmp_model_versions already exists"). So the first opening in each process holds
    ``.<store file>.lock`` (released by the kernel when its holder dies); later openings skip it.
    """
    import mlflow

    path = uri.removeprefix("sqlite:///") if uri.startswith("sqlite:///") else None
    if uri not in _READY_STORES:
        with exclusive_outputs(path, "MLflow store setup", wait=True) if path else contextlib.nullcontext():
            _open_store(uri, path)
        _READY_STORES.add(uri)
    mlflow.set_tracking_uri(uri)


def _open_store(uri: str, path: str | None) -> None:
    """Resolve ``uri``'s store (a sqlite one: make or migrate its tables); TrackingStoreError where it cannot be.
    A server is not contacted here (its first request is)."""
    import mlflow
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import OperationalError, SQLAlchemyError

    if path and Path(path).is_dir():  # sqlite cannot open it, and MLflow retries that for minutes
        raise TrackingStoreError(f"{path} is a folder, not an MLflow store; move it away (the next run makes a new "
                                 "one) or point tracking.uri at another store")
    try:
        client = mlflow.MlflowClient(tracking_uri=uri)  # resolves the tracking and registry stores' schemes
        if path:
            client.search_experiments(max_results=1)
    except OperationalError:
        raise  # "database is locked", say: perhaps passing, so not this error (exit 2 is never retried)
    except (MlflowException, SQLAlchemyError) as exc:
        if isinstance(exc.__cause__, OperationalError) or getattr(exc, "error_code", "") == "TEMPORARILY_UNAVAILABLE":
            raise  # MLflow's sqlite store wraps the same OperationalError so
        cause = redact_credentials(str(getattr(exc, "orig", None) or exc).strip().split("\n")[0].split(" See ")[0])
        if path:
            raise TrackingStoreError(f"{path} cannot be opened as an MLflow store ({cause}); move it away (the next "
                                     "run makes a new one) or point tracking.uri at another store") from None
        raise TrackingStoreError(f"{redact_credentials(uri)}: {cause} (set tracking.uri or "
                                 "MLFLOW_TRACKING_URI to a supported store, e.g. sqlite:///mlflow.db)") from None


def _set_experiment(name: str) -> Any:
    """``mlflow.set_experiment``; a new experiment of the default store keeps its artifacts beside the store, and
    every experiment opens in the MLflow UI's classic view of runs (``EXPERIMENT_KIND``).

    MLflow's default artifact folder is ``./mlruns`` of the process creating the experiment, which for a
    stage of a temporary DVC experiment is a copy about to be deleted.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    uri, artifacts = _project_default()
    if artifacts and mlflow.get_tracking_uri() == uri and mlflow.get_experiment_by_name(name) is None:
        with contextlib.suppress(MlflowException):  # created meanwhile by another stage
            mlflow.create_experiment(name, artifact_location=artifacts)
    experiment = mlflow.set_experiment(name)
    if experiment.tags.get(EXPERIMENT_KIND[0]) != EXPERIMENT_KIND[1]:
        mlflow.MlflowClient().set_experiment_tag(experiment.experiment_id, *EXPERIMENT_KIND)
    return experiment


# MLflow 3's UI opens an experiment by this tag: training and evaluation runs, not GenAI traces and judges
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")


def dvc_experiment_tags() -> dict[str, str]:
    """``dvc.exp_name`` and ``dvc.exp_baseline`` of a stage run by ``dvc exp run`` (empty otherwise)."""
    names = {"DVC_EXP_NAME": "dvc.exp_name", "DVC_EXP_BASELINE_REV": "dvc.exp_baseline"}
    return {tag: os.environ[variable] for variable, tag in names.items() if os.environ.get(variable)}


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


def flat_params(params: Params, skip_sections: Collection[str] = (), only: Collection[str] | None = None
                ) -> dict[str, str]:
    """Every param as a string for MLflow, cut to its length limit, with credentials in URLs redacted;
    ``skip_sections`` leaves out the params of work the run did not do (self-play's, for a base model), and
    ``only`` keeps the keys under those names (a DVC stage's params: ``agent``, ``models.policy``)."""
    def kept(key: str) -> bool:
        if only is not None:
            return any(key == name or key.startswith(f"{name}.") for name in only)
        return key.split(".", 1)[0] not in skip_sections

    return {key: redact_credentials(str(value))[:MAX_PARAM_LENGTH] for key, value in params.flat().items()
            if kept(key)}


def in_pipeline() -> bool:
    """Whether this process runs as a DVC stage (``dvc repro``, ``dvc exp run``, the Prefect flows): DVC sets
    ``DVC_ROOT``. Evaluations outside one are ad hoc and kept apart in MLflow."""
    return bool(os.environ.get("DVC_ROOT"))


def experiment_name(params: Params, stage: str) -> str:
    return f"{params.tracking.experiment_prefix}-{stage}"


def chart_view_url(params: Params, stage: str = "evaluate", ui: str = "http://127.0.0.1:5000") -> str | None:
    """The MLflow UI's chart view of one stage's experiment (``mlflow ui`` at ``ui``), or None before it exists.

    Its first section is ``headline``: one bar chart per headline number (``headline/<name>``), a bar per
    model in the model's colour. Named sections sort before MLflow's catch-all "Model metrics".
    """
    import mlflow

    use_store(tracking_uri(params))
    experiment = mlflow.MlflowClient().get_experiment_by_name(experiment_name(params, stage))
    if experiment is None:
        return None
    return f"{ui.rstrip('/')}/#/experiments/{experiment.experiment_id}/runs?compareRunsMode=CHART"


class Terminated(SystemExit):
    """SIGTERM raised as an exception while a run is open, so ``finally`` blocks run and the run ends KILLED."""


@contextmanager
def start_run(params: Params, stage: str, run_name: str, tags: dict[str, Any] | None = None,
              nested: bool = False, run_id: str | None = None, skip_sections: Collection[str] = (),
              only: Collection[str] | None = None) -> Iterator[Any]:
    """Open an MLflow run in experiment ``<prefix>-<stage>`` with params, provenance and process tags; as a DVC
    stage, only that stage's params and its lock entry's hash (``searchplay.dvc_stage``). Outside DVC, ``only``
    names the params the work depends on (as ``flat_params``; None: every param).

    ``run_id`` continues that run instead (a resumed training; ``resumable_run`` says whether it can be).
    The block ending by an exception ends the run FAILED, by Ctrl-C or SIGTERM KILLED. Before a new run
    starts, this experiment's runs left RUNNING by dead processes on this host are ended KILLED.
    """
    import mlflow

    from searchplay.dvc_stage import running_stage, stage_params, stage_tags

    dvc_stage = running_stage() if in_pipeline() and not nested else None
    use_store(tracking_uri(params))
    experiment = _set_experiment(experiment_name(params, stage))
    if not nested:
        for stale in end_stale_runs(experiment.experiment_id):
            log.info("MLflow run %s was left RUNNING by a process that is gone; ended it KILLED", stale)
    with _sigterm_raises(), mlflow.start_run(run_id=run_id, run_name=run_name, nested=nested) as run:
        try:
            if not nested and run_id is None:  # a continued run has these params already (resumable_run)
                kept = stage_params(dvc_stage) if dvc_stage is not None else only  # the stage's own params
                mlflow.log_params(flat_params(params, skip_sections, kept))
            mlflow.set_tags({"git_commit": git_commit(), "params_hash": params.digest(), "stage": stage,
                             HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()),
                             RUN_COLOR_TAG: model_color(run_name),
                             **stage_tags(dvc_stage), **dvc_experiment_tags(), **(tags or {})})
            yield run
        except (KeyboardInterrupt, Terminated):
            mlflow.end_run(KILLED)  # MLflow's own exit would record FAILED
            raise


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises ``Terminated`` (exit status 143) instead of ending the process on
    the spot. Only in the main thread, and only over the default handler (one someone installed stays)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        raise Terminated(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def end_stale_runs(experiment_id: str) -> list[str]:
    """End as KILLED the experiment's RUNNING runs tagged with this host and a pid that is no longer alive
    (SIGKILL, out-of-memory kill, power loss). Runs of other hosts, and untagged ones, are left alone."""
    from mlflow import MlflowClient

    client = MlflowClient()
    host = socket.gethostname()
    running = client.search_runs([experiment_id], max_results=1000, filter_string=(
        f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'"))
    ended = []
    for run in running:
        pid = run.data.tags.get(PID_TAG, "")
        if pid.isdigit() and not process_alive(int(pid)):
            client.set_terminated(run.info.run_id, KILLED)
            ended.append(run.info.run_id)
    return ended


def resumable_run(params: Params, stage: str, run_id: str) -> str | None:
    """``run_id`` when ``start_run(..., run_id=run_id)`` can continue it: it is in this stage's experiment in
    the current tracking store, not deleted, and was started with these params (MLflow refuses to change a
    logged param); else None, and the caller opens a new run."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri(params))
    try:
        run = client.get_run(run_id)
    except MlflowException:
        return None
    experiment = client.get_experiment_by_name(experiment_name(params, stage))
    if experiment is None or run.info.experiment_id != experiment.experiment_id:
        return None
    if run.info.lifecycle_stage != "active" or run.data.tags.get("params_hash") != params.digest():
        return None
    return run_id


def logged_steps(params: Params, run_id: str, key: str) -> set[int]:
    """The steps at which run ``run_id`` has metric ``key``."""
    from mlflow import MlflowClient

    return {metric.step for metric in MlflowClient(tracking_uri(params)).get_metric_history(run_id, key)}


def register_model(run_id: str, model_dir: str | Path, variant: str, scores: dict[str, float],
                   params: Params, coverage: EvaluationCoverage | None = None) -> str:
    """Register an evaluated checkpoint as a version of ``searchplay-<variant>`` in the model registry.

    The version's source is the checkpoint folder itself (no copy of hundreds of MB into the artifact
    store); its tags carry the variant, the scores and the evaluation's coverage (benchmarks, n per
    benchmark, judge), so the registry answers "which checkpoint scored what, on what". A version
    evaluated on all seven paper benchmarks takes the ``champion`` alias (MLflow 3 aliases, not the
    deprecated stages) when its ``avg.judge_acc`` is at least the current champion's under the same
    judge; a partial evaluation never does. Returns the version number.

    A version registered from ``dvc exp run --temp``/``--queue`` points into the copy DVC deletes; its
    ``dvc.exp_name`` tag names the experiment, whose checkpoint ``dvc exp apply <name>`` restores.
    """
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from searchplay.llm.weights import model_digest

    use_store(tracking_uri(params))
    client = MlflowClient()
    name = f"{params.tracking.experiment_prefix}-{variant}"
    try:
        client.create_registered_model(name, description=f"searchplay policy trained with the {variant} variant")
    except MlflowException as exc:
        if "RESOURCE_ALREADY_EXISTS" not in str(exc.error_code):
            raise
    source = str(Path(model_dir).resolve())
    tags = {"variant": variant, **{f"score.{k}": f"{v:.4f}" for k, v in scores.items()},
            **(coverage.tags() if coverage else {}), **dvc_experiment_tags(),
            CHECKPOINT_DIGEST: model_digest(model_dir)}
    version = _same_version(client, name, source, tags)
    if version is not None:
        log.info("%s is registered as version %s of %s with the same scores; no new version", source, version, name)
    else:
        version = str(client.create_model_version(name, source=source, run_id=run_id, tags=tags).version)
    # for a version found again too: a run killed between the version and its alias left it without one
    if coverage and coverage.full and CHAMPION_SCORE in scores and _beats_champion(client, name, coverage,
                                                                                   scores[CHAMPION_SCORE]):
        client.set_registered_model_alias(name, CHAMPION, version)
    return version


def _same_version(client: Any, name: str, source: str, tags: dict[str, str]) -> str | None:
    """The version of ``name`` already registered from this checkpoint (source and digest) with the same scores and
    coverage, if any: an evaluation run again (a ``dvc repro`` of a stage whose answers it kept) adds no version."""
    def evaluation(version_tags: dict[str, str]) -> dict[str, str]:
        return {key: value for key, value in version_tags.items() if not key.startswith(("dvc.", "mlflow."))}

    query = f"name = '{name}' and tags.`{CHECKPOINT_DIGEST}` = '{tags[CHECKPOINT_DIGEST]}'"
    for version in client.search_model_versions(query):
        if version.source == source and evaluation(version.tags) == evaluation(tags):
            return str(version.version)
    return None


def _beats_champion(client: Any, name: str, coverage: EvaluationCoverage, score: float) -> bool:
    """True when there is no champion yet, it was judged otherwise, or ``score`` is at least its score."""
    from mlflow.exceptions import MlflowException

    try:
        champion = client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        return True
    if champion.tags.get("coverage.judge") != coverage.judge:
        return True
    return score >= float(champion.tags.get(f"score.{CHAMPION_SCORE}", "-inf"))
