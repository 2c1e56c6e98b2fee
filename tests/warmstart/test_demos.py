"""Demo building: the exact self-play prompts, masks that cover only the model's own tokens, real
tokenization per segment (a scripted rollout reproduces a demo id for id), the rule filter, balance."""

from __future__ import annotations

import random
import re

import pytest

from searchplay.agent.proposer_prompts import kg_proposer_messages, ssp_proposer_messages
from searchplay.agent.protocol import information_block
from searchplay.llm.backend import Completion
from searchplay.llm.tokenizer import encode_prompt
from searchplay.retrieval.search import format_documents
from searchplay.retrieval.types import Document
from searchplay.templates import template_question
from searchplay.warmstart.demos import ROLES, DemoBuilder, hops, partition, searched_hops
from tests.selfplay.selfplay_fakes import FakeSearchTool, subgraph_record


class ChainSearchTool(FakeSearchTool):
    """The fake search tool, with every document about a fake subgraph's hop naming that hop's tail (the seed
    names bridge A, bridge A names bridge B, bridge B names the answer), and every document about an answer
    naming its last bridge."""

    HOPS = ((r"of Seed(\d+)$", "Bridge{}A"), (r"of Bridge(\d+)A$", "Bridge{}B"), (r"Bridge(\d+)B", "Answer{}"))

    def search(self, queries, top_k=3):
        out = []
        for docs, query in zip(super().search(queries, top_k), queries, strict=True):
            tail = next((f" It is {name.format(m.group(1))}." for pattern, name in self.HOPS
                         if (m := re.search(pattern, query))), "")
            if answer := re.fullmatch(r"Answer(\d+)", query):
                tail = f" It is linked to Bridge{answer.group(1)}B."
            out.append([Document(d.id, d.title, d.text + tail, d.score) for d in docs])
        return out


def make_builder(tokenizer, search_tool=None, solver_demos="grounded"):
    tool = search_tool or ChainSearchTool()
    return DemoBuilder(tokenizer, lambda messages: encode_prompt(tokenizer, messages),
                       lambda queries: tool.search(queries, top_k=3), format_documents, max_searches=2,
                       solver_demos=solver_demos)


def test_every_role_gets_a_demo_with_the_self_play_prompt_untrained(tokenizer):
    record = subgraph_record(0, 5)
    demos, dropped = make_builder(tokenizer).build([record], ROLES, random.Random(0))
    assert [d.role for d in demos] == list(ROLES) and not dropped
    by_role = {d.role: d for d in demos}
    assert by_role["proposer_kg"].segments[0].ids == encode_prompt(tokenizer, kg_proposer_messages(record))
    assert by_role["proposer_ssp"].segments[0].ids == encode_prompt(tokenizer, ssp_proposer_messages("Answer0", 3))
    for demo in demos:
        assert not demo.segments[0].trained
        assert len(demo.input_ids) == len(demo.loss_mask) == demo.num_tokens
        assert 0 < demo.num_trained < demo.num_tokens


def test_information_blocks_are_masked_and_tokenized_on_their_own(tokenizer):
    tool = ChainSearchTool()
    record = subgraph_record(1, 5)
    demo = next(d for d in make_builder(tokenizer, tool, "first_last").build([record], ["solver"],
                                                                          random.Random(0))[0])
    untrained = [s for s in demo.segments[1:] if not s.trained]
    assert len(untrained) == 2  # max_searches=2: two <information> blocks
    searched = searched_hops(hops(record), 2)["solver"]
    assert [h.query for h in searched] == ["relation 0 of Seed1", "relation 2 of Bridge1B"]  # first hop, then the last
    expected = tool.search([h.query for h in searched], top_k=3)
    for segment, docs in zip(untrained, expected, strict=True):
        assert segment.ids == tokenizer.encode(information_block(format_documents(docs)), add_special_tokens=False)
    text = tokenizer.decode(demo.segments[-1].ids)
    assert text.endswith("<answer> Answer1 </answer>") and "<think>" in text


@pytest.mark.parametrize("seed", range(6))
def test_grounded_solver_demo_asks_a_prefix_and_searches_only_what_it_was_shown(tokenizer, seed):
    """Each query names the question's seed or a tail that the previous results named; the answer is the last
    searched hop's tail, and the question is the template question of that prefix."""
    record = subgraph_record(8, 5)
    [demo], dropped = make_builder(tokenizer).build([record], ["solver"], random.Random(seed))
    assert not dropped
    trained = [tokenizer.decode(s.ids) for s in demo.segments if s.trained]
    queries = [re.search(r"<search> (.*) </search>", t).group(1) for t in trained[:-1]]
    edges = len(queries)
    assert 1 <= edges <= 3
    assert queries == [h.query for h in hops(record)[:edges]]  # in order: seed, then each named tail
    answer = record["path"][edges]["label"]
    assert trained[-1].endswith(f"<answer> {answer} </answer>")
    prefix = {**record, "path": record["path"][:edges + 1], "relations": record["relations"][:edges]}
    assert f"Question: {template_question(prefix)}" in tokenizer.decode(demo.segments[0].ids)
    information = [tokenizer.decode(s.ids) for s in demo.segments[1:] if not s.trained]
    assert f"It is {answer}." in information[-1]


def test_grounded_solver_stops_at_the_first_hop_its_results_do_not_name():
    from searchplay.warmstart.demos import grounded_prefix

    chain = hops(subgraph_record(9, 5))
    found = {hop.query: [Document("d", "t", f"It is {hop.tail}.")] for hop in chain}
    assert grounded_prefix(chain, found, 3) == 3 and grounded_prefix(chain, found, 2) == 2
    found[chain[1].query] = [Document("d", "t", "nothing")]
    assert grounded_prefix(chain, found, 3) == 1
    assert grounded_prefix(chain, {}, 3) == 0


def test_verifier_demo_ends_with_the_end_of_turn_token_and_keeps_its_prompt(tokenizer):
    demos, _ = make_builder(tokenizer).build([subgraph_record(2, 5), subgraph_record(3, 5)], ["verifier"],
                                             random.Random(0))
    demo = demos[0]
    assert demo.segments[-1].trained and demo.segments[-1].ids[-1] == tokenizer.eos_token_id
    reply = tokenizer.decode(demo.segments[-1].ids[:-1])
    assert reply.endswith("Answer: Answer2")
    prompt = tokenizer.decode(demo.segments[0].ids)
    assert "Answer the given question based on the provided materials" in prompt
    assert prompt.count("Doc ") == 6 + 4  # own documents (2 searches x 3) plus 4 noisy ones from the other demo


class ReplayBackend:
    """Emits a demo's trained segments as its completions, in order: a scripted policy for the rollout loop."""

    def __init__(self, tokenizer, turns):
        self.tokenizer, self.turns = tokenizer, list(turns)

    def generate(self, prompts, sampling):
        ids = self.turns.pop(0)
        text = self.tokenizer.decode(ids)
        stop = next((s for s in sampling.stop if text.endswith(s)), None)
        return [Completion(ids, text, "stop", stop)]

    def update_weights(self, model):
        pass

    def release_memory(self) -> None:
        pass


@pytest.mark.parametrize("role", ["proposer_kg", "solver"])
def test_a_rollout_that_writes_the_demo_reproduces_it_id_for_id(tokenizer, role):
    """The rollout loop tokenizes environment text per segment exactly as the demo does."""
    from searchplay.agent.rollout import RolloutConfig, run_rollouts

    demo = make_builder(tokenizer).build([subgraph_record(4, 5)], [role], random.Random(0))[0][0]
    backend = ReplayBackend(tokenizer, [s.ids for s in demo.segments if s.trained])
    trajectory = run_rollouts(backend, ChainSearchTool(), [demo.segments[0].ids],
                              "solver" if role == "solver" else "proposer", RolloutConfig(max_turns=4), top_k=3)[0]
    assert trajectory.valid
    assert trajectory.prompt_ids + trajectory.response_ids == demo.input_ids
    assert [0] * len(trajectory.prompt_ids) + trajectory.loss_mask == demo.loss_mask


def test_solver_and_verifier_demos_whose_documents_never_name_the_answer_are_dropped(tokenizer):
    demos, dropped = make_builder(tokenizer, FakeSearchTool()).build([subgraph_record(6, 5)], ROLES,
                                                                      random.Random(0))
    assert [d.role for d in demos] == ["proposer_kg"]
    assert dropped == {"solver:first_hop_not_in_documents": 1, "verifier:answer_not_in_documents": 1,
                       "proposer_ssp:no_grounded_edge": 1}  # the answer's documents name no bridge either
    _, dropped = make_builder(tokenizer, FakeSearchTool(), "first_last").build([subgraph_record(6, 5)], ["solver"],
                                                                                random.Random(0))
    assert dropped == {"solver:answer_not_in_documents": 1}


def test_a_solver_demo_whose_question_names_its_answer_is_dropped(tokenizer):
    """Boston University -country-> ... : the one-edge prefix "the location of Boston University" answered
    Boston would teach copying from the question."""
    leaking = subgraph_record(7, 5)
    leaking["path"][0]["label"] = "Bridge7A University"
    tool = ChainSearchTool()
    tool.HOPS = ((r"of Bridge(\d+)A University$", "Bridge{}A"), *ChainSearchTool.HOPS)
    for seed in range(4):  # the prefix is 1 or 2 edges: only the 1-edge one leaks
        rng = random.Random(seed)
        edges = random.Random(seed).randint(1, 2)
        demos, dropped = make_builder(tokenizer, tool).build([leaking], ["solver"], rng)
        assert (dropped == {"solver:answer_in_question": 1}) == (edges == 1) and len(demos) == (edges == 2)


def test_proposer_demos_that_would_fail_the_rule_filter_are_dropped(tokenizer):
    leaking = subgraph_record(5, 5)
    leaking["answer"] = leaking["path"][0]["label"]  # the seed's name is in the template question
    demos, dropped = make_builder(tokenizer).build([leaking], ROLES, random.Random(0))
    assert not any(d.role.startswith("proposer") for d in demos)
    assert dropped["proposer_kg:answer_in_question"] == 1
    assert dropped["proposer_ssp:no_grounded_edge"] == 1  # no gold-chain edge ends in the seed


def test_ssp_demo_searches_the_answer_then_checks_an_edge_its_results_name(tokenizer):
    """SSP App. D's backward step, grounded: answer search -> associated concept -> check -> question."""
    tool = ChainSearchTool()
    record = subgraph_record(7, 5)
    demo = make_builder(tokenizer, tool).build([record], ["proposer_ssp"], random.Random(0))[0][0]
    assert demo.segments[0].ids == encode_prompt(tokenizer, ssp_proposer_messages("Answer7", 3))
    trained = [tokenizer.decode(s.ids) for s in demo.segments if s.trained]
    assert [re.search(r"<search> (.*) </search>", t).group(1) for t in trained[:2]] == ["Answer7",
                                                                                       "relation 2 of Bridge7B"]
    assert "The results name Bridge7B" in trained[1]
    assert trained[2].endswith("<question> What is the node 3 that is the relation 2 of Bridge7B? </question>")
    information = [tokenizer.decode(s.ids) for s in demo.segments[1:] if not s.trained]
    assert len(information) == 2 and "linked to Bridge7B" in information[0] and "It is Answer7" in information[1]


def test_ssp_demo_takes_an_edge_from_the_pool_when_its_own_is_not_named():
    """The record's own last hop is preferred; another pool edge into the answer serves when only it is named."""
    from searchplay.warmstart.demos import Backstep, edges_into

    record = {"id": "r", "answer": "Europe", "path": [{"label": "Lima"}, {"label": "Peru"},
                                                     {"label": "Europe", "description": "continent"}],
              "relations": [{"label": "capital of"}, {"label": "continent"}]}
    other = {"id": "o", "answer": "Europe", "path": [{"label": "Ravenna"}, {"label": "Italy"}, {"label": "Europe"}],
             "relations": [{"label": "country"}, {"label": "continent"}]}
    assert edges_into([record, other])["Europe"] == [("Peru", "continent"), ("Italy", "continent")]

    def search(queries):
        text = {"Europe": "Europe includes Italy.", "continent of Italy": "Italy is in Europe."}
        return [[Document(q, q, text.get(q, "nothing"), 1.0)] for q in queries]

    builder = DemoBuilder(None, lambda m: [], search, lambda docs: "")
    plans = builder.backsteps([record], [record, other], random.Random(0))
    step, docs = plans[0]
    assert isinstance(step, Backstep) and step.hop.head == "Italy"
    assert step.question == "What is the continent that is the continent of Italy?"
    assert [d.text for block in docs for d in block] == ["Europe includes Italy.", "Italy is in Europe."]


def test_hop_queries_and_template_question_read_as_english():
    record = {"path": [{"label": "Lima"}, {"label": "Peru"}, {"label": "South America"}],
              "relations": [{"label": "capital of"}, {"label": "continent"}]}
    assert [h.query for h in hops(record)] == ["territory whose capital is Lima", "continent of Peru"]
    assert template_question(record) == "What is the continent of the territory whose capital is Lima?"


def test_partition_holds_out_checks_and_balances_answers():
    records = [{"id": f"s{k}", "answer": "Europe" if k < 10 else f"A{k}"} for k in range(20)]
    demos, check = partition(records, check_count=4, max_per_answer=2, limit=100, rng=random.Random(0))
    assert len(check) == 4 and not {r["id"] for r in check} & {r["id"] for r in demos}
    assert sum(r["answer"] == "Europe" for r in demos) <= 2
    assert len(partition(records, 4, 2, limit=3, rng=random.Random(0))[0]) == 3
    assert partition(records, 4, 2, 100, random.Random(0)) == (demos, check)  # deterministic


def test_the_quick_profile_leaves_room_for_the_proposers_last_turn(repo_root, tokenizer):
    """The KG Proposer's last turn is its reasoning, then the question. At 64 new tokens a turn, the quick profile's
    budget until the Proposer was measured, the demos' turn for a 4-hop path no longer fitted and sampled proposals
    stopped before </question> (docs/decisions.md); the longest path the KG stage extracts must fit."""
    from searchplay.config import load_params
    from searchplay.pipeline import quick_profile
    from searchplay.warmstart.demos import proposer_final_turn

    values, _ = quick_profile(repo_root / "params.quick.yaml")
    params = load_params(repo_root / "params.yaml", {k: v for k, v in values.items() if not k.startswith("pipeline.")})
    labels = ["Johan Cruyff", "Amsterdam", "Netherlands", "Dutch", "West Germanic languages", "Germanic languages",
              "Indo-European languages", "language family"]
    relations = ["place of birth", "country", "official language", "subclass of", "subclass of", "subclass of",
                 "instance of"][:params.kg.max_hops]
    record = {"path": [{"label": label} for label in labels[:len(relations) + 1]],
              "relations": [{"label": relation} for relation in relations]}
    turn = proposer_final_turn(hops(record), template_question(record))
    assert "</question>" in turn
    assert len(tokenizer.encode(turn, add_special_tokens=False)) <= params.agent.max_turn_tokens


def test_the_stage_filters_proposer_demos_with_self_plays_rule_settings():
    """A profile that asks self-play for 3 searches teaches no Proposer demo that self-play would reject."""
    from searchplay.config import Params
    from searchplay.warmstart.stage import demo_builder

    params = Params.model_validate({"selfplay": {"min_searches": 3, "reject_duplicate_searches": False}})
    rules = demo_builder(params, None, FakeSearchTool(), lambda docs: "").rules
    assert (rules.min_searches, rules.reject_duplicate_searches) == (3, False)
