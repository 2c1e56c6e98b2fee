"""Graph store: ingestion (single and sharded, failed ones cleaned up), outgoing edges with labels, ranks, units."""

from __future__ import annotations

import bz2
import gzip
import sqlite3

import pytest

from searchplay.kg import store as store_module
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


COMPRESS = {"": lambda data: data, ".gz": gzip.compress, ".bz2": bz2.compress}


def _rows(store_dir) -> tuple[list, list]:
    db = sqlite3.connect(store_dir / "graph.sqlite")
    return db.execute("SELECT * FROM entities").fetchall(), db.execute("SELECT * FROM statements").fetchall()


@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2"])
def test_sharded_ingestion_matches_single_process(tmp_path, wikidata_excerpt, monkeypatch, suffix):
    """Two workers store the same rows in the same order as one, and a compressed dump is decompressed once."""
    monkeypatch.setattr(store_module, "CHUNK_BYTES", 200_000)  # ~20 chunks, so the two workers interleave
    lines = wikidata_excerpt.read_bytes().splitlines(keepends=True)
    lines[40] = lines[40][:50] + b"\n"  # a corrupt line: reported with its line number whoever parsed it
    data = b"".join(lines)
    dump = tmp_path / f"dump.json{suffix}"
    dump.write_bytes(COMPRESS[suffix](data))
    limit = 0.02  # over the one bad line's share of the dump (1 of 64), under its share of either half
    one = ingest_dump(dump, tmp_path / "one", max_bad_line_share=limit)
    two = ingest_dump(dump, tmp_path / "two", workers=2, max_bad_line_share=limit)
    entities, statements = _rows(tmp_path / "one")
    assert len(entities) == 62 and len(statements) > 4000 and (entities, statements) == _rows(tmp_path / "two")
    assert (two.lines, two.entities, two.bad_lines, two.bytes_read) == (one.lines, one.entities, 1, len(data))
    assert one.bad_share < limit < 2 / one.lines
    assert one.first_bad == "line 41: JSONDecodeError" and one.examples[0].startswith("line 41: JSONDecodeError: ")
    assert two.examples == one.examples and two.first_bad == one.first_bad  # a byte range's lines too
    assert two.bytes_decompressed == one.bytes_decompressed == (len(data) if suffix else 0)
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["graph.sqlite"]


def test_quantity_rendered_with_unit_label(sample_store):
    everest = next(i for i, label, _ in sample_store.items() if label == "Mount Everest")
    elevation = [e for e in sample_store.outgoing(everest) if e.property == "P2044"]
    assert elevation[0].label == "8849 metre" and elevation[0].is_literal


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
@pytest.mark.parametrize("workers", [1, 2])
def test_failed_ingestion_leaves_no_store_and_no_shards(tmp_path, tiny_dump, workers, suffix):
    """A dump cut mid-stream fails after some batches were written: none of them, nor a shard, stays."""
    whole = COMPRESS[suffix](tiny_dump)
    dump = tmp_path / f"cut.json{suffix}"
    dump.write_bytes(whole[: len(whole) * 3 // 4])
    with pytest.raises(TruncatedDumpError, match="is truncated"):
        ingest_dump(dump, tmp_path / "store", workers=workers, batch_size=5)
    assert list((tmp_path / "store").iterdir()) == []
