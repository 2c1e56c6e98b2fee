"""Streaming dump reader: compression, corrupt and truncated lines, empty and unreadable dumps, shards."""

from __future__ import annotations

import bz2
import gzip
import shutil

import pytest

from searchplay.kg.readers import DumpError, DumpReader, SampleReader


def test_excerpt_streams_every_entity(wikidata_excerpt):
    reader = DumpReader(wikidata_excerpt)
    ids = [e.id for e in reader.entities()]
    assert len(ids) == 63 and ids[0] == "Q22" and reader.report.bad_lines == 0


@pytest.mark.parametrize("opener", [gzip.open, bz2.open])
def test_compressed_dumps(tmp_path, wikidata_excerpt, opener):
    suffix = ".gz" if opener is gzip.open else ".bz2"
    path = tmp_path / f"dump.json{suffix}"
    with wikidata_excerpt.open("rb") as src, opener(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert sum(1 for _ in DumpReader(path).entities()) == 63


def _corrupt_copy(tmp_path, wikidata_excerpt, bad: int):
    lines = wikidata_excerpt.read_bytes().splitlines(keepends=True)
    for i in range(1, bad + 1):
        lines[i] = lines[i][: len(lines[i]) // 2] + b"\n"  # truncated mid-object
    path = tmp_path / "corrupt.json"
    path.write_bytes(b"".join(lines))
    return path


def test_corrupt_lines_counted_skipped_and_summarized(tmp_path, wikidata_excerpt):
    reader = DumpReader(_corrupt_copy(tmp_path, wikidata_excerpt, 2), max_bad_line_share=0.05)
    assert sum(1 for _ in reader.entities()) == 61
    assert reader.report.bad_lines == 2 and "line 2" in reader.report.summary()


def test_too_many_corrupt_lines_fail(tmp_path, wikidata_excerpt):
    reader = DumpReader(_corrupt_copy(tmp_path, wikidata_excerpt, 5), max_bad_line_share=0.05)
    with pytest.raises(DumpError, match=r"kg\.max_bad_line_share"):
        list(reader.entities())


def test_truncated_gzip_keeps_what_was_read(tmp_path, wikidata_excerpt):
    whole = gzip.compress(wikidata_excerpt.read_bytes())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    reader = DumpReader(path, max_bad_line_share=1.0)
    entities = list(reader.entities())
    assert 0 < len(entities) < 63 and reader.report.bad_lines >= 1


def test_unreadable_and_empty_dumps_fail_clearly(tmp_path):
    with pytest.raises(DumpError, match="not a readable file"):
        list(DumpReader(tmp_path / "missing.json").entities())
    empty = tmp_path / "empty.json"
    empty.write_text("[\n]\n")
    from searchplay.kg.store import ingest_dump

    with pytest.raises(DumpError, match="no usable Wikidata entity"):
        ingest_dump(empty, tmp_path / "store")


@pytest.mark.parametrize("count", [2, 3, 7])
def test_byte_range_shards_cover_each_entity_once(wikidata_excerpt, count):
    ids = [e.id for i in range(count) for e in DumpReader(wikidata_excerpt, shard=(i, count)).entities()]
    assert sorted(ids) == sorted(e.id for e in DumpReader(wikidata_excerpt).entities())


def test_bundled_sample_reads_through_the_same_reader():
    reader = SampleReader()
    assert sum(1 for _ in reader.entities()) >= 300 and reader.report.bad_lines == 0
