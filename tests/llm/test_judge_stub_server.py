"""LLM-as-judge through a real OpenAI-compatible HTTP endpoint: a stub server on 127.0.0.1, no network.

What the README's judge section promises: ``judge.backend=openai`` with an endpoint and a model name
sends chat completions (key from ``judge.api_key_env``), short-circuits exact matches, caches
replies, and counts an unreachable endpoint as a judge error, never as correct.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from searchplay.config import JudgeConfig
from searchplay.llm.judge import make_judge


class StubJudge(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: 'Correct' when the prompt holds the model answer 'Lutetia', else 'Incorrect'."""

    requests: ClassVar[list[tuple[dict, str | None]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StubJudge.requests.append((body, self.headers.get("Authorization")))
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        prompt = " ".join(message["content"] for message in body["messages"])
        verdict = "Correct" if "Lutetia" in prompt else "The answer is incorrect."
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": verdict}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    StubJudge.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubJudge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_compatible_judge_against_a_local_server(endpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_JUDGE_KEY", "secret")
    config = JudgeConfig(backend="openai", endpoint=endpoint, model="stub-judge", api_key_env="STUB_JUDGE_KEY",
                         cache_path=str(tmp_path / "judge.sqlite"))
    items = [("What was Paris called in Roman times?", "Lutetia", ["Paris"]),
             ("Capital of France?", "Lyon", ["Paris"]),
             ("Capital of France?", "paris", ["Paris"])]
    verdicts = make_judge(config).judge_many(items)
    assert [(v.correct, v.method) for v in verdicts] == [(True, "llm"), (False, "llm"), (True, "exact")]
    assert {v.judge_model for v in verdicts[:2]} == {"stub-judge"}
    assert len(StubJudge.requests) == 2  # the exact match never reached the endpoint
    body, authorization = StubJudge.requests[0]
    assert authorization == "Bearer secret"
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("stub-judge", 0.1, 10)
    again = make_judge(config).judge_many(items[:2])  # a new process opens the same cache file
    assert [v.correct for v in again] == [True, False] and len(StubJudge.requests) == 2


def test_an_unreachable_endpoint_is_a_judge_error_never_correct(tmp_path):
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = JudgeConfig(backend="openai", endpoint=f"http://127.0.0.1:{port}/v1", model="stub-judge",
                         max_retries=1, backoff_s=0.0, timeout_s=2.0, cache_path=None)
    verdict = make_judge(config).judge("Capital of France?", "Lutetia", ["Paris"])
    assert (verdict.correct, verdict.method) == (False, "error") and verdict.error
