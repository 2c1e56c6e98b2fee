"""The LanceDB index: one table ``{id, title, text, vector}``, an ANN index when large, a BM25 index.

Below ``index.ann_threshold`` rows the search is exact (a flat scan); above it an ANN index is
built whose type and partition count come from ``choose_ann`` (measured in benchmarks/retrieval.py,
recorded in docs/decisions/retrieval.md). The folder is built beside its destination and renamed
into place, so a crash never leaves a half-built index where the search tool would open it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from searchplay.io import InputError, atomic_dir, portable_name, read_jsonl, write_json
from searchplay.retrieval.corpus import join_contents

log = logging.getLogger(__name__)
os.environ.setdefault("LANCEDB_LOG", "error")  # lance warns once per query about _distance otherwise

MANIFEST = "searchplay-index.json"
FINGERPRINT_SUFFIX = ".fingerprint.json"  # beside the index folder: what the stages after it depend on
ADD_CHUNK_ROWS = 1024  # passages embedded and appended per step (bounded memory; progress ticks per chunk)
NPROBES_SHARE = 0.2  # IVF partitions probed by default: recall@3 0.97 at 44x exact (100k rows, measured)


class RetrievalIndexError(InputError, RuntimeError):
    """The index folder is missing or does not match the embedder; the message says what to run (exit 2: a retry
    finds it the same way)."""


@dataclass(frozen=True)
class AnnChoice:
    """The ANN index built above ``index.ann_threshold`` (``type=None``: exact search only)."""

    type: str | None
    num_partitions: int | None = None
    options: dict[str, Any] = field(default_factory=dict)


def choose_ann(rows: int, ann_threshold: int, ann_type: str = "auto", num_partitions: int | None = None) -> AnnChoice:
    """Pick the ANN index for a table of ``rows`` vectors.

    ``auto`` is IVF_SQ: in our measurements (docs/decisions/retrieval.md) it trains in seconds,
    needs no refine step for recall@3 >= 0.95, and IVF_PQ recalled poorly without refine.
    Partitions: about sqrt(rows), at least 16.
    """
    if rows <= ann_threshold:
        return AnnChoice(None)
    chosen = "IVF_SQ" if ann_type == "auto" else ann_type
    partitions = num_partitions or max(16, round(math.sqrt(rows)))
    options: dict[str, Any] = {}
    if chosen == "IVF_PQ":
        options = {"num_sub_vectors": 48}
    elif chosen == "IVF_HNSW_SQ":
        partitions = num_partitions or max(1, rows // 250_000)
        options = {"m": 16, "ef_construction": 100}
    return AnnChoice(chosen, partitions, options)


def default_nprobes(num_partitions: int) -> int:
    """``index.nprobes`` when unset: 20% of the partitions (docs/decisions/retrieval.md)."""
    return max(1, math.ceil(NPROBES_SHARE * num_partitions))


def ann_config(choice: AnnChoice):
    """The LanceDB ``config=`` object for ``choice`` (cosine distance)."""
    from lancedb.index import IvfHnswSq, IvfPq, IvfRq, IvfSq

    classes = {"IVF_SQ": IvfSq, "IVF_PQ": IvfPq, "IVF_HNSW_SQ": IvfHnswSq, "IVF_RQ": IvfRq}
    return classes[choice.type](distance_type="cosine", num_partitions=choice.num_partitions, **choice.options)


def _arrow_batch(passages: list[dict], vectors) -> Any:
    import pyarrow as pa

    dimension = vectors.shape[1]
    return pa.table({
        "id": [p["id"] for p in passages],
        "title": [p["title"] for p in passages],
        "text": [p["text"] for p in passages],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), type=pa.float32()), dimension),
    })


def _chunks(records: Iterable[dict], size: int) -> Iterator[list[dict]]:
    chunk: list[dict] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def replaceable_index_dir(index_dir: str | Path) -> Path:
    """``index_dir`` as a Path; a ``RetrievalIndexError`` unless it is absent, empty or an index: a build replaces
    the folder whole, so a file or a folder of other things given as the index's place would be lost."""
    index_dir = Path(index_dir)
    if index_dir.is_file():
        raise RetrievalIndexError(f"{index_dir} is a file, not an index folder; the index build would replace it: "
                                  "choose another --out (index.dir), or move the file away")
    if index_dir.is_dir() and not (index_dir / MANIFEST).exists() and any(index_dir.iterdir()):
        raise RetrievalIndexError(f"{index_dir} holds files but no index ({MANIFEST}); the index build would "
                                  "replace the folder whole: choose another --out (index.dir), or empty it")
    return index_dir


def build_index(passages_path: str | Path, index_dir: str | Path, table: str, embedder: Any, *,
                ann_threshold: int, ann_type: str = "auto", num_partitions: int | None = None,
                fts: bool = True, show_progress: bool = True,
                embedding_cache: str | Path | None = None) -> dict[str, Any]:
    """Embed every passage, write the table, add the ANN and FTS indexes; returns the manifest.

    ``embedding_cache`` (a folder outside ``index_dir``; None: off) keeps passage vectors by text hash, so only
    passages not embedded before by the same embedder are embedded (``embedding_cache.py``).
    """
    import lancedb
    from tqdm import tqdm

    from searchplay.retrieval.embedding_cache import EmbeddingCache

    index_dir = replaceable_index_dir(index_dir)
    # built in a staging folder swapped in whole; a killed build's folder (tens of GB on wiki-18) goes next time
    with atomic_dir(index_dir) as staging:
        db = lancedb.connect(str(staging))
        cache = EmbeddingCache(embedding_cache, embedder) if embedding_cache is not None else None
        lance_table = None
        content = hashlib.sha256()
        progress = tqdm(desc="embedding passages", unit="passage", disable=not show_progress)
        for chunk in _chunks(read_jsonl(passages_path), ADD_CHUNK_ROWS):
            texts = [join_contents(p["title"], p["text"]) for p in chunk]
            vectors = embedder.encode_passages(texts) if cache is None else cache.encode(texts, embedder)
            batch = _arrow_batch(chunk, vectors)
            _hash_rows(content, chunk, vectors)
            if lance_table is None:
                lance_table = db.create_table(table, batch)
            else:
                lance_table.add(batch)
            if cache is not None:
                progress.set_postfix(cache_hits=cache.hits, cache_misses=cache.misses, refresh=False)
            progress.update(len(chunk))
        progress.close()
        if lance_table is None:
            raise RetrievalIndexError(f"{passages_path} has no passages; run `searchplay corpus build` first")
        rows = lance_table.count_rows()
        choice = choose_ann(rows, ann_threshold, ann_type, num_partitions)
        if choice.type:
            lance_table.create_index("vector", config=ann_config(choice))
        if fts:
            from lancedb.index import FTS

            lance_table.create_index("text", config=FTS())
        manifest = {"table": table, "rows": rows, "dimension": embedder.dimension, "embedder": embedder.name,
                    "e5_prefixes": embedder.e5_prefixes, "embedder_dtype": getattr(embedder, "dtype", "float32"),
                    "ann": asdict(choice), "fts": fts, "passages": str(passages_path),
                    "content_sha256": content.hexdigest(),  # the fingerprint's hash: rebuild_if_stale compares them
                    "embedding_cache": None if cache is None else {"dir": portable_name(embedding_cache),
                                                                   "hits": cache.hits, "misses": cache.misses}}
        write_json(staging / MANIFEST, manifest)
    _write_fingerprint(index_dir, manifest, manifest["content_sha256"])
    return manifest


def build_from_params(params: Any, embedder: Any = None) -> dict[str, Any]:
    """``build_index`` with the ``corpus``/``index`` settings of ``params`` (what the index stage runs)."""
    from searchplay.retrieval.embedder import Embedder

    config = params.index
    if not Path(params.corpus.out).exists():
        raise RetrievalIndexError(f"no passages at {params.corpus.out} to build the index from; run `dvc repro "
                                  "corpus` (or `searchplay corpus build`)")
    replaceable_index_dir(config.dir)  # before the embedder loads
    return build_index(params.corpus.out, config.dir, config.table, embedder or Embedder.from_params(params),
                       ann_threshold=config.ann_threshold, ann_type=config.ann_type,
                       num_partitions=config.num_partitions, fts=config.fts, embedding_cache=config.embedding_cache)


def fingerprint_path(index_dir: str | Path) -> Path:
    """``data/index`` -> ``data/index.fingerprint.json``: the index's content (every passage's id, title, text
    and vector, in table order) and settings, hashed. LanceDB names its files by random UUIDs, so the folder's
    bytes differ on every build; the stages that read the index depend on this file instead, and an index
    rebuilt from the same passages by the same embedder re-runs nothing after it."""
    index_dir = Path(index_dir)
    return index_dir.with_name(index_dir.name + FINGERPRINT_SUFFIX)


def stale_reason(index_dir: str | Path) -> str | None:
    """Why the folder at ``index_dir`` is not the index its fingerprint file records; None when it is, or when
    there is no fingerprint file (an index built outside the pipeline)."""
    index_dir = Path(index_dir)
    fingerprint = fingerprint_path(index_dir)
    if not fingerprint.exists():
        return None
    if not (index_dir / MANIFEST).exists():
        return f"there is no index at {index_dir}"
    try:
        built = json.loads((index_dir / MANIFEST).read_text()).get("content_sha256")
        recorded = json.loads(fingerprint.read_text()).get("content_sha256")
    except (ValueError, AttributeError) as exc:  # a cut or hand-edited file: JSON that does not parse, or no object
        return f"{index_dir / MANIFEST} or {fingerprint} does not read as the index's record ({exc})"
    if built != recorded:
        return f"{index_dir} was built from other passages or settings than {fingerprint.name} records"
    return None


def rebuild_if_stale(index_dir: str | Path, build: Callable[[], dict[str, Any]]) -> None:
    """Rebuild the index folder with ``build`` when it is missing or stale, and check it against the fingerprint.

    The pipeline's output is ``<index>.fingerprint.json``; the LanceDB folder, whose file names are random, is
    rebuilt from the passages wherever it is absent (a fresh ``dvc exp run --temp`` copy) or does not match (a
    checkout of another commit). Processes wait for one another's rebuild. A rebuild whose content differs from
    the fingerprint raises ``RetrievalIndexError`` and puts the recorded fingerprint back, so DVC still sees
    the index stage's output as it was and every later use fails the same way until the stage re-runs.
    """
    from searchplay.io import exclusive_outputs

    index_dir = Path(index_dir)
    if stale_reason(index_dir) is None:
        return
    fingerprint = fingerprint_path(index_dir)
    recorded = fingerprint.read_bytes()
    with exclusive_outputs(index_dir, "index build (on first use)", wait=True):
        reason = stale_reason(index_dir)  # another process may have rebuilt it while we waited
        if reason is None:
            return
        log.warning("%s; rebuilding it from the passages (the index stage's output is %s)", reason, fingerprint)
        build()
        if fingerprint.read_bytes() != recorded:
            fingerprint.write_bytes(recorded)
            raise RetrievalIndexError(
                f"the index rebuilt at {index_dir} differs from {fingerprint}: the passages, the embedder or the "
                "index settings changed since the index stage ran, or this machine embeds otherwise (another CPU or "
                "a GPU, where models.embedder_dtype 'auto' picks another dtype); run `dvc repro -f index` (DVC "
                "sees no change to re-run it for; the stages after it then re-run on this machine's index)")


def _write_fingerprint(index_dir: Path, manifest: dict[str, Any], content_sha256: str) -> None:
    settings = ("table", "rows", "dimension", "embedder", "e5_prefixes", "embedder_dtype", "ann", "fts")
    write_json(fingerprint_path(index_dir), {"content_sha256": content_sha256,
                                             **{key: manifest[key] for key in settings}})


def _hash_rows(content: Any, passages: list[dict], vectors: Any) -> None:
    import numpy as np

    for passage in passages:
        content.update(json.dumps([passage["id"], passage["title"], passage["text"]]).encode("utf-8"))
    content.update(np.ascontiguousarray(vectors, dtype="<f4").tobytes())


MANIFEST_KEYS = {"table", "rows", "dimension", "embedder", "e5_prefixes", "ann", "fts"}  # what searching reads


def read_manifest(index_dir: str | Path) -> dict[str, Any]:
    path = Path(index_dir) / MANIFEST
    if not path.exists():
        raise RetrievalIndexError(f"no index at {index_dir} (missing {MANIFEST}); run `searchplay index build`")
    try:
        manifest = json.loads(path.read_text())
    except ValueError as exc:
        raise RetrievalIndexError(f"{path} is not valid JSON ({exc}); run `searchplay index build` again") from None
    missing = sorted(MANIFEST_KEYS - set(manifest)) if isinstance(manifest, dict) else sorted(MANIFEST_KEYS)
    if missing:
        raise RetrievalIndexError(f"{path} is no index manifest (no {', '.join(missing)}); run `searchplay index "
                                  "build` again")
    return manifest


def open_table(index_dir: str | Path, table: str):
    import lancedb

    return lancedb.connect(str(index_dir)).open_table(table)
