"""EVE-Agent's two phases as one self-play step function (Arai & Ichikawa 2026, §3.4; App. E, Algs. 1-2).

Phase A (the first ``eve.phase_a_iterations``): one Proposer rollout per source document with its hop
count h -> the (q, a, e) triple, Dr. Zero's validity filter and format score (Eq. 9) -> n Solver rollouts
WITH search by the Solver frozen at its initialization -> R_DZ (Eq. 2) -> the evidence verifier V-hat
from m single-turn, search-free answers with (q, e) and m with q alone (Eqs. 10-14) -> brevity B(e)
(Eq. 15) -> R_pro (Eq. 16) -> HRPO advantages within hop groups (Eq. 5) -> a Proposer-only update.

Hand-off (before the first Phase B iteration): the trained Proposer, frozen, writes the Solver set on
the held-out document shard (``eve.handoff_samples`` per document, the valid one with the best format
score kept, its e the gold evidence); then the policy goes back to the initial weights, because EVE's
Solver is a separate model that Phase A never trained.

Phase B: G Solver rollouts with search per set question, the Solver quoting ``<evidence>`` before its
``<answer>`` -> R_sol = EM + lambda_E F1(e-hat, e) (Eqs. 19-21) -> GRPO (Eq. 7) -> a Solver-only update.
V-hat is logged again under the Solver being trained, on the batch's (q, gold e) (``verifier/v_*``; the
set's own, from hand-off time, is ``verifier/v_set_*``): how much the gold evidence helps the current
Solver, a Phase B diagnostic.

The rewards and advantages come from the registries (``PROPOSER_REWARDS['eve']``, ``SOLVER_REWARDS['eve']``,
``ADVANTAGE_ESTIMATORS['hrpo']``); the loop reaches this module through ``Variant.step`` and the phases table,
where ``searchplay.recipes.eve`` registers it. Its per-run objects (the hand-off's hooks, the corpus selector) are
an ``EveObjects`` on ``runtime.recipe`` (``searchplay.recipes.eve.objects``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from searchplay.agent.prompts import solver_messages
from searchplay.agent.trajectory import Trajectory
from searchplay.answers import exact_match
from searchplay.config import Params
from searchplay.io import follow_umask, read_jsonl, write_json, write_jsonl
from searchplay.llm.backend import SamplingParams
from searchplay.recipes.eve.objects import EveObjects, eve_objects
from searchplay.recipes.eve.output import Triple, model_text, read_triple, returned_snippets
from searchplay.recipes.eve.prompts import eve_solver_messages, extract_evidence, verifier_answer, verifier_messages
from searchplay.recipes.eve.rewards import evidence_verifier, is_verbatim
from searchplay.recipes.eve.seeds import document_seeds
from searchplay.rewards import PROPOSER_REWARDS, ProposerOutcome
from searchplay.rl import ADVANTAGE_ESTIMATORS, TrainingSample
from searchplay.selfplay import metrics as m
from searchplay.selfplay.phases import PhaseError
from searchplay.selfplay.seeding import HANDOFF, seed_sampling
from searchplay.selfplay.seeds import Seed
from searchplay.selfplay.step import (
    LoopState,
    Runtime,
    ScoredGroups,
    Slot,
    StepResult,
    apply_update,
    propose,
    rollout_valid,
    score_groups,
    update_metrics,
)
from searchplay.selfplay.variants import Variant
from searchplay.timings import read_timings, split_timings, write_timings

log = logging.getLogger(__name__)

def seed_triple(proposal: Any, tokenizer: Any, require_verbatim: bool, max_doc_tokens: int = 0) -> Triple:
    """The triple of a Proposer rollout on a document seed (its ``record['document']`` and hop count)."""
    seed = proposal.seed
    return read_triple(proposal.trajectory, str((seed.record or {}).get("document", "")), int(seed.num_hops or 1),
                       tokenizer, require_verbatim, max_doc_tokens)


# --- the evidence verifier --------------------------------------------------------------------------------


def verify_evidence(backend: Any, encode: Any, triples: list[Triple], params: Params, seed: int
                    ) -> list[tuple[list[bool], list[bool]]]:
    """For each triple, m answers given (q, e) and m given q alone, single turn, no search (Eqs. 12-13).

    One batched ``generate`` call holds all 2m x len(triples) prompts (the paper: the 2m decodes run beside
    the Solver rollouts and cost little). ``eve.verifier: logprob`` replaces the samples by the probability
    of a under each prompt, teacher-forced (see ``answer_probabilities``); the pair then holds one float each.
    """
    if not triples:
        return []
    cfg = params.eve
    if cfg.verifier == "logprob":
        return answer_probabilities(backend, encode, triples)
    size = cfg.verifier_samples
    prompts = []
    for triple in triples:
        prompts += [encode(verifier_messages(triple.question, triple.evidence))] * size
        prompts += [encode(verifier_messages(triple.question, None))] * size
    sampling = SamplingParams(max_new_tokens=cfg.verifier_max_tokens, temperature=cfg.verifier_temperature,
                              stop=("</answer>",), seed=seed)
    replies = [verifier_answer(c.text) for c in backend.generate(prompts, sampling)]
    out = []
    for k, triple in enumerate(triples):
        block = replies[2 * size * k: 2 * size * (k + 1)]
        out.append(([bool(exact_match(r, triple.answer)) for r in block[:size]],
                    [bool(exact_match(r, triple.answer)) for r in block[size:]]))
    return out


def answer_probabilities(backend: Any, encode: Any, triples: list[Triple]) -> list[tuple[list[float], list[float]]]:
    """pi(a | q, e) and pi(a | q): the teacher-forced probability of ``<answer> a </answer>`` after each
    verifier prompt, from the backend's HF model (the paper's implemented-but-unused verifier variant)."""
    import torch

    model = getattr(backend, "model", None)
    if model is None:
        raise ValueError("eve.verifier 'logprob' needs a transformers backend (its .model scores the answer)")
    tokenizer = backend.tokenizer
    out = []
    with getattr(backend, "weights_in_memory", contextlib.nullcontext)():  # a frozen backend's weights wait on disk
        for triple in triples:
            target = tokenizer.encode(f"<answer> {triple.answer} </answer>", add_special_tokens=False)
            probabilities = []
            for evidence in (triple.evidence, None):
                prompt = list(encode(verifier_messages(triple.question, evidence)))
                ids = torch.tensor([prompt + target], device=model.device)
                with torch.no_grad():
                    logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
                logprob = torch.log_softmax(logits, -1).gather(1, torch.tensor(target, device=model.device)[:, None])
                probabilities.append(math.exp(float(logprob.sum())))
            out.append(([probabilities[0]], [probabilities[1]]))
    return out


def verifier_score(pair: tuple[list[Any], list[Any]]) -> float:
    """V-hat from one triple's two conditions: the EM-rate difference (Eq. 14), or p(a|q,e) - p(a|q)."""
    plus, minus = pair
    if plus and isinstance(plus[0], float):
        return round(sum(plus) / len(plus) - sum(minus) / len(minus), 12)
    return evidence_verifier(plus, minus)


# --- the phases as runs (each a DVC stage) ----------------------------------------------------------------

SOLVER_SET = "solver_set.jsonl"  # the hand-off set, in the Phase A run's checkpoint folder (Phase B's input)
HANDOFF_REPORT = "handoff.json"  # its summary, in the Phase A run's reports folder


class HandoffError(PhaseError):
    """Phase B cannot start: no hand-off set; the message names the command that writes it."""


def phase_a_iterations(params: Params) -> int:
    """Iterations of Phase A: ``eve.phase_a_iterations``, else half of ``selfplay.iterations``, rounded up."""
    given = params.eve.phase_a_iterations
    return given if given is not None else math.ceil(params.selfplay.iterations / 2)


def phase_b_iterations(params: Params) -> int:
    """Iterations of Phase B: ``eve.phase_b_iterations``, else the rest of ``selfplay.iterations`` (at least 1)."""
    given = params.eve.phase_b_iterations
    return given if given is not None else max(1, params.selfplay.iterations - phase_a_iterations(params))


def phase_run_name(variant: str, phase: str) -> str:
    """The checkpoint, report and MLflow run name of one run: ``<variant>_phase_a`` for Phase A alone; the
    variant's own name for Phase B alone and for both phases, since Phase B's Solver is what is evaluated."""
    return f"{variant}_phase_a" if phase == "a" else variant


def solver_set_path(params: Params, variant: str) -> Path:
    return Path(params.selfplay.checkpoint_dir) / phase_run_name(variant, "a") / SOLVER_SET


def phase_state(params: Params, phase: str, variant: str = "eve") -> dict[str, Any]:
    """The loop state that pins a new run to one phase (``LoopState.extra``): Phase A only, or Phase B with
    the hand-off set of the Phase A run (checked before anything loads, so a missing set fails at once)."""
    if phase == "a":
        return {"phase": "a"}
    if phase != "b":
        raise ValueError(f"unknown phase {phase!r}; 'a', 'b' or 'all'")
    path = solver_set_path(params, variant)
    if not path.is_file():
        raise HandoffError(f"{path} not found: Phase B trains on the Phase A Proposer's hand-off set; run "
                           f"`searchplay selfplay --variant {variant} --phase a` first")
    return {"phase": "b", "phase_a_iterations": 0, "solver_set": list(read_jsonl(path))}


def finish_phase_a(runtime: Runtime, variant: Variant, params: Params, state: LoopState, root: Path,
                   reports: Path) -> list[dict[str, Any]]:
    """After Phase A's last iteration: the trained Proposer writes the hand-off set (once; a resumed run whose
    set exists keeps it) into the run's checkpoint folder, and its summary into ``handoff.json``."""
    import mlflow

    path = root / SOLVER_SET
    if path.is_file():
        return list(read_jsonl(path))
    eve = eve_objects(runtime)
    if eve.handoff_documents is None:
        raise HandoffError("the hand-off needs EveObjects.handoff_documents (build_runtime gives it for 'eve')")
    tic = time.perf_counter()
    documents = eve.handoff_documents()
    seed_sampling(params.selfplay.seed, state.iteration, purpose=HANDOFF)  # a resumed Phase A hands off the same
    rows = hand_off(runtime, variant, params, state, documents)
    summary = handoff_summary(rows, len(documents), time.perf_counter() - tic)
    results, timings = split_timings(summary)
    write_json(reports / HANDOFF_REPORT, {k: v if math.isfinite(v) else None for k, v in results.items()})
    write_timings(reports, {**read_timings(reports), **timings})  # beside the Phase A run's own
    write_jsonl(path, rows)
    if mlflow.active_run() is not None:
        mlflow.log_metrics({k: v for k, v in summary.items() if math.isfinite(v)})
    if not rows:
        log.warning("hand-off: no valid triple with evidence from %d documents; Phase B will have nothing to train",
                    len(documents))
    return rows


def handoff_summary(rows: list[dict[str, Any]], documents: int, seconds: float) -> dict[str, float]:
    v_hats = [float(row["v_hat"]) for row in rows]
    return {"handoff/documents": float(documents), "handoff/set_size": float(len(rows)),
            "handoff/verbatim_rate": m.rate(sum(bool(row["verbatim"]) for row in rows), len(rows)),
            "handoff/v_mean": m.mean(v_hats), "handoff/v_nonzero": float(sum(abs(v) > 1e-12 for v in v_hats)),
            "time/handoff_s": seconds}


# --- phase A ----------------------------------------------------------------------------------------------


def frozen_solve(runtime: Runtime, questions: list[str], group_size: int) -> list[list[Trajectory]]:
    """n Solver rollouts per question WITH search, by the Solver frozen at initialization (EVE Alg. 1)."""
    if not questions:
        return []
    rollouts = runtime.frozen_rollouts or runtime.rollouts
    style = runtime.solver_config.question_format
    prompts = [runtime.encode(solver_messages(q, style)) for q in questions for _ in range(group_size)]
    flat = rollouts(prompts, "solver", runtime.solver_config)
    return [flat[k * group_size:(k + 1) * group_size] for k in range(len(questions))]


def run_phase_a(runtime: Runtime, variant: Variant, params: Params, state: LoopState) -> StepResult:
    """One Phase A iteration (EVE Alg. 1): Proposer rewards R_pro, HRPO advantages, a Proposer-only update."""
    cfg = params.selfplay
    clock: Counter = Counter()
    tokenizer = runtime.backend.tokenizer
    tic = time.perf_counter()
    seeds, picks = phase_a_seeds(runtime, params, state)
    proposals = propose(runtime, variant, seeds)
    clock["propose"] += time.perf_counter() - tic
    triples = [seed_triple(p, tokenizer, params.eve.require_verbatim, params.search.max_doc_tokens) for p in proposals]
    valid = [k for k, t in enumerate(triples) if t.valid]

    tic = time.perf_counter()
    groups = frozen_solve(runtime, [triples[k].question for k in valid], cfg.group_size)
    clock["solve"] += time.perf_counter() - tic
    correct = {k: [bool(exact_match(t.answer, triples[k].answer)) for t in group]
               for k, group in zip(valid, groups, strict=True)}

    tic = time.perf_counter()
    checked = [k for k in valid if triples[k].evidence]  # no evidence -> V = B = 0 (the paper leaves it open)
    verifier = runtime.frozen or runtime.verifier
    pairs = dict(zip(checked, verify_evidence(verifier, runtime.encode, [triples[k] for k in checked], params,
                                              state.rng.randrange(2**31)), strict=True))
    clock["verify"] += time.perf_counter() - tic
    v_hat = {k: verifier_score(pair) for k, pair in pairs.items()}

    rewards = [PROPOSER_REWARDS[variant.proposer_reward](ProposerOutcome(
        valid=t.valid, solver_correct=correct.get(k, []), question=t.question, answer=t.answer,
        record={"format_score": t.format_score, "verifier": v_hat.get(k),
                "evidence_tokens": t.evidence_tokens if k in v_hat else None}), params) for k, t in enumerate(triples)]
    masks = [p.trajectory.loss_mask for p in proposals]
    advantages = ADVANTAGE_ESTIMATORS[variant.proposer_advantage](rewards, masks, params,
                                                                  hops=[t.hops for t in triples])
    samples = [TrainingSample(p.trajectory.prompt_ids, p.trajectory.response_ids, p.trajectory.loss_mask, adv,
                              "proposer") for p, adv in zip(proposals, advantages, strict=True)]
    update = update_metrics(apply_update(runtime, cfg, samples, [], clock), samples, [])
    selected = selector_feedback(runtime, state, picks, [(k, triples[k]) for k in valid], rewards, correct)
    metrics = {**_phase_a_metrics(proposals, triples, valid, correct, groups, pairs, v_hat, rewards, advantages),
               **update, **selected, **_times(clock)}
    samples_log = {"proposer": [{"seed_id": p.seed.seed_id, "hops": t.hops, "question": t.question,
                                 "answer": t.answer, "evidence": t.evidence, "format_score": t.format_score,
                                 "verbatim": t.verbatim, "v_hat": v_hat.get(k), "reward": r,
                                 "response": model_text(p.trajectory)}
                                for k, (p, t, r) in enumerate(zip(proposals, triples, rewards, strict=True))
                                ][: cfg.sample_trajectories]}
    questions = [{"question": triples[k].question, "answer": triples[k].answer, "seed_id": proposals[k].seed.seed_id,
                  "source": "eve", "evidence": triples[k].evidence, "v_hat": v_hat.get(k),
                  "solver_accuracy": sum(correct[k]) / len(correct[k]) if correct[k] else 0.0} for k in valid]
    return StepResult(metrics, samples_log, questions)


def _phase_a_metrics(proposals: list, triples: list[Triple], valid: list[int], correct: dict[int, list[bool]],
                     groups: list, pairs: dict[int, tuple], v_hat: dict[int, float], rewards: list[float],
                     advantages: list[list[float]]) -> dict[str, float]:
    """A Phase A iteration's Proposer, evidence, verifier and frozen-Solver figures (the update's come apart)."""
    hop_groups: dict[int, list[float]] = {}  # HRPO's groups: the batch's Proposer samples of one hop count
    for triple, adv in zip(triples, advantages, strict=True):
        hop_groups.setdefault(triple.hops, []).extend(adv)
    solver_trajs = [t for g in groups for t in g]
    with_evidence = [t for t in triples if t.valid and t.evidence]
    return {
        "eve/phase": 1.0,
        "proposer/proposals": float(len(proposals)),
        "proposer/reward_mean": m.mean(rewards),
        "proposer/format_score_mean": m.mean([t.format_score for t in triples]),
        "proposer/difficulty_mean": m.mean([_difficulty(c) for c in correct.values()]),
        "filter/valid_rate_rule": m.rate(len(valid), len(proposals)),
        "format/proposer_valid_rate": m.mean([float(p.trajectory.question is not None) for p in proposals]),
        "evidence/presence_rate": m.rate(len(with_evidence), len(valid)),
        "evidence/verbatim_rate": m.rate(sum(t.verbatim for t in with_evidence), len(with_evidence)),
        "evidence/verbatim_rate_relaxed": m.rate(sum(t.verbatim_relaxed for t in with_evidence), len(with_evidence)),
        "evidence/tokens_mean": m.mean([float(t.evidence_tokens) for t in with_evidence]),
        "evidence/answer_leak_rate": m.rate(sum(t.leaks_answer for t in with_evidence), len(with_evidence)),
        "verifier/questions": float(len(v_hat)),
        "verifier/v_mean": m.mean(list(v_hat.values())),
        "verifier/v_nonzero": float(sum(abs(v) > 1e-12 for v in v_hat.values())),
        "verifier/p_with_evidence": m.mean([_rate(p[0]) for p in pairs.values()]),
        "verifier/p_without_evidence": m.mean([_rate(p[1]) for p in pairs.values()]),
        "solver/accuracy": m.mean([float(c) for cs in correct.values() for c in cs]),
        **m.fresh_accuracy(list(correct.values()), ["fresh"] * len(correct)),  # every question written this iteration
        "solver/rollouts": float(len(solver_trajs)),
        "batch/questions": float(len(valid)),
        "train/groups": float(len(hop_groups)),
        "train/groups_nonzero_advantage": float(m.nonzero_advantage_groups(list(hop_groups.values()))),
        "rollout/searches_proposer": m.mean([p.trajectory.num_searches for p in proposals]),
        "rollout/response_tokens_proposer": m.mean([p.trajectory.generated_token_count for p in proposals]),
    }


def phase_a_seeds(runtime: Runtime, params: Params, state: LoopState) -> tuple[list[Seed], list[tuple] | None]:
    """This iteration's source documents: the next ``batch_size`` in the seeded uniform order (Alg. 1), or with
    ``eve.selector`` the corpus selector's picks, each with its question-type line (App. F); the picks too."""
    size = params.selfplay.batch_size
    if not params.eve.selector:
        return state.cursor.next_batch(size), None
    import numpy as np

    from searchplay.recipes.eve.corpus_selector import task_type_instruction

    picks = corpus_selector(runtime, params, state).pick(state.iteration, size,
                                                         np.random.default_rng([params.eve.seed, state.iteration]))
    seeds = [replace(state.cursor.seeds[index], record={**(state.cursor.seeds[index].record or {}), "cluster": cluster,
                                                        "task_type": task, "task_line": task_type_instruction(task)})
             for index, cluster, task in picks]
    return seeds, picks


def corpus_selector(runtime: Runtime, params: Params, state: LoopState) -> Any:
    """The run's selector over the Phase A shard, from the index's passage vectors; a resumed run restores the
    checkpoint's (``state.extra['selector']``), so its clusters and bandits continue exactly."""
    eve = eve_objects(runtime)
    if eve.selector is None:
        from searchplay.recipes.eve.corpus_selector import CorpusSelector, passage_embeddings

        cfg = params.eve
        ids = [seed.seed_id.removeprefix("doc-") for seed in state.cursor.seeds]
        vectors = passage_embeddings(params.index.dir, params.index.table, ids)
        saved = state.extra.get("selector")
        eve.selector = (CorpusSelector.from_state(saved, ids, vectors) if saved else
                          CorpusSelector(ids, vectors, k0=cfg.selector_k0, alpha=cfg.selector_alpha,
                                         beta=cfg.selector_beta, lambda_u=cfg.selector_lambda_u, seed=cfg.seed))
    return eve.selector


def selector_feedback(runtime: Runtime, state: LoopState, picks: list[tuple] | None,
                      valid: list[tuple[int, Triple]], rewards: list[float],
                      correct: dict[int, list[bool]]) -> dict[str, float]:
    """Eqs. 32-33 after a Phase A iteration: the valid triples, annotated with their cluster and task type, with
    R_run from this iteration's mean Proposer reward and the frozen Solver's mean reward (its EM: Phase A's
    Solver writes no evidence, so Eq. 19's F1 term is 0). Nothing to do without the selector."""
    if picks is None:
        return {}
    from searchplay.recipes.eve.corpus_selector import SelectorSample, run_summary_reward

    selector = eve_objects(runtime).selector
    rows = [SelectorSample(picks[k][1], picks[k][2], triple.question, triple.answer) for k, triple in valid]
    solver = [float(c) for k, _ in valid for c in correct.get(k, [])]
    run_reward = run_summary_reward(m.mean(rewards), m.mean(solver) if solver else 0.0)
    if rows:
        selector.feedback(rows, run_reward)
    state.extra["selector"] = selector.to_state()
    return {"selector/clusters": float(selector.num_clusters),
            "selector/clusters_picked": float(len({cluster for _, cluster, _ in picks})),
            "selector/task_types_picked": float(len({task for _, _, task in picks})),
            "selector/feedback_rows": float(len(rows)), "selector/run_reward": run_reward}


def _difficulty(correct: list[bool]) -> float:
    from searchplay.recipes.eve.rewards import drzero_difficulty

    return drzero_difficulty(sum(correct), len(correct)) if len(correct) >= 2 else 0.0


def _rate(values: list[Any]) -> float:
    return sum(float(v) for v in values) / len(values) if values else m.NAN


# --- hand-off ---------------------------------------------------------------------------------------------


def hand_off(runtime: Runtime, variant: Variant, params: Params, state: LoopState,
             documents: list[Seed]) -> list[dict[str, Any]]:
    """The frozen Phase A Proposer writes the Phase B set on held-out documents (EVE §3.4, App. C).

    ``eve.handoff_samples`` rollouts per document; the valid triple with evidence and the best F_fmt is kept
    (Dr. Zero's generation script), its e becoming the gold evidence. Each kept triple carries its V-hat under
    the initial Solver, so the set's evidence quality is on record.
    """
    cfg = params.eve
    tokenizer = runtime.backend.tokenizer
    seeds = [doc for doc in documents for _ in range(cfg.handoff_samples)]
    proposals = propose(runtime, variant, seeds)
    best: dict[str, tuple[Triple, Seed]] = {}
    for proposal in proposals:
        triple = seed_triple(proposal, tokenizer, cfg.require_verbatim, params.search.max_doc_tokens)
        kept = best.get(proposal.seed.seed_id)
        if triple.valid and triple.evidence and (kept is None or triple.format_score > kept[0].format_score):
            best[proposal.seed.seed_id] = (triple, proposal.seed)
    chosen = list(best.values())
    verifier = runtime.frozen or runtime.verifier
    pairs = verify_evidence(verifier, runtime.encode, [t for t, _ in chosen], params, state.rng.randrange(2**31))
    rows = [{"question": t.question, "answer": t.answer, "evidence": t.evidence, "seed_id": seed.seed_id,
             "hops": t.hops, "verbatim": t.verbatim, "v_hat": verifier_score(pair)}
            for (t, seed), pair in zip(chosen, pairs, strict=True)]
    log.info("hand-off: %d Proposer samples on %d held-out documents gave %d set questions", len(proposals),
             len(documents), len(rows))
    return rows


# --- phase B ----------------------------------------------------------------------------------------------


def run_phase_b(runtime: Runtime, variant: Variant, params: Params, state: LoopState) -> StepResult:
    """One Phase B iteration (EVE Alg. 2): Solver rollouts on set questions, R_sol, GRPO, a Solver-only update."""
    cfg = params.selfplay
    clock: Counter = Counter()
    pool = state.extra.get("solver_set", [])
    if not pool:
        log.warning("EVE Phase B: the hand-off set is empty (the Phase A Proposer wrote no valid triple with "
                    "evidence); nothing to train this iteration")
        return StepResult({"eve/phase": 2.0, "handoff/set_size": 0.0, "batch/questions": 0.0,
                           "batch/solver_update_skipped": 1.0, "train/weights_changed": 0.0,
                           "train/weight_delta_max": 0.0}, {"solver": []}, [])
    start = int(state.extra.get("set_position", 0))
    items = [pool[(start + k) % len(pool)] for k in range(cfg.batch_size)]
    state.extra["set_position"] = start + len(items)

    tic = time.perf_counter()
    prompts = [runtime.encode(eve_solver_messages(item["question"])) for item in items for _ in range(cfg.group_size)]
    flat = runtime.rollouts(prompts, "solver", runtime.solver_config)
    groups = [flat[k * cfg.group_size:(k + 1) * cfg.group_size] for k in range(len(items))]
    clock["solve"] += time.perf_counter() - tic

    slots = [Slot(item["question"], item["answer"], [], item["seed_id"], "fresh", record=item) for item in items]
    correct = [[bool(t.answer is not None and exact_match(t.answer, item["answer"])) for t in group]
               for item, group in zip(items, groups, strict=True)]
    scored = score_groups(variant, params, slots, groups, correct)
    evidence = evidence_scores(scored, flat, runtime.backend.tokenizer, params.search.max_doc_tokens)
    tic = time.perf_counter()
    current = [verifier_score(pair) for pair in verify_evidence(
        runtime.backend, runtime.encode, [set_triple(item) for item in items], params, state.rng.randrange(2**31))]
    clock["verify"] += time.perf_counter() - tic
    solver_samples = [sample for group in scored.samples for sample in group]
    update = update_metrics(apply_update(runtime, cfg, [], solver_samples, clock), [], solver_samples)
    v_hats = [item["v_hat"] for item in items if item.get("v_hat") is not None]
    metrics = {
        "eve/phase": 2.0,
        "handoff/set_size": float(len(pool)),
        "batch/questions": float(len(items)),
        "solver/reward_mean": m.mean(scored.rewards),
        "solver/accuracy": m.mean([float(c) for cs in correct for c in cs]),
        # Phase B: this iteration's draw from the hand-off set (a later iteration may draw a question again)
        **m.fresh_accuracy(correct, ["fresh"] * len(correct)),
        "solver/rollouts": float(len(flat)),
        "solver/evidence_presence_rate": m.mean([float(p) for p in evidence.present]),
        "solver/evidence_f1_mean": m.mean(evidence.f1s),
        "evidence/verbatim_rate": m.rate(sum(evidence.verbatim), len(evidence.verbatim)),
        "verifier/v_mean": m.mean(current),
        "verifier/v_nonzero": float(sum(abs(v) > 1e-12 for v in current)),
        "verifier/v_set_mean": m.mean(v_hats),
        "verifier/v_set_nonzero": float(sum(abs(v) > 1e-12 for v in v_hats)),
        "format/solver_valid_rate": m.mean([float(rollout_valid(t)) for t in flat]),
        "rollout/searches_solver": m.mean([t.num_searches for t in flat]),
        "rollout/response_tokens_solver": m.mean([t.generated_token_count for t in flat]),
        "train/groups": float(len(groups)),
        "train/groups_nonzero_advantage": float(m.nonzero_advantage_groups(scored.group_advantages)),
        **update, **_times(clock),
    }
    return StepResult(metrics, *_phase_b_records(items, groups, correct, cfg.sample_trajectories))


def _phase_b_records(items: list[dict[str, Any]], groups: list, correct: list[list[bool]],
                     sample_trajectories: int) -> tuple[dict[str, list], list[dict[str, Any]]]:
    """The logged sample trajectories and the iteration's question rows of a Phase B batch."""
    samples_log = {"solver": [{"question": item["question"], "answer": item["answer"],
                               "gold_evidence": item["evidence"], "prediction": t.answer,
                               "evidence": extract_evidence(model_text(t)), "response": model_text(t)}
                              for item, group in zip(items, groups, strict=True) for t in group
                              ][:sample_trajectories]}
    questions = [{"question": item["question"], "answer": item["answer"], "seed_id": item["seed_id"],
                  "source": "eve", "evidence": item["evidence"], "v_hat": item.get("v_hat"),
                  "solver_accuracy": m.mean([float(c) for c in correct])}
                 for item, correct in zip(items, correct, strict=True)]
    return samples_log, questions


@dataclass
class EvidenceScores:
    """What a Phase B batch's Solver quoted: each rollout's evidence F1 against the gold span and its presence,
    and whether each quoted span stands verbatim in the rollout's search results."""

    f1s: list[float] = field(default_factory=list)
    present: list[bool] = field(default_factory=list)
    verbatim: list[bool] = field(default_factory=list)


def evidence_scores(scored: ScoredGroups, rollouts: list[Trajectory], tokenizer: Any = None,
                    max_doc_tokens: int = 0) -> EvidenceScores:
    """The evidence figures of a Phase B batch, from what the Solver reward read and returned: each rollout's
    ``evidence`` field (its quoted span) and ``details['evidence_f1']`` (EVE Eq. 21); and whether each quoted span
    stands verbatim in the rollout's search results."""
    spans = [rollout["evidence"] for rollout in scored.rollouts]
    return EvidenceScores(f1s=list(scored.details.get("evidence_f1", [])), present=[bool(e) for e in spans],
                          verbatim=[is_verbatim(e, returned_snippets(t, tokenizer, max_doc_tokens))
                                    for e, t in zip(spans, rollouts, strict=True) if e])


def set_triple(item: dict[str, Any]) -> Triple:
    """A hand-off set row as the triple the verifier reads (its q, a and gold e)."""
    return Triple(question=item["question"], answer=item["answer"], evidence=item["evidence"], format_score=1.0,
                  verbatim=bool(item.get("verbatim")), verbatim_relaxed=bool(item.get("verbatim")), evidence_tokens=0,
                  hops=int(item.get("hops") or 1), valid=True)


# --- shared -----------------------------------------------------------------------------------------------


def _times(clock: Counter) -> dict[str, float]:
    return {f"time/{name}_s": float(clock[name]) for name in ("propose", "solve", "verify", "update")}


def run_eve_step(runtime: Runtime, variant: Variant, params: Params, state: LoopState) -> StepResult:
    """EVE's step for iteration ``state.iteration + 1``: Phase A, or (after the hand-off) Phase B.

    A run of one phase (``start_phase``) stays in it: Phase A's run never hands off, Phase B's starts with the set.
    """
    planned = int(state.extra.setdefault("phase_a_iterations", phase_a_iterations(params)))
    if state.extra.get("phase") == "a" or state.iteration < planned:
        return run_phase_a(runtime, variant, params, state)
    if "solver_set" not in state.extra:
        tic = time.perf_counter()
        eve = eve_objects(runtime)
        if eve.handoff_documents is None or eve.reset_policy is None:
            raise ValueError("EVE's hand-off needs EveObjects.handoff_documents and EveObjects.reset_policy "
                             "(build_runtime gives both for the 'eve' variant)")
        state.extra["solver_set"] = hand_off(runtime, variant, params, state, eve.handoff_documents())
        eve.reset_policy()  # EVE's Solver starts from the initial weights, not from the trained Proposer
        state.extra["handoff_s"] = time.perf_counter() - tic
    result = run_phase_b(runtime, variant, params, state)
    if "handoff_s" in state.extra:
        result.metrics["time/handoff_s"] = float(state.extra.pop("handoff_s"))
    return result


# --- the hand-off eve on the runtime (searchplay.selfplay.phases: EVE's ``prepare``) ---------------------

PROPOSER_DIR = "proposer"  # the Phase A Proposer's weights, beside the variant's checkpoints


def prepare_runtime(runtime: Runtime, params: Params, start: str, variant: Variant) -> None:
    """EVE's eve on a built runtime (``runtime.recipe``): the hand-off documents, and the restart of the policy
    from ``start``."""
    runtime.recipe = EveObjects(
        handoff_documents=lambda: document_seeds(params, "handoff")[: params.eve.handoff_documents],
        reset_policy=lambda: restart_from_initial(runtime, params, start, variant))


def restart_from_initial(runtime: Runtime, params: Params, start: str, variant: Variant) -> None:
    """EVE's hand-off: keep the Phase A Proposer's weights (``eve.save_proposer``), then a fresh trainer from the
    initial weights (the Solver's initialization, EVE §3.4), and the rollout backend on them."""
    from searchplay.rl import PolicyTrainer

    if params.eve.save_proposer:
        folder = Path(params.selfplay.checkpoint_dir) / variant.name / PROPOSER_DIR
        runtime.trainer.unwrapped_model.save_pretrained(folder)
        runtime.backend.tokenizer.save_pretrained(folder)
        follow_umask(folder)
        log.info("saved the Phase A Proposer to %s", folder)
    runtime.trainer.release_training_state()  # its moments and reference go before a second trainer loads
    runtime.trainer = PolicyTrainer(start, params)
    runtime.backend.update_weights(runtime.trainer.model)
