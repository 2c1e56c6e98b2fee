"""EVE's document seeds: the corpus split into the Phase A and hand-off shards, with hop counts."""

from __future__ import annotations

import pytest

from searchplay.recipes.eve.seeds import document_shard, load_document_seeds
from searchplay.selfplay.seeds import SeedError
from tests.recipes.eve.eve_fakes import write_eve_corpus


def test_document_seeds_split_the_corpus_into_disjoint_shards_with_hop_counts(tmp_path):
    write_eve_corpus(tmp_path / "passages.jsonl", 200)
    proposer = load_document_seeds(tmp_path / "passages.jsonl", "proposer", 0.2, [4, 3, 2, 1])
    handoff = load_document_seeds(tmp_path / "passages.jsonl", "handoff", 0.2, [4, 3, 2, 1])
    assert not {s.seed_id for s in proposer} & {s.seed_id for s in handoff}
    assert len(proposer) + len(handoff) == 200 and 20 <= len(handoff) <= 60
    hops = [s.num_hops for s in proposer]
    assert set(hops) == {1, 2, 3, 4} and hops.count(1) > hops.count(4)  # 4:3:2:1
    assert proposer[0].record["document"].startswith("(Title: Landmark") and proposer[0].answer == ""
    assert document_shard("7", 0.2) == document_shard("7", 0.2)  # stable


def test_document_seeds_fail_clearly_without_a_corpus(tmp_path):
    with pytest.raises(SeedError, match="searchplay corpus build"):
        load_document_seeds(tmp_path / "absent.jsonl", "proposer", 0.2, [1.0])
