"""Warm-start demos of EVE's formats: the (q, a, e) Proposer, the evidence-quoting Solver, the verifier.

Built from the warm-start split's KG subgraphs with real searches, as the other demos are
(``searchplay.warmstart.demos``). For a path e0 -r1-> e1 -r2-> e2 ... an EVE Proposer demo of h hops:

* the source document is a passage that the search for r1 of e0 returns and that names both e0 and
  e1 (hop 1 is in the document, and so is its first fact);
* it searches the next h - 1 edges (r2 of e1, ...), each result naming the edge's tail;
* it answers e_h, quotes as evidence the sentence of the last document (or of the source document for
  h = 1) that names e_h, verbatim, and asks the template question of the path's first h edges
  ("What is the continent of the country of Ravenna?"), which names only hop 1.

The Solver demo answers that question with the same searches from e0, quoting the same sentence in
``<evidence>`` before its ``<answer>``; the verifier demo answers it from (q, e) in one turn. Demos
whose question leaks the answer (EVE's validity filter) or whose documents do not name the hops are
dropped with a reason.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from searchplay.agent.protocol import information_block
from searchplay.recipes.eve.prompts import eve_proposer_messages, eve_solver_messages, verifier_messages
from searchplay.recipes.eve.rewards import eve_valid
from searchplay.retrieval.types import Document
from searchplay.templates import template_question
from searchplay.warmstart.demos import Demo, DemoBuilder, Hop, Segment, hops, prefix_record, search_turn

EVE_ROLES: tuple[str, ...] = ("proposer_eve", "solver_eve", "verifier_eve")
HOP_WEIGHTS = (4, 3, 2, 1)  # EVE §4.1: h in 1..4 at 4:3:2:1, truncated to what a demo can ground

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentence_naming(text: str, name: str) -> str | None:
    """The first sentence of ``text`` that contains ``name`` (case-insensitive), verbatim, or None.

    >>> sentence_naming("Ravenna is old. It lies in Italy, near Rimini. Rome too.", "italy")
    'It lies in Italy, near Rimini.'
    """
    needle = name.casefold()
    for sentence in _SENTENCE_END.split(text):
        if needle in sentence.casefold():
            return sentence.strip()
    return None


def document_text(document: Document) -> str:
    """A passage as an EVE source document, ``(Title: t)\\n<text>`` (as ``load_document_seeds`` writes it)."""
    return f"(Title: {document.title})\n{document.text}"


def first_naming(documents: Sequence[Document], *names: str) -> Document | None:
    """The first document whose title or text names every one of ``names``."""
    for document in documents:
        text = f"{document.title} {document.text}".casefold()
        if all(name.casefold() in text for name in names):
            return document
    return None


def proposer_final(hops_used: int, answer: str, evidence: str, question: str) -> str:
    return (f"<think> The chain has {hops_used} hops and ends at {answer}. I quote the sentence that states it and "
            f"ask without naming it. </think>\n<answer> {answer} </answer>\n<evidence> {evidence} </evidence>\n"
            f"<question> {question} </question>")


def solver_final(chain: list[Hop], hops_used: int, answer: str, evidence: str) -> str:
    return (f"<think> The results say {chain[hops_used - 1].phrase} is {answer}. </think>\n"
            f"<evidence> {evidence} </evidence>\n<answer> {answer} </answer>")


class EveDemoPlan:
    """One record's EVE demo plan: the source document, the hop count, the searched documents, q, a, e."""

    def __init__(self, chain: list[Hop], document: Document, first_block: list[Document], hops_used: int,
                 searched: list[list[Document]], question: str, answer: str, evidence: str):
        self.chain, self.document, self.first_block, self.hops_used = chain, document, first_block, hops_used
        self.searched, self.question, self.answer, self.evidence = searched, question, answer, evidence


def plan_eve_demo(record: dict[str, Any], found: dict[str, list[Document]], max_searches: int,
                  rng: random.Random) -> EveDemoPlan | str:
    """An EVE demo plan for ``record`` from the searches in ``found`` (query -> documents), or a drop reason."""
    chain = hops(record)
    first_block = found.get(chain[0].query, [])
    document = first_naming(first_block, chain[0].head, chain[0].tail)
    if document is None:
        return "no_source_document"
    limit = min(len(chain), max_searches + 1, len(HOP_WEIGHTS))
    wanted = rng.choices(range(1, limit + 1), HOP_WEIGHTS[:limit])[0]
    searched: list[list[Document]] = []
    for k in range(1, wanted):  # hop k+1 comes from searching edge k
        block = found.get(chain[k].query, [])
        if first_naming(block, chain[k].tail) is None:
            break
        searched.append(block)
    hops_used = 1 + len(searched)
    answer = chain[hops_used - 1].tail
    source = first_naming(searched[-1], answer) if searched else document
    evidence = sentence_naming(source.text, answer) if source is not None else None
    if evidence is None:
        return "no_evidence_sentence"
    question = template_question(prefix_record(record, hops_used))
    if not eve_valid(question, answer):
        return "answer_in_question"
    return EveDemoPlan(chain, document, first_block, hops_used, searched, question, answer, evidence)


def eve_queries(records: Sequence[dict[str, Any]], max_searches: int) -> list[str]:
    """Every query the EVE demos of ``records`` may need: each path's first ``max_searches + 1`` edges."""
    return sorted({hop.query for record in records for hop in hops(record)[: max_searches + 1]})


def build_eve_demos(builder: DemoBuilder, records: list[dict[str, Any]], roles: Sequence[str],
                    rng: random.Random) -> tuple[list[Demo], Counter]:
    """The EVE demos of ``roles`` (a subset of ``EVE_ROLES``) for each record, and the drop reasons."""
    wanted = [role for role in roles if role in EVE_ROLES]
    if not wanted:
        return [], Counter()
    queries = eve_queries(records, builder.max_searches)
    found = dict(zip(queries, builder.search(queries), strict=True)) if queries else {}
    demos, dropped = [], Counter()
    for record in records:
        plan = plan_eve_demo(record, found, builder.max_searches, rng)
        if isinstance(plan, str):
            dropped.update({f"{role}:{plan}": 1 for role in wanted})
            continue
        for role in wanted:
            demos.append(eve_demo(builder, role, str(record["id"]), plan))
    return demos, dropped


def eve_demo(builder: DemoBuilder, role: str, record_id: str, plan: EveDemoPlan) -> Demo:
    """One EVE demo: the role's self-play prompt, its turns with real ``<information>`` blocks, masks."""
    demo = Demo(role, record_id)

    def model(text: str) -> None:
        demo.segments.append(Segment(builder.encode_text(text), True))

    def environment(block: list[Document]) -> None:
        reply = information_block(builder.format_documents(block), builder.information_format)
        demo.segments.append(Segment(builder.encode_text(reply), False))

    if role == "verifier_eve":
        demo.segments.append(Segment(builder.encode_prompt(verifier_messages(plan.question, plan.evidence)), False))
        model(f"<answer> {plan.answer} </answer>")
        return demo
    if role == "proposer_eve":
        messages = eve_proposer_messages(document_text(plan.document), plan.hops_used)
        demo.segments.append(Segment(builder.encode_prompt(messages), False))
        for k, block in enumerate(plan.searched, start=1):
            model(search_turn(plan.chain, k))
            environment(block)
        model(proposer_final(plan.hops_used, plan.answer, plan.evidence, plan.question))
        return demo
    demo.segments.append(Segment(builder.encode_prompt(eve_solver_messages(plan.question)), False))
    for k, block in enumerate([plan.first_block, *plan.searched]):
        model(search_turn(plan.chain, k))
        environment(block)
    model(solver_final(plan.chain, plan.hops_used, plan.answer, plan.evidence))
    return demo
