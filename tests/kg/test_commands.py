"""`searchplay kg extract` end to end: bundled sample, the shared excerpt, bad dumps, the LLM selector."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from searchplay.cli import app
from searchplay.io import read_jsonl

CONTRACT = {"id", "seed_id", "answer", "answer_type", "path", "relations", "waypoints", "distractors", "num_hops",
            "num_nodes", "selector", "selector_model", "selector_replies"}


def _extract(tmp_path, *args):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["--set", f"kg.store_dir={tmp_path / 'store'}", "kg", "extract",
                                      "--out", str(out), *args])
    return result, out


def test_bundled_sample_random_selector(tmp_path):
    result, out = _extract(tmp_path, "--selector", "random", "--num-seeds", "100", "--seed", "3")
    assert result.exit_code == 0, result.output
    records = list(read_jsonl(out / "subgraphs.jsonl"))
    assert len(records) == 100 and all(set(r) == CONTRACT for r in records)
    assert [r["num_nodes"] for r in records] == sorted((r["num_nodes"] for r in records), reverse=True)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["subgraphs"] == 100 and stats["seed"] == 3 and stats["quality"]["success"]


def test_shared_excerpt_random_selector(tmp_path, wikidata_excerpt):
    result, out = _extract(tmp_path, "--dump", str(wikidata_excerpt), "--selector", "random", "--num-seeds", "10")
    assert result.exit_code == 0, result.output
    records = list(read_jsonl(out / "subgraphs.jsonl"))
    assert records and all(3 <= r["num_hops"] <= 7 for r in records)


def test_bad_dump_fails_with_message(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("[\n{not json},\n]\n")
    result, out = _extract(tmp_path, "--dump", str(empty), "--selector", "random")
    assert result.exit_code == 1 and "kg extract failed" in result.output
    assert not (out / "subgraphs.jsonl").exists()


@pytest.mark.slow
def test_bundled_sample_llm_selector(tmp_path, smollm2_path):
    result, out = _extract(tmp_path, "--selector", "llm", "--num-seeds", "3")
    assert result.exit_code == 0, result.output
    stats = json.loads((out / "stats.json").read_text())
    assert stats["extraction"]["selector_calls"] > 0
    for record in read_jsonl(out / "subgraphs.jsonl"):
        assert record["selector"] == "llm" and record["selector_replies"]
        assert all(reply.startswith('{"answer": ') for reply in record["selector_replies"])
