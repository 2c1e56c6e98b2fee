import json

from searchplay.agent.proposer_prompts import (
    EXAMPLE_QUESTIONS,
    KG_DRAFT_INSTRUCTION,
    KG_PROPOSER_SYSTEM,
    kg_proposer_messages,
    parse_rag_answer,
    rag_verification_messages,
    ssp_proposer_messages,
    subgraph_object,
)
from tests.selfplay.selfplay_fakes import subgraph_record


def test_ssp_proposer_is_split_like_the_code_and_filled():
    system, user = ssp_proposer_messages("Castle Drogo", 3)
    assert system["role"] == "system" and user["role"] == "user"
    assert system["content"].startswith("You are an expert question creator.")
    assert system["content"].endswith("arriving at a different, valid conclusion.")
    assert f"Question 1: {EXAMPLE_QUESTIONS[0]} Question 2: {EXAMPLE_QUESTIONS[1]}" in system["content"]
    assert user["content"].startswith("The answer I provided is: Castle Drogo.\n\nYou need to create a question "
                                      "that requires 3 searches.")
    assert "{" not in system["content"] + user["content"]


def test_kg_proposer_carries_one_json_object_with_the_subgraph():
    record = subgraph_record(1, num_nodes=5)
    system, user = kg_proposer_messages(record)
    assert system["content"] == KG_PROPOSER_SYSTEM
    assert "Do not mention correct_answer or titles of intermediate gold-chain nodes." in system["content"]
    header, payload = user["content"].split("\n", 1)
    assert header == "## Input (ONE JSON object)"
    obj = json.loads(payload)
    assert obj == subgraph_object(record)
    assert obj["correct_answer"] == "Answer1"
    assert [e["head"] for e in obj["gold_chain"]] == ["Seed1", "Bridge1A", "Bridge1B"]
    assert obj["gold_chain"][-1]["tail"] == "Answer1"
    assert obj["distractors"] == [{"divergence_node": "Bridge1A", "edges": [
        {"head": "Bridge1A", "relation": "relation 9", "tail": "Decoy1", "tail_desc": "a decoy"}]}]


def test_the_draft_prompt_is_the_kg_prompt_plus_the_draft_field_and_its_line():
    record = subgraph_record(1, num_nodes=5)
    system, user = kg_proposer_messages(record, draft="What is the relation 2 of Seed1?")
    assert system == kg_proposer_messages(record)[0]
    header, payload = user["content"].split("\n", 1)
    payload, instruction = payload.split("\n\n")
    assert header == "## Input (ONE JSON object)" and instruction == KG_DRAFT_INSTRUCTION
    assert json.loads(payload) == {**subgraph_object(record), "draft_question": "What is the relation 2 of Seed1?"}


def test_rag_prompt_is_verbatim_and_answer_parsing():
    (message,) = rag_verification_messages("Doc 1(Title: X) y", "Who?")
    assert message["content"] == (
        "Answer the given question based on the provided materials. You should first conduct very concise "
        "reasoning within 50 words, and then directly provide your answer without detailed illustrations after "
        "saying 'Answer:'.\n\nMaterials: Doc 1(Title: X) y\n\nQuestion: Who?")
    assert parse_rag_answer("short reasoning. Answer: Dijon\n") == "Dijon"
    assert parse_rag_answer("Answer: wrong. Then again, answer：Paris") == "Paris"
    assert parse_rag_answer("no final line") is None
    assert parse_rag_answer("Answer:   ") is None
