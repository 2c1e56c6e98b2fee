"""On-disk graph store (sqlite): entities and statements, answering "outgoing edges of v" by index.

Ingestion streams entities in batches (memory bounded by ``batch_size``, not by the dump), and can
be split across processes: each worker fills its own shard database, then the shards are merged in
the dump's order and indexed once. A plain dump is split by byte ranges; a compressed one is
decompressed once, here, and its line chunks go to the workers. docs/decisions/kg.md says why.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from searchplay.kg.entities import Entity
from searchplay.kg.readers import CHUNK_BYTES, MAX_EXAMPLES, DumpError, DumpReader, ReadReport
from searchplay.kg.values import render_quantity

SCHEMA = """
CREATE TABLE IF NOT EXISTS entities (id TEXT PRIMARY KEY, kind TEXT, label TEXT, description TEXT,
                                     aliases TEXT, enwiki TEXT, datatype TEXT);
CREATE TABLE IF NOT EXISTS statements (subject TEXT, property TEXT, datatype TEXT, rank INTEGER,
                                       snaktype TEXT, target TEXT, value TEXT, unit TEXT);
"""
INDEXES = "CREATE INDEX IF NOT EXISTS statements_subject ON statements(subject);"
STORE_FILE = "graph.sqlite"
LOAD = "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"  # a failed load is removed whole, never resumed
QUEUED_CHUNKS = 2  # chunks handed to each worker ahead of time: it never waits, memory stays bounded
ALL_ROWS = (0, 2**63 - 1)  # rowid range of a whole shard
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Edge:
    """One outgoing statement of a node, with the labels the selector prompt shows."""

    property: str
    relation: str  # property label (the id when the property entity is absent)
    datatype: str
    rank: int
    target: str | None  # entity id, or None for a literal
    label: str  # target label or rendered literal
    description: str

    @property
    def is_literal(self) -> bool:
        return self.target is None


@dataclass(frozen=True)
class Node:
    id: str
    label: str | None
    description: str | None
    aliases: list[str]
    enwiki: str | None


def _rows(entities: Iterable[Entity]) -> Iterator[tuple[tuple, list[tuple]]]:
    for e in entities:
        yield ((e.id, e.kind, e.label, e.description, json.dumps(e.aliases, ensure_ascii=False), e.enwiki, e.datatype),
               [(s.subject, s.property, s.datatype, s.rank, s.snaktype, s.target, s.value, s.unit)
                for s in e.statements])


def write_entities(path: Path, entities: Iterable[Entity], batch_size: int = 5000) -> int:
    """Insert entities into the sqlite file at ``path`` in batches of ``batch_size``; returns the count."""
    db = _connect(path)
    count = insert_entities(db, entities, batch_size)
    db.close()
    return count


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.executescript(LOAD + SCHEMA)
    return db


def insert_entities(db: sqlite3.Connection, entities: Iterable[Entity], batch_size: int) -> int:
    """Insert entities into ``db`` in batches of ``batch_size``, each committed; returns the count."""
    count, entity_rows, statement_rows = 0, [], []
    for entity_row, statements in _rows(entities):
        entity_rows.append(entity_row)
        statement_rows.extend(statements)
        count += 1
        if len(entity_rows) >= batch_size:
            _flush(db, entity_rows, statement_rows)
    _flush(db, entity_rows, statement_rows)
    return count


def _flush(db: sqlite3.Connection, entity_rows: list, statement_rows: list) -> None:
    db.executemany("INSERT OR REPLACE INTO entities VALUES (?,?,?,?,?,?,?)", entity_rows)
    db.executemany("INSERT INTO statements VALUES (?,?,?,?,?,?,?,?)", statement_rows)
    db.commit()
    entity_rows.clear()
    statement_rows.clear()


@dataclass(frozen=True)
class Piece:
    """Rows one worker wrote for one part of the dump: its shard file and the (after, up to] rowid ranges."""

    shard: str
    entities: tuple[int, int] = ALL_ROWS
    statements: tuple[int, int] = ALL_ROWS


def _ingest_shard(args: tuple[str, float, int, int, str, int]) -> tuple[Piece, ReadReport]:
    """A worker's byte range of a plain dump -> its own shard file; its bad lines numbered from the range's start."""
    dump, max_bad, index, count, shard_path, batch_size = args
    reader = DumpReader(dump, max_bad, shard=(index, count))
    write_entities(Path(shard_path), reader.entities(check=False), batch_size)  # the parent checks the whole dump
    return Piece(shard_path), reader.report


_shard: tuple[str, sqlite3.Connection] | None = None  # this worker process's shard (a compressed dump's chunks)


def _open_shard(store_dir: str) -> None:
    """Worker initializer: one shard file per process, named by its pid."""
    global _shard
    path = Path(store_dir) / f"shard-{os.getpid()}.sqlite"
    _shard = (str(path), _connect(path))


def _ingest_chunk(args: tuple[str, float, int, bytes, int]) -> tuple[Piece, ReadReport]:
    """One chunk of lines (the parent decompressed it) -> rows appended to this worker's shard."""
    dump, max_bad, first, chunk, batch_size = args
    assert _shard is not None, "_open_shard runs first"
    path, db = _shard
    before = _last_rowids(db)
    reader = DumpReader(dump, max_bad)
    insert_entities(db, reader.parse(chunk.splitlines(keepends=True), first), batch_size)
    after = _last_rowids(db)
    return Piece(path, (before[0], after[0]), (before[1], after[1])), reader.report


def _last_rowids(db: sqlite3.Connection) -> tuple[int, int]:
    return tuple(db.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}").fetchone()[0]
                 for table in ("entities", "statements"))


class StoreWriteError(RuntimeError):
    """The store could not be written (a full disk, an I/O error); nothing of it is left behind."""


def ingest_dump(dump: str | Path, store_dir: str | Path, workers: int = 1, max_bad_line_share: float = 0.01,
                batch_size: int = 5000, progress: Callable[[int], None] | None = None) -> ReadReport:
    """Ingest a dump into ``store_dir/graph.sqlite``, split over ``workers`` processes (kg.ingest_workers).

    ``store_dir`` is overwritten: the kg stage passes a staging folder (``searchplay.io.atomic_dir``),
    so the previous store stays until the new one is complete. On any failure the files written here
    (the store, the shards) are removed. Returns the combined read report; raises ``DumpError`` on an
    unreadable or truncated dump, too many bad lines or no usable entity.
    """
    store_dir = Path(store_dir)
    store_dir.mkdir(parents=True, exist_ok=True)
    final = store_dir / STORE_FILE
    _remove(final, *store_dir.glob("shard-*.sqlite"))
    try:
        report = _ingest(dump, final, workers, max_bad_line_share, batch_size, progress)
        _remove(*store_dir.glob("shard-*.sqlite"))  # merged (a worker that got no chunk left an empty one)
        _index(final)
    except sqlite3.OperationalError as exc:  # "database or disk is full", "disk I/O error", ...
        _remove(final, *store_dir.glob("shard-*.sqlite"))
        raise StoreWriteError(f"writing the KG store {final} failed: {exc} "
                              f"({shutil.disk_usage(store_dir).free / 2**30:.1f} GiB free there)") from None
    except BaseException:
        _remove(final, *store_dir.glob("shard-*.sqlite"))
        raise
    return report


def _ingest(dump: str | Path, final: Path, workers: int, max_bad_line_share: float, batch_size: int,
            progress: Callable[[int], None] | None) -> ReadReport:
    if workers == 1:
        reader = DumpReader(dump, max_bad_line_share)
        entities = reader.entities()
        if progress is not None:
            entities = _counting(entities, progress)
        write_entities(final, entities, batch_size)
        report = reader.report
    else:
        fed = DumpReader(dump, max_bad_line_share).compressed
        pieces, report = (_feed if fed else _ranges)(Path(dump), final.parent, workers, max_bad_line_share, batch_size)
        if report.bad_lines:
            log.warning(report.summary())  # the workers say nothing; here is the whole dump's summary
        _merge(final, pieces)
    if report.bad_share > max_bad_line_share:
        raise DumpError(report.too_many_bad_lines(max_bad_line_share))
    if report.entities == 0:
        raise DumpError(f"dump {dump} holds no usable Wikidata entity ({report.lines} lines read); expected a JSON "
                        "array with one entity object per line")
    return report


def _ranges(dump: Path, store_dir: Path, workers: int, max_bad: float,
            batch_size: int) -> tuple[list[Piece], ReadReport]:
    """A plain dump: each worker reads its own byte range into its own shard."""
    jobs = [(str(dump), max_bad, i, workers, str(store_dir / f"shard-{i}.sqlite"), batch_size)
            for i in range(workers)]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        results = pool.map(_ingest_shard, jobs)
    first_line = 1
    for _, part in results:  # in the dump's order: each range starts after the lines of those before it
        part.number_from(first_line)
        first_line += part.lines
    return [piece for piece, _ in results], _combine(str(dump), [part for _, part in results])


def _feed(dump: Path, store_dir: Path, workers: int, max_bad: float,
          batch_size: int) -> tuple[list[Piece], ReadReport]:
    """A compressed dump: decompressed once here (on ``workers`` threads for .bz2), its chunks parsed by the workers."""
    feeder = DumpReader(dump, max_bad)
    jobs = ((str(dump), max_bad, first, chunk, batch_size) for first, chunk in feeder.chunks(workers, CHUNK_BYTES))
    pieces, report = [], ReadReport(source=str(dump))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_open_shard,
                             initargs=(str(store_dir),)) as pool:
        try:
            for piece, part in _in_order(pool, _ingest_chunk, jobs, workers * QUEUED_CHUNKS):
                pieces.append(piece)
                report = _combine(str(dump), [report, part])
        finally:
            pool.shutdown(cancel_futures=True)
    report.bytes_decompressed = feeder.report.bytes_decompressed
    return pieces, report


def _in_order(pool: ProcessPoolExecutor, function: Callable, jobs: Iterable, ahead: int) -> Iterator:
    """``function`` over ``jobs`` in the pool, results in the jobs' order, at most ``ahead`` jobs submitted at once."""
    pending: deque[Future] = deque()
    for job in jobs:
        pending.append(pool.submit(function, job))
        if len(pending) >= ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _remove(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _counting(entities: Iterator[Entity], progress: Callable[[int], None]) -> Iterator[Entity]:
    for entity in entities:
        progress(1)
        yield entity


def _combine(source: str, reports: list[ReadReport]) -> ReadReport:
    total = ReadReport(source=source)
    for r in reports:
        total.lines += r.lines
        total.entities += r.entities
        total.bad_lines += r.bad_lines
        total.bytes_read += r.bytes_read
        total.bytes_decompressed += r.bytes_decompressed
        total.bad_examples += r.bad_examples[: MAX_EXAMPLES - len(total.bad_examples)]
    return total


def _merge(final: Path, pieces: list[Piece]) -> None:
    """Copy the pieces' rows into the store in the dump's order (the order of ``pieces``)."""
    db = _connect(final)
    for piece in pieces:
        db.execute("ATTACH DATABASE ? AS shard", (piece.shard,))
        db.execute("INSERT OR REPLACE INTO entities SELECT * FROM shard.entities WHERE rowid > ? AND rowid <= ?",
                   piece.entities)
        db.execute("INSERT INTO statements SELECT * FROM shard.statements WHERE rowid > ? AND rowid <= ?",
                   piece.statements)
        db.commit()
        db.execute("DETACH DATABASE shard")
    db.close()


def _index(final: Path) -> None:
    db = sqlite3.connect(final)
    db.executescript(INDEXES)
    db.close()


EDGE_QUERY = """
SELECT s.property, COALESCE(p.label, s.property), s.datatype, s.rank, s.target,
       COALESCE(t.label, s.value), COALESCE(t.description, ''), s.unit, u.label
FROM statements s
LEFT JOIN entities p ON p.id = s.property
LEFT JOIN entities t ON t.id = s.target
LEFT JOIN entities u ON u.id = s.unit
WHERE s.subject = ? AND s.snaktype = 'value'
ORDER BY s.property, s.rank DESC
"""


class GraphStore:
    """Read access to an ingested store: nodes, outgoing edges, seed candidates."""

    def __init__(self, store_dir: str | Path):
        path = Path(store_dir) / STORE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"no graph store at {path}; ingest a dump first (searchplay kg extract)")
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)

    def node(self, entity_id: str) -> Node | None:
        row = self.db.execute("SELECT id, label, description, aliases, enwiki FROM entities WHERE id = ?",
                              (entity_id,)).fetchone()
        return Node(row[0], row[1], row[2], json.loads(row[3] or "[]"), row[4]) if row else None

    def outgoing(self, entity_id: str) -> list[Edge]:
        """Outgoing value statements of ``entity_id``, preferred rank before normal within a property.

        Targets without an English label are skipped (they cannot be named in a question).
        """
        edges = []
        for prop, relation, datatype, rank, target, label, description, unit, unit_label in self.db.execute(
                EDGE_QUERY, (entity_id,)):
            if not label or (target is not None and label == target) or (unit and not unit_label):
                continue  # unlabeled target, or a quantity whose unit cannot be named
            if datatype == "quantity" and target is None:
                label = render_quantity(label, unit_label)
            edges.append(Edge(prop, relation, datatype, rank, target, label, description))
        return edges

    def statements(self, entity_id: str) -> list[tuple]:
        """All stored statements of ``entity_id`` (subject, property, datatype, rank, snaktype, target, value, unit)."""
        return self.db.execute("SELECT * FROM statements WHERE subject = ? ORDER BY property, rank DESC",
                               (entity_id,)).fetchall()

    def items(self, require_label: bool = True, require_enwiki: bool = False) -> list[tuple[str, str, str | None]]:
        """(id, label, enwiki) of items, for seed selection, in id order (deterministic)."""
        query = "SELECT id, label, enwiki FROM entities WHERE kind = 'item'"
        if require_label:
            query += " AND label IS NOT NULL"
        if require_enwiki:
            query += " AND enwiki IS NOT NULL"
        return self.db.execute(query + " ORDER BY id").fetchall()

    def count(self, table: str) -> int:
        assert table in {"entities", "statements"}
        return self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]

    def close(self) -> None:
        self.db.close()
