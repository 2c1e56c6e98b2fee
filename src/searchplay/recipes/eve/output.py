"""EVE's Proposer output read off a rollout: the (q, a, e) triple, Dr. Zero's format score, the verbatim check.

Shared by self-play (``searchplay.recipes.eve.phases``) and the warm-start's format check, so both read the
Proposer the same way (EVE §3.1, Eq. 9, App. D; docs/decisions/eve.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from searchplay.agent.trajectory import Trajectory
from searchplay.answers import normalize_answer
from searchplay.recipes.eve.prompts import extract_evidence, extract_last_answer
from searchplay.recipes.eve.rewards import drzero_format_score, is_verbatim

_THINK_FIRST = re.compile(r"^\s*<think>(.*?)</think>", re.DOTALL)  # Dr. Zero's planning-turn test (App. D)
LEAK_TOKENS = 8  # the paper leaves leakage open: spans this short, or equal to the answer, are counted as answer leaks


@dataclass(frozen=True)
class Triple:
    """What one EVE Proposer rollout produced, and how the filters and the format score read it."""

    question: str
    answer: str
    evidence: str
    format_score: float  # F_fmt (Eq. 9); 0 = invalid
    verbatim: bool  # e a contiguous span of d or a returned snippet, whitespace collapsed
    verbatim_relaxed: bool  # the same after Norm()
    evidence_tokens: int  # |e| in Proposer tokens (Eq. 15)
    hops: int
    valid: bool

    @property
    def leaks_answer(self) -> bool:
        """Norm(e) == Norm(a), or a span shorter than ``LEAK_TOKENS`` that holds a (our rule: the paper leaves
        leakage open)."""
        e, a = normalize_answer(self.evidence), normalize_answer(self.answer)
        return bool(e) and (e == a or (self.evidence_tokens < LEAK_TOKENS and a in e))


def model_text(trajectory: Trajectory) -> str:
    """Everything the model wrote, turn after turn (no prompt, no ``<information>``)."""
    return "\n".join(turn.text for turn in trajectory.turns)


def returned_snippets(trajectory: Trajectory, tokenizer: Any = None, max_doc_tokens: int = 0) -> list[str]:
    """The rollout's retrieved passages as text, ``title\\ntext`` (the verbatim check's and F_ans's Sigma), each
    text cut as the rollout showed it (``search.max_doc_tokens``, ``format_documents``): a span the model never
    saw is no evidence it copied."""
    from searchplay.retrieval.search import truncate_tokens

    if not max_doc_tokens:
        return [f"{doc.title}\n{doc.text}" for doc in trajectory.documents]
    return [f"{doc.title}\n{truncate_tokens(doc.text.replace(chr(10), ' '), max_doc_tokens, tokenizer)}"
            for doc in trajectory.documents]


def read_triple(trajectory: Trajectory, document: str, hops: int, tokenizer: Any,
                require_verbatim: bool = False, max_doc_tokens: int = 0) -> Triple:
    """(q, a, e) of a Proposer rollout on source ``document`` with ``hops`` prescribed, with Dr. Zero's F_fmt
    (Eq. 9, App. D) and the verbatim check against the document and the returned snippets (§3.1).

    q is the rollout's ``<question>``; a and e the last ``<answer>`` and ``<evidence>`` spans it wrote.
    Valid: F_fmt > 0 (q and a non-empty, Norm(a) not in Norm(q)), and with ``require_verbatim`` a verbatim e.
    """
    text = model_text(trajectory)
    question = (trajectory.question or "").strip()
    answer = (extract_last_answer(text) or "").strip()
    evidence = (extract_evidence(text) or "").strip()
    snippets = returned_snippets(trajectory, tokenizer, max_doc_tokens)
    searches = [turn for turn in trajectory.turns if turn.action == "search"]
    answered = [turn for turn in searches if turn.documents and turn.search_error is None]
    score = drzero_format_score(question, answer, assistant_turns=len(trajectory.turns),
                                think_turns=sum(bool(_THINK_FIRST.match(t.text)) for t in trajectory.turns),
                                tool_calls=len(searches), tool_responses=len(answered), hops=hops,
                                source_document=document, responses_text=snippets)
    sources = [document, *snippets]
    verbatim = is_verbatim(evidence, sources)
    tokens = len(tokenizer.encode(evidence, add_special_tokens=False)) if evidence else 0
    valid = score > 0 and (verbatim or not require_verbatim)
    return Triple(question, answer, evidence, score, verbatim, is_verbatim(evidence, sources, relaxed=True),
                  tokens, hops, valid)
