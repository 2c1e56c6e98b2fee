"""The CLI verbs end to end; the slow test builds and searches a real index on a subset of the bundled corpus.

The full bundled corpus (12,379 passages) takes ~4 minutes to embed on 2 CPU cores, over the test
budget, so the slow test indexes the Switzerland passage plus 400 others; `dvc repro` builds the full one.
"""

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from searchplay.cli import app
from searchplay.io import write_jsonl
from searchplay.retrieval.corpus import CorpusReport, read_wiki_summaries

SUBSET_STRIDE = 30  # every 30th bundled passage (~410) joins the Switzerland passage


def run(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_corpus_build_writes_passages(tmp_path):
    source = tmp_path / "wiki18.jsonl"
    source.write_text(json.dumps({"id": "9", "contents": '"Bern"\nBern is the capital.'}) + "\n")
    out = tmp_path / "passages.jsonl"
    run("corpus", "build", "--source", "flashrag", "--path", str(source), "--out", str(out))
    assert json.loads(out.read_text()) == {"id": "9", "title": "Bern", "text": "Bern is the capital."}


def test_corpus_build_reports_a_bad_corpus(tmp_path):
    source = tmp_path / "bad.jsonl"
    source.write_text("not json\n")
    result = CliRunner().invoke(app, ["corpus", "build", "--source", "jsonl", "--path", str(source),
                                      "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2  # a retry reads the same file
    assert not (tmp_path / "o.jsonl").exists()
    result = CliRunner().invoke(app, ["corpus", "build", "--source", "jsonl", "--path", str(tmp_path),
                                      "--out", str(tmp_path / "o.jsonl")])  # an input, not an output: no output advice
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "is a folder; give the corpus file in it" in said and "--out" not in said


def test_corpus_build_exits_2_on_a_truncated_file(tmp_path):
    import gzip

    whole = gzip.compress(b"".join(json.dumps({"id": str(i), "contents": f'"T{i}"\nText {i}.'}).encode() + b"\n"
                                   for i in range(200)))
    source = tmp_path / "wiki18.jsonl.gz"
    source.write_bytes(whole[: len(whole) // 2])
    out = tmp_path / "o.jsonl"
    result = CliRunner().invoke(app, ["corpus", "build", "--source", "flashrag", "--path", str(source),
                                      "--out", str(out)])
    unwrapped = "".join(result.output.split())  # rich breaks the long path wherever the terminal width falls
    assert result.exit_code == 2 and "wiki18.jsonl.gzistruncated" in unwrapped
    assert not out.exists()


def test_index_and_search_errors_are_one_line_and_exit_2(tmp_path):
    passages = tmp_path / "passages.jsonl"
    write_jsonl(passages, [{"id": "1", "title": "Bern", "text": "Bern is the capital."}])

    def fails(*args: str) -> str:
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        return " ".join(result.output.split())  # rich wraps long lines

    assert "no passages at" in fails("index", "build", "--passages", str(tmp_path / "nope.jsonl"),
                                     "--out", str(tmp_path / "index"))
    assert "is a file, not an index folder" in fails("index", "build", "--passages", str(passages),
                                                     "--out", str(passages))  # --out given the passages
    assert passages.read_text().startswith('{"id": "1"')
    assert "no index at" in fails("--set", f"index.dir={tmp_path / 'index'}", "search", "Bern")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "searchplay-index.json").write_text("{}")  # valid JSON, no manifest
    assert "is no index manifest (no ann, dimension" in fails("--set", f"index.dir={tmp_path / 'empty'}", "search",
                                                               "Bern", "--mode", "fts")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/retrieve"  # nothing listens once the block ends
    result = CliRunner().invoke(app, ["--set", f"search.server_url={url}", "--set", "search.retries=0", "search",
                                      "Bern"])
    assert result.exit_code == 1 and "search error:" in result.output and "Traceback" not in result.output
    with socket.socket() as taken:  # a server already running there
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert f"cannot listen on 127.0.0.1:{port}" in fails("serve-retriever", "--port", port)  # before any load
        assert "another --port" in fails("serve-retriever", "--port", port)
    named = fails("serve-retriever", "--host", "no such host")
    assert "must be an address of this machine" in named and "--port" not in named


@pytest.fixture(scope="module")
def bundled_subset(wiki_summaries_path, minilm_path, tmp_path_factory) -> Path:
    passages = list(read_wiki_summaries(wiki_summaries_path, CorpusReport("bundled")))
    subset = [p.to_dict() for i, p in enumerate(passages) if p.title == "Switzerland" or i % SUBSET_STRIDE == 0]
    root = tmp_path_factory.mktemp("bundled")
    write_jsonl(root / "passages.jsonl", subset)
    run("--set", f"corpus.out={root / 'passages.jsonl'}", "--set", f"index.dir={root / 'index'}",
        "--set", f"index.embedding_cache={root / 'cache'}", "index", "build")
    return root / "index"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_search_capital_of_switzerland(bundled_subset, mode):
    result = run("--set", f"index.dir={bundled_subset}", "search", "capital of Switzerland", "-k", "3",
                 "--mode", mode)
    lines = [line for line in result.stdout.splitlines() if line.startswith("Doc ")]
    assert len(lines) == 3
    assert any(line.startswith(f'Doc {i}(Title: "Switzerland") Switzerland, officially') for i, line in
               enumerate(lines, start=1))
