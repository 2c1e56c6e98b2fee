"""Prompt messages for the agent roles (SSP App. D).

The Solver prompt is the Search-R1 prompt as printed in the SSP paper's Appendix D, verbatim
(including its "as many times as your want"); the official code's training string differs by a
comma and two words (SSP App. D), the evaluation data uses the printed one.
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


QUESTION_FORMATS = ("plain", "searchr1")


def format_question(question: str, style: str = "plain") -> str:
    """The question as the prompt's ``{question}`` slot receives it.

    ``plain``: stripped (SSP code's training prompt). ``searchr1``: Search-R1's data preprocessing
    (``scripts/data_process/nq_search.py``), whose files SSP evaluates on: a "?" appended when the
    question does not end with one, and a newline after it (the template's ``Question: {question}\\n``).

    >>> format_question(" who wrote hamlet "), format_question("who wrote hamlet", "searchr1")
    ('who wrote hamlet', 'who wrote hamlet?\\n')
    """
    question = question.strip()
    if style == "plain":
        return question
    if style == "searchr1":
        return (question if question.endswith("?") else question + "?") + "\n"
    raise ValueError(f"question format {style!r}: expected one of {QUESTION_FORMATS}")


def solver_messages(question: str, question_format: str = "plain") -> list[dict[str, str]]:
    """Chat messages for one Solver rollout: SSP App. D Search-R1 system + user prompt.

    ``question_format``: see ``format_question`` (``agent.question_format``, ``evaluate.question_format``).

    >>> solver_messages("Who wrote Hamlet?")[1]["content"].endswith("Question: Who wrote Hamlet?")
    True
    """
    if not question.strip():
        raise ValueError("solver_messages: the question is empty; a Solver rollout needs a question to answer")
    return [
        {"role": "system", "content": SOLVER_SYSTEM_PROMPT},
        {"role": "user", "content": SOLVER_USER_TEMPLATE.format(question=format_question(question, question_format))},
    ]
