"""Retrieval speed and recall: exact (flat) search vs the ANN index, on synthetic and real vectors.

Synthetic run: ``--rows`` (default 1,000,000) 384-d vectors from a mixture of Gaussian clusters,
L2-normalized (uniform noise has no neighbourhood structure to index); queries are fresh draws
from the same mixture. Ground truth is an exact numpy cosine top-k, so recall@k of LanceDB's flat
scan is checked too. Real-text run: the bundled Wikipedia passages embedded with MiniLM (reusing
``--real-index`` when given), queried with the passage titles.

Printed per configuration: build time, disk size, batched top-3 queries/s, recall@3 vs exact.

    .venv/bin/python benchmarks/retrieval.py --rows 100000          # quick check
    .venv/bin/python benchmarks/retrieval.py --real-index data/index  # the full run
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("LANCEDB_LOG", "error")

TOP_K = 3
QUERY_BATCH = 32  # queries per multi-vector LanceDB call (rollouts search in batches)


def cluster_centres(clusters: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    return centres / np.linalg.norm(centres, axis=1, keepdims=True)


def mixture(rows: int, centres: np.ndarray, spread: float, rng: np.random.Generator, chunk: int = 100_000):
    """Yield normalized float32 chunks drawn from Gaussian blobs around ``centres``."""
    dim = centres.shape[1]
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        points = centres[rng.integers(0, len(centres), n)] + spread * rng.standard_normal((n, dim)).astype(np.float32)
        yield points / np.linalg.norm(points, axis=1, keepdims=True)


def exact_top_k(vectors: np.ndarray, queries: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """Row indices of the k most cosine-similar vectors per (normalized) query."""
    best = np.zeros((len(queries), 0), dtype=np.int64)
    best_scores = np.zeros((len(queries), 0), dtype=np.float32)
    for start in range(0, len(vectors), 200_000):
        scores = queries @ vectors[start:start + 200_000].T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        best = np.hstack([best, top + start])
        best_scores = np.hstack([best_scores, np.take_along_axis(scores, top, axis=1)])
        keep = np.argsort(-best_scores, axis=1)[:, :k]
        best, best_scores = np.take_along_axis(best, keep, 1), np.take_along_axis(best_scores, keep, 1)
    return best


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def timed_search(table, queries: np.ndarray, ann: bool, nprobes: int = 0, refine: int = 0):
    """(queries/s, ids per query) for batched multi-vector searches of QUERY_BATCH queries."""
    found: list[list[int]] = []
    started = time.perf_counter()
    for start in range(0, len(queries), QUERY_BATCH):
        batch = queries[start:start + QUERY_BATCH]
        query = table.search(list(batch)).distance_type("cosine").limit(TOP_K)
        if ann:
            query = query.nprobes(nprobes)
            if refine:
                query = query.refine_factor(refine)
        else:
            query = query.bypass_vector_index()
        rows = query.select(["row", "_distance"]).to_list()
        per_query: list[list[int]] = [[] for _ in batch]
        for row in rows:
            per_query[row.get("query_index", 0)].append(row["row"])
        found += per_query
    return len(queries) / (time.perf_counter() - started), found


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t.tolist())) / TOP_K for f, t in zip(found, truth, strict=True)]))


def report(label: str, qps: float, rec: float, exact_qps: float, extra: str = "") -> None:
    print(f"  {label:<44} {qps:9.1f} q/s  {qps / exact_qps:6.1f}x exact  recall@3 {rec:.3f}  {extra}", flush=True)


def run_ann(table, root: Path, queries, truth, exact_qps, rows: int, types: list[str], sweep: list[tuple[int, int]]):
    from searchplay.retrieval.index import ann_config, choose_ann

    for ann_type in types:
        choice = choose_ann(rows, 0, ann_type)
        before = disk_mb(root)
        started = time.perf_counter()
        table.create_index("vector", config=ann_config(choice), replace=True)
        build_s = time.perf_counter() - started
        print(f" {ann_type} partitions={choice.num_partitions} {choice.options}: build {build_s:.1f}s, "
              f"index on disk {disk_mb(root) - before:.1f} MB", flush=True)
        for nprobes, refine in sweep:
            qps, found = timed_search(table, queries, True, nprobes, refine)
            report(f"nprobes={nprobes} refine_factor={refine}", qps, recall(found, truth), exact_qps)


def synthetic(args) -> None:
    import lancedb
    import pyarrow as pa

    rng = np.random.default_rng(args.seed)
    root = Path(tempfile.mkdtemp(prefix="bench-lance-", dir=args.dir))
    print(f"synthetic: {args.rows:,} x {args.dim} vectors, {args.clusters} clusters, {args.queries} queries")
    db = lancedb.connect(str(root))
    started = time.perf_counter()
    vectors = np.empty((args.rows, args.dim), dtype=np.float32)
    table = None
    offset = 0
    centres = cluster_centres(args.clusters, args.dim, rng)
    for chunk in mixture(args.rows, centres, args.spread, rng):
        vectors[offset:offset + len(chunk)] = chunk
        batch = pa.table({"row": np.arange(offset, offset + len(chunk)),
                          "vector": pa.FixedSizeListArray.from_arrays(pa.array(chunk.ravel()), args.dim)})
        if table is None:
            table = db.create_table("bench", batch)
        else:
            table.add(batch)
        offset += len(chunk)
    print(f" table written in {time.perf_counter() - started:.1f}s, {disk_mb(root):.0f} MB on disk", flush=True)
    queries = next(mixture(args.queries, centres, args.spread, np.random.default_rng(args.seed + 1)))
    truth = exact_top_k(vectors, queries)
    del vectors
    exact_queries = queries[:args.exact_queries]
    exact_qps, found = timed_search(table, exact_queries, ann=False)
    print(" exact (flat scan, no index):", flush=True)
    report("flat", exact_qps, recall(found, truth[:args.exact_queries]), exact_qps)
    run_ann(table, root, queries, truth, exact_qps, args.rows, args.types, args.sweep)
    shutil.rmtree(root, ignore_errors=True)


def real_text(args) -> None:
    import lancedb
    import pyarrow as pa

    from searchplay.retrieval.embedder import Embedder

    embedder = Embedder("bundled:minilm")
    root = Path(tempfile.mkdtemp(prefix="bench-real-", dir=args.dir))
    if args.real_index:
        source = lancedb.connect(args.real_index).open_table("passages").to_arrow()
        print(f"real text: {source.num_rows:,} bundled passages from {args.real_index}", flush=True)
    else:
        from searchplay.assets import resolve
        from searchplay.retrieval.corpus import CorpusReport, join_contents, read_wiki_summaries

        passages = list(read_wiki_summaries(Path(resolve("bundled:wiki-summaries")), CorpusReport("bundled")))
        started = time.perf_counter()
        vectors = embedder.encode_passages([join_contents(p.title, p.text) for p in passages], show_progress=True)
        elapsed = time.perf_counter() - started
        print(f"real text: embedded {len(passages):,} passages in {elapsed:.0f}s ({len(passages) / elapsed:.0f}/s)")
        source = pa.table({"title": [p.title for p in passages],
                           "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1])})
    vectors = np.stack(source.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    titles = source.column("title").to_pylist()
    table = lancedb.connect(str(root)).create_table(
        "bench", pa.table({"row": np.arange(len(vectors)), "vector": source.column("vector")}))
    rng = np.random.default_rng(args.seed)
    picked = sorted({titles[i] for i in rng.integers(0, len(titles), args.queries)})
    started = time.perf_counter()
    queries = embedder.encode_queries(picked)
    print(f" embedded {len(picked)} title queries in {time.perf_counter() - started:.2f}s", flush=True)
    truth = exact_top_k(vectors, queries)
    exact_qps, found = timed_search(table, queries, ann=False)
    print(" exact (flat scan, no index):", flush=True)
    report("flat", exact_qps, recall(found, truth), exact_qps)
    partitions = max(16, round(math.sqrt(len(vectors))))
    print(f" (IVF_SQ forced on {len(vectors):,} rows, {partitions} partitions, below the default threshold)")
    run_ann(table, root, queries, truth, exact_qps, len(vectors), ["IVF_SQ"], args.sweep)
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=2000, help="Gaussian blobs in the mixture")
    parser.add_argument("--spread", type=float, default=0.06, help="per-dimension noise around a centre")
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--exact-queries", type=int, default=64, help="flat scans are slow: time fewer")
    parser.add_argument("--types", default="IVF_SQ", help="comma-separated ANN types to build and compare")
    parser.add_argument("--sweep", default="16:5,32:5,64:5,128:5", help="nprobes:refine_factor pairs to time")
    parser.add_argument("--real-index", default=None, help="reuse this index's vectors for the real-text run")
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--dir", default=None, help="scratch folder (default: the system temp dir)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.types = args.types.split(",")
    args.sweep = [tuple(int(x) for x in pair.split(":")) for pair in args.sweep.split(",")]
    if not args.skip_synthetic:
        synthetic(args)
    if not args.skip_real:
        real_text(args)


if __name__ == "__main__":
    main()
