"""`searchplay kg extract` end to end: bundled sample, the shared excerpt, bad dumps, the LLM selector."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from searchplay.cli import app
from searchplay.io import read_jsonl

CONTRACT = {"id", "seed_id", "answer", "answer_type", "path", "relations", "waypoints", "distractors", "num_hops",
            "num_nodes", "selector", "selector_model", "selector_replies", "split"}


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
