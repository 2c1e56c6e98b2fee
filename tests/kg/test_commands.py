"""`searchplay kg extract` end to end: bundled sample, the shared excerpt, bad and truncated dumps (the previous
store and pool stay), the LLM selector."""

from __future__ import annotations

import bz2
import gzip
import json

import pytest
from typer.testing import CliRunner

from searchplay.cli import app
from searchplay.config import Params
from searchplay.io import read_jsonl
from searchplay.kg.store import GraphStore, ingest_dump

CONTRACT = {"id", "seed_id", "answer", "answer_type", "path", "relations", "waypoints", "distractors", "num_hops",
            "num_nodes", "selector", "selector_model", "selector_replies", "split", "answers"}


def _extract(tmp_path, *args):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["--set", f"kg.store_dir={tmp_path / 'store'}", "kg", "extract",
                                      "--out", str(out), *args])
    return result, out


def test_bundled_sample_random_selector(tmp_path):
    result, out = _extract(tmp_path, "--selector", "random", "--num-seeds", "100", "--seed", "3")
    assert result.exit_code == 0, result.output
    records = list(read_jsonl(out / "subgraphs.jsonl"))
    stats = json.loads((out / "stats.json").read_text())
    held_out = stats["split"]["kg_heldout"]
    assert len(records) == 100 - sum(held_out["not_asked"].values()) and all(set(r) == CONTRACT for r in records)
    assert [r["num_nodes"] for r in records] == sorted((r["num_nodes"] for r in records), reverse=True)
    assert stats["subgraphs"] == len(records) and stats["seed"] == 3 and stats["quality"]["success"]
    assert held_out["questions"] == stats["split"]["counts"]["kg_heldout"] > 0
    assert all(r["answer"] == r["answers"][0] for r in records)
    assert stats["ingest"]["source"] == "src/searchplay/data/kg_sample.json"  # committed: no machine path


def test_shared_excerpt_random_selector(tmp_path, wikidata_excerpt):
    result, out = _extract(tmp_path, "--dump", str(wikidata_excerpt), "--selector", "random", "--num-seeds", "10")
    assert result.exit_code == 0, result.output
    records = list(read_jsonl(out / "subgraphs.jsonl"))
    assert records and all(3 <= r["num_hops"] <= 7 for r in records)


def test_bad_dump_fails_with_message(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("[\n{not json},\n]\n")
    result, out = _extract(tmp_path, "--dump", str(empty), "--selector", "random")
    assert result.exit_code == 2 and "kg extract failed" in result.output  # a retry reads the same dump
    assert not (out / "subgraphs.jsonl").exists()


def _previous_run(tmp_path, tiny_dump):
    """An out folder as a finished run leaves it: store/graph.sqlite (50 entities), subgraphs.jsonl, stats.json."""
    out = tmp_path / "out"
    (tmp_path / "previous.json").write_bytes(tiny_dump)
    ingest_dump(tmp_path / "previous.json", out / "store")
    (out / "subgraphs.jsonl").write_text('{"id": "previous pool"}\n')
    (out / "stats.json").write_text('{"subgraphs": 1}\n')
    return out


def _assert_previous_run_intact(out):
    """The store still holds its 50 entities, the pool files are untouched, no staging folder or shard is left."""
    store = GraphStore(out / "store")
    assert store.count("entities") == 50
    store.close()
    assert sorted(p.name for p in out.iterdir()) == ["stats.json", "store", "subgraphs.jsonl"]
    assert [p.name for p in (out / "store").iterdir()] == ["graph.sqlite"]
    assert (out / "subgraphs.jsonl").read_text() == '{"id": "previous pool"}\n'


def test_missing_dump_keeps_the_previous_store(tmp_path, tiny_dump):
    """with a missing --dump path the store went from 63 entities to 0."""
    out = _previous_run(tmp_path, tiny_dump)
    result, _ = _extract(tmp_path, "--dump", str(tmp_path / "missing.json"), "--selector", "random")
    assert result.exit_code == 2 and "not a readable file" in result.output
    _assert_previous_run_intact(out)


def _message_lines(output: str) -> list[str]:
    """The lines a user reads, without the progress bar's."""
    return [line for line in output.splitlines() if line.strip() and "━" not in line]


def test_a_dump_with_many_bad_lines_fails_in_one_line(tmp_path, tiny_dump, caplog):
    """30% corrupt lines: one line with the counts, the setting and the first bad line (it was 14 lines, the
    examples printed twice)."""
    out = _previous_run(tmp_path, tiny_dump)
    lines = tiny_dump.splitlines(keepends=True)
    lines[1:-1] = [line[: len(line) // 2] + b"\n" if i % 3 == 0 else line for i, line in enumerate(lines[1:-1])]
    (tmp_path / "bad.json").write_bytes(b"".join(lines))
    result, _ = _extract(tmp_path, "--dump", str(tmp_path / "bad.json"), "--selector", "random")
    assert result.exit_code == 2, result.output
    assert len(_message_lines(result.output)) == 1, result.output
    assert "17 of 52 lines" in result.output and "kg.max_bad_line_share=1.0%" in result.output
    assert "the first is line 2: JSONDecodeError" in result.output
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # no second copy of the examples
    _assert_previous_run_intact(out)


def test_a_full_disk_fails_in_one_line_and_keeps_the_previous_store(tmp_path, tiny_dump, monkeypatch):
    """SQLite's own "database or disk is full" (a page limit stands in for the disk): one line naming the store
    and the free space, not a raw ``sqlite3.OperationalError`` traceback."""
    import sqlite3

    from searchplay.kg import store

    out = _previous_run(tmp_path, tiny_dump)

    class SmallDisk:
        OperationalError = sqlite3.OperationalError

        @staticmethod
        def connect(*args, **kwargs):
            db = sqlite3.connect(*args, **kwargs)
            db.execute("PRAGMA max_page_count = 4")
            return db

    monkeypatch.setattr(store, "sqlite3", SmallDisk)
    (tmp_path / "new.json").write_bytes(tiny_dump)
    result, _ = _extract(tmp_path, "--dump", str(tmp_path / "new.json"), "--selector", "random")
    monkeypatch.undo()
    assert result.exit_code == 1, result.output
    assert len(_message_lines(result.output)) == 1, result.output
    assert "writing the KG store" in result.output and "database or disk is full" in result.output
    assert "GiB free there" in result.output and "Traceback" not in result.output
    _assert_previous_run_intact(out)


def _cut_gzip(data: bytes) -> bytes:
    whole = gzip.compress(data)
    return whole[: len(whole) // 2]


def _cut_bz2(data: bytes) -> bytes:
    whole = bz2.compress(data)
    return whole[: len(whole) // 2]


TRUNCATIONS = {  # file name -> (how the tiny dump is cut, what the message says)
    "cut.json.gz": (_cut_gzip, "stream ends before its end-of-stream marker"),
    "cut.json.bz2": (_cut_bz2, "stream ends before its end-of-stream marker"),
    "no-bracket.json": (lambda data: data.removesuffix(b"]\n"), "not the closing ']'"),
    "partial.json": (lambda data: b"".join(data.splitlines(keepends=True)[1:-1])[:-40],
                     "its last line has no newline and does not parse"),
}


@pytest.mark.parametrize("name", list(TRUNCATIONS))
def test_truncated_dump_exits_2_and_keeps_the_previous_store(tmp_path, tiny_dump, name):
    out = _previous_run(tmp_path, tiny_dump)
    cut, message = TRUNCATIONS[name]
    (tmp_path / name).write_bytes(cut(tiny_dump))
    result, _ = _extract(tmp_path, "--dump", str(tmp_path / name), "--selector", "random")
    output = " ".join(result.output.split())  # rich wraps at the terminal width
    assert result.exit_code == 2, result.output
    assert "kg extract failed" in output and f"{name} is truncated" in output and message in output
    _assert_previous_run_intact(out)


def test_inputs_kg_extract_cannot_use_exit_2_not_the_retried_1(tmp_path):
    """A retry finds them the same way: no eligible seed in the dump, no dump named, no corpus to check against."""
    dump = tmp_path / "properties.json"
    dump.write_text('[\n{"type": "property", "id": "P31", "datatype": "wikibase-item", "labels": {"en": {"language": '
                    '"en", "value": "instance of"}}, "claims": {}}\n]\n')
    result, _ = _extract(tmp_path, "--dump", str(dump), "--selector", "random")
    assert result.exit_code == 2 and "no eligible seed" in " ".join(result.output.split()), result.output
    for settings, message in ((["kg.source=dump"], "needs kg.dump"),
                              (["kg.require_in_corpus=true", "corpus.source=jsonl",
                                f"corpus.out={tmp_path / 'absent.jsonl'}"], "run the corpus stage first")):
        sets = [arg for setting in settings for arg in ("--set", setting)]
        result = CliRunner().invoke(app, [*sets, "--set", f"kg.store_dir={tmp_path / 'store'}", "kg", "extract",
                                          "--out", str(tmp_path / "out"), "--selector", "random"])
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output


@pytest.mark.parametrize("where", ["extraction", "shard merge"])
def test_run_failing_midway_keeps_the_previous_store(tmp_path, tiny_dump, monkeypatch, where):
    """A crash after the new store was (partly) built: the old store, pool and stats stay; no staging, no shards."""
    from searchplay.kg import pipeline, store

    def crash(*args, **kwargs):
        raise RuntimeError(f"{where} crashed")

    monkeypatch.setattr(*(pipeline, "extract_subgraphs") if where == "extraction" else (store, "_merge"), crash)
    out = _previous_run(tmp_path, tiny_dump)
    (tmp_path / "new.json").write_bytes(tiny_dump.replace(b"Item", b"Thing"))
    params = Params.model_validate({"kg": {"selector": "random", "ingest_workers": 2 if where == "shard merge" else 1}})
    with pytest.raises(RuntimeError, match="crashed"):
        pipeline.run_extract(params, str(tmp_path / "new.json"), out)
    _assert_previous_run_intact(out)
    assert GraphStore(out / "store").node("Q1").label == "Item 0"


def test_a_pool_written_elsewhere_keeps_its_store_beside_it_not_in_the_projects(tmp_path, tiny_dump):
    """`kg extract --out DIR` without --dump wrote its store to kg.store_dir, the project's (a DVC output), so the
    project's pool no longer matched its store."""
    project = _previous_run(tmp_path, tiny_dump)  # kg.out_dir with its store, as the kg stage leaves it
    other = tmp_path / "other"
    result = CliRunner().invoke(app, ["--set", f"kg.out_dir={project}", "--set", f"kg.store_dir={project / 'store'}",
                                      "kg", "extract", "--out", str(other), "--selector", "random", "--num-seeds", "5"])
    assert result.exit_code == 0, result.output
    _assert_previous_run_intact(project)
    assert GraphStore(other / "store").count("entities") > 50 and len(list(read_jsonl(other / "subgraphs.jsonl"))) == 5


def test_successful_run_replaces_the_store(tmp_path, tiny_dump):
    from searchplay.assets import bundled_sample_path

    out = _previous_run(tmp_path, tiny_dump)
    result, _ = _extract(tmp_path, "--dump", str(bundled_sample_path()), "--selector", "random", "--num-seeds", "5")
    assert result.exit_code == 0, result.output
    assert GraphStore(out / "store").count("entities") > 50 and len(list(read_jsonl(out / "subgraphs.jsonl"))) == 5
    assert sorted(p.name for p in out.iterdir()) == ["stats.json", "store", "subgraphs.jsonl"]


@pytest.mark.slow
@pytest.mark.parametrize("constrained", [True, False])
def test_local_llm_selector_batched_real_model(sample_store, smollm2_path, constrained):
    """SmolLM2 picks relations for several seeds in one left-padded batch; constrained replies always parse,
    free replies parse or are counted."""
    import random

    from searchplay.config import KGConfig
    from searchplay.kg.extract import candidate_edges
    from searchplay.kg.relations import RelationFilter
    from searchplay.kg.selectors import LocalSelector, SelectionRequest

    relation_filter = RelationFilter.from_config(KGConfig())
    requests = []
    for label in ["Albert Einstein", "France", "Danube", "Hamlet"]:
        node = next(i for i, name, _ in sample_store.items() if name == label)
        edges = candidate_edges(sample_store, node, relation_filter, random.Random(0), {node}, {label.casefold()},
                                allow_literals=False, max_candidates=10)
        requests.append(SelectionRequest([label], [], "", edges))
    from searchplay.llm import load_backend

    selector = LocalSelector(load_backend(str(smollm2_path)), str(smollm2_path), max_retries=1, batch_size=4,
                             constrained=constrained)
    selections = selector.select(requests)
    assert len(selections) == 4
    for request, selection in zip(requests, selections, strict=True):
        if constrained:
            assert selection.replies == [f'{{"answer": {selection.choice}}}'] and not selection.invalid
            assert 0 <= selection.choice <= len(request.candidates)
            continue
        assert 1 <= len(selection.replies) <= 2 and selection.replies[0].startswith('{"answer": ')
        assert 0 <= selection.choice <= len(request.candidates)
        assert selection.invalid == (selection.choice == 0 and len(selection.replies) == 2
                                     and '"answer": 0' not in selection.replies[-1].replace(" ", ""))
