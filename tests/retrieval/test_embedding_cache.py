"""The embedding cache: a rebuild embeds only the passages it has not embedded before."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from searchplay.io import write_jsonl
from searchplay.retrieval.corpus import join_contents
from searchplay.retrieval.embedding_cache import EmbeddingCache, key_folder
from searchplay.retrieval.index import build_index, open_table, read_manifest
from searchplay.retrieval.search import LanceSearchTool

from .conftest import TINY_PASSAGES, HashingEmbedder


class CountingEmbedder(HashingEmbedder):
    """The hashing fake, counting the passages it is asked to embed."""

    def __init__(self, name: str = "test-hashing", dtype: str = "float32"):
        super().__init__()
        self.name, self.dtype = name, dtype
        self.calls: list[list[str]] = []

    @property
    def embedded(self) -> int:
        return sum(len(texts) for texts in self.calls)

    def encode_passages(self, passages, show_progress=False):
        self.calls.append(list(passages))
        return super().encode_passages(passages, show_progress)


def build(root: Path, embedder, passages=TINY_PASSAGES, cache: Path | None = None, name: str = "index") -> Path:
    write_jsonl(root / "passages.jsonl", passages)
    build_index(root / "passages.jsonl", root / name, "passages", embedder, ann_threshold=10**6,
                show_progress=False, embedding_cache=cache)
    return root / name


def vectors_by_id(index: Path) -> dict[str, np.ndarray]:
    rows = open_table(index, "passages").to_arrow().to_pylist()
    return {row["id"]: np.asarray(row["vector"], dtype=np.float32) for row in rows}


def search_ids(index: Path) -> list[list[str]]:
    tool = LanceSearchTool(index, "passages", HashingEmbedder())
    queries = ["capital of Switzerland", "longest river in Europe", "filler topic 3"]
    return [[doc.id for doc in docs] for docs in tool.search(queries, top_k=3)]


def test_a_second_build_embeds_nothing_and_gives_the_same_index(tmp_path):
    cache = tmp_path / "cache"
    first = CountingEmbedder()
    build(tmp_path, first, cache=cache, name="first")
    second = CountingEmbedder()
    build(tmp_path, second, cache=cache, name="second")
    assert first.embedded == len(TINY_PASSAGES) and second.calls == []
    before, after = vectors_by_id(tmp_path / "first"), vectors_by_id(tmp_path / "second")
    assert before.keys() == after.keys()
    assert all(np.array_equal(before[i], after[i]) for i in before)
    assert search_ids(tmp_path / "first") == search_ids(tmp_path / "second")
    assert read_manifest(tmp_path / "first")["embedding_cache"] == {"dir": str(cache), "hits": 0, "misses": 60}
    assert read_manifest(tmp_path / "second")["embedding_cache"] == {"dir": str(cache), "hits": 60, "misses": 0}


def test_an_empty_cache_hands_the_embedder_the_same_list_as_no_cache(tmp_path):
    with_cache, without = CountingEmbedder(), CountingEmbedder()
    build(tmp_path, with_cache, cache=tmp_path / "cache", name="a")
    build(tmp_path, without, name="b")
    assert with_cache.calls == without.calls


def test_changing_one_passage_re_embeds_only_that_one(tmp_path):
    cache = tmp_path / "cache"
    build(tmp_path, CountingEmbedder(), cache=cache)
    changed = [dict(p) for p in TINY_PASSAGES]
    changed[1]["text"] = "Bern is the federal city of Switzerland, on the Aare."
    embedder = CountingEmbedder()
    index = build(tmp_path, embedder, changed, cache=cache)
    assert embedder.calls == [[join_contents("Bern", "Bern is the federal city of Switzerland, on the Aare.")]]
    assert read_manifest(index)["embedding_cache"]["hits"] == 59
    expected = HashingEmbedder().encode_passages([embedder.calls[0][0]])[0]
    assert np.allclose(vectors_by_id(index)["1"], expected)


@pytest.mark.parametrize("other", [CountingEmbedder(name="another-model"), CountingEmbedder(dtype="bfloat16")])
def test_another_embedder_key_re_embeds_everything(tmp_path, other):
    cache = tmp_path / "cache"
    build(tmp_path, CountingEmbedder(), cache=cache)
    build(tmp_path, other, cache=cache)
    assert other.embedded == len(TINY_PASSAGES)
    assert key_folder(other) != key_folder(CountingEmbedder())
    assert len(list(cache.iterdir())) == 2


class RetrainedEmbedder(CountingEmbedder):
    """The same name, settings and folder as ``CountingEmbedder``, other weights: every vector rotated."""

    def _vectors(self, texts):
        return np.roll(super()._vectors(texts), 1, axis=1)


def test_other_weights_under_the_same_name_re_embed_everything(tmp_path):
    cache = tmp_path / "cache"
    build(tmp_path, CountingEmbedder(), cache=cache)
    retrained = RetrainedEmbedder()
    index = build(tmp_path, retrained, cache=cache)
    assert retrained.embedded == len(TINY_PASSAGES) and len(list(cache.iterdir())) == 2
    expected = retrained.encode_passages([join_contents(TINY_PASSAGES[0]["title"], TINY_PASSAGES[0]["text"])])[0]
    assert np.allclose(vectors_by_id(index)[TINY_PASSAGES[0]["id"]], expected)
    assert key_folder(CountingEmbedder()) == key_folder(CountingEmbedder())  # the same weights: the same folder


def test_no_cache_writes_no_folder_and_embeds_everything(tmp_path):
    embedder = CountingEmbedder()
    for _ in range(2):
        index = build(tmp_path, embedder)
    assert embedder.embedded == 2 * len(TINY_PASSAGES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "index.fingerprint.json", "passages.jsonl"]
    assert read_manifest(index)["embedding_cache"] is None


def test_duplicate_texts_in_a_chunk_are_embedded_once(tmp_path):
    passages = [dict(p, id=str(i)) for i, p in enumerate(TINY_PASSAGES[:5] * 2)]
    embedder = CountingEmbedder()
    index = build(tmp_path, embedder, passages, cache=tmp_path / "cache")
    assert embedder.embedded == 5
    vectors = vectors_by_id(index)
    assert all(np.array_equal(vectors[str(i)], vectors[str(i + 5)]) for i in range(5))
    assert read_manifest(index)["embedding_cache"] == {"dir": str(tmp_path / "cache"), "hits": 0, "misses": 10}


@pytest.mark.parametrize("damage", ["manifest", "data", "file"])
def test_a_corrupt_cache_is_replaced_with_a_warning(tmp_path, caplog, damage):
    cache = tmp_path / "cache"
    build(tmp_path, CountingEmbedder(), cache=cache)
    folder = cache / key_folder(CountingEmbedder())
    if damage == "file":
        import shutil

        shutil.rmtree(folder)
        folder.write_bytes(b"\x00garbage")
    else:
        sub = "_versions" if damage == "manifest" else "data"
        for path in (folder / "vectors.lance" / sub).iterdir():
            if path.is_file():
                path.write_bytes(b"not a lance file" * 10)
    embedder = CountingEmbedder()
    with caplog.at_level(logging.WARNING, logger="searchplay.retrieval.embedding_cache"):
        index = build(tmp_path, embedder, cache=cache, name="rebuilt")
    assert str(folder) in caplog.text and "unreadable" in caplog.text
    assert embedder.embedded == len(TINY_PASSAGES)
    assert search_ids(index) == search_ids(build(tmp_path, CountingEmbedder(), name="reference"))
    again = CountingEmbedder()
    build(tmp_path, again, cache=cache, name="again")
    assert again.calls == []


def test_lookup_finds_many_hashes_over_several_appends(tmp_path):
    embedder = HashingEmbedder()
    cache = EmbeddingCache(tmp_path, embedder)
    texts = [f"text {i}" for i in range(3000)]
    for start in range(0, 3000, 1000):
        cache.encode(texts[start:start + 1000], embedder)
    reopened = EmbeddingCache(tmp_path, embedder)  # indexes the hash column
    asked = [*texts[500:2000], "never seen"]
    vectors = reopened.encode(asked, embedder)
    assert (reopened.hits, reopened.misses) == (1500, 1)
    assert np.allclose(vectors, embedder.encode_passages(asked))


def test_two_builds_filling_one_cache_at_once_leave_no_duplicate_rows(tmp_path):
    """Two caches opened on one folder before either writes (two `index build` runs at once): both embed the same
    texts, and the cache keeps one row per text."""
    embedder = HashingEmbedder()
    first, second = EmbeddingCache(tmp_path, embedder), EmbeddingCache(tmp_path, embedder)
    texts = [f"text {i}" for i in range(50)]
    first.encode(texts, embedder)
    second.encode([*texts[25:], "one more"], embedder)  # its snapshot predates the first's rows: all misses
    table = EmbeddingCache(tmp_path, embedder)._table.to_arrow()
    assert table.num_rows == 51 and len(set(table.column("hash").to_pylist())) == 51
