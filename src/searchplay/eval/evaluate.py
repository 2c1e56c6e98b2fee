"""The evaluate stage: load, gate, sample, solve, judge, score, report, track.

Outputs under ``<evaluate.out_dir>/<variant>/``: ``metrics.json`` (DVC metric, flat numeric keys,
0-100), ``run.json`` (model, judge, protocol, skipped records), ``sample.json`` (the drawn ids),
``predictions/<benchmark>.jsonl`` (per question; also the resume log), ``report.md``/``report.html``
and ``charts/<benchmark>.png``; all logged to MLflow under the variant's run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchplay.config import Params
from searchplay.eval.benchmarks import LoadedBenchmark, QAItem, load_benchmark
from searchplay.eval.report import read_variant_metrics, write_run_report
from searchplay.eval.runner import StageTimes, read_finished, rollout_config, run_benchmark
from searchplay.eval.sampling import sample_items
from searchplay.eval.scoring import benchmark_scores, flat_metrics, group_scores
from searchplay.io import write_json, write_jsonl

log = logging.getLogger(__name__)


@dataclass
class EvalResult:
    out_dir: Path
    metrics: dict[str, float]
    per_benchmark: dict[str, dict[str, float]]
    run: dict[str, Any]
    times: StageTimes = field(default_factory=StageTimes)


def latest_checkpoint(params: Params, variant: str) -> Path | None:
    """The HF model folder of the newest complete self-play checkpoint of ``variant``, or None.

    Layout and completeness rules belong to ``searchplay.selfplay.checkpoint``
    (``<checkpoint_dir>/<variant>/iter_NNNNNN/model/``); the path is resolved so the recorded model
    names the iteration actually evaluated.
    """
    from searchplay.selfplay.checkpoint import latest_model_dir

    found = latest_model_dir(params.selfplay.checkpoint_dir, variant)
    return found.resolve() if found is not None else None


def resolve_model(params: Params, variant: str) -> tuple[str, str]:
    """(model to evaluate, where it came from): ``evaluate.model``, else the latest checkpoint, else the policy."""
    from searchplay import assets

    if params.evaluate.model:
        return assets.resolve(params.evaluate.model), "evaluate.model"
    checkpoint = latest_checkpoint(params, variant)
    if checkpoint is not None:
        return str(checkpoint), "checkpoint"
    log.warning("no self-play checkpoint under %s/%s; evaluating the base model models.policy=%s",
                params.selfplay.checkpoint_dir, variant, params.models.policy)
    return assets.resolve(params.models.policy), "models.policy"


def load_and_sample(params: Params,
                    benchmarks: list[str]) -> tuple[dict[str, list[QAItem]], dict[str, LoadedBenchmark]]:
    """Load every benchmark, run the data-quality gate, draw ``evaluate.n`` items with ``evaluate.seed``."""
    from searchplay.quality.benchmarks import validate_benchmark

    loaded = {name: load_benchmark(name, params) for name in benchmarks}
    for name, bench in loaded.items():
        if bench.num_skipped:
            log.warning("%s: skipped %d malformed records (%s)", name, bench.num_skipped, dict(bench.skipped))
        validate_benchmark(bench.items, name)
    cfg = params.evaluate
    sampled = {name: sample_items(bench.items, cfg.n, cfg.seed) for name, bench in loaded.items()}
    return sampled, loaded


def evaluate(params: Params, variant: str, *, backend: Any = None, search_tool: Any = None, judge: Any = None,
             track: bool = True, progress: bool = True) -> EvalResult:
    """Run the whole stage for one variant; components may be injected (tests, the speed benchmark)."""
    cfg = params.evaluate
    out_dir = Path(cfg.out_dir) / variant
    sampled, loaded = load_and_sample(params, list(cfg.benchmarks))
    write_json(out_dir / "sample.json", {"seed": cfg.seed, "n": cfg.n,
                                         "ids": {name: [i.id for i in items] for name, items in sampled.items()}})
    model, model_source = resolve_model(params, variant)
    if backend is None:
        from searchplay.llm import load_backend

        backend = load_backend(model, params)
    if search_tool is None:
        from searchplay.retrieval import load_search_tool

        search_tool = load_search_tool(params)
    if judge is None:
        from searchplay.llm.judge import make_judge

        judge = make_judge(params.judge, backend=backend)
    run = {"variant": variant, "model": model, "model_source": model_source,
           "base_model": params.models.policy if model_source == "checkpoint" else model,
           "judge": judge.name, "metric": "judge accuracy (exact match first, then the judge), 0-100",
           "n": cfg.n, "seed": cfg.seed, "temperature": cfg.temperature, "max_turns": cfg.max_turns,
           "top_k": params.search.top_k, "benchmarks": list(cfg.benchmarks),
           "sources": {name: bench.source for name, bench in loaded.items()},
           "skipped": {name: dict(bench.skipped) for name, bench in loaded.items()}}

    config = rollout_config(params)
    times = StageTimes()
    per_benchmark: dict[str, dict[str, float]] = {}
    bar = _progress(sum(len(v) for v in sampled.values()), progress)
    for name, items in sampled.items():
        path = out_dir / "predictions" / f"{name}.jsonl"
        _drop_other_models(path, model)
        records = run_benchmark(items, path, backend=backend, search_tool=search_tool, judge=judge, config=config,
                                model=model, batch_size=cfg.batch_size, top_k=params.search.top_k, times=times,
                                on_batch=bar.update)
        write_jsonl(path, records)  # exactly the sampled questions, in sample order
        per_benchmark[name] = benchmark_scores(records)
        per_benchmark[name]["skipped_records"] = loaded[name].num_skipped
    bar.close()
    metrics = flat_metrics(per_benchmark, group_scores(per_benchmark))
    write_json(out_dir / "metrics.json", metrics)
    write_json(out_dir / "run.json", {**run, "times_s": vars(times)})
    others = {k: v for k, v in read_variant_metrics(cfg.out_dir).items() if k != variant}
    write_run_report(out_dir, run, per_benchmark, metrics, others, cfg.paper_reference_model)
    if track:
        _log_to_mlflow(params, variant, run, metrics, out_dir)
    return EvalResult(out_dir, metrics, per_benchmark, run, times)


def _drop_other_models(path: Path, model: str) -> None:
    """Predictions of a different model in the resume log are discarded (logged), never mixed in."""
    finished = read_finished(path)
    stale = [r for r in finished.values() if r.get("model") != model]
    if stale:
        log.warning("%s: %d predictions were made by another model; evaluating them again", path, len(stale))
        write_jsonl(path, [r for r in finished.values() if r.get("model") == model])


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="evaluate", unit="q", disable=not enabled)


def _log_to_mlflow(params: Params, variant: str, run: dict[str, Any], metrics: dict[str, float], out_dir: Path) -> None:
    import mlflow

    from searchplay.tracking import start_run

    tags = {"variant": variant, "judge": run["judge"], "model": run["model"][:500], "model_source": run["model_source"]}
    with start_run(params, "evaluate", variant, tags=tags) as mlflow_run:
        mlflow.log_metrics(metrics)
        mlflow.log_artifacts(str(out_dir), artifact_path="eval")
    if params.pipeline.register_model and run["model_source"] == "checkpoint":
        from searchplay.tracking import register_model

        scores = {key: value for key, value in metrics.items() if key.endswith("judge_acc")}
        version = register_model(mlflow_run.info.run_id, run["model"], variant, scores, params)
        log.info("registered %s as version %s of %s-%s", run["model"], version,
                 params.tracking.experiment_prefix, variant)
