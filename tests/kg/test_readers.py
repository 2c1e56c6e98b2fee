"""Streaming dump reader: compression, corrupt lines, truncated dumps, empty and unreadable dumps, shards."""

from __future__ import annotations

import bz2
import gzip
import shutil
from pathlib import Path

import pytest

from searchplay.kg.readers import DumpError, DumpReader, SampleReader, TruncatedDumpError


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


COMPRESS = {"": lambda data: data, ".gz": gzip.compress, ".bz2": bz2.compress}


def _dump(tmp_path, data: bytes, suffix: str = "") -> Path:
    path = tmp_path / f"dump.json{suffix}"
    path.write_bytes(COMPRESS[suffix](data))
    return path


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
@pytest.mark.parametrize("shard", [(0, 1), (1, 2)])
def test_compressed_dump_cut_in_the_middle_fails(tmp_path, tiny_dump, suffix, shard):
    """a .gz cut in half counted as one bad line, dropping the rest with exit code 0."""
    path = _dump(tmp_path, tiny_dump, suffix)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    reader = DumpReader(path, max_bad_line_share=1.0, shard=shard)  # no bad-line share lets it pass
    with pytest.raises(TruncatedDumpError, match=rf"dump\.json\{suffix} is truncated: the \{suffix} stream ends "
                                                 "before its end-of-stream marker .*download the dump again"):
        list(reader.entities())


@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2"])
@pytest.mark.parametrize("shard", [(0, 1), (0, 2), (1, 2)])
def test_array_without_its_closing_bracket_fails(tmp_path, tiny_dump, suffix, shard):
    """Wikidata's dumps are one JSON array: every line up to the cut parses, only the missing "]" tells."""
    path = _dump(tmp_path, tiny_dump.removesuffix(b"]\n"), suffix)
    with pytest.raises(TruncatedDumpError, match=r"is truncated: it opens a JSON array with '\[' but its last line "
                                                 r"ends .*\}', not the closing '\]'"):
        list(DumpReader(path, shard=shard).entities())


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("shard", [(0, 1), (1, 2)])
def test_partial_last_line_fails(tmp_path, tiny_dump, suffix, shard):
    lines = tiny_dump.splitlines(keepends=True)[1:-1]  # one entity per line, no array brackets
    path = _dump(tmp_path, b"".join(lines)[:-40], suffix)  # cut inside the last entity
    with pytest.raises(TruncatedDumpError, match="is truncated: its last line has no newline and does not parse"):
        list(DumpReader(path, max_bad_line_share=1.0, shard=shard).entities())


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_whole_dumps_without_a_final_newline_and_bad_lines_within_the_share_pass(tmp_path, tiny_dump, suffix):
    assert sum(1 for _ in DumpReader(_dump(tmp_path, tiny_dump.rstrip(), suffix)).entities()) == 50
    lines = tiny_dump.splitlines(keepends=True)
    assert sum(1 for _ in DumpReader(_dump(tmp_path, b"".join(lines[1:-1]).rstrip(), suffix)).entities()) == 50
    lines[10] = lines[10][:30] + b"\n"  # one corrupt line in the middle: counted and skipped, as before
    reader = DumpReader(_dump(tmp_path, b"".join(lines), suffix), max_bad_line_share=0.05)
    assert sum(1 for _ in reader.entities()) == 49 and reader.report.bad_lines == 1


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
