"""Entity sources behind one interface: the Wikidata JSON dump (streamed), the bundled sample, SPARQL.

The dump is a JSON array with one entity per line (``[`` first, ``]`` last, each inner line ending
in ``,``). It is read line by line, never whole, from ``.json``, ``.json.gz`` or ``.json.bz2``.
A line that does not parse is counted, skipped and summarized in ``ReadReport``; the read fails only
when the share of bad lines exceeds ``max_bad_line_share`` or when no usable entity was found.
"""

from __future__ import annotations

import bz2
import gzip
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

import orjson

from searchplay.assets import bundled_sample_path
from searchplay.kg.entities import Entity, parse_entity

log = logging.getLogger(__name__)
MAX_EXAMPLES = 5  # bad lines quoted in the summary


class DumpError(ValueError):
    """A dump that cannot be used; the message says what was expected and what was found."""


@dataclass
class ReadReport:
    """What a reader saw: entity and line counts, bad lines with a few examples."""

    source: str
    lines: int = 0
    entities: int = 0
    bad_lines: int = 0
    bytes_read: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def bad_share(self) -> float:
        return self.bad_lines / max(self.lines, 1)

    def bad(self, number: int, line: bytes, reason: str) -> None:
        self.bad_lines += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"line {number}: {reason}: {line[:80]!r}")

    def summary(self) -> str:
        text = f"{self.source}: {self.entities} entities from {self.lines} lines, {self.bad_lines} bad lines skipped"
        return text + "".join(f"\n  {example}" for example in self.examples)


class EntitySource(Protocol):
    """Anything that yields entities and reports what it read."""

    report: ReadReport

    def entities(self) -> Iterator[Entity]: ...


def open_dump(path: Path) -> IO[bytes]:
    """Open a dump for binary line reading, decompressing .gz / .bz2 by suffix."""
    if not path.is_file():
        raise DumpError(f"dump {path} is not a readable file; expected a Wikidata JSON dump (.json/.json.gz/.json.bz2)")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    if path.suffix == ".bz2":
        return bz2.open(path, "rb")
    return path.open("rb")


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


class DumpReader:
    """Stream a Wikidata JSON dump; ``shard=(i, n)`` reads only the i-th of n parts.

    Plain files are split by byte ranges; compressed files cannot seek, so every shard decompresses
    the stream and parses only lines with ``number % n == i`` (parsing dominates the cost).
    """

    def __init__(self, path: str | Path, max_bad_line_share: float = 0.01, shard: tuple[int, int] = (0, 1)):
        self.path = Path(path)
        self.max_bad_line_share = max_bad_line_share
        self.shard = shard
        self.report = ReadReport(source=str(self.path))

    def _lines(self, handle: IO[bytes]) -> Iterator[bytes]:
        index, count = self.shard
        if count == 1:
            yield from handle
        elif self.path.suffix in {".gz", ".bz2"}:
            yield from (line for number, line in enumerate(handle) if number % count == index)
        else:
            size = self.path.stat().st_size
            yield from iter_lines(handle, size * index // count, size * (index + 1) // count)

    def entities(self) -> Iterator[Entity]:
        report = self.report
        try:
            with open_dump(self.path) as handle:
                for line in self._lines(handle):
                    report.lines += 1
                    report.bytes_read += len(line)
                    try:
                        entity = parse_line(line)
                    except (ValueError, TypeError, AttributeError, KeyError) as exc:
                        report.bad(report.lines, line, type(exc).__name__)
                        continue
                    if entity is not None:
                        report.entities += 1
                        yield entity
        except (OSError, EOFError) as exc:  # unreadable or truncated compressed stream
            if report.entities == 0:
                raise DumpError(f"cannot read dump {self.path}: {exc}") from None
            report.bad(report.lines + 1, b"", f"stream ended early ({exc})")
            log.warning("%s: stream ended early after %d entities: %s", self.path, report.entities, exc)
        self.check()

    def check(self) -> None:
        """Raise ``DumpError`` when the bad-line share is too high (run after reading)."""
        report = self.report
        if report.bad_lines:
            log.warning(report.summary())
        if report.bad_share > self.max_bad_line_share:
            raise DumpError(f"{report.bad_lines} of {report.lines} lines of {self.path} are corrupt "
                            f"({report.bad_share:.1%} > kg.max_bad_line_share={self.max_bad_line_share:.1%}); "
                            f"{report.summary()}")


class SampleReader(DumpReader):
    """The bundled sample: a small real-format dump, read by the same code as the full dump."""

    def __init__(self, max_bad_line_share: float = 0.0):
        super().__init__(bundled_sample_path(), max_bad_line_share)
