import json

import pytest

from searchplay.selfplay.seeds import SeedCursor, SeedError, load_answer_seeds, load_kg_seeds
from tests.selfplay.selfplay_fakes import subgraph_record, write_kg_pool


def test_kg_seeds_keep_descending_node_order_and_only_their_split(tmp_path):
    records = [subgraph_record(k, 10 - k, split) for k, split in
               enumerate(["selfplay", "warmstart", "selfplay", "kg_heldout", "selfplay"])]
    (tmp_path / "subgraphs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    seeds = load_kg_seeds(tmp_path)
    assert [s.seed_id for s in seeds] == ["sg-0", "sg-1", "sg-2", "sg-3", "sg-4"]
    assert seeds[0].waypoints == ("Seed0", "Bridge0A", "Bridge0B") and seeds[0].num_hops == 3
    assert [s.seed_id for s in load_kg_seeds(tmp_path, split="selfplay")] == ["sg-0", "sg-2", "sg-4"]
    assert [s.seed_id for s in load_kg_seeds(tmp_path, split="warmstart")] == ["sg-1"]


def test_a_split_with_no_subgraph_or_a_pool_without_splits_fails_with_the_fix(tmp_path):
    write_kg_pool(tmp_path, 2)
    with pytest.raises(SeedError, match=r"kg\.num_seeds"):
        load_kg_seeds(tmp_path, split="kg_heldout")
    record = subgraph_record(0, 3)
    del record["split"]
    (tmp_path / "subgraphs.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(SeedError, match="searchplay kg extract"):
        load_kg_seeds(tmp_path, split="selfplay")


def test_unsorted_pool_is_sorted_stably(tmp_path):
    records = [subgraph_record(0, 3), subgraph_record(1, 9), subgraph_record(2, 3)]
    (tmp_path / "subgraphs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert [s.seed_id for s in load_kg_seeds(tmp_path)] == ["sg-1", "sg-0", "sg-2"]


def test_bad_pools_fail_with_the_fix(tmp_path):
    with pytest.raises(SeedError, match="searchplay kg"):
        load_kg_seeds(tmp_path)
    bad = subgraph_record(0, 3)
    del bad["waypoints"]
    (tmp_path / "subgraphs.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(SeedError, match=r"subgraphs.jsonl:1: .*waypoints"):
        load_kg_seeds(tmp_path)
    whole = json.dumps(subgraph_record(0, 3))
    (tmp_path / "subgraphs.jsonl").write_text(whole + "\n" + whole[:30])  # a cut copy: the selfplay verb's
    with pytest.raises(SeedError, match=r"subgraphs.jsonl:2: not valid JSON.*searchplay kg extract"):  # one line
        load_kg_seeds(tmp_path)


def test_answer_seeds_and_cursor_wraparound(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text('{"ground_truth": "Castle Drogo", "search_turns": 3}\n{"answer": "Dr. Will Boyd"}\n')
    seeds = load_answer_seeds(path, default_hops=2)
    assert [(s.answer, s.num_hops) for s in seeds] == [("Castle Drogo", 3), ("Dr. Will Boyd", 2)]
    path.write_text('{"answer": ""}\n')
    with pytest.raises(SeedError, match=r"answers\.jsonl:1"):
        load_answer_seeds(path, 2)
    cursor = SeedCursor(seeds)
    assert [s.answer for s in cursor.next_batch(3)] == ["Castle Drogo", "Dr. Will Boyd", "Castle Drogo"]
    assert cursor.position == 3 and cursor.epoch == 1


def test_ssp_seeds_are_the_distinct_answers_in_a_seeded_random_order(tmp_path):
    """SSP samples answers from a set (§3.2): repeats of the KG pool collapse, the order is a seeded shuffle."""
    from searchplay.config import Params
    from searchplay.selfplay.loop import load_seeds
    from searchplay.selfplay.variants import VARIANTS

    records = [subgraph_record(k, 20 - k) for k in range(8)]
    for record in records[:3]:
        record["answer"] = "Europe"
    (tmp_path / "subgraphs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    params = Params()
    params.kg.out_dir = str(tmp_path)
    kg = load_seeds(params, VARIANTS["kg_wcr"])
    ssp = load_seeds(params, VARIANTS["ssp"])
    assert [s.seed_id for s in kg] == [f"sg-{k}" for k in range(8)]  # the KG curriculum, repeats kept
    assert sorted(s.seed_id for s in ssp) == ["sg-0", "sg-3", "sg-4", "sg-5", "sg-6", "sg-7"]
    assert ssp == load_seeds(params, VARIANTS["ssp"])  # reproducible (resume restores the cursor over it)
    assert [s.seed_id for s in ssp] != sorted(s.seed_id for s in ssp)
    params.selfplay.seed = 1
    assert load_seeds(params, VARIANTS["ssp"]) != ssp
