"""Every answer the KG gives to a path's question, and the kg_heldout rules built on it."""

from __future__ import annotations

import random
from typing import ClassVar

from searchplay.config import KGConfig
from searchplay.kg.golds import answer_share, cap_answer_share, heldout_questions, path_answers, with_answers
from searchplay.kg.pipeline import split_pool
from searchplay.kg.store import Edge


def _edge(prop: str, target: str, rank: int = 1) -> Edge:
    return Edge(prop, prop, "wikibase-item", rank, target, target.capitalize(), "")


class ChainStore:
    """France borders Spain and Italy; Spain's capital is Madrid, Italy's Rome (preferred) and a deprecated Turin."""

    edges: ClassVar[dict[str, list[Edge]]] = {
        "france": [_edge("P47", "spain"), _edge("P47", "italy"), _edge("P30", "europe")],
        "spain": [_edge("P36", "madrid"), _edge("P47", "france")],
        "italy": [_edge("P36", "rome", rank=2), _edge("P36", "turin", rank=0)],
    }

    def outgoing(self, node_id: str) -> list[Edge]:
        return self.edges.get(node_id, [])


def test_a_one_to_many_hop_gives_every_answer_the_chain_reaches():
    assert path_answers(ChainStore(), "france", ["P47", "P36"]) == ["Madrid", "Rome"]  # Turin: not truthy
    assert path_answers(ChainStore(), "france", ["P30"]) == ["Europe"]
    assert path_answers(ChainStore(), "france", ["P47", "P47"]) == ["France"]
    assert path_answers(ChainStore(), "france", ["P36", "P47"]) == []


def test_the_walked_answer_comes_first():
    record = {"seed_id": "france", "answer": "Rome", "relations": [{"id": "P47"}, {"id": "P36"}]}
    assert with_answers(ChainStore(), record)["answers"] == ["Rome", "Madrid"]


def test_no_answer_golds_more_than_the_share_of_the_questions_kept():
    records = [{"answers": ["Europe"]}] * 30 + [{"answers": [f"a{i}"]} for i in range(20)] + [
        {"answers": ["Asia", "Europe"]}] * 5
    kept = cap_answer_share(records, 0.1)
    top, share = answer_share(kept)
    assert share <= 0.1 and len(kept) == 22 and top in {"Europe", "Asia"}
    assert cap_answer_share(records, 1.0) == records


def test_questions_with_too_many_answers_are_not_asked():
    records = [{"answers": [str(i)] * 1} for i in range(10)] + [{"answers": list("abcdef")}]
    kept, not_asked = heldout_questions(records, max_golds=5, max_answer_share=0.5)
    assert len(kept) == 10 and not_asked == {"too_many_golds": 1, "answer_share_cap": 0}


def test_the_pool_is_split_by_seed_and_its_held_out_questions_follow_the_rules(sample_store):
    from searchplay.kg.extract import extract_subgraphs
    from searchplay.kg.relations import RelationFilter
    from searchplay.kg.selectors import RandomSelector

    config = KGConfig(selector="random", selector_batch_size=64, paths_per_seed=4, heldout_share=0.35,
                      warmstart_share=0.25)
    seeds = [item_id for item_id, _, _ in sample_store.items(require_enwiki=True)]
    random.Random(0).shuffle(seeds)
    records, _ = extract_subgraphs(sample_store, seeds, RandomSelector(0), RelationFilter.from_config(config), config,
                                   600, random.Random(0))
    kept, summary = split_pool(sample_store, records, config)
    assert len({r["id"] for r in records}) == len(records)  # a repeated walk is not a second question
    split_of_seed: dict[str, set[str]] = {}
    for record in kept:
        split_of_seed.setdefault(record["seed_id"], set()).add(record["split"])
        assert record["answer"] in record["answers"]
    assert all(len(splits) == 1 for splits in split_of_seed.values())
    held = [r for r in kept if r["split"] == "kg_heldout"]
    assert len(held) == summary["questions"] > 0 and summary["top_answer_share"] <= 0.1
    assert all(len(r["answers"]) <= 5 for r in held) and summary["multi_gold_questions"] > 0
    assert len(summary["hop_histogram"]) >= 3  # the hop counts are mixed
    held_seeds = {r["seed_id"] for r in held}
    assert not any(node["id"] in held_seeds for r in kept if r["split"] != "kg_heldout" for node in r["path"])
    dropped = summary["training_paths_dropped"]
    assert sum(dropped.values()) > 0 and set(dropped) <= {"selfplay", "warmstart"}
    open_config = config.model_copy(update={"heldout_isolation": "none"})
    unisolated, open_summary = split_pool(sample_store, records, open_config)
    assert len(unisolated) == len(kept) + sum(dropped.values()) and open_summary["training_paths_dropped"] == {}
    assert [r for r in unisolated if r["split"] == "kg_heldout"] == held  # the held-out test is the same
