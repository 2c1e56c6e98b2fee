import numpy as np
import pytest

from searchplay.retrieval.embedder import Embedder


class RecordingEncoder:
    """A sentence-transformers stand-in that records what it was asked to encode."""

    max_seq_length = 16

    def __init__(self):
        self.calls: list[list[str]] = []

    def get_embedding_dimension(self):
        return 4

    def encode(self, texts, batch_size, show_progress_bar, convert_to_numpy, normalize_embeddings):
        self.calls.append(list(texts))
        return np.ones((len(texts), 4), dtype=np.float32) / 2


@pytest.mark.parametrize(("e5", "query", "passage"), [(True, "query: who", "passage: Bern"), (False, "who", "Bern")])
def test_e5_prefixes_follow_the_switch(e5, query, passage):
    encoder = RecordingEncoder()
    embedder = Embedder("fake", e5_prefixes=e5, encoder=encoder)
    embedder.encode_queries(["who", "what"])
    embedder.encode_passages(["Bern"])
    assert encoder.calls[0][0] == query and len(encoder.calls[0]) == 2  # all queries in one call
    assert encoder.calls[1] == [passage]


def test_outputs_are_float32_matrices():
    embedder = Embedder("fake", encoder=RecordingEncoder())
    vectors = embedder.encode_queries(["a", "b", "c"])
    assert vectors.shape == (3, 4) and vectors.dtype == np.float32
    assert embedder.dimension == 4 and embedder.max_seq_length == 16


@pytest.fixture(scope="module")
def minilm(minilm_path) -> Embedder:
    return Embedder("bundled:minilm", device="cpu")


@pytest.mark.slow
def test_bundled_minilm_ranks_nearer_sentence_first(minilm):
    query = minilm.encode_queries(["What is the capital city of Switzerland?"])[0]
    passages = minilm.encode_passages(["Bern is the federal city and de facto capital of Switzerland.",
                                       "Photosynthesis converts light energy into chemical energy in plants."])
    similarities = passages @ query
    assert similarities[0] > similarities[1] + 0.2
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_query_longer_than_the_encoder_limit_is_truncated(minilm):
    long_query = "capital of Switzerland " * 1000  # ~3000 tokens, limit 256
    short = minilm.encode_queries(["capital of Switzerland " * 80])[0]
    vector = minilm.encode_queries([long_query])[0]
    assert minilm.max_seq_length == 256
    assert float(vector @ short) > 0.99  # both are the same first 256 tokens


def test_bf16_embedder_returns_float32_and_ranks_as_fp32(minilm_path):
    """The fast dtype keeps the ranking: same order on a query whose passages differ clearly."""
    import numpy as np

    bf16 = Embedder("bundled:minilm", device="cpu", dtype="bfloat16")
    fp32 = Embedder("bundled:minilm", device="cpu", dtype="float32")
    assert (bf16.dtype, fp32.dtype) == ("bfloat16", "float32")
    passages = ["Bern is the federal city of Switzerland.", "Pasta is boiled in salted water.",
                "The Alps cross Switzerland.", "A violin has four strings."]
    scores = {name: e.encode_queries(["capital of Switzerland"]) @ e.encode_passages(passages).T
              for name, e in (("bf16", bf16), ("fp32", fp32))}
    assert scores["bf16"].dtype == np.float32
    assert list(np.argsort(-scores["bf16"][0])) == list(np.argsort(-scores["fp32"][0]))
    assert np.allclose(scores["bf16"], scores["fp32"], atol=0.02)


def test_auto_dtype_is_bf16_only_where_the_cpu_has_bf16_instructions(monkeypatch):
    import torch

    from searchplay import precision
    from searchplay.retrieval.embedder import pick_dtype

    monkeypatch.setattr(precision, "cpu_bf16_instructions", lambda: "AVX512-BF16")
    assert pick_dtype("auto", "cpu") is torch.bfloat16
    monkeypatch.setattr(precision, "cpu_bf16_instructions", lambda: None)
    assert pick_dtype("auto", "cpu") is torch.float32
    assert pick_dtype("float32", "cpu") is torch.float32


def test_an_embedder_that_cannot_load_is_named_before_sentence_transformers_starts(tmp_path):
    from searchplay.llm.weights import ModelLoadError
    from searchplay.retrieval.embedder import Embedder

    with pytest.raises(ModelLoadError, match=r"no such model folder; check the path \(models\.embedder\)"):
        Embedder(str(tmp_path / "no such embedder"), device="cpu")
