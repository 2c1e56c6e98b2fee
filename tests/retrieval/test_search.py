"""The in-process tool and the HTTP client run the same tests (parity), on a tiny real LanceDB index."""

import logging

import pytest
from fastapi.testclient import TestClient

from searchplay.retrieval.client import RetrieverClient
from searchplay.retrieval.search import LanceSearchTool, format_documents, reciprocal_rank_fusion, truncate_tokens
from searchplay.retrieval.server import create_app
from searchplay.retrieval.types import Document, SearchTool
from tests.retrieval.conftest import HashingEmbedder, build_tiny_index


@pytest.fixture(scope="module", params=["local", "http"])
def search_tool(request, tiny_index, hashing_embedder) -> SearchTool:
    local = LanceSearchTool(tiny_index, "passages", hashing_embedder, mode="dense")
    if request.param == "local":
        return local
    return RetrieverClient("http://testserver", client=TestClient(create_app(local)))


def test_dense_finds_the_bern_passage_first(search_tool):
    (docs,) = search_tool.search(["capital of Switzerland"], top_k=3)
    assert len(docs) == 3
    assert docs[0].title == "Bern" and docs[0].id == "1"
    assert docs[0].text.startswith("Bern is the de facto capital")
    assert docs[0].score >= docs[1].score >= docs[2].score


def test_batch_keeps_query_order_and_top_k(search_tool):
    results = search_tool.search(["highest mountain Himalayas", "river flowing to the Black Sea", "jazz music"],
                                 top_k=2)
    assert [r[0].title for r in results] == ["Mount Everest", "Danube", "Jazz"]
    assert all(len(r) == 2 for r in results)


def test_blank_queries_give_empty_lists_with_a_warning(search_tool, caplog):
    with caplog.at_level(logging.WARNING):
        results = search_tool.search(["", "largest city of France on the Seine", "   "], top_k=3)
    assert results[0] == [] and results[2] == []
    assert results[1][0].title == "Paris"
    assert "empty or whitespace-only" in caplog.text
    assert search_tool.search([" "], top_k=3) == [[]]


def test_overlong_query_is_handled(search_tool):
    (docs,) = search_tool.search(["capital of Switzerland " * 2000], top_k=3)
    assert docs[0].title == "Bern"


@pytest.mark.parametrize("mode", ["fts", "hybrid"])
def test_fts_and_hybrid_modes(tiny_index, hashing_embedder, mode):
    embedded = []

    class Counting(type(hashing_embedder)):
        def encode_queries(self, queries):
            embedded.extend(queries)
            return super().encode_queries(queries)

    tool = LanceSearchTool(tiny_index, "passages", Counting(), mode=mode)
    (docs,) = tool.search(["Turing mathematician"], top_k=3)
    assert docs[0].title == "Alan Turing"
    assert len(docs) <= 3
    assert embedded == ([] if mode == "fts" else ["Turing mathematician"])  # full text alone embeds no query


def test_hybrid_scores_are_rrf(tiny_index, hashing_embedder):
    tool = LanceSearchTool(tiny_index, "passages", hashing_embedder, mode="hybrid")
    (docs,) = tool.search(["Alan Turing mathematician"], top_k=1)
    assert docs[0].score == pytest.approx(2 / 61)  # first in both lists: 1/(60+1) twice


def test_hybrid_returns_top_k_documents_beyond_its_candidate_lists(tiny_index, hashing_embedder):
    """Each list is cut at ``hybrid_candidates`` before the fusion; a larger ``top_k`` lengthens them."""
    tool = LanceSearchTool(tiny_index, "passages", hashing_embedder, mode="hybrid", hybrid_candidates=4)
    assert len(tool.search(["the capital city of a country"], top_k=2)[0]) == 2
    (docs,) = tool.search(["the capital city of a country"], top_k=10)
    assert len(docs) == 10 and len({d.id for d in docs}) == 10


def test_dimension_mismatch_is_a_clear_error(tiny_index, hashing_embedder):
    from searchplay.retrieval.index import RetrievalIndexError

    class Wrong(type(hashing_embedder)):
        dimension = 32

    with pytest.raises(RetrievalIndexError, match="rebuild the index"):
        LanceSearchTool(tiny_index, "passages", Wrong())


def test_the_tool_reopens_a_rebuilt_index_even_with_identical_contents(tmp_path):
    index = build_tiny_index(tmp_path)
    tool = LanceSearchTool(index, "passages", HashingEmbedder())
    first = tool.version
    build_tiny_index(tmp_path)  # `index build` again: a new folder swapped in, the old one deleted
    assert tool.search(["capital of Switzerland"], top_k=1)[0][0].title == "Bern"
    assert tool.version == LanceSearchTool(index, "passages", HashingEmbedder()).version != first


def test_rrf_fuses_rankings():
    a, b, c = (Document(i, i, i) for i in "abc")
    fused = reciprocal_rank_fusion([[a, b, c], [c, b]], top_k=3, k=60)
    assert [d.id for d in fused] == ["c", "b", "a"]  # 1/63 + 1/61 > 2/62
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2].score == pytest.approx(1 / 61)


def test_format_documents_is_search_r1s_block():
    docs = [Document("1", "Bern", "Bern is the capital."), Document("2", "Aare", "A river.")]
    assert format_documents(docs) == 'Doc 1(Title: "Bern") Bern is the capital.\nDoc 2(Title: "Aare") A river.\n'
    assert format_documents([]) == ""


@pytest.mark.slow
def test_format_documents_truncates_each_document(smollm2_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    text = "word " * 50
    block = format_documents([Document("1", "T", text), Document("2", "U", "short")], tokenizer, max_doc_tokens=5)
    first, second = block.splitlines()
    assert len(tokenizer.encode(first.split(") ", 1)[1], add_special_tokens=False)) <= 5
    assert second == 'Doc 2(Title: "U") short'


def test_truncate_without_tokenizer_counts_words():
    assert truncate_tokens("a b c d", 2) == "a b"
    assert truncate_tokens("a b", 0) == "a b"


def test_load_search_tool_picks_the_client_or_the_local_index(tiny_index):
    from searchplay.config import load_params
    from searchplay.retrieval import load_search_tool

    remote = load_search_tool(load_params("/nonexistent.yaml", {"search.server_url": "http://127.0.0.1:9/retrieve"}))
    assert isinstance(remote, RetrieverClient) and remote.url == "http://127.0.0.1:9/retrieve"
    bounded = load_search_tool(load_params("/nonexistent.yaml", {"search.server_url": "http://127.0.0.1:9",
                                                                "serve.max_queries": 7, "serve.max_query_chars": 50}))
    assert (bounded.limits.max_queries, bounded.limits.max_query_chars) == (7, 50)
    local = load_search_tool(load_params("/nonexistent.yaml", {"index.dir": str(tiny_index), "search.mode": "fts"}))
    assert isinstance(local, LanceSearchTool)
    assert local.search(["Danube"], top_k=1)[0][0].title == "Danube"
