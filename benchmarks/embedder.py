"""Embedder speed by dtype, and whether retrieval stays the same.

Embeds the first ``--passages`` passages of the corpus with ``searchplay.retrieval.Embedder`` in fp32
and in each ``--dtypes`` entry, in the same process, then queries both with the questions of a shipped
benchmark. Prints passages/s, the speed-up over fp32, and top-3 agreement: the share of each query's
fp32 top-3 passages that the other dtype also ranks in its top 3 (the bar is 0.95).

    .venv/bin/python benchmarks/embedder.py                       # corpus from `searchplay corpus`
    .venv/bin/python benchmarks/embedder.py --passages 4096 --dtypes bfloat16,float16
    .venv/bin/python benchmarks/embedder.py --beside-competitor   # the same beside one process spinning on a core

Threads wait as every ``searchplay`` command decides at its start (``searchplay.process.choose_thread_wait``),
so with ``--beside-competitor``, which starts the competitor first, both dtypes run with passive waiting.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time

import numpy as np

from searchplay.process import choose_thread_wait, keep_freed_memory


def read_texts(path: str, limit: int) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return [f"{r['title']} {r['text']}" for r in map(json.loads, itertools.islice(handle, limit))]


def read_questions(path: str, limit: int) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line)["question"] for line in itertools.islice(handle, limit)]


def embed(dtype: str, passages: list[str], questions: list[str], batch: int) -> tuple[float, np.ndarray, np.ndarray]:
    from searchplay.retrieval.embedder import Embedder  # torch loads here, after the thread-wait choice

    embedder = Embedder("bundled:minilm", device="cpu", batch_size=batch, dtype=dtype)
    embedder.encode_passages(passages[:batch])  # warm-up
    tic = time.perf_counter()
    vectors = embedder.encode_passages(passages)
    rate = len(passages) / (time.perf_counter() - tic)
    return rate, vectors, embedder.encode_queries(questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="data/corpus/passages.jsonl")
    parser.add_argument("--questions", default="data/benchmarks/nq/test.jsonl")
    parser.add_argument("--passages", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dtypes", default="bfloat16")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--beside-competitor", action="store_true",
                        help="run everything beside one process spinning on one core (started first)")
    args = parser.parse_args()
    competitor = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.beside_competitor else None
    try:
        if competitor:
            time.sleep(1.0)
        run(args)
    finally:
        if competitor:
            competitor.kill()
            competitor.wait()


def run(args: argparse.Namespace) -> None:
    keep_freed_memory()  # as every searchplay command runs
    print(f"threads wait: {choose_thread_wait()}{' (beside a competitor)' if args.beside_competitor else ''}")
    passages, questions = read_texts(args.corpus, args.passages), read_questions(args.questions, args.queries)
    base_rate, base_passages, base_queries = embed("float32", passages, questions, args.batch)
    base_top = np.argsort(-base_queries @ base_passages.T, axis=1)[:, :3]
    print(f"{len(passages)} passages, {len(questions)} queries")
    print(f"float32   {base_rate:7.1f} passages/s")
    for dtype in args.dtypes.split(","):
        rate, vectors, queries = embed(dtype, passages, questions, args.batch)
        top = np.argsort(-queries @ vectors.T, axis=1)[:, :3]
        agreement = np.mean([len(set(a) & set(b)) / 3 for a, b in zip(base_top, top, strict=True)])
        print(f"{dtype:9s} {rate:7.1f} passages/s  {rate / base_rate:.2f}x fp32  top-3 agreement {agreement:.3f}")


if __name__ == "__main__":
    main()
