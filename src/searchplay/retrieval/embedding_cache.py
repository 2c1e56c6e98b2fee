"""Passage vectors cached by the SHA-256 of the exact text embedded, so a rebuild embeds only changed passages.

A LanceDB table ``{hash, vector}`` in ``<cache_dir>/<key>/``, where ``<key>`` hashes what makes a vector valid
(embedder name, e5 prefixes, dtype, dimension, max sequence length, and the vector of a fixed probe text, which
tells other weights under the same name apart): another embedder gets its own folder. It
lives outside ``index.dir`` because DVC deletes a stage's outputs before it runs the stage.

Lookups read the table as it was when opened, its ``hash`` column BTREE-indexed then; rows added during a build
are found by the next build (a text repeated in two chunks of one build is embedded twice). An unreadable cache
is logged, removed and started empty: the cache never fails a build. One build at a time per cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import warnings
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

TABLE = "vectors"


def text_hash(text: str) -> str:
    """SHA-256 hex of the exact passage text handed to the embedder."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


PROBE_TEXT = "searchplay embedding cache probe: which weights made these vectors?"


def weights_probe(embedder: Any) -> str:
    """16 hex digits of the SHA-256 of ``embedder``'s vector for ``PROBE_TEXT``, rounded to 4 decimals: a model
    retrained or replaced under the same name or folder embeds differently, so it gets another cache folder."""
    vector = np.asarray(embedder.encode_queries([PROBE_TEXT]), dtype=np.float32).round(4) + 0.0  # -0.0 -> 0.0
    return hashlib.sha256(vector.tobytes()).hexdigest()[:16]


def embedder_key(embedder: Any) -> dict[str, Any]:
    """What makes a cached vector valid for ``embedder`` (attributes a test fake may lack get defaults): its
    name, settings and ``weights_probe``, since a name or a local folder can hold other weights later."""
    return {"embedder": embedder.name, "e5_prefixes": bool(getattr(embedder, "e5_prefixes", False)),
            "dtype": str(getattr(embedder, "dtype", "float32")), "dimension": int(embedder.dimension),
            "max_seq_length": getattr(embedder, "max_seq_length", None), "weights_probe": weights_probe(embedder)}


def key_folder(embedder: Any, key: dict[str, Any] | None = None) -> str:
    """The cache subfolder for ``embedder``: 16 hex digits of the SHA-256 of ``embedder_key`` (or ``key``, that
    key computed already)."""
    key = embedder_key(embedder) if key is None else key
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _sql_list(values: Sequence[str]) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


class EmbeddingCache:
    """The vectors of one embedder; ``hits`` and ``misses`` count the passages ``encode`` was asked for."""

    def __init__(self, cache_dir: str | Path, embedder: Any):
        self.key = embedder_key(embedder)  # once: its weights probe is a forward
        self.folder = Path(cache_dir) / key_folder(embedder, self.key)
        self.dimension = int(embedder.dimension)
        self.hits = self.misses = 0
        try:
            self._open()
        except Exception as exc:  # whatever is wrong with it, it is only a cache
            log.warning("embedding cache %s is unreadable (%s: %s); removing it and starting an empty one",
                        self.folder, type(exc).__name__, exc)
            shutil.rmtree(self.folder, ignore_errors=True)
            if self.folder.exists():
                self.folder.unlink()  # a file where the folder should be
            self._open()

    def _schema(self):
        import pyarrow as pa

        return pa.schema([pa.field("hash", pa.string()), pa.field("vector", pa.list_(pa.float32(), self.dimension))])

    def _open(self) -> None:
        """Open (or create) the table, index its hash column, and keep a read-only snapshot for lookups."""
        import lancedb

        self.folder.mkdir(parents=True, exist_ok=True)
        db = lancedb.connect(str(self.folder), read_consistency_interval=timedelta(0))  # see rows another process added
        if not (self.folder / f"{TABLE}.lance").exists():
            self._table = db.create_table(TABLE, schema=self._schema())
            (self.folder / "key.json").write_text(json.dumps(self.key, indent=2) + "\n")
            self._snapshot = None
            return
        self._table = db.open_table(TABLE)
        if self._table.schema != self._schema():
            raise ValueError(f"schema {self._table.schema} is not {self._schema()}")
        if self._table.count_rows():
            self._index_hashes()
            self._snapshot = db.open_table(TABLE)
            self._snapshot.checkout(self._table.version)
            self._snapshot.search().limit(1).to_arrow()  # read a row: a damaged data file fails here
        else:
            self._snapshot = None

    def _index_hashes(self) -> None:
        """BTREE-index the hash column, or fold rows added since into the index (and compact the appends)."""
        from lancedb.index import BTree

        indexed = [index.name for index in self._table.list_indices() if index.columns == ["hash"]]
        if not indexed:
            self._table.create_index("hash", config=BTree())
        elif self._table.index_stats(indexed[0]).num_unindexed_rows:
            with warnings.catch_warnings():  # "removes every version": yes, one build at a time uses the cache
                warnings.simplefilter("ignore", UserWarning)
                self._table.optimize(cleanup_older_than=timedelta(0))

    def lookup(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``hashes`` (one chunk: the filter names every hash), by hash."""
        if self._snapshot is None or not hashes:
            return {}
        found = (self._snapshot.search().where(f"hash IN ({_sql_list(sorted(set(hashes)))})")
                 .select(["hash", "vector"]).limit(None).to_arrow())
        vectors = found.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        return dict(zip(found.column("hash").to_pylist(), vectors.reshape(-1, self.dimension), strict=True))

    def add(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors`` (one row per hash) in the cache; a hash already there (stored meanwhile by another
        process building an index at the same time) is not added again (LanceDB ``merge_insert`` on ``hash``)."""
        import pyarrow as pa

        if not hashes:
            return
        flat = pa.array(np.asarray(vectors, dtype=np.float32).ravel(), type=pa.float32())
        rows = pa.table({"hash": list(hashes), "vector": pa.FixedSizeListArray.from_arrays(flat, self.dimension)},
                        schema=self._schema())
        self._table.merge_insert("hash").when_not_matched_insert_all().execute(rows)

    def encode(self, texts: Sequence[str], embedder: Any) -> np.ndarray:
        """``embedder.encode_passages(texts)``, embedding only the texts not cached (each distinct text once,
        in ``texts``' order), storing those; the vectors come back in ``texts``' order."""
        hashes = [text_hash(text) for text in texts]
        vectors = self.lookup(hashes)
        self.hits += sum(h in vectors for h in hashes)
        self.misses += sum(h not in vectors for h in hashes)
        missing = {h: text for h, text in zip(hashes, texts, strict=True) if h not in vectors}
        if missing:
            embedded = embedder.encode_passages(list(missing.values()))
            self.add(list(missing), embedded)
            vectors.update(zip(missing, np.asarray(embedded, dtype=np.float32), strict=True))
        return np.stack([vectors[h] for h in hashes]) if hashes else np.zeros((0, self.dimension), np.float32)
