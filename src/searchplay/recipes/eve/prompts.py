# ruff: noqa: E501  (prompts keep their paragraphs as single lines)
"""EVE-Agent's prompts: the evidence-writing Proposer, the evidence-quoting Solver, the single-turn verifier.

The EVE paper publishes no prompt. These follow the STRUCTURE of Dr. Zero's
challenger prompt (from its code: start from a fact in the source document, n hops
= n - 1 searches, no spoilers, a single concise answer) and our EVE additions,
in this project's tag protocol (``<search>``/``<information>``, not Qwen tool calls). Our
wording; nothing is copied. Two protocol choices (docs/decisions/eve.md):

* the Proposer writes ``<answer>`` and ``<evidence>`` BEFORE ``<question>``, because a Proposer
  rollout ends at ``</question>`` (``agent.protocol.FINAL_TAG``);
* the Solver quotes ``<evidence>`` before its ``<answer>``, which ends a Solver rollout.
"""

from __future__ import annotations

from searchplay.agent.prompts import SOLVER_SYSTEM_PROMPT, SOLVER_USER_TEMPLATE
from searchplay.agent.protocol import tag_spans

EVE_PROPOSER_SYSTEM = """\
You are an expert question creator. From a source document you build one challenging question with a single, unambiguous answer, plus the evidence that supports the answer.

Definitions: the question follows a chain of n hops. Hop 1 is an entity, event or detail written in the source document. Each later hop is a fact that links the previous hop to the next one and that you find by searching. Hop n is the final answer.

Process:
1. Pick hop 1 from the source document.
2. Chain forward: for each hop after the first, search for the fact that leads from the previous hop to the next one. A question of n hops needs exactly n - 1 searches; a 1-hop question needs none and is answered by the document itself.
3. Stop at hop n, which must be one short, canonical answer (a name, a place, a date, a number, yes or no).

Protocol: you must reason inside <think> and </think> first every time you plan or get new information. To search, write <search> query </search>; the top results come back between <information> and </information>.

Final output, in this order:
<answer> the answer of hop n, a few words </answer>
<evidence> a contiguous span copied VERBATIM, character for character, from the source document or from one of the <information> passages you received; it must state the fact that gives the answer. Keep it short: one or two sentences. Do not paraphrase, summarize or add words, and do not write the answer alone. </evidence>
<question> the question: it names only hop 1 and asks for hop n </question>

Critical rules:
1. Hop 1 is in the source document; every later hop is supported by your search results.
2. Search is mandatory when n > 1, exactly n - 1 times.
3. No spoilers: the question must not contain the answer or the intermediate hops.
4. The question is self-contained; the answer is concise, without commentary.
5. The evidence is verbatim."""

EVE_PROPOSER_USER = """\
Create a question and answer with n = {hops} hops, with its evidence, starting from the following source document: {document}"""


def eve_proposer_messages(document: str, hops: int, task_line: str | None = None) -> list[dict[str, str]]:
    """The EVE Proposer prompt for source document d and prescribed hop count h (EVE Eq. 8, Alg. 1);
    ``task_line``: the corpus selector's question-type line, appended (App. F).

    >>> eve_proposer_messages("(Title: Paris)\\nParis is the capital of France.", 2)[1]["content"].startswith(
    ...     "Create a question and answer with n = 2 hops")
    True
    """
    if hops < 1:
        raise ValueError(f"eve_proposer_messages: the hop count must be >= 1, got {hops}")
    if not document.strip():
        raise ValueError("eve_proposer_messages: the source document is empty")
    user = EVE_PROPOSER_USER.format(hops=hops, document=document.strip())
    return [{"role": "system", "content": EVE_PROPOSER_SYSTEM},
            {"role": "user", "content": f"{user}\n{task_line}" if task_line else user}]


EVE_SOLVER_EVIDENCE = """\
When you give the answer, first copy the passage text that supports it, verbatim from the search results, inside <evidence> and </evidence>, then give the answer. For example, <evidence> ...copied sentence... </evidence> <answer> Beijing </answer>."""
EVE_SOLVER_USER_TEMPLATE = SOLVER_USER_TEMPLATE.replace(" Question: {question}", f" {EVE_SOLVER_EVIDENCE} Question: {{question}}")


def eve_solver_messages(question: str) -> list[dict[str, str]]:
    """The Phase B Solver prompt (EVE Eq. 19-21): the Search-R1 Solver prompt plus the evidence instruction.

    >>> user = eve_solver_messages("Who wrote Hamlet?")[1]["content"]
    >>> "<evidence>" in user and user.endswith("Question: Who wrote Hamlet?")
    True
    """
    if not question.strip():
        raise ValueError("eve_solver_messages: the question is empty")
    return [{"role": "system", "content": SOLVER_SYSTEM_PROMPT},
            {"role": "user", "content": EVE_SOLVER_USER_TEMPLATE.format(question=question.strip())}]


VERIFIER_WITH_EVIDENCE = """\
Answer the question using the evidence below. Do not search. Give only the final answer inside <answer> and </answer>, without explanation.
Evidence: {evidence}
Question: {question}"""

VERIFIER_WITHOUT_EVIDENCE = """\
Answer the question. Do not search. Give only the final answer inside <answer> and </answer>, without explanation.
Question: {question}"""


def verifier_messages(question: str, evidence: str | None) -> list[dict[str, str]]:
    """The single-turn, search-free verifier prompt, with (q, e) or q alone (EVE Eqs. 10, 12-13).

    The two prompts differ only in the evidence, so V-hat isolates its effect (Eqs. 10-14).

    >>> verifier_messages("Q?", None)[0]["content"].endswith("Question: Q?")
    True
    """
    if evidence is None:
        return [{"role": "user", "content": VERIFIER_WITHOUT_EVIDENCE.format(question=question.strip())}]
    return [{"role": "user", "content": VERIFIER_WITH_EVIDENCE.format(evidence=evidence.strip(),
                                                                     question=question.strip())}]


def extract_evidence(text: str) -> str | None:
    """The LAST well-formed ``<evidence>`` span, stripped, or None.

    >>> extract_evidence("<evidence> a </evidence><evidence>b c</evidence>"), extract_evidence("none")
    ('b c', None)
    """
    spans = tag_spans(text, "evidence")
    return spans[-1] if spans else None


def extract_last_answer(text: str) -> str | None:
    """The LAST ``<answer>`` span of a text (the Proposer's a; Dr. Zero's last-match rule), or None."""
    spans = tag_spans(text, "answer")
    return spans[-1] if spans else None


def verifier_answer(text: str) -> str:
    """A verifier reply's answer: the last ``<answer>`` span, else the whole stripped reply (our rule).

    >>> verifier_answer("<answer> Paris </answer>"), verifier_answer(" Paris ")
    ('Paris', 'Paris')
    """
    answer = extract_last_answer(text)
    return answer if answer is not None else text.strip()
