"""Format validity per role, sampled on held-out prompts with the self-play rollout loop and filters.

The rates the warm-start must raise, each measured exactly as self-play
counts it: ``proposer_valid_rate`` passes the self-play rule filter (a ``<question>`` of 10+ words,
no answer leak, 2+ distinct searches), ``solver_answer_rate`` closes ``<answer>`` within the turn
budget, ``verifier_format_rate`` writes SSP's "Answer:" line within its 70 tokens. Rollouts use
``params.agent`` (turns, tokens, temperature 1.0 as self-play samples). The formats a recipe adds
(``searchplay.warmstart.formats``) bring their own rates, measured here when the params enable them.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from searchplay.agent.prompts import solver_messages
from searchplay.agent.proposer_prompts import (
    RAG_MAX_TOKENS,
    RAG_TEMPERATURE,
    kg_proposer_messages,
    parse_rag_answer,
    rag_verification_messages,
    ssp_proposer_messages,
)
from searchplay.answers import normalize_answer
from searchplay.question_rules import FilterRules, rule_filter
from searchplay.templates import template_question
from searchplay.warmstart.demos import hops, searched_hops
from searchplay.warmstart.formats import enabled_formats


def rate(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def format_validity(backend: Any, search_tool: Any, records: list[dict[str, Any]], params: Any,
                    format_documents: Any, seed: int = 0) -> tuple[dict[str, float], dict[str, list[dict]]]:
    """Sample every role once per record; returns the rates and the decoded samples (for the report)."""
    from searchplay.agent.rollout import RolloutConfig
    from searchplay.llm.tokenizer import encode_prompt

    def encode(messages: list[dict]) -> list[int]:
        return encode_prompt(backend.tokenizer, messages)

    solver_config = RolloutConfig.from_params(params, seed=seed)
    results: dict[str, float] = {}
    samples: dict[str, list[dict]] = {}
    checks = [_proposer_validity(backend, search_tool, records, params, encode, solver_config),
              _solver_validity(backend, search_tool, records, params, encode, solver_config)]
    if params.warmstart.verifier:  # a role the warm-start does not teach is not checked
        checks.append(_verifier_validity(backend, search_tool, records, params, encode, format_documents, seed))
    for rates, decoded in checks:
        results.update(rates)
        samples.update(decoded)
    for demo_format in enabled_formats(params):  # a recipe's formats (searchplay.warmstart.formats)
        more_rates, more_samples = demo_format.validity(backend, search_tool, records, params, seed)
        results.update(more_rates)
        samples.update(more_samples)
    return results, samples


def _proposer_validity(backend: Any, search_tool: Any, records: list[dict[str, Any]], params: Any, encode: Any,
                       solver_config: Any) -> tuple[dict[str, float], dict[str, list[dict]]]:
    """The Proposers of ``warmstart.proposers`` (KG, SSP), one batch: the share of questions that pass the rule
    filter, per prompt family and their mean."""
    from searchplay.agent.rollout import run_rollouts

    proposer_config = replace(solver_config, temperature=params.selfplay.proposer_temperature)
    rules = FilterRules.of(params.selfplay)
    answers = [str(r["answer"]) for r in records]
    results: dict[str, float] = {}
    samples: dict[str, list[dict]] = {}
    prompts = {"kg": kg_proposer_messages,
               "ssp": lambda r: ssp_proposer_messages(str(r["answer"]), int(r["num_hops"]))}
    families = [(family, prompts[family]) for family in params.warmstart.proposers]
    every = run_rollouts(backend, search_tool, [encode(build(r)) for _, build in families for r in records],
                         "proposer", proposer_config, top_k=params.search.top_k)  # 2n rows at once: less than n twice
    for index, (family, _) in enumerate(families):
        trajectories = every[index * len(records):(index + 1) * len(records)]
        verdicts = [rule_filter(t, a, rules) for t, a in zip(trajectories, answers, strict=True)]
        results[f"proposer_{family}_valid_rate"] = rate([v is None for v in verdicts])
        samples[f"proposer_{family}"] = [{"answer": a, "question": t.question, "rejected": v,
                                          "output": backend.tokenizer.decode(t.response_ids, skip_special_tokens=False)}
                                         for t, a, v in zip(trajectories, answers, verdicts, strict=True)]
    family_rates = [results[f"proposer_{family}_valid_rate"] for family, _ in families]
    results["proposer_valid_rate"] = sum(family_rates) / len(family_rates)
    return results, samples


def _solver_validity(backend: Any, search_tool: Any, records: list[dict[str, Any]], params: Any, encode: Any,
                     solver_config: Any) -> tuple[dict[str, float], dict[str, list[dict]]]:
    """The Solver on each record's template question: answer, search and exact-match rates."""
    from searchplay.agent.rollout import run_rollouts

    answers = [str(r["answer"]) for r in records]
    questions = [template_question(r) for r in records]
    solver_prompts = [encode(solver_messages(q, solver_config.question_format)) for q in questions]
    solved = run_rollouts(backend, search_tool, solver_prompts, "solver", solver_config, top_k=params.search.top_k)
    results = {
        "solver_answer_rate": rate([t.valid and t.answer is not None for t in solved]),
        "solver_search_rate": rate([t.num_searches > 0 for t in solved]),
        "solver_em": rate([t.answer is not None and normalize_answer(t.answer) == normalize_answer(a)
                           for t, a in zip(solved, answers, strict=True)]),
    }
    samples = [{"question": q, "answer": a, "prediction": t.answer,
                "output": backend.tokenizer.decode(t.response_ids, skip_special_tokens=False)}
               for q, a, t in zip(questions, answers, solved, strict=True)]
    return results, {"solver": samples}


def _verifier_validity(backend: Any, search_tool: Any, records: list[dict[str, Any]], params: Any, encode: Any,
                       format_documents: Any, seed: int) -> tuple[dict[str, float], dict[str, list[dict]]]:
    """The RAG verifier over each record's own documents and noise: the share of replies that parse."""
    from searchplay.llm.backend import SamplingParams

    top_k = params.search.top_k
    answers = [str(r["answer"]) for r in records]
    questions = [template_question(r) for r in records]
    searched = [searched_hops(hops(r), params.warmstart.max_searches)["proposer"] for r in records]
    queries = [hop.query for chain in searched for hop in chain]  # what a Proposer demo searches
    found = search_tool.search(queries, top_k=top_k) if queries else []
    rng, prompts, cursor = random.Random(seed), [], 0
    for chain, question in zip(searched, questions, strict=True):
        count = len(chain)
        own = [d for block in found[cursor:cursor + count] for d in block]
        cursor += count
        noise = [d for block in found for d in block if d not in own]
        docs = own + rng.sample(noise, min(params.selfplay.noisy_docs, len(noise)))
        rng.shuffle(docs)
        prompts.append(encode(rag_verification_messages(format_documents(docs), question)))
    replies = backend.generate(prompts, SamplingParams(max_new_tokens=RAG_MAX_TOKENS, temperature=RAG_TEMPERATURE,
                                                       seed=seed))
    parsed = [parse_rag_answer(c.text) for c in replies]
    samples = [{"question": q, "answer": a, "parsed": p, "output": c.text}
               for q, a, p, c in zip(questions, answers, parsed, replies, strict=True)]
    return {"verifier_format_rate": rate([p is not None for p in parsed])}, {"verifier": samples}
