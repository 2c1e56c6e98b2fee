"""Prompt messages for the agent roles (SSP App. D; notes/ssp.md §10.3).

The Solver prompt is the Search-R1 prompt as printed in the SSP paper's Appendix D, verbatim
(including its "as many times as your want"); the official code's training string differs by a
comma and two words (notes/ssp.md §10.3), the evaluation data uses the printed one.
"""

from __future__ import annotations

SOLVER_SYSTEM_PROMPT = "You are a helpful and harmless assistant."

SOLVER_USER_TEMPLATE = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}"
)


def solver_messages(question: str) -> list[dict[str, str]]:
    """Chat messages for one Solver rollout: SSP App. D Search-R1 system + user prompt.

    >>> solver_messages("Who wrote Hamlet?")[1]["content"].endswith("Question: Who wrote Hamlet?")
    True
    """
    question = question.strip()
    if not question:
        raise ValueError("solver_messages: the question is empty; a Solver rollout needs a question to answer")
    return [
        {"role": "system", "content": SOLVER_SYSTEM_PROMPT},
        {"role": "user", "content": SOLVER_USER_TEMPLATE.format(question=question)},
    ]
