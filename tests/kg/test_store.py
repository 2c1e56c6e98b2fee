"""Graph store: ingestion (single and sharded, failed ones cleaned up), outgoing edges with labels, ranks, units."""

from __future__ import annotations

import gzip

import pytest

from searchplay.kg.readers import TruncatedDumpError
from searchplay.kg.store import GraphStore, ingest_dump


def test_excerpt_ingested_with_outgoing_edges(tmp_path, wikidata_excerpt):
    report = ingest_dump(wikidata_excerpt, tmp_path, batch_size=7)
    store = GraphStore(tmp_path)
    assert report.entities == store.count("entities") == 63
    edges = store.outgoing("Q42")
    citizenship = [e for e in edges if e.property == "P27"]
    assert citizenship and citizenship[0].target == "Q145" and citizenship[0].label == "United Kingdom"
    assert not [e for e in store.outgoing("Q31") if e.label in {"unknown value", "no value"}]  # some/novalue
    node = store.node("Q42")
    assert node.enwiki == "Douglas Adams" and node.description


def test_preferred_before_normal(tmp_path, wikidata_excerpt):
    ingest_dump(wikidata_excerpt, tmp_path)
    store = GraphStore(tmp_path)
    for subject in ["Q31", "Q142", "Q64"]:
        edges = store.outgoing(subject)
        for prop in {e.property for e in edges}:
            ranks = [e.rank for e in edges if e.property == prop]
            assert ranks == sorted(ranks, reverse=True)


def test_sharded_ingestion_matches_single_process(tmp_path, wikidata_excerpt):
    ingest_dump(wikidata_excerpt, tmp_path / "one")
    ingest_dump(wikidata_excerpt, tmp_path / "two", workers=2)
    one, two = GraphStore(tmp_path / "one"), GraphStore(tmp_path / "two")
    assert one.count("entities") == two.count("entities") == 63
    assert one.count("statements") == two.count("statements")
    assert not list((tmp_path / "two").glob("shard-*"))


def test_quantity_rendered_with_unit_label(sample_store):
    everest = next(i for i, label, _ in sample_store.items() if label == "Mount Everest")
    elevation = [e for e in sample_store.outgoing(everest) if e.property == "P2044"]
    assert elevation[0].label == "8849 metre" and elevation[0].is_literal


@pytest.mark.parametrize("workers", [1, 2])
def test_failed_ingestion_leaves_no_store_and_no_shards(tmp_path, tiny_dump, workers):
    """A dump cut mid-stream fails after some batches were written: none of them, nor a shard, stays."""
    whole = gzip.compress(tiny_dump)
    dump = tmp_path / "cut.json.gz"
    dump.write_bytes(whole[: len(whole) * 3 // 4])
    with pytest.raises(TruncatedDumpError, match="is truncated"):
        ingest_dump(dump, tmp_path / "store", workers=workers, batch_size=5)
    assert list((tmp_path / "store").iterdir()) == []
