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
