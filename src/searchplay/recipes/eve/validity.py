"""EVE's format validity in the warm-start: the rates its demos must raise, sampled on held-out subgraphs.

``eve_format_validity`` is the EVE format's ``validity`` in the warm-start's format table
(``searchplay.warmstart.formats``): the EVE warm-start stage (``searchplay.recipes.eve.warmstart``) measures it
before and after training, and the shared stage beside its own rates with ``eve.warmstart_demos``.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from searchplay.warmstart.validity import rate


def eve_format_validity(backend: Any, search_tool: Any, records: list[dict[str, Any]], params: Any,
                        seed: int = 0) -> tuple[dict[str, float], dict[str, list[dict]]]:
    """EVE's formats on held-out subgraphs planned as the EVE demos are (source document, hop count, q, e):

    ``proposer_eve_valid_rate``: the Proposer's triple passes Dr. Zero's filter (F_fmt > 0) and has evidence;
    ``proposer_eve_verbatim_rate``: of those, evidence copied verbatim; ``solver_eve_evidence_rate``: the EVE
    Solver closes an answer after quoting evidence; ``verifier_eve_answer_rate``: the single-turn verifier
    writes an ``<answer>`` span. Records the planner cannot ground are left out (their count is logged).
    """
    from searchplay.agent.rollout import RolloutConfig, run_rollouts
    from searchplay.llm.backend import SamplingParams
    from searchplay.llm.tokenizer import encode_prompt
    from searchplay.recipes.eve.demos import EveDemoPlan, document_text, eve_queries, plan_eve_demo
    from searchplay.recipes.eve.output import model_text, read_triple
    from searchplay.recipes.eve.prompts import (
        eve_proposer_messages,
        eve_solver_messages,
        extract_evidence,
        extract_last_answer,
        verifier_messages,
    )

    tokenizer, top_k = backend.tokenizer, params.search.top_k
    queries = eve_queries(records, params.warmstart.max_searches)
    found = dict(zip(queries, search_tool.search(queries, top_k=top_k), strict=True)) if queries else {}
    rng = random.Random(seed)
    plans = [p for p in (plan_eve_demo(r, found, params.warmstart.max_searches, rng) for r in records)
             if isinstance(p, EveDemoPlan)]
    if not plans:
        return {"eve_check_prompts": 0.0}, {}
    config = RolloutConfig.from_params(params, seed=seed)
    proposer_config = replace(config, temperature=params.selfplay.proposer_temperature)

    def encode(messages: list[dict]) -> list[int]:
        return encode_prompt(tokenizer, messages)

    documents = [document_text(p.document) for p in plans]
    proposed = run_rollouts(backend, search_tool, [encode(eve_proposer_messages(d, p.hops_used))
                                                   for d, p in zip(documents, plans, strict=True)],
                            "proposer", proposer_config, top_k=top_k)
    triples = [read_triple(t, d, p.hops_used, tokenizer, max_doc_tokens=params.search.max_doc_tokens)
               for t, d, p in zip(proposed, documents, plans, strict=True)]
    with_evidence = [t for t in triples if t.valid and t.evidence]
    solved = run_rollouts(backend, search_tool, [encode(eve_solver_messages(p.question)) for p in plans], "solver",
                          config, top_k=top_k)
    quoted = [extract_evidence(model_text(t)) for t in solved]
    replies = backend.generate([encode(verifier_messages(p.question, p.evidence)) for p in plans],
                               SamplingParams(max_new_tokens=params.eve.verifier_max_tokens,
                                              temperature=params.eve.verifier_temperature, stop=("</answer>",),
                                              seed=seed))
    results = {
        "eve_check_prompts": float(len(plans)),
        "proposer_eve_valid_rate": rate([t.valid and bool(t.evidence) for t in triples]),
        "proposer_eve_verbatim_rate": rate([t.verbatim for t in with_evidence]) if with_evidence else 0.0,
        "solver_eve_evidence_rate": rate([t.answer is not None and bool(e) for t, e in zip(solved, quoted,
                                                                                            strict=True)]),
        "verifier_eve_answer_rate": rate([extract_last_answer(c.text) is not None for c in replies]),
    }
    return results, _eve_samples(plans, triples, proposed, solved, quoted)


def _eve_samples(plans: list, triples: list, proposed: list, solved: list,
                 quoted: list[str | None]) -> dict[str, list[dict]]:
    """The decoded EVE Proposer and Solver samples of the format check (for the report)."""
    from searchplay.recipes.eve.output import model_text

    return {"proposer_eve": [{"hops": p.hops_used, "question": t.question, "answer": t.answer,
                              "evidence": t.evidence, "format_score": t.format_score, "verbatim": t.verbatim,
                              "output": model_text(r)} for p, t, r in zip(plans, triples, proposed, strict=True)],
            "solver_eve": [{"question": p.question, "answer": p.answer, "prediction": t.answer, "evidence": e,
                            "output": model_text(t)} for p, t, e in zip(plans, solved, quoted, strict=True)]}
