import socket

import pytest
from fastapi.testclient import TestClient

from searchplay.retrieval.client import RetrieverClient, RetrieverRequestError, RetrieverUnavailable, retrieve_url
from searchplay.retrieval.server import create_app
from searchplay.retrieval.types import Document


class ScriptedTool:
    """Returns one fixed document per query; raises on the query 'boom'."""

    def search(self, queries, top_k=3):
        if "boom" in queries:
            raise RuntimeError("index exploded")
        return [[Document("7", "Bern", f"about {q}", 0.5)][:top_k] for q in queries]


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
    assert http.get("/health").json() == {"status": "ok"}
    assert http.post("/retrieve", json={"queries": ["a"]}).status_code == 200


def test_failure_inside_search_is_a_500_and_the_server_survives(http):
    response = http.post("/retrieve", json={"queries": ["boom"]})
    assert response.status_code == 500 and "index exploded" in response.json()["detail"]
    assert http.post("/retrieve", json={"queries": ["a"]}).status_code == 200


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


def test_retrieve_url_accepts_base_or_full_url():
    assert retrieve_url("http://h:8000") == "http://h:8000/retrieve"
    assert retrieve_url("http://h:8000/retrieve/") == "http://h:8000/retrieve"
