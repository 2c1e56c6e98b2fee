"""Index build with the embedding cache: cold, warm, and after one passage changed.

Builds a LanceDB index of the first ``--passages`` corpus passages three times with the bundled MiniLM
embedder and one cache folder: empty cache (every passage embedded), the same corpus again (none
embedded), then with one passage's text changed (one embedded). Prints each build's time, the cache's
hits and misses, and the speed-up of the warm builds over the cold one; all three in one process.

    .venv/bin/python benchmarks/embedding_cache.py                 # corpus from `searchplay corpus build`
    .venv/bin/python benchmarks/embedding_cache.py --passages 4096
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path

from searchplay.retrieval.embedder import Embedder
from searchplay.retrieval.index import build_index


def timed_build(passages: list[dict], root: Path, name: str, embedder: Embedder) -> tuple[float, dict]:
    source = root / f"{name}.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in passages))
    tic = time.perf_counter()
    manifest = build_index(source, root / f"index_{name}", "passages", embedder, ann_threshold=10**9, fts=False,
                           show_progress=False, embedding_cache=root / "cache")
    return time.perf_counter() - tic, manifest["embedding_cache"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="data/corpus/passages.jsonl")
    parser.add_argument("--passages", type=int, default=2048)
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8") as handle:
        passages = [json.loads(line) for line in itertools.islice(handle, args.passages)]
    changed = [dict(p) for p in passages]
    changed[len(changed) // 2]["text"] += " (edited)"
    embedder = Embedder("bundled:minilm", device="cpu")
    embedder.encode_passages(["warm-up"])
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        cold, cache = timed_build(passages, root, "cold", embedder)
        print(f"{len(passages)} passages, {embedder.name} ({embedder.dtype})")
        print(f"cold    {cold:7.1f} s  hits {cache['hits']:5d}  misses {cache['misses']:5d}")
        for name, corpus in [("warm", passages), ("one-changed", changed)]:
            seconds, cache = timed_build(corpus, root, name, embedder)
            print(f"{name:11s} {seconds:7.1f} s  hits {cache['hits']:5d}  misses {cache['misses']:5d}  "
                  f"{cold / seconds:6.1f}x cold")


if __name__ == "__main__":
    main()
