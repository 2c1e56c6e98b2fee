"""The bundled sample: size, real format, >=300 entities, >=80% with a bundled Wikipedia article, reproducible."""

from __future__ import annotations

import json

from searchplay.kg import build_sample
from searchplay.kg.readers import bundled_sample_path


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
    build_sample.write_dump(build_sample.build(), out)
    assert out.read_bytes() == bundled_sample_path().read_bytes()
