"""FastAPI ``/retrieve`` with Search-R1's schema, so several rollout workers share one index.

Request ``{"queries": [...], "topk": 3, "return_scores": true}``; response
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` (without scores: lists of
documents), one list per query, ``contents`` in wiki-18's ``"Title"\\ntext`` form.

A malformed body gets 422 from the schema; a request over the bounds (``limits.RequestLimits``) gets 413
or 422 saying which bound. Searches run on a bounded worker pool: a request that finds no free worker
within ``serve.server_timeout_s`` gets 503, one whose search runs longer gets 504, and beyond
``serve.server_queue`` waiting requests the answer is 503 at once. A failure inside the search gets a
500 with an error id; the traceback, which names server paths, goes to the server log only.
``/health`` runs a one-query search and reports the index version and row count (docs/usage.md,
"Serving the index").
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from searchplay.retrieval.corpus import join_contents
from searchplay.retrieval.limits import RequestLimits, refusal
from searchplay.retrieval.types import Document, SearchTool

log = logging.getLogger(__name__)

PROBE_QUERY = "capital"  # /health's readiness search: any word will do, it only has to run end to end


class QueryRequest(BaseModel):
    queries: list[str]
    topk: int = Field(3, ge=1)
    return_scores: bool = False


class SearchPool:
    """At most ``workers`` searches at once and ``queue`` more waiting; each caller waits ``timeout_s`` at most."""

    def __init__(self, limits: RequestLimits):
        self.limits = limits
        self.executor = ThreadPoolExecutor(limits.workers, thread_name_prefix="retrieve")
        self.slots = threading.BoundedSemaphore(limits.workers + limits.queue)

    async def run(self, search: Callable[..., Any], *args: Any) -> Any:
        """``search(*args)`` on a worker; raises HTTPException 503 (busy, not started) or 504 (too slow)."""
        if not self.slots.acquire(blocking=False):
            raise HTTPException(503, f"the retriever is busy ({self.limits.workers} searches running and "
                                     f"{self.limits.queue} waiting, serve.server_queue): retry later")
        try:
            future = self.executor.submit(search, *args)
        except BaseException:
            self.slots.release()
            raise
        future.add_done_callback(lambda _: self.slots.release())  # a timed-out search holds its slot until done
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.limits.timeout_s)
        except TimeoutError:
            if future.cancelled():
                raise HTTPException(503, f"the retriever is busy: no worker was free within {self.limits.timeout_s:g}"
                                         " s (serve.server_timeout_s): retry later") from None
            raise HTTPException(504, f"the search took longer than {self.limits.timeout_s:g} s "
                                     "(serve.server_timeout_s): send fewer queries per request") from None


def index_status(tool: SearchTool) -> dict[str, Any] | None:
    """Version, rows and embedder of the index a ``LanceSearchTool`` has open (None for other tools)."""
    manifest = getattr(tool, "manifest", None)
    if manifest is None:
        return None
    return {"version": getattr(tool, "version", None), "rows": manifest.get("rows"),
            "embedder": manifest.get("embedder"), "ann": manifest.get("ann", {}).get("type")}


def render(found: list[list[Document]], return_scores: bool) -> list[list[dict[str, Any]]]:
    """Search-R1's result lists: ``{"document": {"id", "contents"}, "score"}`` per hit, or the bare documents."""
    result = []
    for documents in found:
        docs = [{"id": d.id, "contents": join_contents(d.title, d.text)} for d in documents]
        result.append([{"document": doc, "score": d.score} for doc, d in zip(docs, documents, strict=True)]
                      if return_scores else docs)
    return result


def internal_error(what: str) -> JSONResponse:
    """A 500 that names an error id to find in the server log, and nothing of the server's internals."""
    error_id = uuid.uuid4().hex[:8]
    log.exception("%s failed (error id %s)", what, error_id)
    return JSONResponse(status_code=500, content={
        "detail": f"internal error in the retriever (error id {error_id}); the server log has the details"})


class BoundedBody:
    """ASGI middleware: a request body over ``limits.max_body_bytes`` gets 413 before anything parses it, whether
    its size is declared (Content-Length) or not (chunked: counted as it arrives, never held beyond the bound),
    and a body that is not UTF-8 gets 400. The body read here is handed on to the app unchanged."""

    def __init__(self, app: Any, limits: RequestLimits):
        self.app, self.limits = app, limits

    def _too_large(self, size: int | None) -> JSONResponse:
        said = f"request body of {size} bytes" if size is not None else "request body"
        return JSONResponse(status_code=413, content={"detail": (
            f"{said} over {self.limits.max_body_bytes} bytes, the most for {self.limits.max_queries} queries of "
            f"{self.limits.max_query_chars} characters (serve.max_queries, serve.max_query_chars)")})

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"").decode("latin-1")
        if declared.isdigit() and int(declared) > self.limits.max_body_bytes:
            return await self._too_large(int(declared))(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body_bytes:
                return await self._too_large(None)(scope, receive, send)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            response = JSONResponse(status_code=400, content={"detail": "request body is not UTF-8 (JSON expected)"})
            return await response(scope, receive, send)
        handed = False

        async def replay() -> dict:
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


def create_app(tool: SearchTool, limits: RequestLimits | None = None) -> FastAPI:
    limits = limits or RequestLimits()
    pool = SearchPool(limits)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        pool.executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="searchplay retriever", lifespan=lifespan)

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
        return internal_error(f"{request.method} {request.url.path}")

    app.add_middleware(BoundedBody, limits=limits)

    @app.get("/health")
    async def health() -> JSONResponse:
        started = time.perf_counter()
        try:
            await pool.run(tool.search, [PROBE_QUERY], 1)
            problem = None
        except HTTPException as exc:
            problem = exc.detail
        except Exception:
            log.exception("/health: the probe search failed")
            problem = "the probe search failed; the server log has the details"
        body = {"status": "ok" if problem is None else "unavailable", "ready": problem is None,
                "index": index_status(tool), "probe_ms": round(1000 * (time.perf_counter() - started), 1)}
        if problem:
            body["detail"] = problem
        return JSONResponse(status_code=200 if problem is None else 503, content=body)

    @app.post("/retrieve")
    async def retrieve(request: QueryRequest) -> Any:
        refused = refusal(request.queries, request.topk, limits)
        if refused:
            raise HTTPException(*refused)
        try:
            found = await pool.run(tool.search, request.queries, request.topk)
        except HTTPException:
            raise
        except Exception:
            return internal_error(f"/retrieve of {len(request.queries)} queries")
        return {"result": render(found, request.return_scores)}

    return app


class ListenError(RuntimeError):
    """The server's address cannot be bound (in use, or not allowed); the message names it and what to do."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for the server, bound before the index loads so a port in use fails at once
    with a ``ListenError`` instead of uvicorn's log line and exit 3 after the load."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise ListenError(f"cannot listen on {host}:{port} ({exc.strerror}); another server holds it? choose "
                              "another --port (search.port), or stop that server") from None
        raise ListenError(f"cannot listen on {host}:{port} ({exc.strerror}); --host (search.host) must be an "
                          "address of this machine, such as 127.0.0.1 or 0.0.0.0") from None
    return sock


def serve(tool: SearchTool, host: str = "127.0.0.1", port: int = 8000, limits: RequestLimits | None = None,
          sock: socket.socket | None = None) -> None:
    """Serve ``tool`` under uvicorn until interrupted; ``sock``: bound already (``listening_socket``)."""
    import uvicorn

    config = uvicorn.Config(create_app(tool, limits), host=host, port=port, log_level="info")
    uvicorn.Server(config).run(sockets=[sock or listening_socket(host, port)])


@contextmanager
def serve_in_thread(app: FastAPI, startup_s: float = 10.0) -> Iterator[str]:
    """Run ``app`` under uvicorn in a daemon thread on a free port of 127.0.0.1; yields its base URL and
    stops the server on exit (tests, the fault drills, notebooks; ``serve-retriever`` runs it in front)."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_s
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.01)
    try:
        if not server.started:
            raise RuntimeError(f"uvicorn did not start within {startup_s:g} s")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()

