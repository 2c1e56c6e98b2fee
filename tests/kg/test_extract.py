"""Algorithm 1 on the bundled sample: target lengths, no revisits, literal last, distractors, sorting, stats."""

from __future__ import annotations

import random

import pytest

from searchplay.config import KGConfig
from searchplay.kg.extract import PathState, candidate_edges, expand_paths, extract_subgraphs, pool_stats
from searchplay.kg.relations import RelationFilter
from searchplay.kg.selectors import RandomSelector, Selection

CONFIG = KGConfig(selector="random", selector_batch_size=64)
FILTER = RelationFilter.from_config(CONFIG)


@pytest.fixture(scope="module")
def pool(sample_store):
    seeds = [i for i, _label, _wiki in sample_store.items(require_enwiki=True)]
    random.Random(0).shuffle(seeds)
    return extract_subgraphs(sample_store, seeds, RandomSelector(0), FILTER, CONFIG, 120, random.Random(0))


def _node_key(node):
    return node["id"] or ("literal", node["label"])


def test_pool_size_hops_and_sorting(pool):
    records, stats = pool
    assert len(records) == 120 and stats.seeds_tried >= 120
    assert all(3 <= r["num_hops"] <= 7 for r in records)
    sizes = [r["num_nodes"] for r in records]
    assert sizes == sorted(sizes, reverse=True)
    assert len({r["id"] for r in records}) == len(records)


def test_no_revisit_waypoints_and_literal_only_last(pool):
    for r in pool[0]:
        keys = [_node_key(n) for n in r["path"]]
        assert len(keys) == len(set(keys)) == r["num_hops"] + 1
        assert len({n["label"].casefold() for n in r["path"]}) == len(keys)
        assert all(n["id"] is not None for n in r["path"][:-1])
        assert r["waypoints"] == [n["label"] for n in r["path"][:-1]] and r["answer"] == r["path"][-1]["label"]
        assert len(r["relations"]) == r["num_hops"]


def test_distractor_constraints(pool):
    for r in pool[0]:
        assert 1 <= len(r["distractors"]) <= 3
        path_ids = {n["id"] for n in r["path"] if n["id"]}
        path_labels = {n["label"].casefold() for n in r["path"]}
        for branch in r["distractors"]:
            assert 1 <= branch["divergence_index"] <= r["num_hops"] - 1
            assert 1 <= len(branch["nodes"]) <= 2 and len(branch["relations"]) == len(branch["nodes"])
            for node in branch["nodes"]:
                assert node["id"] not in path_ids and node["label"].casefold() not in path_labels
            assert all(n["id"] is not None for n in branch["nodes"][:-1])
        assert r["num_nodes"] == len(r["path"]) + sum(len(b["nodes"]) for b in r["distractors"])


def test_literal_candidates_only_on_the_final_hop(sample_store):
    einstein = next(i for i, label, _ in sample_store.items() if label == "Albert Einstein")
    rng = random.Random(0)
    middle = candidate_edges(sample_store, einstein, FILTER, rng, set(), set(), allow_literals=False, max_candidates=10)
    final = candidate_edges(sample_store, einstein, FILTER, rng, set(), set(), allow_literals=True, max_candidates=10)
    assert not any(e.is_literal for e in middle)
    assert {"date of birth", "date of death"} <= {e.relation for e in final if e.is_literal}
    assert len({e.property for e in final}) == len(final) <= 10  # one value per property


def test_target_length_and_stop(sample_store):
    germany = next(i for i, label, _ in sample_store.items() if label == "Germany")

    class StopAtTwo:
        name, model = "scripted", "scripted"

        def select(self, requests):
            return [Selection(choice=0 if len(r.relation_labels) == 2 else _border(r), replies=["x"]) for r in requests]

    def _border(request):
        return 1 + [e.relation for e in request.candidates].index("shares border with")

    long = PathState(germany, 7, [{"id": germany, "label": "Germany", "description": ""}])
    short = PathState(germany, 3, [{"id": germany, "label": "Germany", "description": ""}])
    from searchplay.kg.extract import ExtractionStats

    expand_paths(sample_store, [long, short], StopAtTwo(), FILTER, random.Random(1), 10, ExtractionStats())
    assert long.hops == 2 and short.hops == 2  # the selector's 0 stops expansion (Algorithm 1 lines 10-11)
    expand_paths(sample_store, [s := PathState(germany, 4, [{"id": germany, "label": "Germany", "description": ""}])],
                 RandomSelector(3), FILTER, random.Random(3), 10, ExtractionStats())
    assert s.hops <= 4


def test_pool_stats_fields(pool):
    stats = pool_stats(*pool)
    assert stats["subgraphs"] == 120 and sum(stats["hop_histogram"].values()) == 120
    assert 0 < stats["largest_relation_share"] <= 1 and stats["unique_relations"] > 5
    assert set(stats["answer_types"]) <= {"Date", "Number", "Person", "Organization", "Location", "Other"}


def test_entity_nodes_carry_their_wikidata_aliases_for_gdcr(pool, sample_store):
    """Records name each entity node's aliases (GDCR's matcher reads them); literals and alias-less nodes have none."""
    from searchplay.kg.extract import MAX_ALIASES
    from searchplay.rewards.gdcr import subgraph_aliases

    nodes = [n for r in pool[0] for n in (*r["path"], *(m for b in r["distractors"] for m in b["nodes"]))]
    with_aliases = [n for n in nodes if n.get("aliases")]
    assert with_aliases, "the bundled sample has aliases (e.g. 'USA' for United States)"
    for node in with_aliases:
        stored = sample_store.node(node["id"]).aliases
        assert node["aliases"] == [a for a in stored if a != node["label"]][:MAX_ALIASES]
    assert all(not n.get("aliases") for n in nodes if n["id"] is None)
    record = next(r for r in pool[0] if any(n.get("aliases") for n in r["path"]))
    assert subgraph_aliases(record)
