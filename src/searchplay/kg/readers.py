"""Entity sources behind one interface: the Wikidata JSON dump (streamed), the bundled sample, SPARQL.

The dump is a JSON array with one entity per line (``[`` first, ``]`` last, each inner line ending
in ``,``). It is read line by line, never whole, from ``.json``, ``.json.gz`` or ``.json.bz2``.
A line that does not parse is counted, skipped and summarized in ``ReadReport``; the read fails
when the share of bad lines exceeds ``max_bad_line_share``, when no usable entity was found, and
always when the dump is truncated (``TruncatedDumpError``): a compressed stream that ends before its
end-of-stream marker, an array opened with ``[`` whose last line is not ``]``, or a last line without
its newline that does not parse.

Several ingest workers share one pass over a compressed dump: ``DumpReader.chunks`` decompresses it
once (a ``.bz2`` with indexed_bzip2's parallel decoder) and cuts it into chunks of whole lines that the
workers parse with ``DumpReader.parse``. A plain dump is split by byte ranges instead (``shard``).
"""

from __future__ import annotations

import gzip
import logging
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

import indexed_bzip2
import orjson

from searchplay.assets import bundled_sample_path
from searchplay.io import COMPRESSED, InputError, TruncatedInputError
from searchplay.kg.entities import Entity, parse_entity

log = logging.getLogger(__name__)
MAX_EXAMPLES = 5  # bad lines quoted in the summary
TAIL_BYTES = 65536  # read from the end of a plain dump to find its last line (the closing "]")
AGAIN = "copy or download the dump again (an interrupted transfer?)"
CHUNK_BYTES = 4 << 20  # decompressed bytes per chunk handed to an ingest worker (~1 ms to pickle, 2 queued a worker)
BZ2_END = 0x177245385090  # the 48-bit magic that opens a bzip2 stream's footer (then a 32-bit CRC, bit padding)


PERMANENT_READ_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError, gzip.BadGzipFile)


class DumpError(InputError, ValueError):
    """A dump that cannot be used; the message says what was expected and what was found."""


class TruncatedDumpError(DumpError, TruncatedInputError):
    """A dump that ends early; never read as a whole one (the CLI exits 2: a retry reads the same file)."""


@dataclass
class ReadReport:
    """What a reader saw: entity and line counts, bad lines with a few examples."""

    source: str
    lines: int = 0
    entities: int = 0
    bad_lines: int = 0
    bytes_read: int = 0
    bytes_decompressed: int = 0  # bytes that came out of a decompressor in this reader (0 for a plain dump)
    bad_examples: list[tuple[int, str, bytes]] = field(default_factory=list)  # (line number, reason, first bytes)

    @property
    def bad_share(self) -> float:
        return self.bad_lines / max(self.lines, 1)

    @property
    def examples(self) -> list[str]:
        """The first ``MAX_EXAMPLES`` bad lines, quoted: ``line N: reason: b'...'``."""
        return [f"line {number}: {reason}: {head!r}" for number, reason, head in self.bad_examples]

    @property
    def first_bad(self) -> str:
        """``line N: reason`` of the first bad line (the one-line error names it); empty when there is none."""
        return f"line {self.bad_examples[0][0]}: {self.bad_examples[0][1]}" if self.bad_examples else ""

    def bad(self, number: int, line: bytes, reason: str) -> None:
        self.bad_lines += 1
        if len(self.bad_examples) < MAX_EXAMPLES:
            self.bad_examples.append((number, reason, line[:80]))

    def number_from(self, first: int) -> None:
        """Renumber the quoted bad lines of a part read from its own line 1, whose first line is ``first``."""
        self.bad_examples = [(number + first - 1, reason, head) for number, reason, head in self.bad_examples]

    def summary(self) -> str:
        text = f"{self.source}: {self.entities} entities from {self.lines} lines, {self.bad_lines} bad lines skipped"
        return text + "".join(f"\n  {example}" for example in self.examples)

    def too_many_bad_lines(self, limit: float) -> str:
        """One line for a dump over the bad-line limit: the counts, the setting and the first bad line."""
        first = f"; the first is {self.first_bad}" if self.first_bad else ""
        return (f"{self.bad_lines} of {self.lines} lines of {self.source} are corrupt ({self.bad_share:.1%} > "
                f"kg.max_bad_line_share={limit:.1%}){first}; re-download the dump or raise kg.max_bad_line_share")


class EntitySource(Protocol):
    """Anything that yields entities and reports what it read."""

    report: ReadReport

    def entities(self) -> Iterator[Entity]: ...


def open_dump(path: Path, threads: int = 1) -> IO[bytes]:
    """Open a dump for binary line reading, decompressing .gz / .bz2 by suffix.

    With ``threads > 1`` a ``.bz2`` is decompressed by indexed_bzip2 on that many threads (its blocks
    are independent). Its header and end-of-stream marker are checked first: on several threads that
    decoder read a file that is not bzip2 as empty, and its errors do not say whether a stream was
    cut. A ``.gz`` always goes through the stdlib (one thread).
    """
    if not path.is_file():
        raise DumpError(f"dump {path} is not a readable file; expected a Wikidata JSON dump (.json/.json.gz/.json.bz2)")
    if path.suffix == ".bz2" and threads > 1:
        with path.open("rb") as handle:
            if handle.read(3) != b"BZh":
                raise OSError("not a bzip2 file (no 'BZh' header)")
        if bz2_cut(path):
            raise EOFError(path)  # read as the stdlib reports a stream that ends early
        return indexed_bzip2.open(str(path), parallelization=threads)
    return COMPRESSED.get(path.suffix, open)(path, "rb")


def bz2_cut(path: Path) -> bool:
    """Whether a .bz2 file lacks the stream footer at its end: the 48-bit end magic and a CRC, padded to a byte."""
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - 11))
        tail = int.from_bytes(handle.read(), "big")
    return not any((tail >> (32 + pad)) & (2**48 - 1) == BZ2_END for pad in range(8))


def parse_line(line: bytes) -> Entity | None:
    """One dump line -> Entity; None for the array brackets and blank lines; ValueError if corrupt."""
    text = line.strip()
    if text in (b"", b"[", b"]"):
        return None
    if text.endswith(b","):
        text = text[:-1]
    return parse_entity(orjson.loads(text))  # orjson: ~3x the stdlib's speed on dump lines


def iter_lines(handle: IO[bytes], start: int = 0, end: int | None = None) -> Iterator[bytes]:
    """Lines of ``handle`` whose first byte lies in [start, end) (byte-range sharding of plain files)."""
    if start:
        handle.seek(start - 1)
        handle.readline()  # finish the line that straddles the boundary; its owner is the previous shard
    position = handle.tell()
    for line in handle:
        if end is not None and position >= end:
            break
        position += len(line)
        yield line


def plain_ends(path: Path) -> tuple[bytes | None, bytes | None]:
    """First and last non-blank lines of an uncompressed dump, read from its two ends (no full pass).

    The last line is looked for in the final ``TAIL_BYTES``; a longer one comes back as None (it is not ``]``).
    """
    with path.open("rb") as handle:
        first = next((line for line in handle if line.strip()), None)
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - TAIL_BYTES))
        tail = handle.read().splitlines()
    if size > TAIL_BYTES:
        tail = tail[1:]  # the first piece may be the end of a longer line
    return first, next((line for line in reversed(tail) if line.strip()), None)


class DumpReader:
    """Stream a Wikidata JSON dump; ``shard=(i, n)`` reads only the i-th of n byte ranges of a plain file.

    A compressed dump cannot be split by byte ranges: it is read whole here, or cut by ``chunks`` into
    line chunks for several workers, each decompressed once. A truncated dump raises
    ``TruncatedDumpError`` in every mode (module docstring).
    """

    def __init__(self, path: str | Path, max_bad_line_share: float = 0.01, shard: tuple[int, int] = (0, 1)):
        self.path = Path(path)
        self.max_bad_line_share = max_bad_line_share
        self.shard = shard
        self.report = ReadReport(source=str(self.path))
        self.compressed = self.path.suffix in COMPRESSED
        if self.compressed and shard[1] > 1:
            raise ValueError(f"{self.path}: a compressed dump is not split by byte ranges; share it with chunks()")

    def _lines(self, handle: IO[bytes]) -> Iterator[bytes]:
        index, count = self.shard
        if count > 1:
            size = self.path.stat().st_size
            yield from iter_lines(handle, size * index // count, size * (index + 1) // count)
        else:
            yield from handle

    def entities(self, check: bool = True) -> Iterator[Entity]:
        """The dump's entities, bad lines counted and skipped; ``check``: then apply the bad-line limit and warn
        about bad lines (``DumpReader.check``). A byte-range worker leaves both to the parent, which sees every
        range."""
        ends = Ends()
        try:
            with open_dump(self.path) as handle:
                if not self.compressed:
                    self._check_closed(*plain_ends(self.path))  # before any parsing: a cut file fails fast
                yield from self.parse(ends.watch(self._lines(handle), self.report) if self.compressed
                                      else self._lines(handle))
        except EOFError:
            raise self._ended_early() from None
        except (OSError, zlib.error) as exc:  # not a gzip/bz2 file, a corrupt block, a read error
            raise self._unreadable(exc) from None
        if self.compressed:
            self._check_closed(ends.first, ends.last)
        if check:
            self.check()

    def chunks(self, threads: int = 1, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
        """(number of its first line, chunk of whole lines) over the whole dump, decompressed once.

        The reader that parses a chunk is told its first line's number (``parse``), so bad lines are
        quoted with their line in the dump. ``threads`` decompress a ``.bz2`` (``open_dump``).
        """
        ends, number = Ends(), 1
        try:
            with open_dump(self.path, threads) as handle:
                while chunk := handle.read(chunk_bytes) + handle.readline():
                    self.report.bytes_decompressed += len(chunk) if self.compressed else 0
                    ends.see(chunk)
                    yield number, chunk
                    number += chunk.count(b"\n")
        except EOFError:
            raise self._ended_early() from None
        except DumpError:
            raise
        except (OSError, zlib.error, RuntimeError, ValueError) as exc:  # indexed_bzip2 raises the last two
            raise self._unreadable(exc) from None
        self._check_closed(ends.first, ends.last)

    def parse(self, lines: Iterable[bytes], first: int = 1) -> Iterator[Entity]:
        """Entities of ``lines`` (numbered from ``first`` in the dump); bad ones counted and skipped in the report."""
        report = self.report
        for number, line in enumerate(lines, first):
            report.lines += 1
            report.bytes_read += len(line)
            try:
                entity = parse_line(line)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                if not line.endswith(b"\n"):  # only the last line of a file can lack one
                    raise TruncatedDumpError(
                        f"dump {self.path} is truncated: its last line has no newline and does not parse "
                        f"({type(exc).__name__}): ...{line[-80:]!r}; {AGAIN}") from None
                report.bad(number, line, type(exc).__name__)
                continue
            if entity is not None:
                report.entities += 1
                yield entity

    def _ended_early(self) -> TruncatedDumpError:
        return TruncatedDumpError(f"dump {self.path} is truncated: the {self.path.suffix} stream ends before its "
                                  f"end-of-stream marker (after {self.report.lines} lines); {AGAIN}")

    def _unreadable(self, exc: Exception) -> DumpError:
        return DumpError(f"cannot read dump {self.path} (after {self.report.lines} lines): {exc}; expected a "
                         "Wikidata JSON dump (.json/.json.gz/.json.bz2)",
                         retryable=isinstance(exc, OSError) and not isinstance(exc, PERMANENT_READ_ERRORS))  # EIO

    def _check_closed(self, first: bytes | None, last: bytes | None) -> None:
        """A dump that opens a JSON array with ``[`` must end with ``]``; any other last line means it was cut."""
        if first is not None and first.strip() == b"[" and (last or b"").strip() != b"]":
            raise TruncatedDumpError(f"dump {self.path} is truncated: it opens a JSON array with '[' but its last line "
                                     f"ends ...{(last or b'').strip()[-80:]!r}, not the closing ']'; {AGAIN}")

    def check(self) -> None:
        """Raise ``DumpError`` when the bad-line share is too high (run after reading)."""
        report = self.report
        if report.bad_share > self.max_bad_line_share:
            raise DumpError(report.too_many_bad_lines(self.max_bad_line_share))
        if report.bad_lines:
            log.warning(report.summary())


@dataclass
class Ends:
    """First and last non-blank lines of a stream that passes by whole (a compressed dump's array check)."""

    first: bytes | None = None
    last: bytes | None = None

    def see(self, text: bytes) -> None:
        """Take in the next piece of the stream (whole lines)."""
        stripped = text.strip()
        if stripped:
            if self.first is None:
                self.first = stripped.split(b"\n", 1)[0]
            self.last = stripped[stripped.rfind(b"\n") + 1:]

    def watch(self, lines: Iterable[bytes], report: ReadReport) -> Iterator[bytes]:
        """Pass ``lines`` on, seeing each and counting its bytes as decompressed."""
        for line in lines:
            report.bytes_decompressed += len(line)
            self.see(line)
            yield line


class SampleReader(DumpReader):
    """The bundled sample: a small real-format dump, read by the same code as the full dump."""

    def __init__(self, max_bad_line_share: float = 0.0):
        super().__init__(bundled_sample_path(), max_bad_line_share)
