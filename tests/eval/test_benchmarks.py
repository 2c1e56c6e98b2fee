"""Benchmark loaders: real FlashRAG files, malformed input (skip and count / clear error), missing files,
the HF-hub call, the FanOutQA flattening, and the KG held-out split."""

from __future__ import annotations

import json
import sys
import types

import pytest

from searchplay.config import Params
from searchplay.eval import benchmarks as bm
from searchplay.eval.benchmarks import (
    BenchmarkError,
    benchmark_file,
    is_heldout,
    kg_template_question,
    load_benchmark,
    load_fanoutqa,
    load_flashrag_jsonl,
    load_kg_heldout,
)

SIZES = {"nq": 1000, "triviaqa": 512, "popqa": 512, "hotpotqa": 1000, "2wikimultihopqa": 1000,
         "musique": 2417, "bamboogle": 125}


@pytest.mark.parametrize("name", list(SIZES))
def test_real_files_load_whole(benchmarks_dir, name):
    loaded = load_benchmark(name, Params.model_validate({"evaluate": {"data_dir": str(benchmarks_dir)}}))
    assert len(loaded.items) == SIZES[name] and loaded.num_skipped == 0
    assert loaded.source.endswith(f"{name}/{bm.SPLITS[name]}.jsonl")
    first = loaded.items[0]
    assert first.benchmark == name and first.question and first.golden_answers


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD = json.dumps({"id": "a", "question": "Q?", "golden_answers": ["x"]})
BAD_LINES = [
    ('{"id": "b", "question": "Q?", "golden_answers": ["x"]', "not valid JSON"),
    (json.dumps({"id": "c", "question": "Q?", "golden_answers": []}), "empty golden_answers"),
    (json.dumps({"id": "d", "question": "  ", "golden_answers": ["x"]}), "missing or empty question"),
    (json.dumps({"id": "e", "question": "Q?", "golden_answers": [""]}), "empty or non-string answer"),
    (json.dumps({"question": "Q?", "golden_answers": ["x"]}), "missing id"),
    (GOOD, "duplicate id"),
]


def test_malformed_lines_are_skipped_and_counted(tmp_path):
    path = _write(tmp_path / "nq" / "test.jsonl", [GOOD] + [line for line, _ in BAD_LINES])
    loaded = load_flashrag_jsonl(path, "nq", on_malformed="skip")
    assert [item.id for item in loaded.items] == ["a"]
    assert loaded.num_skipped == len(BAD_LINES)
    for _, reason in BAD_LINES:
        assert any(reason in key for key in loaded.skipped), reason


@pytest.mark.parametrize(("line", "reason"), BAD_LINES)
def test_malformed_line_is_a_clear_error_when_configured(tmp_path, line, reason):
    path = _write(tmp_path / "nq" / "test.jsonl", [GOOD, line])
    with pytest.raises(BenchmarkError, match=rf"test.jsonl:2: .*{reason}.*on_malformed"):
        load_flashrag_jsonl(path, "nq", on_malformed="error")


def test_missing_file_names_the_paths_and_the_fix(tmp_path):
    with pytest.raises(BenchmarkError, match=r"'hotpotqa'.*dev.jsonl.*test.jsonl.*data_dir"):
        benchmark_file(tmp_path, "hotpotqa")


def test_split_falls_back_to_the_other_file(tmp_path):
    path = _write(tmp_path / "nq" / "dev.jsonl", [GOOD])
    assert benchmark_file(tmp_path, "nq") == path


def test_hub_call_is_built_from_hub_id_and_split(monkeypatch):
    calls = []

    def load_dataset(path, name, split):
        calls.append((path, name, split))
        return [{"id": "test_0", "question": "who?", "golden_answers": ["me"]}, {"id": "test_1", "question": "q"}]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    params = Params.model_validate({"evaluate": {"hub_id": "RUC-NLPIR/FlashRAG_datasets"}})
    loaded = load_benchmark("hotpotqa", params)
    assert calls == [("RUC-NLPIR/FlashRAG_datasets", "hotpotqa", "dev")]
    assert [i.id for i in loaded.items] == ["test_0"] and loaded.num_skipped == 1
    assert loaded.source == "hf://RUC-NLPIR/FlashRAG_datasets/hotpotqa/dev"


def test_hub_without_datasets_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(BenchmarkError, match="pip install datasets"):
        bm.load_from_hub("RUC-NLPIR/FlashRAG_datasets", "nq")


def test_fanoutqa_flattening(fanoutqa_dev_path):
    loaded = load_fanoutqa(fanoutqa_dev_path)
    ids = [item.id for item in loaded.items]
    assert len(ids) == len(set(ids)) == 1250  # 1,266 string answers - 1 empty - 15 repeated sub-question ids
    assert loaded.skipped == {"golden_answers holds an empty or non-string answer": 1}
    by_id = {item.id: item for item in loaded.items}
    item = by_id["739617a754ded71f"]
    assert item.question == "What is the batting hand of Pat Burrell?" and item.golden_answers == ["Right"]
    assert item.metadata == {"parent_id": "7dcbbbdc7f1120cd", "evidence_title": "Pat Burrell"}
    assert "bca4ab7d1f4df703" not in by_id  # a list answer is not single-hop


def test_fanoutqa_unreadable_file(tmp_path):
    bad = tmp_path / "dev.json"
    bad.write_text("{")
    with pytest.raises(BenchmarkError, match="FanOutQA"):
        load_fanoutqa(bad)


SUBGRAPH = {"id": "sg-1", "answer": "Paris", "path": [{"id": "Q1", "label": "Emmanuel Macron", "description": ""},
                                                       {"id": "Q2", "label": "France", "description": ""},
                                                       {"id": "Q90", "label": "Paris", "description": ""}],
            "relations": [{"id": "P27", "label": "country of citizenship"}, {"id": "P36", "label": "capital"}],
            "waypoints": ["Emmanuel Macron", "France"], "num_hops": 2}


def test_kg_template_question_nests_relations():
    assert kg_template_question(SUBGRAPH) == "What is the capital of the country of citizenship of Emmanuel Macron?"


def test_heldout_split_is_deterministic_and_near_share():
    params = Params()
    ids = [f"sg-{i}" for i in range(4000)]
    held = [i for i in ids if is_heldout(i, params)]
    assert held == [i for i in ids if is_heldout(i, Params())]
    assert 0.08 < len(held) / len(ids) < 0.12
    none = Params.model_validate({"evaluate": {"kg_heldout_share": 0.0}})
    assert not any(is_heldout(i, none) for i in ids)


def test_kg_heldout_loader_keeps_only_heldout_subgraphs(tmp_path):
    params = Params.model_validate({"evaluate": {"kg_heldout_share": 0.5}})
    records = [{**SUBGRAPH, "id": f"sg-{i}"} for i in range(40)]
    path = _write(tmp_path / "subgraphs.jsonl", [json.dumps(r) for r in records] + ['{"id": "x"}'])
    loaded = load_kg_heldout(path, params)
    expected = [r["id"] for r in records if is_heldout(r["id"], params)]
    assert [i.id for i in loaded.items] == expected and 0 < len(expected) < 40
    assert loaded.items[0].golden_answers == ["Paris"]
    assert loaded.num_skipped == (1 if is_heldout("x", params) else 0)


def test_kg_heldout_missing_file(tmp_path):
    with pytest.raises(BenchmarkError, match="searchplay kg"):
        load_kg_heldout(tmp_path / "nope.jsonl", Params())
