"""CLI verbs of the retrieval stage: ``corpus build``, ``index build``, ``search``, ``serve-retriever``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from searchplay.cliutil import EXIT_BAD_PARAMS, console, get_params, print_error

corpus_app = typer.Typer(help="Build the retrieval corpus (passages.jsonl).", no_args_is_help=True)
index_app = typer.Typer(help="Build the LanceDB index over the corpus.", no_args_is_help=True)


@corpus_app.command("build")
def corpus_build(
    ctx: typer.Context,
    source: str = typer.Option(None, "--source", help="bundled | flashrag | jsonl (corpus.source)"),
    path: str = typer.Option(None, "--path", help="corpus file for flashrag/jsonl (corpus.path)"),
    out: str = typer.Option(None, "--out", help="passages.jsonl to write (corpus.out)"),
) -> None:
    """Read a corpus, split and validate it, write passages.jsonl atomically."""
    from searchplay.cliutil import exit_code_for
    from searchplay.io import exclusive_outputs
    from searchplay.quality import DataQualityError
    from searchplay.retrieval.corpus import CorpusError, build_corpus

    params = get_params(ctx, **{"corpus.source": source, "corpus.path": path, "corpus.out": out})
    config = params.corpus
    try:
        with exclusive_outputs(config.out, "corpus build"), console.status(f"reading the {config.source} corpus"):
            report = build_corpus(config.source, config.path, config.out, config.passage_words,
                                  config.max_bad_line_share, config.max_articles)
    except (CorpusError, DataQualityError) as exc:
        console.print(f"[red]corpus error[/red]\n{exc}")
        raise typer.Exit(exit_code_for(exc)) from None
    console.print(f"wrote {report.passages} passages from {report.lines} entries to {config.out} "
                  f"({report.bad_lines} malformed skipped)")


@index_app.command("build")
def index_build(
    ctx: typer.Context,
    passages: str = typer.Option(None, "--passages", help="passages.jsonl (corpus.out)"),
    out: str = typer.Option(None, "--out", help="index folder (index.dir)"),
) -> None:
    """Embed the passages and build the LanceDB table, ANN index (if large) and full-text index."""
    from searchplay.io import exclusive_outputs
    from searchplay.retrieval.index import build_from_params

    params = get_params(ctx, **{"corpus.out": passages, "index.dir": out})
    config = params.index
    started = time.perf_counter()
    with index_errors(), exclusive_outputs(config.dir, "index build"):
        manifest = build_from_params(params)
    ann = manifest["ann"]["type"] or "none (exact search)"
    console.print(f"indexed {manifest['rows']} passages into {config.dir} in {time.perf_counter() - started:.0f}s; "
                  f"ANN: {ann}; full-text: {manifest['fts']}")
    if cache := manifest["embedding_cache"]:
        console.print(f"embedding cache {cache['dir']}: {cache['hits']} hits, {cache['misses']} misses")


def search_command(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="the search query"),
    top_k: int = typer.Option(None, "-k", "--top-k", help="documents to return (search.top_k)"),
    mode: str = typer.Option(None, "--mode", help="dense | fts | hybrid (search.mode)"),
) -> None:
    """Search the index and print Search-R1's document block."""
    from searchplay.retrieval.client import RetrieverUnavailable
    from searchplay.retrieval.search import format_documents, load_search_tool

    params = get_params(ctx, **{"search.top_k": top_k, "search.mode": mode})
    with index_errors():
        tool = load_search_tool(params)
        try:
            documents = tool.search([query], top_k=params.search.top_k)[0]
        except RetrieverUnavailable as exc:  # the server may come back: exit 1, which a retry may mend
            print_error("search error", str(exc))
            raise typer.Exit(1) from None
    for doc in documents:
        console.print(f"[dim]{doc.id}  score={doc.score:.4f}[/dim]")
    typer.echo(format_documents(documents, max_doc_tokens=params.search.max_doc_tokens), nl=False)


def serve_retriever(
    ctx: typer.Context,
    host: str = typer.Option(None, "--host", help="bind address (search.host, default 127.0.0.1)"),
    port: int = typer.Option(None, "--port", help="port (search.port)"),
) -> None:
    """Serve the local index over HTTP at /retrieve (Search-R1's schema) and /health; reopens it after each rebuild."""
    from searchplay.retrieval.limits import RequestLimits
    from searchplay.retrieval.search import load_search_tool
    from searchplay.retrieval.server import ListenError, listening_socket, serve

    params = get_params(ctx, **{"search.host": host, "search.port": port, "search.server_url": None})
    if params.search.server_url:
        console.print("[red]search.server_url is set: the server must serve a local index; unset it[/red]")
        raise typer.Exit(2)
    try:
        sock = listening_socket(params.search.host, params.search.port)
    except ListenError as exc:
        print_error("serve error", str(exc))
        raise typer.Exit(EXIT_BAD_PARAMS) from None
    with index_errors():
        tool = load_search_tool(params)
    serve(tool, params.search.host, params.search.port, RequestLimits.from_serve_config(params.serve), sock)


@contextmanager
def index_errors() -> Iterator[None]:
    """An index that cannot be built or opened (no passages, a passages line that does not parse, a missing
    index, an output place that is not an index): one line and exit 2, as a retry reads the same files."""
    from searchplay.retrieval.index import RetrievalIndexError

    try:
        yield
    except (RetrievalIndexError, ValueError) as exc:
        print_error("index error", str(exc))
        raise typer.Exit(EXIT_BAD_PARAMS) from None


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to the root app."""
    app.add_typer(corpus_app, name="corpus")
    app.add_typer(index_app, name="index")
    app.command("search")(search_command)
    app.command("serve-retriever")(serve_retriever)
