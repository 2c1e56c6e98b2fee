"""Rule-based question filter (SSP §3.3; thresholds from the SSP code, ``_is_valid_search_question``).

Runs before RAG verification to reject illegal Proposer outputs cheaply. The KG paper keeps the
same filter (KG-paths paper App. B.2: "lightweight rule-based checks remove malformed or
answer-leaking candidates"). A primitive below the stages: self-play, the warm-start and the
question-quality gate all apply the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from searchplay.answers import normalize_answer
from searchplay.templates import RELATION_PHRASES

MIN_QUESTION_CHARS = 10  # SSP code: len(question.strip()) < 10 is invalid
MAX_QUESTION_CHARS = 1000  # SSP code
MIN_QUESTION_WORDS = 10  # SSP code: fewer than 10 whitespace-separated words is invalid

# Rejection reasons, in the order the rules are checked (logged as counts per iteration).
REJECT_REASONS = ("no_question", "empty", "too_short", "too_long", "too_few_words", "answer_in_question",
                  "no_information", "too_few_searches", "duplicate_searches", "no_head_entity",
                  "no_last_relation")

# Words too common in questions to show which relation one asks for ("located in ..." is every place).
GENERIC_WORDS = frozenset({"the", "that", "this", "what", "which", "whose", "where", "with", "from", "into", "is",
                           "of", "or", "an", "a", "in", "to", "by", "on", "located", "next", "thing", "kind",
                           "part", "larger", "whole"})


class ProposerOutput(Protocol):
    """What the filter reads of a Proposer trajectory (``searchplay.agent.trajectory.Trajectory``)."""

    @property
    def question(self) -> str | None: ...
    @property
    def documents(self) -> Sequence[object]: ...
    @property
    def search_queries(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class FilterRules:
    """Thresholds of the rule filter; the defaults are the SSP code's."""

    min_searches: int = 2  # SSP code rejects <= 1 search query (paper: "no search tool invoked")
    reject_duplicate_searches: bool = True  # SSP code: any two identical queries reject

    @classmethod
    def of(cls, selfplay: Any) -> FilterRules:
        """The thresholds ``params.selfplay`` sets: self-play's filter, and the warm-start's, which teaches it."""
        return cls(min_searches=selfplay.min_searches, reject_duplicate_searches=selfplay.reject_duplicate_searches)


def answer_in_question(answer: str, question: str) -> bool:
    """SSP rule (4), 'containing the original answer in the question'.

    True if a* occurs case-insensitively in q (SSP code), or its normalized form (``unicode`` scheme: accents
    folded, punctuation and articles dropped) occurs as whole words in the normalized question, a plural or
    possessive 's' allowed (catches 'Dijon,' vs 'dijon', accents, and 'The Seine' in 'Does Seine ...'). Either
    match rejects. Whole words: 'U.S.' ('us') is not in 'focused', 'The Band' not in 'husband'.

    >>> answer_in_question("Gödel", "Who was godel's advisor?"), answer_in_question("The Band", "Her husband?")
    (True, False)
    """
    if answer.strip().lower() in question.lower():
        return True
    normalized = normalize_answer(answer, "unicode")  # the stricter scheme: a leak with accents is a leak
    pattern = rf"(?<!\S){re.escape(normalized)}s?(?!\S)"
    return bool(normalized) and re.search(pattern, normalize_answer(question, "unicode")) is not None


def names_entity(question: str, names: Sequence[str]) -> bool:
    """Whether ``question`` names the entity: one of its ``names`` (label, aliases) as a case-insensitive
    substring, or in normalized form (accents and punctuation folded).

    >>> names_entity("Which sea is next to the capital of Türkiye?", ["Turkey", "Turkiye"])
    True
    >>> names_entity("What is the continent of the country of Romania?", ["Bucharest"])
    False
    """
    folded, normalized = question.casefold(), f" {normalize_answer(question, 'unicode')} "
    for name in (n.strip() for n in names):
        if not name:
            continue
        normalized_name = normalize_answer(name, "unicode")
        if name.casefold() in folded or (normalized_name and f" {normalized_name} " in normalized):
            return True
    return False


def relation_words(label: str) -> set[str]:
    """The words that show a question asks for relation ``label``: its label's and its template phrase's
    content words (``searchplay.templates``), lower-case, without the generic ones.

    >>> sorted(relation_words("shares border with"))
    ['border', 'bordering', 'country', 'shares']
    """
    phrase = RELATION_PHRASES.get(" ".join(label.split()).casefold(), "").replace("{x}", "")
    return {w for w in re.findall(r"[a-z]+", f"{label} {phrase}".casefold()) if len(w) >= 4 and w not in GENERIC_WORDS}


def asks_relation(question: str, label: str) -> bool:
    """Whether ``question`` mentions relation ``label`` (one of its ``relation_words`` as a case-insensitive
    substring, so "border" matches "bordering"). A KG Proposer's question that does not mention the path's
    last relation asks for something else than the path's end (its gold).

    >>> asks_relation("Which continent is the country of Romania on?", "continent")
    True
    >>> asks_relation("What is the continent that is the country of Romania?", "subclass of")
    False
    """
    words = relation_words(label)
    folded = question.casefold()
    return not words or any(word in folded for word in words)  # a relation without content words: unchecked


def rule_filter(trajectory: ProposerOutput, answer: str, rules: FilterRules = FilterRules(),
                head_names: Sequence[str] | None = None, last_relation: str | None = None) -> str | None:
    """Why a Proposer trajectory's question is rejected (one of ``REJECT_REASONS``), or None if it passes.

    SSP §3.3 rules (1)-(4) with the SSP code's thresholds: a first ``<question>`` span must exist, be
    non-empty, have 10-1000 characters and at least 10 words, not contain a*; the trajectory must hold
    retrieved material and at least ``min_searches`` distinct search queries. With ``head_names`` (a KG
    path's head entity: label and aliases) the question must also name it: a question that does not start
    where its path starts cannot have the path's end as its answer (a rule beyond the papers'). With
    ``last_relation`` (the label of the path's last hop) it must mention that relation (``asks_relation``).
    """
    if trajectory.question is None:
        return "no_question"
    question = trajectory.question.strip()
    if not question:
        return "empty"
    if len(question) < MIN_QUESTION_CHARS:
        return "too_short"
    if len(question) > MAX_QUESTION_CHARS:
        return "too_long"
    if len(question.split()) < MIN_QUESTION_WORDS:
        return "too_few_words"
    if answer_in_question(answer, question):
        return "answer_in_question"
    if not trajectory.documents:
        return "no_information"
    queries = [q.strip() for q in trajectory.search_queries]
    if len(set(queries)) < rules.min_searches:
        return "too_few_searches"
    if rules.reject_duplicate_searches and len(set(queries)) != len(queries):
        return "duplicate_searches"
    if head_names is not None and not names_entity(question, head_names):
        return "no_head_entity"
    if last_relation is not None and not asks_relation(question, last_relation):
        return "no_last_relation"
    return None
