"""The bundled sample: size, real format, >=300 entities, >=80% with a bundled Wikipedia article, reproducible."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from searchplay.assets import bundled_sample_path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_kg_sample.py"


def load_builder():
    spec = importlib.util.spec_from_file_location("build_kg_sample", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _items():
    lines = bundled_sample_path().read_text(encoding="utf-8").splitlines()
    assert lines[0] == "[" and lines[-1] == "]"
    return [json.loads(line.rstrip(",")) for line in lines[1:-1]]


def test_sample_size_and_count():
    assert bundled_sample_path().stat().st_size <= 2_000_000
    items = [e for e in _items() if e["type"] == "item"]
    assert len(items) >= 300
    assert all(e["id"].startswith("Q") and e["labels"]["en"]["value"] for e in items)


def test_sample_entities_have_bundled_articles(wiki_summaries_path):
    titles = set(json.loads(wiki_summaries_path.read_text(encoding="utf-8")))
    items = [e for e in _items() if e["type"] == "item"]
    share = sum(e["sitelinks"]["enwiki"]["title"] in titles for e in items) / len(items)
    assert share >= 0.8, f"only {share:.1%} of sample entities have a bundled Wikipedia summary"


def test_generator_reproduces_committed_file(tmp_path):
    out = tmp_path / "sample.json"
    builder = load_builder()
    builder.write_dump(builder.build(), out)
    assert out.read_bytes() == bundled_sample_path().read_bytes()
