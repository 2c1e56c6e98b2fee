"""The ``warmstart_eve`` stage (``searchplay warmstart --eve``): the shared warm-start, continued on demos of
EVE's formats, through the shared stage's public functions (``searchplay.warmstart.stage``).

Only the ``eve`` variant writes (q, a, e) triples, quotes ``<evidence>`` and answers EVE's single-turn
verifier prompt, so only it starts from this checkpoint; every other variant keeps starting from the
shared warm-start, whose weights this stage does not touch (docs/decisions/eve.md, "Warm-start").

Inputs: ``<warmstart.out_dir>/model`` and the warm-start split's KG subgraphs (the same demo and check
subgraphs as the shared stage). It trains ``eve.warmstart_steps`` steps, each on one EVE Proposer demo,
one Solver demo (the plain Solver of EVE's Phase A and the evidence-quoting one of Phase B in turn) and
one EVE verifier demo. Outputs, beside the shared stage's:

* ``<eve.warmstart_out_dir>/model/``: what ``selfplay --variant eve`` starts from;
* ``<eve.warmstart_reports_dir>/``: ``metrics.json`` (EVE's format rates before = the shared warm-start,
  ``_before``, and after), ``history.csv``, ``loss.png``, ``samples.json``; an MLflow run ``warmstart_eve``.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from searchplay.config import Params
from searchplay.model_paths import warmstart_model_dir
from searchplay.recipes.eve.demos import EVE_ROLES, build_eve_demos
from searchplay.recipes.eve.validity import eve_format_validity
from searchplay.warmstart.demos import partition
from searchplay.warmstart.stage import (
    WarmstartError,
    decoded_demos,
    demo_builder,
    drop_stale_outputs,
    finalize,
    load_policy,
    log_to_mlflow,
    policy_backend,
    save_trained_model,
    sft_totals,
    stage_run,
    train,
    warmstart_records,
    write_reports,
    written_outputs,
)

log = logging.getLogger(__name__)

PLAIN_ROLES = ("solver",)  # EVE's Phase A Solver answers with the plain Solver prompt
EVE_RATES = (("proposer_eve_valid_rate", "Proposer\n(q, a, e) valid"), ("proposer_eve_verbatim_rate",
             "evidence\nverbatim"), ("solver_eve_evidence_rate", "Solver quotes\n+ answers"),
             ("verifier_eve_answer_rate", "verifier\n<answer>"))
BEFORE = ("_before", "warm-start")


def eve_params(params: Params) -> Params:
    """``params`` with the warm-start's outputs and step count swapped for the EVE stage's."""
    cfg = params.eve
    swapped = params.warmstart.model_copy(update={"out_dir": cfg.warmstart_out_dir,
                                                  "reports_dir": cfg.warmstart_reports_dir,
                                                  "steps": cfg.warmstart_steps})
    return params.model_copy(update={"warmstart": swapped})


def run_eve_warmstart(params: Params, search_tool: Any = None, progress: bool = True,
                      track: bool = True) -> dict[str, Any]:
    """Run the whole stage; returns the metrics written to ``metrics.json``. With ``track`` one MLflow run
    (``warmstart_eve``) spans it."""
    with stage_run(eve_params(params), "warmstart_eve", track):
        return _run_eve_warmstart(params, search_tool, progress, track)


def _run_eve_warmstart(params: Params, search_tool: Any, progress: bool, track: bool) -> dict[str, Any]:
    import torch

    from searchplay.llm.tokenizer import load_tokenizer
    from searchplay.retrieval import format_documents, load_search_tool

    start = _shared_warmstart(params)
    ours = eve_params(params)
    cfg = ours.warmstart
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    started = time.perf_counter()

    records = warmstart_records(params)
    demo_records, check_records = partition(records, cfg.eval_prompts, cfg.max_per_answer, cfg.demos_per_role, rng)
    tokenizer = load_tokenizer(str(start))
    search_tool = search_tool or load_search_tool(params)

    def fmt(docs: Any) -> str:
        return format_documents(docs, tokenizer, params.search.max_doc_tokens)

    demos, dropped = _build_demos(params, demo_records, rng, tokenizer, search_tool, fmt)
    per_role = Counter(d.role for d in demos)

    model = load_policy(str(start), ours)
    backend = policy_backend(model, tokenizer, ours, str(start)) if check_records else None  # eval_prompts 0
    tic = time.perf_counter()
    before, before_samples = eve_check(backend, search_tool, check_records, ours)
    if backend is not None:
        backend.release_memory()  # the check's caches and bf16 copy make room for AdamW's state
    history, train_seconds = train(model, demos, ours, progress, start=str(start))
    model = finalize(model, ours)
    if backend is not None:
        backend.update_weights(model)
    after, samples = eve_check(backend, search_tool, check_records, ours)
    check_seconds = time.perf_counter() - tic - train_seconds
    save_trained_model(model, tokenizer, ours)
    drop_stale_outputs(Path(ours.warmstart.out_dir), written_outputs(ours))
    log.info("EVE format rates, warm-start -> EVE warm-start: %s",
             {k: (round(before.get(k, float("nan")), 2), round(v, 2)) for k, v in after.items()})

    metrics: dict[str, Any] = {
        "enabled": True, "method": cfg.method, "steps": cfg.steps, "lr": cfg.lr, "starts_from": "warmstart",
        **after, **{f"{k}_before": v for k, v in before.items()}, "check_prompts": len(check_records),
        "demos": len(demos), **{f"demos_{role}": per_role.get(role, 0) for role in (*PLAIN_ROLES, *EVE_ROLES)},
        "demos_dropped": sum(dropped.values()), "demo_subgraphs": len(demo_records), **sft_totals(history),
        "time_train_s": round(train_seconds, 1), "time_check_s": round(check_seconds, 1),
        "time_total_s": round(time.perf_counter() - started, 1),
    }
    reports = Path(cfg.reports_dir)
    write_reports(reports, metrics, history, {"before": before_samples, "after": samples,
                                              "demos": decoded_demos(demos, tokenizer)},
                  rates=EVE_RATES, before=BEFORE, after="EVE warm-start", prompts_key="eve_check_prompts")
    if track:
        log_to_mlflow(ours, metrics, history, reports, run_name="warmstart_eve")
    return metrics


def _shared_warmstart(params: Params) -> Path:
    """The shared warm-start's model folder, which the EVE warm-start continues; an error when there is none."""
    if not params.warmstart.enabled:
        raise WarmstartError("warmstart.enabled is false: the EVE warm-start continues the shared one; run "
                             "`selfplay --variant eve` from models.policy with warmstart.enabled=false instead")
    start = warmstart_model_dir(params)
    if not (start / "config.json").is_file():
        raise WarmstartError(f"{start} holds no model; run `searchplay warmstart` first")
    return start


def eve_check(backend: Any, search_tool: Any, records: list[dict[str, Any]],
              params: Params) -> tuple[dict[str, float], dict[str, Any]]:
    """EVE's format rates on the check prompts; none without a backend (``warmstart.eval_prompts: 0``)."""
    if backend is None:
        return {}, {}
    return eve_format_validity(backend, search_tool, records, params, params.warmstart.seed)


def _build_demos(params: Params, demo_records: list[dict], rng: random.Random, tokenizer: Any, search_tool: Any,
                 fmt: Any) -> tuple[list[Any], Counter]:
    """The plain roles' demos and EVE's; an error when no EVE demo could be grounded in the corpus."""
    builder = demo_builder(params, tokenizer, search_tool, fmt)
    demos, dropped = builder.build(demo_records, PLAIN_ROLES, rng)
    eve_demos, eve_dropped = build_eve_demos(builder, demo_records, EVE_ROLES, rng)
    demos += eve_demos
    dropped += eve_dropped
    if not eve_demos:
        raise WarmstartError(f"no EVE demo could be grounded ({dict(eve_dropped)}); the corpus must hold "
                             "passages naming the warm-start paths' first hops")
    log.info("EVE warm-start: %d demos from %d subgraphs (%s); dropped %s", len(demos), len(demo_records),
             dict(Counter(d.role for d in demos)), dict(dropped) or "none")
    return demos, dropped
