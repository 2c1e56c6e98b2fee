"""``RetrieverClient``: the ``SearchTool`` interface over a Search-R1 ``/retrieve`` server."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from searchplay.retrieval.corpus import parse_contents
from searchplay.retrieval.limits import RequestLimits
from searchplay.retrieval.types import Document, SearchTool, split_blank

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.5  # doubled after each failed attempt


class RetrieverUnavailable(ConnectionError):
    """The /retrieve server could not be reached or kept failing; the message names the URL."""


class RetrieverRequestError(ValueError):
    """The server refused the request (4xx); the message carries its explanation."""


def retrieve_url(url: str) -> str:
    """Accept Search-R1's ``http://host:port/retrieve`` or the bare base URL."""
    url = url.rstrip("/")
    return url if url.endswith("/retrieve") else f"{url}/retrieve"


class RetrieverClient(SearchTool):
    """POSTs ``{"queries", "topk", "return_scores": true}`` and parses ``{"result": [[{document, score}]]}``.

    Connection errors, timeouts and 5xx answers are retried ``retries`` times with backoff; a 4xx
    answer is not retried. Batches go out in requests of at most ``limits.max_queries`` queries, each cut
    to ``limits.max_query_chars`` characters (the server's bounds, serve.* in params.yaml).
    ``client`` injects an ``httpx.Client`` (tests pass FastAPI's TestClient).
    """

    def __init__(self, url: str, timeout_s: float = 30.0, retries: int = 2, client: Any = None,
                 limits: RequestLimits | None = None):
        import httpx

        self.url = retrieve_url(url)
        self.retries = retries
        self.limits = limits or RequestLimits()
        self.client = client or httpx.Client(timeout=timeout_s)

    def search(self, queries: Sequence[str], top_k: int = 3) -> list[list[Document]]:
        results: list[list[Document]] = [[] for _ in queries]
        positions, texts = split_blank(queries)
        if not texts:
            return results
        texts = self._cut(texts)
        batch = self.limits.max_queries
        for start in range(0, len(texts), batch):
            payload = self._post({"queries": texts[start:start + batch], "topk": top_k, "return_scores": True})
            for position, hits in zip(positions[start:start + batch], payload["result"], strict=True):
                results[position] = [self._document(hit) for hit in hits]
        return results

    def _cut(self, texts: list[str]) -> list[str]:
        """Queries longer than the server takes, cut to its bound (the embedder would truncate them anyway)."""
        most = self.limits.max_query_chars
        if any(len(text) > most for text in texts):
            log.warning("cutting %d queries to %d characters (serve.max_query_chars)",
                        sum(len(text) > most for text in texts), most)
        return [text[:most] for text in texts]

    @staticmethod
    def _document(hit: dict[str, Any]) -> Document:
        document = hit["document"]
        title, text = parse_contents(document["contents"])
        return Document(str(document["id"]), title, text, float(hit.get("score", 0.0)))

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        delay, last_error = RETRY_BACKOFF_S, "no attempt made"
        for attempt in range(self.retries + 1):
            try:
                response = self.client.post(self.url, json=body)
            except httpx.HTTPError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 400:
                    return response.json()
                if response.status_code < 500:
                    raise RetrieverRequestError(f"retriever at {self.url} refused the request "
                                                f"(HTTP {response.status_code}): {response.text[:500]}")
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
            if attempt < self.retries:
                log.warning("retriever %s failed (%s); retrying in %.1fs", self.url, last_error, delay)
                time.sleep(delay)
                delay *= 2
        raise RetrieverUnavailable(f"retriever at {self.url} failed after {self.retries + 1} attempts ({last_error}); "
                                   "is `searchplay serve-retriever` running there?")
