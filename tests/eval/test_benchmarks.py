"""Benchmark loaders: real FlashRAG files, malformed input (skip and count / clear error), missing files,
truncated files (always an error), the HF-hub call, the FanOutQA flattening, and the kg_heldout split with its
majority answer."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

from searchplay.config import Params
from searchplay.eval import benchmarks as bm
from searchplay.eval.benchmarks import (
    BenchmarkError,
    TruncatedBenchmarkError,
    benchmark_file,
    kg_majority_answer,
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


def test_status_lists_each_shipped_file_as_ok(benchmarks_dir):
    rows = bm.benchmark_status(Params.model_validate({"evaluate": {"data_dir": str(benchmarks_dir)}}))
    assert [name for name, _, _ in rows] == [f"benchmark {name}" for name in SIZES]  # not kg_heldout
    assert {state for _, state, _ in rows} == {"ok"}
    assert dict((n, d) for n, _, d in rows)["benchmark musique"].endswith("musique/dev.jsonl (2417 questions)")


def test_status_says_how_to_fix_a_missing_or_empty_file(tmp_path):
    (tmp_path / "nq").mkdir()
    (tmp_path / "nq" / "test.jsonl").write_text("\n")
    params = Params.model_validate({"evaluate": {"data_dir": str(tmp_path), "benchmarks": ["nq", "bamboogle"]}})
    (_, nq_state, nq_detail), (_, state, detail) = bm.benchmark_status(params)
    assert nq_state == "missing" and nq_detail.endswith("is empty")
    assert state == "missing" and "bamboogle/test.jsonl not found" in detail and "evaluate.data_dir" in detail
    hub = Params.model_validate({"evaluate": {"hub_id": "RUC-NLPIR/FlashRAG_datasets", "benchmarks": ["nq"]}})
    assert bm.benchmark_status(hub) == [("benchmark nq", "hub", "hf://RUC-NLPIR/FlashRAG_datasets/nq/test "
                                         "(needs the hub reachable and `pip install datasets`)")]


def test_default_data_dir_is_the_shipped_folder(repo_root):
    assert Params().evaluate.data_dir == "data/benchmarks"
    assert (repo_root / Params().evaluate.data_dir / "bamboogle" / "test.jsonl").is_file()
    assert Params().evaluate.benchmarks[-1] == "kg_heldout"


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD = json.dumps({"id": "a", "question": "Q?", "golden_answers": ["x"]})
BAD_LINES = [
    ('{"id": "b", "question": "Q?", "golden_answers": ["x"]', "not valid JSON"),
    (json.dumps({"id": "c", "question": "Q?", "golden_answers": []}), "empty golden_answers"),
    (json.dumps({"id": "f", "question": "Q?", "golden_answers": "x"}), "golden_answers is a str, not a list"),
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


def _cut(path, suffix):
    """The 30-question file at ``path`` (+ ``suffix``): compressed and cut in the middle, or its last line cut."""
    import bz2
    import gzip

    text = "".join(json.dumps({"id": f"q{i}", "question": f"Question {i}?", "golden_answers": [f"answer {i}"] * 5})
                   + "\n" for i in range(30)).encode()
    path = path.with_name(path.name + suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == "":
        path.write_bytes(text[:-20])  # the last line loses its end and its newline
        return path
    whole = gzip.compress(text) if suffix == ".gz" else bz2.compress(text)
    path.write_bytes(whole)
    assert len(load_flashrag_jsonl(path, "nq").items) == 30  # a whole compressed file reads
    path.write_bytes(whole[: len(whole) // 2])
    return path


@pytest.mark.parametrize(("suffix", "message"), [(".gz", "the compressed stream ends before its end-of-stream marker"),
                                                 (".bz2", "the compressed stream ends before its end-of-stream marker"),
                                                 ("", r"its last line \(30\) has no newline")])
@pytest.mark.parametrize("on_malformed", ["skip", "error"])
def test_truncated_file_fails_whatever_on_malformed_says(tmp_path, suffix, message, on_malformed):
    """a cut file is not a malformed last record to skip; the questions after the cut are lost."""
    path = _cut(tmp_path / "nq" / "test.jsonl", suffix)
    with pytest.raises(TruncatedBenchmarkError, match=rf"test\.jsonl{suffix} is truncated: {message}"):
        load_flashrag_jsonl(path, "nq", on_malformed=on_malformed)


def test_truncated_benchmark_exits_2_from_the_cli(tmp_path):
    from typer.testing import CliRunner

    from searchplay.cli import app

    _cut(tmp_path / "nq" / "test.jsonl", "")
    result = CliRunner().invoke(app, ["evaluate", "--variant", "base", "--benchmarks", "nq", "--data-dir",
                                      str(tmp_path), "--out", str(tmp_path / "out"), "--no-track"])
    unwrapped = "".join(result.output.split())  # rich breaks the long path wherever the terminal width falls
    assert result.exit_code == 2 and "test.jsonlistruncated" in unwrapped


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


def test_an_empty_benchmark_file_is_named(tmp_path):
    (tmp_path / "nq").mkdir()
    (tmp_path / "nq" / "test.jsonl").write_text("")
    with pytest.raises(BenchmarkError, match=r"nq[/\\]test\.jsonl: no records \(an empty file\?\)"):
        bm.load_flashrag_jsonl(tmp_path / "nq" / "test.jsonl", "nq")


def test_a_hub_split_not_cached_offline_says_how_to_load_it():
    assert os.environ["HF_HUB_OFFLINE"] == "1"  # as every searchplay command runs unless --online
    with pytest.raises(BenchmarkError, match=r"searchplay --online evaluate") as error:  # the real datasets library
        bm.load_from_hub("searchplay-tests/never-cached", "nq")
    from searchplay.cliutil import exit_code_for

    assert exit_code_for(error.value) == 2  # a retry finds the hub off the same way


def test_an_unreachable_hub_while_online_may_pass_so_it_is_not_an_input_error(monkeypatch):
    from searchplay.cliutil import exit_code_for

    def unreachable(path, name, split):
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (ConnectTimeout)")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=unreachable))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)  # searchplay --online
    with pytest.raises(bm.HubUnreachableError, match=r"could not be reached.*try again") as error:
        bm.load_from_hub("RUC-NLPIR/FlashRAG_datasets", "nq")
    assert exit_code_for(error.value) == 1  # a flow retries it; offline (above) it is exit 2
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # the same error with the hub off: exit 2
    with pytest.raises(BenchmarkError, match="searchplay --online evaluate") as offline:
        bm.load_from_hub("RUC-NLPIR/FlashRAG_datasets", "nq")
    assert exit_code_for(offline.value) == 2


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


SUBGRAPH = {"id": "sg-1", "answer": "Paris", "split": "kg_heldout",
            "path": [{"id": "Q1", "label": "Emmanuel Macron", "description": ""},
                     {"id": "Q2", "label": "France", "description": ""},
                     {"id": "Q90", "label": "Paris", "description": ""}],
            "relations": [{"id": "P27", "label": "country of citizenship"}, {"id": "P36", "label": "capital"}],
            "waypoints": ["Emmanuel Macron", "France"], "num_hops": 2}


def test_kg_template_question_is_the_shared_one():
    from searchplay import templates

    assert kg_template_question is templates.template_question
    assert kg_template_question(SUBGRAPH) == "What is the capital of the country of citizenship of Emmanuel Macron?"


def _pool(tmp_path, splits_and_answers, extra_lines=()):
    records = [{**SUBGRAPH, "id": f"sg-{i}", "split": split, "answer": answer}
               for i, (split, answer) in enumerate(splits_and_answers)]
    return _write(tmp_path / "subgraphs.jsonl", [json.dumps(r) for r in records] + list(extra_lines))


POOL = [("kg_heldout", "Paris"), ("selfplay", "Europe"), ("warmstart", "Europe"), ("kg_heldout", "Europe"),
        ("selfplay", "Asia"), ("kg_heldout", "Lima")]


def test_kg_heldout_loader_keeps_only_the_kg_heldout_split(tmp_path):
    loaded = load_kg_heldout(_pool(tmp_path, POOL))
    assert [i.id for i in loaded.items] == ["sg-0", "sg-3", "sg-5"]
    assert [i.golden_answers for i in loaded.items] == [["Paris"], ["Europe"], ["Lima"]]
    assert loaded.items[0].question.startswith("What is the capital of")
    assert loaded.items[0].metadata == {"num_hops": 2, "waypoints": ["Emmanuel Macron", "France"]}


def test_every_answer_the_kg_gives_is_a_gold(tmp_path):
    record = {**SUBGRAPH, "answers": ["Paris", "Lyon"]}  # a one-to-many hop admits both
    loaded = load_kg_heldout(_write(tmp_path / "subgraphs.jsonl", [json.dumps(record)]))
    assert loaded.items[0].golden_answers == ["Paris", "Lyon"]


def test_kg_heldout_malformed_lines_are_counted(tmp_path):
    path = _pool(tmp_path, POOL, ['{"id": "x", "split": "kg_heldout"}', "{oops", '{"id": "y", "split": "selfplay"}'])
    loaded = load_kg_heldout(path)
    assert len(loaded.items) == 3 and loaded.num_skipped == 2  # a training-split line is not looked at
    with pytest.raises(BenchmarkError, match=r"subgraphs\.jsonl:7"):
        load_kg_heldout(path, on_malformed="error")


def test_truncated_pool_fails(tmp_path):
    path = _pool(tmp_path, POOL)
    path.write_bytes(path.read_bytes()[:-25])
    with pytest.raises(TruncatedBenchmarkError, match=r"subgraphs\.jsonl is truncated: its last line \(6\)"):
        load_kg_heldout(path)
    with pytest.raises(TruncatedBenchmarkError, match="is truncated"):
        kg_majority_answer(path)


def test_pool_without_split_field_says_to_regenerate(tmp_path):
    path = _write(tmp_path / "subgraphs.jsonl", [json.dumps({k: v for k, v in SUBGRAPH.items() if k != "split"})])
    with pytest.raises(BenchmarkError, match="searchplay kg extract"):
        load_kg_heldout(path)
    with pytest.raises(BenchmarkError, match="searchplay kg extract"):
        kg_majority_answer(path)


def test_majority_answer_comes_from_the_training_splits(tmp_path):
    assert kg_majority_answer(_pool(tmp_path, POOL)) == "Europe"  # 2 of the 3 training records
    only_heldout = tmp_path / "heldout"
    assert kg_majority_answer(_pool(only_heldout, [("kg_heldout", "Paris")])) is None


def test_load_benchmark_reads_the_pool_under_kg_out_dir(tmp_path):
    _pool(tmp_path, POOL)
    loaded = load_benchmark("kg_heldout", Params.model_validate({"kg": {"out_dir": str(tmp_path)}}))
    assert len(loaded.items) == 3 and loaded.name == "kg_heldout"


def test_kg_heldout_missing_file(tmp_path):
    with pytest.raises(BenchmarkError, match="searchplay kg"):
        load_kg_heldout(tmp_path / "nope.jsonl", Params())
