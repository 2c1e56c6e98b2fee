"""`searchplay evaluate` for real: the bundled SmolLM2, a small real LanceDB index of Wikipedia lead
sections (MiniLM embeddings), Bamboogle and NQ from data/benchmarks, then `searchplay report`."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

PASSAGES = 50


@pytest.fixture(scope="module")
def small_index(tmp_path_factory, wiki_summaries_path, minilm_path):
    from searchplay.config import Params
    from searchplay.io import write_jsonl
    from searchplay.retrieval.corpus import CorpusReport, read_wiki_summaries
    from searchplay.retrieval.embedder import Embedder
    from searchplay.retrieval.index import build_index

    root = tmp_path_factory.mktemp("index")
    report = CorpusReport(str(wiki_summaries_path))
    passages = itertools.islice(read_wiki_summaries(wiki_summaries_path, report), PASSAGES)
    write_jsonl(root / "passages.jsonl", (p.to_dict() for p in passages))
    embedder = Embedder.from_params(Params())
    build_index(root / "passages.jsonl", root / "index", "passages", embedder, ann_threshold=10**6, fts=False,
                show_progress=False)
    return root / "index"


def test_evaluate_then_report(tmp_path, monkeypatch, small_index, benchmarks_dir, smollm2_path):
    from searchplay.cli import app

    monkeypatch.chdir(tmp_path)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump({
        "index": {"dir": str(small_index)},
        "agent": {"max_turn_tokens": 48},
        "evaluate": {"max_turns": 2, "batch_size": 3},
        "selfplay": {"checkpoint_dir": str(tmp_path / "checkpoints")},
        "tracking": {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    }))
    runner = CliRunner()
    result = runner.invoke(app, ["--params", str(params_file), "evaluate", "--benchmarks", "bamboogle,nq",
                                 "--data-dir", str(benchmarks_dir), "--n", "3", "--seed", "0",
                                 "--out", str(tmp_path / "eval"), "--variant", "base"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    out = tmp_path / "eval" / "base"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["bamboogle.n"] == 3 and metrics["nq.n"] == 3 and "avg.judge_acc" in metrics
    assert metrics["nq.em_ci_low"] <= metrics["nq.em"] <= metrics["nq.em_ci_high"]
    assert "judge: exact-match" in (out / "report.md").read_text()
    assert "[kg_wcr_table1]" in (out / "report.md").read_text()
    assert (out / "charts" / "bamboogle.png").exists() and (out / "charts" / "nq.png").exists()
    records = [json.loads(line) for line in (out / "predictions" / "bamboogle.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["judge_model"] == "exact-match" for r in records)
    assert all(r["model"] == "bundled:smollm2" and r["output"] for r in records)  # the params id, not a path

    result = runner.invoke(app, ["report", "--eval-dir", str(tmp_path / "eval"), "--out", str(tmp_path / "compare")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "compare" / "compare.png").exists()
