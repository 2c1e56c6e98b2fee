"""The Search-R1 / SSP tag protocol: stop strings, action parsing and trajectory-level extraction.

Tags (SSP App. A.2, D): ``<think>`` reasoning, ``<search>`` a tool call, ``<information>`` the
environment's reply (never the model's), ``<answer>`` the Solver's final answer, ``<question>`` the
Proposer's final output. Pure functions over text; the rollout loop (``searchplay.agent.rollout``)
turns them into environment steps. Choices where the papers are silent: docs/decisions/agent.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from searchplay.agent.trajectory import Role

TAGS = ("think", "search", "information", "answer", "question")
_ANY_TAG = re.compile(r"</?(?:think|search|information|answer|question)>")

# The tag that ends each role's rollout; generation also stops after every </search> (SSP §3, App. B.1).
FINAL_TAG: dict[str, str] = {"solver": "answer", "proposer": "question"}


def stop_strings(role: Role) -> tuple[str, ...]:
    """Strings that end one generation call: ``</search>`` and the role's final closing tag (plus EOS)."""
    return ("</search>", f"</{FINAL_TAG[role]}>")


# Search-R1's corrective observation for an invalid action (search_r1/llm_agent/generation.py,
# execute_predictions), worded for the role's final tag.
_CORRECTIVE = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
    "</search>. If I want to give the final {what}, I should put the {what} between <{tag}> and </{tag}>. "
    "Let me try again.\n"
)


def corrective_message(role: Role) -> str:
    """The environment text appended after an invalid action (Search-R1's wording; 'question' for the Proposer)."""
    tag = FINAL_TAG[role]
    return _CORRECTIVE.format(what=tag, tag=tag)


# The environment's reply around search results (the whitespace differs between the two codebases):
# SSP's sglang tool reply and Search-R1's generation.py ``f'\n\n<information>{obs.strip()}</information>\n\n'``.
INFORMATION_FORMATS: dict[str, str] = {
    "ssp": "\n<information>\n{results}</information>\n\n",
    "searchr1": "\n\n<information>{results}</information>\n\n",
}


def information_block(formatted_documents: str, style: str = "ssp") -> str:
    """Wrap search results as the tool reply; ``style`` 'ssp' (default) or 'searchr1' (``agent.information_format``).

    >>> information_block("Doc 1 ...\\n"), information_block("Doc 1 ...\\n", "searchr1")
    ('\\n<information>\\nDoc 1 ...</information>\\n\\n', '\\n\\n<information>Doc 1 ...</information>\\n\\n')
    """
    if style not in INFORMATION_FORMATS:
        raise ValueError(f"information format {style!r}: expected one of {sorted(INFORMATION_FORMATS)}")
    return INFORMATION_FORMATS[style].format(results=formatted_documents.strip())


def tag_spans(text: str, tag: str) -> list[str]:
    """Contents of every well-formed ``<tag>…</tag>`` span, in order, innermost on nesting.

    Each closing tag pairs with the nearest opening tag before it (and after the previous pair);
    closing tags without an opening tag are ignored. Contents are stripped.

    >>> tag_spans("<a>x</a> <answer> A <answer>B</answer> </answer> <answer>C</answer>", "answer")
    ['B', 'C']
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    spans: list[str] = []
    cursor = 0
    while (close := text.find(closing, cursor)) != -1:
        start = text.rfind(opening, cursor, close)
        if start != -1:
            spans.append(text[start + len(opening) : close].strip())
        cursor = close + len(closing)
    return spans


def extract_answer(text: str) -> str | None:
    """The Solver's answer: the LAST well-formed ``<answer>`` span (SSP quark_score.py), or None."""
    spans = tag_spans(text, "answer")
    return spans[-1] if spans else None


def extract_question(text: str) -> str | None:
    """The Proposer's question: the FIRST well-formed ``<question>`` span, or None."""
    spans = tag_spans(text, "question")
    return spans[0] if spans else None


def extract_think(text: str) -> str:
    """Every ``<think>`` span joined with newlines (the trajectory text WCR matches waypoints in)."""
    return "\n".join(span for span in tag_spans(text, "think") if span)


def count_answer_tags(text: str, rule: str = "either") -> int:
    """The answer-tag count that the spam guard compares with its limit, in model-generated text.

    ``either`` (SSP code, quark_score.py): the larger of the ``<answer>`` and the ``</answer>`` counts,
    so the guard fires on more than 10 opening *or* more than 10 closing tags. ``sum``: both counts
    added (this project's earlier rule, kept as ``agent.answer_tag_rule: sum``).

    >>> count_answer_tags("<answer>" * 6 + "a</answer>"), count_answer_tags("<answer>a</answer>", "sum")
    (6, 2)
    """
    opening, closing = text.count("<answer>"), text.count("</answer>")
    if rule == "either":
        return max(opening, closing)
    if rule == "sum":
        return opening + closing
    raise ValueError(f"answer tag rule {rule!r}: expected 'either' (SSP code) or 'sum'")


def answer_tag_penalty(count: int, limit: int = 10) -> float:
    """Score multiplier against answer-tag spam: 1/4 above ``limit`` tags, else 1.

    SSP official code (quark_score.py, a reward spam guard the paper does not mention): a Solver response with
    more than 10 answer tags has its score divided by 4. Param: ``agent.max_answer_tags``.

    >>> answer_tag_penalty(2), answer_tag_penalty(11)
    (1.0, 0.25)
    """
    return 0.25 if count > limit else 1.0


ActionKind = Literal["search", "answer", "question", "invalid"]


@dataclass(frozen=True)
class Action:
    """What one generated turn asks the environment to do."""

    kind: ActionKind
    content: str = ""
    reason: str | None = None  # why an action is invalid


def parse_action(turn_text: str, role: Role) -> Action:
    """Read the action of one generation call (which stopped at a closing tag, EOS or the length budget).

    The action is the earliest well-formed ``<search>`` or final-tag span (Search-R1's first-match rule;
    generation stops at the first closing tag, so there is at most one). Invalid: no complete action,
    an empty span, or a span that contains another protocol tag (nested tags).

    >>> parse_action("<think>x</think><search> Paris </search>", "solver")
    Action(kind='search', content='Paris', reason=None)
    >>> parse_action("<answer>a <search>b</answer>", "solver").reason
    'nested tags inside <answer>'
    """
    final = FINAL_TAG[role]
    candidates = []
    for tag in ("search", final):
        close = turn_text.find(f"</{tag}>")
        if close != -1:
            candidates.append((close, tag))
    for close, tag in sorted(candidates):
        start = turn_text.rfind(f"<{tag}>", 0, close)
        if start == -1:
            continue
        content = turn_text[start + len(tag) + 2 : close]
        if _ANY_TAG.search(content):
            return Action("invalid", content.strip(), f"nested tags inside <{tag}>")
        if not content.strip():
            return Action("invalid", "", f"empty <{tag}>")
        return Action(tag, content.strip())  # type: ignore[arg-type]
    if candidates:
        return Action("invalid", reason=f"</{candidates[0][1]}> without an opening tag")
    return Action("invalid", reason=f"no <search> or <{final}> action")
