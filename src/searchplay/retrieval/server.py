"""FastAPI ``/retrieve`` with Search-R1's schema, so several rollout workers share one index.

Request ``{"queries": [...], "topk": 3, "return_scores": true}``; response
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` (without scores: lists of
documents), one list per query, ``contents`` in wiki-18's ``"Title"\\ntext`` form.
A malformed body gets 422 from the schema; a failure inside the search gets a JSON 500 and the
server keeps serving.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from searchplay.retrieval.corpus import join_contents
from searchplay.retrieval.types import SearchTool

log = logging.getLogger(__name__)

MAX_QUERIES = 4096  # per request; larger batches are refused with 422
MAX_TOPK = 100


class QueryRequest(BaseModel):
    queries: list[str] = Field(..., max_length=MAX_QUERIES)
    topk: int = Field(3, ge=1, le=MAX_TOPK)
    return_scores: bool = False


def create_app(tool: SearchTool) -> FastAPI:
    app = FastAPI(title="searchplay retriever")

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("retrieval failed for %s", request.url.path)
        return JSONResponse(status_code=500, content={"detail": f"{type(exc).__name__}: {exc}"})

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/retrieve")
    def retrieve(request: QueryRequest) -> dict:
        found = tool.search(request.queries, top_k=request.topk)
        result = []
        for documents in found:
            docs = [{"id": d.id, "contents": join_contents(d.title, d.text)} for d in documents]
            if request.return_scores:
                result.append([{"document": doc, "score": d.score} for doc, d in zip(docs, documents, strict=True)])
            else:
                result.append(docs)
        return {"result": result}

    return app


def serve(tool: SearchTool, host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(create_app(tool), host=host, port=port, log_level="info")
