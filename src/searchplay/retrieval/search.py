"""The in-process search tool over the LanceDB index, RRF fusion, and Search-R1's document block."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from searchplay.retrieval.corpus import join_contents
from searchplay.retrieval.index import MANIFEST, RetrievalIndexError, default_nprobes, open_table, read_manifest
from searchplay.retrieval.types import Document, SearchTool, split_blank

log = logging.getLogger(__name__)

Mode = Literal["dense", "fts", "hybrid"]
RRF_K = 60  # Cormack et al. 2009, "Reciprocal Rank Fusion outperforms Condorcet...", k = 60
RESULT_COLUMNS = ["id", "title", "text"]
SWAP_WAIT_S = 5.0  # how long a search cut short by `index build`'s folder swap waits for the new index
SWAP_POLL_S = 0.01  # how often it looks meanwhile (the swap is two renames: milliseconds)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Document]], top_k: int, k: int = RRF_K) -> list[Document]:
    """Fuse ranked lists: score(d) = sum over lists of 1 / (k + rank(d)), rank from 1 (Cormack et al. 2009, Eq. 1).

    >>> a, b = Document("1", "A", "x"), Document("2", "B", "y")
    >>> [d.id for d in reciprocal_rank_fusion([[a, b], [b]], top_k=2)]
    ['2', '1']
    """
    scores: dict[str, float] = {}
    first_seen: dict[str, Document] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc.id] = scores.get(doc.id, 0.0) + 1.0 / (k + rank)
            first_seen.setdefault(doc.id, doc)
    best = sorted(scores, key=lambda doc_id: -scores[doc_id])[:top_k]
    return [Document(doc_id, first_seen[doc_id].title, first_seen[doc_id].text, scores[doc_id]) for doc_id in best]


@dataclass(frozen=True)
class OpenedIndex:
    """One build of the index as opened: its version (``index_version``), manifest and LanceDB table."""

    version: str | None
    manifest: dict[str, Any]
    table: Any


def index_version(index_dir: str | Path) -> str | None:
    """A short id of the build at ``index_dir`` (None while there is none).

    ``index build`` writes a new folder and renames it into place, so every build has a new manifest file;
    its inode and modification time tell the builds apart even when their contents are identical.
    """
    try:
        stat = (Path(index_dir) / MANIFEST).stat()
    except FileNotFoundError:
        return None
    return hashlib.sha1(f"{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_size}".encode()).hexdigest()[:12]


class LanceSearchTool(SearchTool):
    """``SearchTool`` over a LanceDB table built by ``build_index``.

    dense: cosine similarity of the query embedding (score = 1 - cosine distance), as the papers'
    E5 retriever; fts: BM25 over ``text``; hybrid: RRF of the two (``hybrid_candidates`` each).

    When ``index build`` swaps a new index into ``index_dir``, the next search reopens it (a long-lived
    server keeps serving across rebuilds); a search that the swap cut short is retried once on the new one.
    """

    def __init__(self, index_dir: str | Path, table: str = "passages", embedder: Any = None, mode: Mode = "dense",
                 nprobes: int | None = None, refine_factor: int = 5, hybrid_candidates: int = 20, rrf_k: int = RRF_K):
        if mode not in ("dense", "fts", "hybrid"):
            raise ValueError(f"search mode must be 'dense', 'fts' or 'hybrid', got {mode!r}")
        self.index_dir, self.table_name = Path(index_dir), table
        self.embedder, self.mode = embedder, mode
        self.nprobes, self.refine_factor = nprobes, refine_factor
        self.hybrid_candidates, self.rrf_k = hybrid_candidates, rrf_k
        self._reopen_lock = threading.Lock()
        self.opened = self._open()

    @property
    def manifest(self) -> dict[str, Any]:
        return self.opened.manifest

    @property
    def table(self) -> Any:
        return self.opened.table

    @property
    def version(self) -> str | None:
        return self.opened.version

    def _open(self) -> OpenedIndex:
        version = index_version(self.index_dir)  # read first: a swap right after only causes one more reopen
        manifest = read_manifest(self.index_dir)
        if self.mode != "fts":
            self._check_embedder(manifest)
        if self.mode != "dense" and not manifest.get("fts"):
            raise RetrievalIndexError(f"mode {self.mode!r} needs the full-text index; rebuild with index.fts: true")
        return OpenedIndex(version, manifest, open_table(self.index_dir, self.table_name))

    def _check_embedder(self, manifest: dict[str, Any]) -> None:
        if self.embedder is None:
            raise ValueError(f"mode {self.mode!r} needs an embedder (the one the index was built with)")
        if self.embedder.dimension != manifest["dimension"]:
            raise RetrievalIndexError(
                f"embedder {self.embedder.name!r} gives {self.embedder.dimension}-d vectors but the index was built "
                f"with {manifest['embedder']!r} ({manifest['dimension']}-d); rebuild the index")
        if self.embedder.name != manifest["embedder"] or self.embedder.e5_prefixes != manifest["e5_prefixes"]:
            log.warning("querying an index built with %s (e5_prefixes=%s) using %s (e5_prefixes=%s)",
                        manifest["embedder"], manifest["e5_prefixes"], self.embedder.name, self.embedder.e5_prefixes)

    def current(self, wait_s: float = 0.0) -> OpenedIndex:
        """The opened index, reopened first if ``index build`` has swapped in a new one since.

        While the swap is under way (between its two renames there is no manifest) this waits up to
        ``wait_s`` for the new one. A new index that cannot be opened is logged and the old one kept.
        """
        if index_version(self.index_dir) == self.opened.version:
            return self.opened
        with self._reopen_lock:
            deadline = time.monotonic() + wait_s
            while (version := index_version(self.index_dir)) is None and time.monotonic() < deadline:
                time.sleep(SWAP_POLL_S)
            if version is None or version == self.opened.version:  # still mid-swap, or another thread reopened
                return self.opened
            try:
                self.opened = self._open()
            except Exception:  # whatever the new folder holds, keep answering from what is open
                log.exception("the index at %s changed (version %s) but could not be reopened; still serving %s",
                              self.index_dir, version, self.opened.version)
            else:
                log.info("reopened the index at %s: version %s, %s rows", self.index_dir, self.opened.version,
                         self.opened.manifest.get("rows"))
            return self.opened

    def search(self, queries: Sequence[str], top_k: int = 3) -> list[list[Document]]:
        results: list[list[Document]] = [[] for _ in queries]
        positions, texts = split_blank(queries)
        if not texts:
            return results
        opened = self.current()
        try:
            found = self._search(opened, texts, top_k)
        except Exception:
            reopened = self.current(wait_s=SWAP_WAIT_S)
            if reopened is opened:
                raise
            log.info("the index was swapped during a search; retrying on version %s", reopened.version)
            found = self._search(reopened, texts, top_k)
        for position, documents in zip(positions, found, strict=True):
            results[position] = documents
        return results

    def _search(self, opened: OpenedIndex, texts: list[str], top_k: int) -> list[list[Document]]:
        if self.mode == "dense":
            return self.dense(opened, texts, top_k)
        if self.mode == "fts":
            return [self.fts(opened, text, top_k) for text in texts]
        candidates = max(top_k, self.hybrid_candidates)  # each list at least as long as the answer asked for
        dense = self.dense(opened, texts, candidates)
        return [reciprocal_rank_fusion([d, self.fts(opened, t, candidates)], top_k, self.rrf_k)
                for d, t in zip(dense, texts, strict=True)]

    def dense(self, opened: OpenedIndex, texts: Sequence[str], top_k: int) -> list[list[Document]]:
        """All queries embedded in one batch and sent as one multi-vector LanceDB query."""
        vectors = self.embedder.encode_queries(texts)
        query = opened.table.search(list(vectors)).distance_type("cosine").limit(top_k)
        ann = opened.manifest["ann"]
        if ann["type"]:
            query = query.nprobes(self.nprobes or default_nprobes(ann["num_partitions"]))
            if self.refine_factor:
                query = query.refine_factor(self.refine_factor)
        rows = query.select([*RESULT_COLUMNS, "_distance"]).to_list()
        found: list[list[Document]] = [[] for _ in texts]
        for row in rows:
            index = row.get("query_index", 0)
            found[index].append(Document(row["id"], row["title"], row["text"], 1.0 - float(row["_distance"])))
        return [sorted(docs, key=lambda d: -d.score) for docs in found]

    def fts(self, opened: OpenedIndex, text: str, top_k: int) -> list[Document]:
        query = opened.table.search(text, query_type="fts").limit(top_k)
        rows = query.select([*RESULT_COLUMNS, "_score"]).to_list()
        return [Document(r["id"], r["title"], r["text"], float(r["_score"])) for r in rows]


def truncate_tokens(text: str, max_tokens: int, tokenizer: Any = None) -> str:
    """The first ``max_tokens`` tokens of ``text`` (whitespace words without a tokenizer); 0: unchanged."""
    if max_tokens <= 0:
        return text
    if tokenizer is None:
        words = text.split()
        return text if len(words) <= max_tokens else " ".join(words[:max_tokens])
    ids = tokenizer.encode(text, add_special_tokens=False)
    return text if len(ids) <= max_tokens else tokenizer.decode(ids[:max_tokens]).strip()


def format_documents(docs: Sequence[Document], tokenizer: Any = None, max_doc_tokens: int = 0) -> str:
    """Search-R1's observation block (``_passages2string``): ``Doc {i}(Title: {first line}) {rest}\\n`` per doc.

    As in Search-R1 the title is the first line of the wiki-18 ``contents``, so it keeps its quotes:
    ``Doc 1(Title: "Bern") Bern is the capital...``. Each document's text is cut to
    ``max_doc_tokens`` tokens (0: no cut).
    """
    lines = []
    for number, doc in enumerate(docs, start=1):
        title, _, text = join_contents(doc.title, doc.text).partition("\n")
        text = truncate_tokens(text.replace("\n", " "), max_doc_tokens, tokenizer)
        lines.append(f"Doc {number}(Title: {title}) {text}\n")
    return "".join(lines)


def load_search_tool(params: Any) -> SearchTool:
    """The HTTP client when ``search.server_url`` is set, else the local index at ``index.dir``, rebuilt first
    where it is missing or does not match its fingerprint file (``rebuild_if_stale``)."""
    if params.search.server_url:
        from searchplay.retrieval.client import RetrieverClient
        from searchplay.retrieval.limits import RequestLimits

        return RetrieverClient(params.search.server_url, timeout_s=params.search.timeout_s,
                               retries=params.search.retries, limits=RequestLimits.from_serve_config(params.serve))
    from searchplay.retrieval.embedder import Embedder
    from searchplay.retrieval.index import build_from_params, rebuild_if_stale

    mode = params.search.mode
    embedder = None if mode == "fts" else Embedder.from_params(params)
    rebuild_if_stale(params.index.dir, lambda: build_from_params(params, embedder))
    return LanceSearchTool(params.index.dir, params.index.table, embedder, mode, params.index.nprobes,
                           params.index.refine_factor, params.search.hybrid_candidates, params.search.rrf_k)
