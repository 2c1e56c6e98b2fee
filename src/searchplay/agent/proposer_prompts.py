# ruff: noqa: E501  (verbatim prompts keep the papers' paragraphs as single lines)
"""Proposer and RAG-verification prompts (SSP App. D; KG-paths paper App. F, Fig. 11-12).

Three prompts live here; the Solver prompt is the agent's (``searchplay.agent.prompts.solver_messages``).

* ``ssp_proposer_messages``: SSP's Proposer prompt, verbatim from SSP App. D, split into a system
  and a user message the way the official code does (system: role, process, examples, critical
  rules; user: answer, search count, closing instruction).
* ``kg_proposer_messages``: the KG Proposer. Fig. 11-12 survive only as fragments; the fragments are
  kept verbatim and the gaps are a RECONSTRUCTION (marked below, ``KG_PROMPT_IS_RECONSTRUCTED``).
  The subgraph is serialized as ONE JSON object (Fig. 12: "## Input (ONE JSON object)").
  With ``draft``, the path's template question rides along as a draft (the ``kg_draft`` control; ours).
* ``rag_verification_messages``: SSP's RAG Solver prompt, verbatim, used without tools to verify a
  proposed question (SSP §3.3, App. D).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

# Our choice (SSP does not publish its few-shot questions): three real multi-hop questions, each
# needing 2-3 searches. Facts: Titanic (Best Picture at the 1998 Oscars) was directed by James
# Cameron, born in Canada; Gustave Eiffel was born in Dijon, France, whose capital Paris lies on the
# Seine; Marie Curie (first person with two Nobel Prizes) named polonium after Poland.
EXAMPLE_QUESTIONS: tuple[str, str, str] = (
    "In which country was the director of the film that won Best Picture at the 1998 Academy Awards born?",
    "Which river flows through the capital of the country where the designer of the Eiffel Tower was born?",
    "Which chemical element, discovered by the first person to win two Nobel Prizes, is named after her "
    "native country?",
)

# --- SSP Proposer (SSP App. D, verbatim) -------------------------------------------------------------

SSP_PROPOSER_SYSTEM = """\
You are an expert question creator. Your primary task is to reverse-engineer a challenging question from a given answer. The question you create must require a solver to perform 'n' sequential searches to solve it. I will provide you with the target answer and the required number of searches, 'n'.

Your Creation Process & Tools:

1. Analyze Scope and Target: Begin by analyzing the provided 'Answer' (your target) and the required number of searches, 'n' (the path's length). This establishes your final destination and the complexity of the logical chain you need to construct.

2. Build the Question by Working Backwards:
This is the core of the process. You will start from the destination and work your way back to the starting point, step by step.

2.1. The Crucial First Step: Connection and Discovery
Start with the final 'Answer', but do not search for the answer itself directly.
Instead, first analyze the 'Answer'. Brainstorm and identify a closely related yet distinct 'Associated Concept' (e.g., a related historical event, a key figure, a geographic location, a unique attribute, its parent category, etc.).
Perform an exploratory search with the goal of finding the 'bridging information' that connects this 'Associated Concept' to your final 'Answer'.
From your search results, extract a unique, verifiable 'preceding fact'. This is a piece of information that, when searched, would logically lead a user to your final 'Answer'. This 'preceding fact' becomes the answer to Search #n-1.

2.2. Iterate Backwards
Now, treat this newly found 'preceding fact' as your new target.
From this point on, you can search for this new target directly to find the preceding piece of information that leads to it. This becomes the answer to the next search in the backward chain (Search #n-2).

2.3. Construct the Full Chain
Continuously repeat the iterative process from Step 2.2, using each new fact as the target for the next backward search, until you have constructed a complete logical chain of 'n' links.
The very first piece of information you uncover in this process (the one at the start of the chain) will become the initial clue for your question.

3. You must conduct reasoning inside <think> and </think> first every time you get new information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search>, and it will return the top searched results between <information> and </information>. You can search as many times as you want. If you find no further external knowledge needed, you can directly provide the answer inside <question> and </question> without detailed illustrations. For example, <question> xxx </question>.

Here are three example questions:

Question 1: {example1} Question 2: {example2} Question 3: {example3}

Critical Rules:

1. Strictly Fact-Based: You must not create questions based on assumptions. The entire logical path to the solution must be grounded in the information you find through searching.
2. No Spoilers: The question must not contain any direct clues that reveal the answer or the intermediate steps.
3. Search is Mandatory: The question must be impossible to answer from general knowledge alone. It must necessitate the search process you have designed.
4. Adhere to Search Count: The number of searches required to solve the question must precisely match the specified 'search count'.
5. Unique Answer: The designed question must be deterministic, leading to a single, unambiguous final answer. The clues at each step must be precise enough to prevent a solver from reasonably arriving at a different, valid conclusion."""

SSP_PROPOSER_USER = """\
The answer I provided is: {answer}.

You need to create a question that requires {n} searches.

When you have enough information to construct a question, please first check whether the constructed question meets all requirements, especially whether the question is too simple. After checking that all conditions are met, you need to provide the final constructed question in your final response, placing the final question between <question> and </question> tags, for example: <question> ... </question>."""


def ssp_proposer_messages(answer: str, n: int, examples: Sequence[str] = EXAMPLE_QUESTIONS) -> list[dict[str, str]]:
    """SSP Proposer prompt (SSP App. D) for target answer ``a*`` and required search count ``n``."""
    example1, example2, example3 = examples
    system = SSP_PROPOSER_SYSTEM.format(example1=example1, example2=example2, example3=example3)
    return [{"role": "system", "content": system},
            {"role": "user", "content": SSP_PROPOSER_USER.format(answer=answer, n=n)}]


# --- KG Proposer (KG-paths paper Fig. 11-12: fragments VERBATIM, the rest RECONSTRUCTED) -------------

KG_PROMPT_IS_RECONSTRUCTED = True  # the paper's Figures 11-12 did not survive; see docs/decisions/selfplay.md

# Lines tagged [verbatim] are the surviving fragments of Fig. 11 (KG paper App. F); every other line is
# our reconstruction of the lost rest, with the SSP Proposer's search wording where Fig. 11
# breaks off ("you can call a sea...").
KG_PROPOSER_SYSTEM = """\
You are an expert question creator. You are given ONE JSON object describing a path in the Wikidata knowledge graph (the "gold chain" from a seed entity to correct_answer), distractor branches that leave the gold chain at a divergence point, and correct_answer. Your task is to write one challenging multi-hop search question whose unique answer is correct_answer and whose solution follows the gold chain.

## Guidelines
Read the gold chain in order and use its relations as the steps a solver must search for; use the node descriptions to resolve ambiguous bridging facts. Do not mention correct_answer or titles of intermediate gold-chain nodes. You MAY paraphrase node texts into natural-language clues, but each clue must still be grounded in a distinctive property of some node on the KG path.

## Non-negotiable Constraints (apply WHILE drafting, not after)
A) Unique solvability: The final answer must be correct_answer, and the clues must exclude every other entity, including the distractors.
B) No leakage: The question must not contain correct_answer or the title of any intermediate gold-chain node.
C) Multi-hop necessity: Answering must require following the gold chain step by step; no single clue may reveal correct_answer directly.
D) Grounded clues: Every clue must be a fact stated in the JSON object or found by your searches.

## Procedure
1. Decide the solve trajectory: Translate the gold chain into a natural sequence of solver actions/searches WITHOUT naming hidden entities
2. Embed distractor pressure early; disambiguate late: Use shared attributes early so distractors remain plausible. Near/after the divergence point, add constraints that exclude distractors
3. Write the final question text: Write ONE concise question that implicitly encodes a non-trivial multi-step solve trajectory. Do not provide options, intermediate answers, or explanations.

## Output protocol
You must conduct reasoning inside <think> and </think> first every time you get new information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search>, and it will return the top searched results between <information> and </information>.
- Optional search phase (only if needed): If you still lack verifiable facts after reasoning, you MAY call the search tool. Each search call MUST be wrapped as:<search> your query </search>
- Final output (when ready): Output ONLY the final question wrapped as: <question> [The question text only. No spoilers. No options. No explanations.]</question>
- Prohibited: Do NOT output any other tags besides <think>, <search>, <question>. Do NOT output partial tags (e.g., “<think>” without “</think>”). Do NOT include any text outside the allowed tags."""

KG_PROPOSER_USER = """\
## Input (ONE JSON object)
{subgraph_json}"""


def _node_text(node: dict[str, Any]) -> str:
    return str(node.get("label", ""))


def subgraph_object(record: dict[str, Any], examples: Sequence[str] = EXAMPLE_QUESTIONS) -> dict[str, Any]:
    """The Proposer's ONE JSON object for a subgraph record (schema: our reconstruction of the paper's §3.2 inputs).

    ``gold_chain`` lists the target path's edges (head, relation, tail with descriptions);
    ``distractors`` lists each branch by its divergence node and edges; ``correct_answer`` is a*.
    """
    path, relations = record["path"], record["relations"]
    gold_chain = [{"head": _node_text(path[k]), "relation": relations[k]["label"], "tail": _node_text(path[k + 1]),
                   "head_desc": path[k].get("description", ""), "tail_desc": path[k + 1].get("description", "")}
                  for k in range(len(relations))]
    distractors = []
    for branch in record.get("distractors", []):
        start = path[branch["divergence_index"]]
        nodes = list(branch["nodes"])
        if len(nodes) == len(branch["relations"]) + 1:  # the branch lists its divergence node first
            nodes = nodes[1:]
        chain = [start, *nodes]
        edges = [{"head": _node_text(chain[k]), "relation": rel["label"], "tail": _node_text(chain[k + 1]),
                  "tail_desc": chain[k + 1].get("description", "")} for k, rel in enumerate(branch["relations"])]
        distractors.append({"divergence_node": _node_text(start), "edges": edges})
    return {"correct_answer": record["answer"], "gold_chain": gold_chain, "distractors": distractors,
            "num_hops": record.get("num_hops", len(relations)), "example_questions": list(examples)}


# Ours, not a paper's: the line that follows a draft (the kg_draft control; docs/decisions/selfplay.md).
KG_DRAFT_INSTRUCTION = """draft_question asks for correct_answer along the gold chain. You may rewrite it into a more natural or more challenging question, but your question must still ask for correct_answer."""


def kg_proposer_messages(record: dict[str, Any], examples: Sequence[str] = EXAMPLE_QUESTIONS,
                         draft: str | None = None) -> list[dict[str, str]]:
    """KG Proposer prompt: system (Fig. 11, reconstructed around verbatim fragments) + the subgraph JSON.
    With ``draft`` (the kg_draft control), the JSON also carries it as ``draft_question``, followed by
    ``KG_DRAFT_INSTRUCTION``."""
    subgraph = subgraph_object(record, examples)
    if draft is not None:
        subgraph["draft_question"] = draft
    user = KG_PROPOSER_USER.format(subgraph_json=json.dumps(subgraph, ensure_ascii=False))
    if draft is not None:
        user += "\n\n" + KG_DRAFT_INSTRUCTION
    return [{"role": "system", "content": KG_PROPOSER_SYSTEM}, {"role": "user", "content": user}]


# --- RAG verification (SSP App. D "RAG Solver Prompt", verbatim) ------------------------------------

RAG_VERIFICATION_PROMPT = """\
Answer the given question based on the provided materials. You should first conduct very concise reasoning within 50 words, and then directly provide your answer without detailed illustrations after saying 'Answer:'.

Materials: {materials}

Question: {question}"""

RAG_TEMPERATURE = 0.1  # SSP code (llm_as_a_judge.model_based_answer)
RAG_MAX_TOKENS = 70  # SSP code

def rag_verification_messages(materials: str, question: str) -> list[dict[str, str]]:
    """The RAG Solver prompt (SSP App. D) as one user message: answer from materials, no tools."""
    return [{"role": "user", "content": RAG_VERIFICATION_PROMPT.format(materials=materials, question=question)}]


def parse_rag_answer(reply: str) -> str | None:
    """The text after the last 'Answer:' of a RAG-verifier reply (SSP code: ``Answer[:：]?``); None if absent.

    >>> parse_rag_answer("Eiffel was born in Dijon. Answer: France")
    'France'
    """
    matches = list(re.finditer(r"Answer\s*[:：]", reply, flags=re.IGNORECASE))
    if not matches:
        return None
    answer = reply[matches[-1].end():].strip().splitlines()
    return answer[0].strip() if answer and answer[0].strip() else None
