"""Retrieval test fixtures: a hashing bag-of-words embedder (a test fake) and a tiny real LanceDB index."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from searchplay.io import write_jsonl

DIMENSION = 1024

ARTICLES = [
    ("Switzerland", "Switzerland is a landlocked country in Europe; its federal city is Bern."),
    ("Bern", "Bern is the de facto capital of Switzerland, on the river Aare."),
    ("Paris", "Paris is the capital and largest city of France, on the Seine."),
    ("Danube", "The Danube is the second-longest river in Europe, flowing to the Black Sea."),
    ("Photosynthesis", "Photosynthesis turns light, water and carbon dioxide into sugar."),
    ("Alan Turing", "Alan Turing was an English mathematician and computer scientist."),
    ("Mount Everest", "Mount Everest is the highest mountain above sea level, in the Himalayas."),
    ("Jazz", "Jazz is a music genre that originated in New Orleans in the 19th century."),
]
TINY_PASSAGES = [{"id": str(i), "title": title, "text": text} for i, (title, text) in enumerate(ARTICLES)]
TINY_PASSAGES += [{"id": str(i), "title": f"Filler {i}", "text": f"Filler passage {i} about topic {i % 7}, item {i}."}
                  for i in range(8, 60)]


class HashingEmbedder:
    """A deterministic bag-of-words embedder: each lower-cased word hashed into one of 1024 dims."""

    name = "test-hashing"
    dimension = DIMENSION
    max_seq_length = 512

    def __init__(self, e5_prefixes: bool = False):
        self.e5_prefixes = e5_prefixes

    def _vectors(self, texts):
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, zlib.crc32(word.encode()) % DIMENSION] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def encode_queries(self, queries):
        return self._vectors(queries)

    def encode_passages(self, passages, show_progress=False):
        return self._vectors(passages)


def build_tiny_index(root: Path, passages: list[dict] = TINY_PASSAGES) -> Path:
    """Build (or rebuild in place, as `index build` does: a staging folder, then a swap) ``root/index``."""
    from searchplay.retrieval.index import build_index

    source = root / "passages.jsonl"
    write_jsonl(source, passages)
    build_index(source, root / "index", "passages", HashingEmbedder(), ann_threshold=1_000_000, show_progress=False)
    return root / "index"


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory) -> Path:
    """A real LanceDB index (flat + FTS) over 60 passages, embedded by the hashing fake."""
    return build_tiny_index(tmp_path_factory.mktemp("tiny_index"))


@pytest.fixture(scope="module")
def hashing_embedder() -> HashingEmbedder:
    return HashingEmbedder()
