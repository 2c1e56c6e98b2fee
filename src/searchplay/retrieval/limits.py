"""What one ``/retrieve`` request may ask of the server, and how long it may take (``serve.*`` in params.yaml).

Without bounds one request with a huge query list held the server for 250 s and an empty one was answered
200. The server refuses what is over these bounds with 413 or 422 and a message that
names the bound; ``RetrieverClient`` splits and cuts its requests to the same bounds, so our own rollout
workers never hit them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

JSON_BYTES_PER_CHAR = 6  # the longest JSON spelling of one character ("\u00e9")
BODY_OVERHEAD_BYTES = 4096  # the rest of the request body: keys, topk, return_scores


@dataclass(frozen=True)
class RequestLimits:
    """The server's bounds; the defaults are ``ServeConfig``'s (tests/retrieval/test_limits.py keeps them equal)."""

    max_queries: int = 128  # 128 queries of 2048 characters: 16.5 s on 2 shared cores (MiniLM), under timeout_s
    max_query_chars: int = 2048  # about the 256 tokens a query embedder reads (Search-R1: max_length 256)
    max_top_k: int = 100
    timeout_s: float = 20.0
    workers: int = 2
    queue: int = 32

    @classmethod
    def from_serve_config(cls, serve: Any) -> RequestLimits:
        """The bounds set in params.yaml's ``serve`` section."""
        return cls(serve.max_queries, serve.max_query_chars, serve.max_top_k, serve.server_timeout_s,
                   serve.server_workers, serve.server_queue)

    @property
    def max_body_bytes(self) -> int:
        """The largest body a request within the bounds can have (larger ones are refused before parsing)."""
        return self.max_queries * (self.max_query_chars * JSON_BYTES_PER_CHAR + 4) + BODY_OVERHEAD_BYTES


def refusal(queries: Sequence[str], top_k: int, limits: RequestLimits) -> tuple[int, str] | None:
    """The HTTP status and message for a request over the bounds, or None when it is within them.

    >>> refusal([], 3, RequestLimits())
    (422, 'queries is empty: send 1 to 128 queries per request')
    >>> refusal(["capital of Switzerland"], 3, RequestLimits()) is None
    True
    """
    if not queries:
        return 422, f"queries is empty: send 1 to {limits.max_queries} queries per request"
    if len(queries) > limits.max_queries:
        return 413, (f"{len(queries)} queries in one request, at most {limits.max_queries} (serve.max_queries): "
                     "split the batch into several requests")
    longest = max(range(len(queries)), key=lambda i: len(queries[i]))
    if len(queries[longest]) > limits.max_query_chars:
        return 413, (f"query {longest} has {len(queries[longest])} characters, at most {limits.max_query_chars} "
                     "(serve.max_query_chars): shorten it")
    if top_k > limits.max_top_k:
        return 422, f"topk {top_k} is above the limit of {limits.max_top_k} (serve.max_top_k): ask for fewer"
    return None
