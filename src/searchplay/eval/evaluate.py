"""The evaluate stage: load, gate, sample, solve, judge, score, report, track.

Four kinds of model are evaluated under the same protocol: ``--variant base`` (``models.policy``),
``--variant warmstart`` (the warm-start checkpoint; a recipe's warm-start by its registered model name) and
``--variant <v>`` (the newest self-play checkpoint of variant v); ``evaluate.model`` overrides all three. The
names come from the registries in ``searchplay.model_paths`` (``evaluable_variants``).

Outputs under ``<evaluate.out_dir>/<variant>/``: ``metrics.json`` (DVC metric, flat numeric keys,
0-100, each score with its n and 95% interval), ``run.json`` (model, judge, protocol, skipped
records), ``sample.json`` (the drawn ids), ``predictions/<benchmark>.jsonl`` (per question, with the
model's full output; also the resume log, a ``persist`` output of the DVC stage: a run again asks only what
it does not answer under the same model revision, settings and code), ``report.md``/``report.html`` and
``charts/<benchmark>.png``; all logged to MLflow under the variant's run. Every file names the model
by its params id and paths relative to the repository, so committed reports hold no machine's paths.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchplay.config import SELFPLAY_ONLY, Params
from searchplay.eval.benchmarks import (
    KG_HELDOUT,
    LoadedBenchmark,
    QAItem,
    kg_majority_answer,
    kg_pool_path,
    load_benchmark,
)
from searchplay.eval.replacement import check_replacement
from searchplay.eval.report import BASE_FALLBACK, write_run_report
from searchplay.eval.runner import StageTimes, evaluation_turns, read_finished, rollout_config, run_benchmarks
from searchplay.eval.sampling import sample_items
from searchplay.eval.scoring import (
    benchmark_scores,
    flat_metrics,
    group_scores,
    headline_metrics,
    majority_baseline_em,
    question_search_recall,
    scores_by_hops,
)
from searchplay.io import InputError, code_digest, portable_name, write_json, write_jsonl
from searchplay.timings import write_timings
from searchplay.tracking import in_pipeline

log = logging.getLogger(__name__)


@dataclass
class EvalResult:
    out_dir: Path
    metrics: dict[str, float]
    per_benchmark: dict[str, dict[str, float]]
    run: dict[str, Any]
    times: StageTimes = field(default_factory=StageTimes)


BASE = "base"  # --variant base: models.policy as it is, before any training


class ModelNotFoundError(InputError, FileNotFoundError):
    """The model a variant names is not there yet; the message names the command that makes it (exit 2: a retry
    finds it missing too)."""


@dataclass(frozen=True)
class ModelChoice:
    """The model an evaluation runs: its params id (what every output records), where it loads from, and why."""

    id: str
    path: str
    source: str  # evaluate.model | models.policy | warmstart | checkpoint


def final_model(params: Params, variant: str) -> Path | None:
    """The HF folder ``variant``'s self-play run exported at its end (``<checkpoint_dir>/<variant>/model/``), or
    None; resolved so the recorded model names the folder actually evaluated. The per-iteration checkpoints in
    ``resume/`` beside it are a resume state, not a model (``searchplay.model_paths``)."""
    from searchplay.model_paths import final_model_dir

    found = final_model_dir(params.selfplay.checkpoint_dir, variant)
    return found.resolve() if found is not None else None


def warmstart_model(params: Params, model: str) -> Path:
    """The HF folder of the warm-start evaluated as ``model`` (``warmstart``: ``<warmstart.out_dir>/model``; a
    recipe's: its own ``warmstart.<key>``; rule and names in ``searchplay.model_paths``)."""
    from searchplay.model_paths import warmstart_dir, warmstart_models, warmstart_of_model

    warmstart = warmstart_of_model(model)
    if warmstart is None:
        raise ValueError(f"{model!r} is not a registered warm-start; known: {list(warmstart_models())}")
    return warmstart_dir(params, warmstart)


def resolve_model(params: Params, variant: str, allow_base: bool = False) -> ModelChoice:
    """The model to evaluate: ``evaluate.model``; else by variant: ``base`` -> ``models.policy``, a registered
    warm-start (``warmstart``, a recipe's) -> its checkpoint, any other -> its latest self-play checkpoint. A
    variant without a checkpoint is an error naming where it looked, unless ``allow_base`` (the base model,
    recorded as ``BASE_FALLBACK`` in run.json and the report): a report never names a variant it did not score.
    """
    from searchplay import assets
    from searchplay.model_paths import WARMSTARTS, warmstart_of_model

    if params.evaluate.model:
        return ModelChoice(portable_name(params.evaluate.model), assets.resolve(params.evaluate.model),
                           "evaluate.model")
    policy = ModelChoice(params.models.policy, assets.resolve(params.models.policy), "models.policy")
    if variant == BASE:
        return policy
    warmstart = warmstart_of_model(variant)
    if warmstart is not None:
        folder = warmstart_model(params, variant)
        if not (folder / "config.json").is_file():
            raise ModelNotFoundError(f"no {variant} model at {folder} (expected an HF folder with config.json); "
                                     f"run `{WARMSTARTS[warmstart].command}` first")
        return ModelChoice(portable_name(folder), str(folder), "warmstart")
    checkpoint = final_model(params, variant)
    if checkpoint is not None:
        return ModelChoice(portable_name(checkpoint), str(checkpoint), "checkpoint")
    where = Path(params.selfplay.checkpoint_dir) / variant / "model"
    if not allow_base:
        raise ModelNotFoundError(f"no self-play model of {variant} at {where} (an HF folder with config.json, "
                                 f"written when the run ends); run `searchplay selfplay --variant {variant}` first, "
                                 "or pass --allow-base to score the base model under this name")
    log.warning("no self-play model at %s; evaluating the base model models.policy=%s (--allow-base)",
                where, params.models.policy)
    return ModelChoice(policy.id, policy.path, BASE_FALLBACK)


# What decides a model's answers: weights, config and tokenizer; not the optimizer, scheduler or RNG states that
# a self-play checkpoint keeps beside them.
ANSWER_FILES = ("*.safetensors", "pytorch_model*.bin", "adapter_model.bin", "config.json", "generation_config.json",
                "adapter_config.json", "tokenizer*", "special_tokens_map.json", "vocab.json", "merges.txt",
                "chat_template.jinja")  # transformers 5 saves the template that writes every prompt on its own


def model_revision(path: str | Path) -> str | None:
    """A short content hash of a local model folder's weights, config and tokenizer, or None for a hub id.

    The recorded model id of the warm-start (or of a re-trained iteration) stays the same when its weights
    change; the revision does not, so the resume log never mixes two trainings' answers. A rerun that writes the
    same weights gets the same revision (a hash of file times would not), so the predictions stay unchanged.
    """
    folder = Path(path)
    if not folder.is_dir():
        return None
    files = sorted({file for pattern in ANSWER_FILES for file in folder.glob(pattern) if file.is_file()})
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.name}:".encode())
        with file.open("rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:12]


def questions_for(name: str, available: int, cfg: Any) -> int:
    """How many questions to draw: ``evaluate.n``, except kg_heldout (``evaluate.kg_heldout_n``, None: all)."""
    if name == KG_HELDOUT:
        return max(1, cfg.kg_heldout_n or available)
    return cfg.n


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
    sampled = {name: sample_items(bench.items, questions_for(name, len(bench.items), cfg), cfg.seed)
               for name, bench in loaded.items()}
    if KG_HELDOUT in loaded and (asked := cfg.kg_heldout_n) and asked > (held := len(loaded[KG_HELDOUT].items)):
        log.warning("kg_heldout has %d questions, fewer than evaluate.kg_heldout_n=%d: every one is asked; raise "
                    "kg.heldout_share or kg.paths_per_seed for more", held, asked)
    return sampled, loaded


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # a variant is also a folder name under evaluate.out_dir


def evaluable_variants() -> tuple[str, ...]:
    """The names ``--variant`` accepts (each is also an output folder's name): base, the registered warm-starts
    and the registered self-play variants (``searchplay.model_paths``), each in registration order."""
    from searchplay.model_paths import selfplay_variants, warmstart_models

    return (BASE, *warmstart_models(), *selfplay_variants())


def evaluate(params: Params, variant: str, *, backend: Any = None, search_tool: Any = None, judge: Any = None,
             track: bool = True, progress: bool = True, register: bool = False,
             allow_base: bool = False, replace: bool = False) -> EvalResult:
    """Run the whole stage for one variant; components may be injected (tests, the speed benchmark).

    ``track``: one MLflow run spans the whole evaluation (opened before the first question, metrics and
    artifacts logged at the end, FAILED or KILLED if it does not finish), in ``<prefix>-evaluate`` inside a
    DVC stage and ``<prefix>-evaluate-adhoc`` otherwise. ``register``: also register an evaluated self-play
    checkpoint in the MLflow model registry (the pipeline's ``evaluate@<variant>`` stages ask for it; an
    ad-hoc evaluation does not). ``allow_base``: score the base model for a variant without a checkpoint
    (``resolve_model``). ``replace``: replace an evaluation in the output folder that asked more
    (``searchplay.eval.replacement``; outside a DVC stage such a run stops before the model loads).
    """
    if not PLAIN_NAME.fullmatch(variant):  # the CLI takes only evaluable_variants(); a library caller a plain name
        raise ValueError(f"variant {variant!r} is not a plain folder name (letters, digits, _ and -)")
    choice = resolve_model(params, variant, allow_base)  # before anything is written or loaded
    if not replace and not in_pipeline():
        most = {name: questions_for(name, sys.maxsize, params.evaluate) for name in params.evaluate.benchmarks}
        check_replacement(Path(params.evaluate.out_dir) / variant, most)
    if not track:
        return _evaluate(params, variant, choice, backend, search_tool, judge, progress)
    import mlflow

    from searchplay.tracking import start_run

    stage = "evaluate" if in_pipeline() else "evaluate-adhoc"
    skipped = () if choice.source == "checkpoint" else tuple(SELFPLAY_ONLY)  # what a model without self-play never read
    tags = {"variant": variant, "model": choice.id[:500], "model_source": choice.source,
            "run_kind": "pipeline" if in_pipeline() else "adhoc"}
    with start_run(params, stage, variant, tags=tags, skip_sections=skipped) as mlflow_run:
        result = _evaluate(params, variant, choice, backend, search_tool, judge, progress)
        mlflow.set_tag("judge", result.run["judge"])
        mlflow.log_metrics(result.metrics)
        mlflow.log_metrics(headline_run_metrics(result.metrics))
        mlflow.log_artifacts(str(result.out_dir), artifact_path="eval")
    if register and params.pipeline.register_model and choice.source == "checkpoint":
        _register(params, variant, result, choice.path, mlflow_run.info.run_id)
    return result


HEADLINE_PREFIX = "headline/"  # MLflow's chart view puts this section first (sections sort before "Model metrics")


def headline_run_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """headline.json's evaluation numbers as ``headline/<name>`` MLflow metrics: the few to compare models by,
    in one chart section of their own (``headline/kg_heldout_em``, ``headline/avg_judge_acc``, ...)."""
    numbers = headline_metrics(metrics)["eval"]
    return {f"{HEADLINE_PREFIX}{name}": float(value) for name, value in numbers.items()}


def _evaluate(params: Params, variant: str, choice: ModelChoice, backend: Any, search_tool: Any, judge: Any,
              progress: bool) -> EvalResult:
    cfg = params.evaluate
    out_dir = Path(cfg.out_dir) / variant
    sampled, loaded = load_and_sample(params, list(cfg.benchmarks))
    model, revision = choice.id, model_revision(choice.path)
    search_tool, backend, judge = _load_tools(params, choice, search_tool, backend, judge)
    run = _run_record(params, variant, choice, judge.name, loaded, revision)

    config = rollout_config(params)
    settings = settings_fingerprint(run, config, params)
    times = StageTimes()
    per_benchmark: dict[str, dict[str, float]] = {}
    bar = _progress(sum(len(v) for v in sampled.values()), progress)
    paths = {name: out_dir / "predictions" / f"{name}.jsonl" for name in sampled}
    prepare_resume_log(paths, model, revision)
    answered = run_benchmarks({paths[name]: items for name, items in sampled.items()}, backend=backend,
                              search_tool=search_tool, judge=judge, config=config, model=model,
                              model_revision=revision, batch_size=cfg.batch_size, top_k=params.search.top_k,
                              times=times, on_batch=bar.update, settings=settings, normalization=cfg.normalization,
                              evidence=cfg.evidence)
    for name, path in paths.items():
        write_jsonl(path, answered[path])  # exactly the sampled questions, in sample order
        per_benchmark[name] = benchmark_scores(answered[path])
        per_benchmark[name]["skipped_records"] = loaded[name].num_skipped
    bar.close()
    check_judge_errors(judge, [r for records in answered.values() for r in records], params.judge.max_error_share)
    for name, found in question_searches(search_tool, sampled, params.search.top_k, cfg.normalization).items():
        per_benchmark[name]["question_search_recall"] = found
    if KG_HELDOUT in sampled:
        answer = kg_majority_answer(kg_pool_path(params))
        run["kg_heldout_majority_answer"] = answer
        per_benchmark[KG_HELDOUT]["majority_baseline_em"] = majority_baseline_em(sampled[KG_HELDOUT], answer,
                                                                                 cfg.normalization)
        per_benchmark[KG_HELDOUT].update(scores_by_hops(sampled[KG_HELDOUT], answered[paths[KG_HELDOUT]]))
    metrics = flat_metrics(per_benchmark, group_scores(per_benchmark))
    # the sample beside its metrics: a run that fails before here changes neither (its predictions are kept)
    write_json(out_dir / "sample.json", {"seed": cfg.seed, "n": cfg.n,
                                         "ids": {name: [i.id for i in items] for name, items in sampled.items()}})
    write_json(out_dir / "metrics.json", metrics)
    selfplay_metrics = Path(params.selfplay.reports_dir) / variant / "metrics.json"
    last_iteration = None
    if choice.source == "checkpoint" and selfplay_metrics.exists():
        last_iteration = json.loads(selfplay_metrics.read_text(encoding="utf-8"))
    write_json(out_dir / "headline.json", headline_metrics(metrics, last_iteration))
    write_json(out_dir / "run.json", run)
    write_timings(out_dir, {"times_s": vars(times), "questions_per_s": times.questions / max(times.total, 1e-9)})
    write_run_report(out_dir, run, per_benchmark, metrics, cfg.paper_reference_model)
    return EvalResult(out_dir, metrics, per_benchmark, run, times)


def _load_tools(params: Params, choice: ModelChoice, search_tool: Any, backend: Any,
                judge: Any) -> tuple[Any, Any, Any]:
    """The search tool, the model and the judge, each unless given; the search tool first, so a missing index
    fails before a model loads."""
    if search_tool is None:
        from searchplay.retrieval import load_search_tool

        search_tool = load_search_tool(params)
    if backend is None:
        from searchplay.llm import load_backend

        backend = load_backend(choice.path, params)
    if judge is None:
        from searchplay.llm.judge import make_judge

        judge = make_judge(params.judge, backend=backend, normalization=params.evaluate.normalization,
                           policy_name=f"local-policy ({choice.id})")  # each model judges itself: named so
    return search_tool, backend, judge


def _run_record(params: Params, variant: str, choice: ModelChoice, judge_name: str, loaded: dict[str, Any],
                revision: str) -> dict[str, Any]:
    """run.json: what was scored (model, source, revision, judge) and under which protocol."""
    cfg = params.evaluate
    return {"variant": variant, "model": choice.id, "model_source": choice.source, "model_revision": revision,
            "base_model": params.models.policy if choice.source in ("checkpoint", "warmstart") else choice.id,
            "judge": judge_name, "metric": "judge accuracy (exact match first, then the judge), 0-100",
            "n": cfg.n, "seed": cfg.seed, "temperature": cfg.temperature, "max_turns": evaluation_turns(params),
            "top_k": params.search.top_k, "benchmarks": list(cfg.benchmarks),
            "normalization": cfg.normalization, "judge_prompt": params.judge.prompt,
            "protocol": {key: getattr(cfg, key) for key in PROTOCOL_KEYS},
            "sources": {name: portable_name(bench.source) for name, bench in loaded.items()},
            "skipped": {name: dict(bench.skipped) for name, bench in loaded.items()}}


def question_searches(search_tool: Any, sampled: dict[str, list[QAItem]], top_k: int,
                      normalization: str) -> dict[str, float]:
    """Per benchmark, the retrieval recall of one top-k search with each question as its query (one batched
    call to the same search tool the Solver used): the reference for the models' ``retrieval_recall``.

    A failing search (a retrieval server gone, say) leaves the reference out with a warning instead of
    failing a stage whose answers are already scored and written.
    """
    questions = [item.question for items in sampled.values() for item in items]
    try:
        documents = iter(search_tool.search(questions, top_k=top_k) if questions else [])
    except Exception as exc:  # any tool's failure means the same: no reference row
        log.warning("one search with each question (the retrieval reference) failed, left out: %s", exc)
        return {}
    return {name: question_search_recall(items, [next(documents) for _ in items], normalization)
            for name, items in sampled.items() if items}


# The evaluation protocol's options (docs/decisions/eval.md "Protocol options"), recorded in run.json.
PROTOCOL_KEYS = ("eos_without_action", "final_answer_turn", "information_format", "question_format")


def check_judge_errors(judge: Any, records: list[dict[str, Any]], max_share: float) -> None:
    """An evaluation whose share of unjudged answers exceeds ``judge.max_error_share`` is no result: raise
    ``JudgeOutageError`` naming the judge and the count before any score is written (the predictions file keeps
    the answers; a re-run judges the failed ones again)."""
    from searchplay.llm.judge import JudgeOutageError

    errors = sum(bool(r.get("judge_error")) for r in records)
    if records and errors / len(records) > max_share:
        where = getattr(judge, "where", getattr(judge, "name", "the judge"))
        raise JudgeOutageError(f"{errors} of {len(records)} answers could not be judged by {where} (more than "
                               f"judge.max_error_share={max_share:g}); no scores written, run again once it answers")


# evaluate.* keys that choose which questions are asked or where answers go, not what an answer is
QUESTION_CHOICE = {"benchmarks", "n", "kg_heldout_n", "seed", "out_dir", "data_dir", "hub_id"}


def settings_fingerprint(run: dict[str, Any], config: Any, params: Params) -> str:
    """A short hash of everything that changes a prediction or its scores: the model and its revision, every
    param the evaluation stage depends on (the ``agent``, ``search`` and ``judge`` sections, ``evaluate`` but the
    choice of questions, the policy's dtype, the embedder and its dtype, how an ANN index is searched), the
    retrieval index's content (its fingerprint file), the decoding and the package's code. Predictions recorded
    under another fingerprint are not reused (the predictions folder outlives a DVC re-run); the questions
    themselves are checked record by record."""
    import json
    from dataclasses import asdict, is_dataclass

    from searchplay.retrieval.index import fingerprint_path

    keys = ("model", "model_revision", "judge", "judge_prompt", "normalization", "top_k")
    rollout = asdict(config) if is_dataclass(config) else repr(config)
    index = fingerprint_path(params.index.dir)
    basis = {**{k: run.get(k) for k in keys}, "rollout": rollout, "code": code_digest(),
             "params": {"agent": params.agent.model_dump(mode="json"), "search": params.search.model_dump(mode="json"),
                        "judge": params.judge.model_dump(mode="json"),
                        "evaluate": params.evaluate.model_dump(mode="json", exclude=QUESTION_CHOICE),
                        "embedder": [params.models.embedder, params.models.embedder_dtype],
                        "policy_dtype": params.models.dtype,
                        "ann_search": [params.index.nprobes, params.index.refine_factor]},
             "index": index.read_text(encoding="utf-8") if index.is_file() else None}
    return hashlib.sha256(json.dumps(basis, sort_keys=True, default=str).encode()).hexdigest()[:16]


def prepare_resume_log(paths: dict[str, Path], model: str, revision: str | None = None) -> None:
    """Discard the predictions of a different model (id or revision) from each benchmark's file, never mixed in,
    and say so in one line; in a DVC stage, also remove the files of benchmarks this run does not ask, so the
    stage's output (a ``persist`` folder, kept between runs) holds this run's alone."""
    dropped, folder = {}, next(iter(paths.values()), Path()).parent
    for name, path in paths.items():
        finished = read_finished(path)
        kept = [r for r in finished.values() if r.get("model") == model and r.get("model_revision") == revision]
        if len(kept) < len(finished):
            dropped[name] = len(finished) - len(kept)
            write_jsonl(path, kept)
    if dropped:  # a DVC stage's earlier output after a retrain: expected there; by hand, worth a warning
        log.log(logging.INFO if in_pipeline() else logging.WARNING, "%s: predictions made by another model or "
                "revision dropped (%s): none is reused", folder,
                ", ".join(f"{name} {count}" for name, count in dropped.items()))
    if in_pipeline() and paths:  # and a killed rewrite's temporary file, which DVC would hash into the output
        for other in {*folder.glob("*.jsonl"), *folder.glob(".*.jsonl.*.tmp")} - set(paths.values()):
            other.unlink()


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="evaluate", unit="q", disable=not enabled)


def _register(params: Params, variant: str, result: EvalResult, model_path: str, run_id: str) -> None:
    """Register the evaluated checkpoint as a version of ``<prefix>-<variant>`` with its scores and coverage."""
    from searchplay.tracking import EvaluationCoverage, register_model

    run, metrics = result.run, result.metrics
    scores = {key: value for key, value in metrics.items() if key.endswith("judge_acc")}
    coverage = EvaluationCoverage(benchmarks=list(run["benchmarks"]), judge=run["judge"],
                                  n={b: int(metrics.get(f"{b}.n", 0)) for b in run["benchmarks"]})
    version = register_model(run_id, model_path, variant, scores, params, coverage)
    log.info("registered %s as version %s of %s-%s", run["model"], version, params.tracking.experiment_prefix,
             variant)
