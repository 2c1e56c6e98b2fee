"""Streaming dump reader: compression, corrupt lines, truncated dumps, empty and unreadable dumps, shards, chunks."""

from __future__ import annotations

import bz2
import gzip
import shutil
from pathlib import Path

import pytest

from searchplay.kg.readers import DumpError, DumpReader, SampleReader, TruncatedDumpError, bz2_cut


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


def _read(path: Path, mode: str, max_bad_line_share: float = 0.01) -> list:
    """Entities of a dump read whole ("whole"), by byte range 1 of 2 ("range"), or as the ingest workers
    share it: decompressed once into chunks of whole lines (on 1 or 2 threads), each parsed by its own reader."""
    if mode == "whole":
        return list(DumpReader(path, max_bad_line_share).entities())
    if mode == "range":
        return list(DumpReader(path, max_bad_line_share, shard=(1, 2)).entities())
    threads = int(mode.removeprefix("chunks-"))
    return [entity for first, chunk in DumpReader(path, max_bad_line_share).chunks(threads, chunk_bytes=2048)
            for entity in DumpReader(path, max_bad_line_share).parse(chunk.splitlines(keepends=True), first)]


SHARED = ["chunks-1", "chunks-2"]


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
@pytest.mark.parametrize("mode", ["whole", *SHARED])
@pytest.mark.parametrize("cut", [2, 4, 11])  # in the middle, and a .bz2 footer cut before or inside its CRC
def test_compressed_dump_cut_in_the_middle_fails(tmp_path, tiny_dump, suffix, mode, cut):
    """a .gz cut in half counted as one bad line, dropping the rest with exit code 0."""
    path = _dump(tmp_path, tiny_dump, suffix)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2 if cut == 2 else size - cut])
    with pytest.raises(TruncatedDumpError, match=rf"dump\.json\{suffix} is truncated: the \{suffix} stream ends "
                                                 "before its end-of-stream marker .*download the dump again"):
        _read(path, mode, max_bad_line_share=1.0)  # no bad-line share lets it pass


@pytest.mark.parametrize(("suffix", "mode"), [("", "range")] + [(suffix, mode) for suffix in ["", ".gz", ".bz2"]
                                                                   for mode in ["whole", *SHARED]])
def test_array_without_its_closing_bracket_fails(tmp_path, tiny_dump, suffix, mode):
    """Wikidata's dumps are one JSON array: every line up to the cut parses, only the missing "]" tells."""
    path = _dump(tmp_path, tiny_dump.removesuffix(b"]\n"), suffix)
    with pytest.raises(TruncatedDumpError, match=r"is truncated: it opens a JSON array with '\[' but its last line "
                                                 r"ends .*\}', not the closing '\]'"):
        _read(path, mode)


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("mode", ["whole", *SHARED])
def test_partial_last_line_fails(tmp_path, tiny_dump, suffix, mode):
    lines = tiny_dump.splitlines(keepends=True)[1:-1]  # one entity per line, no array brackets
    path = _dump(tmp_path, b"".join(lines)[:-40], suffix)  # cut inside the last entity
    with pytest.raises(TruncatedDumpError, match="is truncated: its last line has no newline and does not parse"):
        _read(path, mode, max_bad_line_share=1.0)


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


@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2"])
@pytest.mark.parametrize("threads", [1, 2])
def test_chunks_hold_every_line_once_in_order_and_decompress_it_once(tmp_path, wikidata_excerpt, suffix, threads):
    """The workers' chunks are the serial reader's lines: same entities in the same order, a bad line quoted with
    its line in the dump, and each decompressed byte counted once."""
    lines = wikidata_excerpt.read_bytes().splitlines(keepends=True)
    lines[30] = lines[30][:100] + b"\n"  # one corrupt line
    data = b"".join(lines)
    path = _dump(tmp_path, data, suffix)
    serial = DumpReader(path, max_bad_line_share=0.05)
    expected = [e.id for e in serial.entities()]
    feeder, workers = DumpReader(path), []
    for first, chunk in feeder.chunks(threads, chunk_bytes=300_000):  # a chunk ends with its line: ~15 chunks
        workers.append(DumpReader(path))
        workers[-1].ids = [e.id for e in workers[-1].parse(chunk.splitlines(keepends=True), first)]
    assert len(workers) > 10 and [i for w in workers for i in w.ids] == expected and len(expected) == 62
    assert [ex for w in workers for ex in w.report.examples] == serial.report.examples == [
        f"line 31: JSONDecodeError: {lines[30][:80]!r}"]
    decompressed = len(data) if suffix else 0
    assert feeder.report.bytes_decompressed == serial.report.bytes_decompressed == decompressed
    assert sum(w.report.bytes_read for w in workers) == serial.report.bytes_read == len(data)


def test_compressed_dumps_are_not_split_by_byte_ranges(tmp_path, tiny_dump):
    with pytest.raises(ValueError, match="not split by byte ranges; share it with chunks"):
        DumpReader(_dump(tmp_path, tiny_dump, ".bz2"), shard=(1, 2))


def test_bz2_footer_found_whatever_its_bit_offset(tmp_path, tiny_dump):
    """The end marker of a .bz2 is not byte-aligned: dumps of different lengths put it at different bit offsets."""
    for extra in range(24):
        path = _dump(tmp_path, tiny_dump + b" " * extra, ".bz2")
        assert not bz2_cut(path)
        path.write_bytes(path.read_bytes()[:-1])
        assert bz2_cut(path)


@pytest.mark.parametrize("damage", ["corrupt block", "not bzip2"])
def test_bad_bz2_on_threads_is_unreadable_not_truncated(tmp_path, wikidata_excerpt, damage):
    path = _dump(tmp_path, wikidata_excerpt.read_bytes(), ".bz2")
    data = bytearray(path.read_bytes() if damage == "corrupt block" else wikidata_excerpt.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 50):
        data[i] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(DumpError, match=r"cannot read dump .*dump\.json\.bz2 \(after \d+ lines\): ") as info:
        list(DumpReader(path).chunks(threads=2))
    assert not isinstance(info.value, TruncatedDumpError)


def test_bundled_sample_reads_through_the_same_reader():
    reader = SampleReader()
    assert sum(1 for _ in reader.entities()) >= 300 and reader.report.bad_lines == 0
