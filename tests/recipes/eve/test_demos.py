"""EVE's warm-start demos: the self-play prompts, a Proposer demo that the rollout loop reproduces id for id
and that EVE's own reader scores as a valid, verbatim triple with a full format score, the drop reasons,
and the schedule that interleaves them with the other roles."""

from __future__ import annotations

import random
from collections import Counter

from searchplay.llm.tokenizer import encode_prompt
from searchplay.recipes.eve.demos import EVE_ROLES, build_eve_demos, document_text, sentence_naming
from searchplay.recipes.eve.output import read_triple
from searchplay.recipes.eve.prompts import eve_proposer_messages, eve_solver_messages, verifier_messages
from searchplay.recipes.eve.rewards import eve_valid, is_verbatim
from searchplay.retrieval.search import format_documents
from searchplay.retrieval.types import Document
from searchplay.warmstart.demos import DemoBuilder, hops
from searchplay.warmstart.stage import schedule
from tests.selfplay.selfplay_fakes import FakeSearchTool, subgraph_record
from tests.warmstart.test_demos import ReplayBackend


class EdgeSearchTool(FakeSearchTool):
    """Search results for a KG edge's query name its head and its tail in one sentence."""

    def __init__(self, records):
        super().__init__()
        self.edges = {hop.query: hop for record in records for hop in hops(record)}

    def search(self, queries, top_k=3):
        out = []
        for docs, query in zip(super().search(queries, top_k), queries, strict=True):
            hop = self.edges.get(query)
            tail = f" {hop.head} leads to {hop.tail} by {query.split(' of ')[0]}. Nothing more." if hop else ""
            out.append([Document(d.id, d.title, d.text + tail, d.score) for d in docs])
        return out


def make_builder(tokenizer, tool):
    return DemoBuilder(tokenizer, lambda messages: encode_prompt(tokenizer, messages),
                       lambda queries: tool.search(queries, top_k=3), format_documents, max_searches=2)


def test_sentence_naming_copies_the_sentence_verbatim():
    text = "Seed0 is old. Seed0 leads to Bridge0A by relation 0. Nothing more."
    assert sentence_naming(text, "bridge0a") == "Seed0 leads to Bridge0A by relation 0."
    assert sentence_naming(text, "Atlantis") is None


def test_every_eve_role_gets_a_demo_with_its_self_play_prompt(tokenizer):
    records = [subgraph_record(k, 5) for k in range(12)]
    tool = EdgeSearchTool(records)
    demos, dropped = build_eve_demos(make_builder(tokenizer, tool), records, EVE_ROLES, random.Random(0))
    assert not dropped and Counter(d.role for d in demos) == dict.fromkeys(EVE_ROLES, 12)
    prompts = [tokenizer.decode(d.segments[0].ids) for d in demos]
    assert all(not d.segments[0].trained and 0 < d.num_trained < d.num_tokens for d in demos)
    by_role = {role: [d for d in demos if d.role == role] for role in EVE_ROLES}
    finals = [tokenizer.decode(d.segments[-1].ids) for d in by_role["proposer_eve"]]
    assert all(f.index("<answer>") < f.index("<evidence>") < f.index("<question>") for f in finals)
    hop_counts = Counter(len([s for s in d.segments if not s.trained]) for d in by_role["proposer_eve"])
    assert set(hop_counts) <= {1, 2, 3} and len(hop_counts) > 1  # the prompt plus h - 1 information blocks
    assert all("source document: (Title: " in p for p in prompts[0::3])
    solver_final = tokenizer.decode(by_role["solver_eve"][0].segments[-1].ids)
    assert solver_final.index("<evidence>") < solver_final.index("<answer>")
    assert tokenizer.decode(by_role["verifier_eve"][0].segments[-1].ids).startswith("<answer>")


def test_a_rollout_that_writes_the_proposer_demo_reproduces_it_and_reads_as_a_valid_verbatim_triple(tokenizer):
    from searchplay.agent.rollout import RolloutConfig, run_rollouts

    records = [subgraph_record(k, 5) for k in range(12)]
    tool = EdgeSearchTool(records)
    demos, _ = build_eve_demos(make_builder(tokenizer, tool), records, ["proposer_eve"], random.Random(0))
    for demo in demos:
        prompt = tokenizer.decode(demo.segments[0].ids)
        h = int(prompt.split("n = ")[1].split(" hops")[0])
        document = prompt.split("source document: ")[1].rsplit("<|im_end|>", 1)[0]
        assert demo.segments[0].ids == encode_prompt(tokenizer, eve_proposer_messages(document, h))
        backend = ReplayBackend(tokenizer, [s.ids for s in demo.segments if s.trained])
        trajectory = run_rollouts(backend, tool, [demo.segments[0].ids], "proposer", RolloutConfig(max_turns=4),
                                  top_k=3)[0]
        assert trajectory.prompt_ids + trajectory.response_ids == demo.input_ids
        triple = read_triple(trajectory, document, h, tokenizer)
        assert triple.valid and triple.format_score == 1.0 and triple.verbatim and eve_valid(triple.question,
                                                                                            triple.answer)
        assert triple.answer in triple.evidence and triple.answer not in triple.question


def test_solver_and_verifier_demos_quote_what_the_solver_was_shown(tokenizer):
    records = [subgraph_record(k, 5) for k in range(4)]
    tool = EdgeSearchTool(records)
    demos, _ = build_eve_demos(make_builder(tokenizer, tool), records, ["solver_eve", "verifier_eve"],
                               random.Random(0))
    for solver, verifier in zip(demos[0::2], demos[1::2], strict=True):
        shown = tokenizer.decode([i for s in solver.segments[1:] if not s.trained for i in s.ids])
        final = tokenizer.decode(solver.segments[-1].ids)
        evidence = final.split("<evidence>")[1].split("</evidence>")[0].strip()
        assert is_verbatim(evidence, [shown])
        question = tokenizer.decode(solver.segments[0].ids).split("Question: ")[-1].split("<|im_end|>")[0]
        assert solver.segments[0].ids == encode_prompt(tokenizer, eve_solver_messages(question))
        assert verifier.segments[0].ids == encode_prompt(tokenizer, verifier_messages(question, evidence))


def test_records_without_a_grounded_source_document_are_dropped_with_the_reason(tokenizer):
    record = subgraph_record(0, 5)
    demos, dropped = build_eve_demos(make_builder(tokenizer, FakeSearchTool()), [record], EVE_ROLES,
                                     random.Random(0))
    assert demos == [] and dropped == Counter({f"{role}:no_source_document": 1 for role in EVE_ROLES})


def test_the_schedule_turns_through_the_eve_forms_and_is_unchanged_without_them(tokenizer):
    from searchplay.warmstart.demos import Demo

    plain = [Demo(role, "x") for role in ("proposer_kg", "proposer_ssp", "solver", "verifier")]
    assert [[d.role for d in step] for step in schedule(plain, 2)] == [
        ["proposer_kg", "solver", "verifier"], ["proposer_ssp", "solver", "verifier"]]
    every = plain + [Demo(role, "x") for role in EVE_ROLES]
    assert [[d.role for d in step] for step in schedule(every, 3)] == [
        ["proposer_kg", "solver", "verifier"], ["proposer_ssp", "solver_eve", "verifier_eve"],
        ["proposer_eve", "solver", "verifier"]]


def test_the_document_text_is_the_seed_format():
    assert document_text(Document("1", "Paris", "Paris is big.")) == "(Title: Paris)\nParis is big."
