import inspect
import json
import logging
import socket
import threading

import pytest
from fastapi.testclient import TestClient

from searchplay.config import SearchConfig
from searchplay.retrieval.client import RetrieverClient, RetrieverRequestError, RetrieverUnavailable, retrieve_url
from searchplay.retrieval.limits import RequestLimits
from searchplay.retrieval.search import LanceSearchTool
from searchplay.retrieval.server import create_app, serve
from searchplay.retrieval.types import Document
from tests.retrieval.conftest import TINY_PASSAGES, HashingEmbedder, build_tiny_index


class ScriptedTool:
    """Returns one fixed document per query; raises on the query 'boom'."""

    def search(self, queries, top_k=3):
        if "boom" in queries:
            raise RuntimeError("index exploded at /srv/secret/index/passages.lance")
        return [[Document("7", "Bern", f"about {q}", 0.5)][:top_k] for q in queries]


class BlockingTool:
    """Blocks every search until ``release`` is set (at most 5 s), so tests can hold the workers."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def search(self, queries, top_k=3):
        self.entered.set()
        self.release.wait(5)
        return [[] for _ in queries]


@pytest.fixture()
def http():
    return TestClient(create_app(ScriptedTool()), raise_server_exceptions=False)


def test_retrieve_schema_matches_search_r1(http):
    response = http.post("/retrieve", json={"queries": ["a", "b"], "topk": 3, "return_scores": True})
    assert response.status_code == 200
    assert response.json() == {"result": [
        [{"document": {"id": "7", "contents": '"Bern"\nabout a'}, "score": 0.5}],
        [{"document": {"id": "7", "contents": '"Bern"\nabout b'}, "score": 0.5}],
    ]}
    plain = http.post("/retrieve", json={"queries": ["a"]}).json()
    assert plain == {"result": [[{"id": "7", "contents": '"Bern"\nabout a'}]]}


@pytest.mark.parametrize("body", ['{"queries": ["a"', '{"topk": 3}', '{"queries": "a"}',
                                  '{"queries": ["a"], "topk": 0}', "[]", ""])
def test_malformed_requests_get_422_and_the_server_survives(http, body):
    response = http.post("/retrieve", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert http.get("/health").json()["status"] == "ok"
    assert http.post("/retrieve", json={"queries": ["a"]}).status_code == 200


def test_failure_inside_search_is_a_500_without_internals_and_the_server_survives(http, caplog):
    with caplog.at_level(logging.ERROR, logger="searchplay.retrieval.server"):
        response = http.post("/retrieve", json={"queries": ["boom"]})
    assert response.status_code == 500
    detail = response.json()["detail"]
    assert "internal error" in detail and "error id" in detail
    assert "/srv/secret" not in response.text and "Traceback" not in response.text and "exploded" not in detail
    error_id = detail.split("error id ")[1].split(")")[0]
    assert error_id in caplog.text and "/srv/secret" in caplog.text  # the details stay in the server log
    assert http.post("/retrieve", json={"queries": ["a"]}).status_code == 200


# no bounds on /retrieve.

@pytest.mark.parametrize(("body", "status", "says"), [
    ({"queries": []}, 422, "queries is empty"),
    ({"queries": ["q"] * 5}, 413, "5 queries in one request, at most 4 (serve.max_queries)"),
    ({"queries": ["q", "x" * 41]}, 413, "query 1 has 41 characters, at most 40 (serve.max_query_chars)"),
    ({"queries": ["q"], "topk": 11}, 422, "topk 11 is above the limit of 10 (serve.max_top_k)"),
])
def test_requests_over_the_bounds_are_refused_with_the_bound_named(body, status, says):
    limits = RequestLimits(max_queries=4, max_query_chars=40, max_top_k=10)
    http = TestClient(create_app(ScriptedTool(), limits), raise_server_exceptions=False)
    response = http.post("/retrieve", json=body)
    assert response.status_code == status and says in response.json()["detail"]
    assert http.post("/retrieve", json={"queries": ["q"] * 4, "topk": 10}).status_code == 200


def test_a_huge_body_is_refused_before_parsing():
    limits = RequestLimits(max_queries=4, max_query_chars=40)
    http = TestClient(create_app(ScriptedTool(), limits), raise_server_exceptions=False)
    headers = {"content-type": "application/json"}
    at_the_bounds = json.dumps({"queries": ["\u00e9" * 40] * 4, "topk": 3, "return_scores": True})  # 6 bytes a char
    assert http.post("/retrieve", content=at_the_bounds, headers=headers).status_code == 200
    response = http.post("/retrieve", content=b'{"queries": ["' + b"x" * limits.max_body_bytes + b'"]}',
                         headers=headers)
    assert response.status_code == 413 and "serve.max_queries" in response.json()["detail"]


def test_a_chunked_body_is_bounded_as_a_sized_one_and_a_good_one_passes_through():
    limits = RequestLimits(max_queries=4, max_query_chars=40)
    http = TestClient(create_app(ScriptedTool(), limits), raise_server_exceptions=False)
    headers = {"content-type": "application/json"}

    def chunks(total: int):  # no Content-Length: httpx sends a generator chunked
        yield b'{"queries": ["'
        for _ in range(total // 1024):
            yield b"x" * 1024
        yield b'"]}'

    response = http.post("/retrieve", content=chunks(20 * limits.max_body_bytes), headers=headers)
    assert response.status_code == 413 and "serve.max_queries" in response.json()["detail"]

    def small():
        yield b'{"queries": ["where is Bern"],'
        yield b' "topk": 1}'

    response = http.post("/retrieve", content=small(), headers=headers)
    assert response.status_code == 200 and response.json()["result"][0][0]["id"] == "7"


def test_a_body_that_is_not_utf8_gets_400_not_500():
    http = TestClient(create_app(ScriptedTool()), raise_server_exceptions=False)
    response = http.post("/retrieve", content=b'{"queries": ["\xff\xfe caf\xe9"]}')
    assert response.status_code == 400 and "UTF-8" in response.json()["detail"]
    assert http.post("/retrieve", json={"queries": ["q"]}).status_code == 200  # and it keeps serving


def test_a_slow_search_gets_504_and_a_request_finding_no_worker_503():
    tool = BlockingTool()
    limits = RequestLimits(timeout_s=0.3, workers=1, queue=1)
    with TestClient(create_app(tool, limits)) as http:
        try:
            slow = http.post("/retrieve", json={"queries": ["q"]})  # holds the only worker
            assert slow.status_code == 504 and "longer than 0.3 s" in slow.json()["detail"]
            waited = http.post("/retrieve", json={"queries": ["q"]})  # queued behind it, never started
            assert waited.status_code == 503 and "no worker was free" in waited.json()["detail"]
            assert http.get("/health").status_code == 503
        finally:
            tool.release.set()


def test_beyond_the_queue_the_answer_is_503_at_once():
    tool = BlockingTool()
    limits = RequestLimits(timeout_s=2, workers=1, queue=0)
    with TestClient(create_app(tool, limits)) as http:
        try:
            holder = threading.Thread(target=http.post, args=("/retrieve",), kwargs={"json": {"queries": ["q"]}})
            holder.start()
            assert tool.entered.wait(5)
            busy = http.post("/retrieve", json={"queries": ["q"]})
            assert busy.status_code == 503 and "serve.server_queue" in busy.json()["detail"]
        finally:
            tool.release.set()
            holder.join(5)
        assert http.post("/retrieve", json={"queries": ["q"]}).status_code == 200


def test_client_splits_batches_and_cuts_queries_to_the_bounds():
    limits = RequestLimits(max_queries=2, max_query_chars=10)
    http = TestClient(create_app(ScriptedTool(), limits))
    client = RetrieverClient("http://testserver", client=http, limits=limits)
    results = client.search(["a", "", "b", "c", "d" * 30, "e"], top_k=1)
    assert [r[0].text if r else None for r in results] == ["about a", None, "about b", "about c",
                                                          f"about {'d' * 10}", "about e"]


# 500 to every request after `index build` replaced the index, while /health said ok.

def test_server_keeps_answering_after_the_index_is_rebuilt(tmp_path):
    index = build_tiny_index(tmp_path)
    http = TestClient(create_app(LanceSearchTool(index, "passages", HashingEmbedder())), raise_server_exceptions=False)
    before = http.get("/health").json()
    assert http.post("/retrieve", json={"queries": ["capital of Switzerland"]}).status_code == 200

    renamed = [{**p, "text": p["text"].replace("Bern", "Berne")} for p in TINY_PASSAGES[:20]]
    build_tiny_index(tmp_path, renamed)
    response = http.post("/retrieve", json={"queries": ["capital of Switzerland Berne"], "topk": 1})
    assert response.status_code == 200, response.text  # was 500: "lance error: Not found: <path>"
    assert "Berne is the de facto capital" in response.json()["result"][0][0]["contents"]
    after = http.get("/health").json()
    assert before["ready"] and before["index"]["rows"] == 60 and before["index"]["version"]
    assert after["ready"] and after["index"]["rows"] == 20 and after["index"]["version"] != before["index"]["version"]


def test_health_reports_a_failing_probe_as_not_ready():
    class Broken:
        version = "abc"

        def __init__(self):
            self.manifest = {"rows": 3, "embedder": "x"}

        def search(self, queries, top_k=3):
            raise RuntimeError("lance error: Not found: /srv/secret/data.lance")

    response = TestClient(create_app(Broken()), raise_server_exceptions=False).get("/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["ready"] is False and body["index"]["rows"] == 3
    assert "/srv/secret" not in response.text


def test_client_reports_an_unreachable_server():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = RetrieverClient(f"http://127.0.0.1:{port}/retrieve", timeout_s=2, retries=1)
    with pytest.raises(RetrieverUnavailable, match=f"127.0.0.1:{port}/retrieve failed after 2 attempts"):
        client.search(["anything"])


def test_client_raises_on_4xx_without_retrying(http):
    client = RetrieverClient("http://testserver", client=http)
    with pytest.raises(RetrieverRequestError, match="HTTP 422"):
        client.search(["a"], top_k=0)


def test_the_server_binds_localhost_by_default():
    assert SearchConfig().host == "127.0.0.1"
    assert inspect.signature(serve).parameters["host"].default == "127.0.0.1"


def test_retrieve_url_accepts_base_or_full_url():
    assert retrieve_url("http://h:8000") == "http://h:8000/retrieve"
    assert retrieve_url("http://h:8000/retrieve/") == "http://h:8000/retrieve"
