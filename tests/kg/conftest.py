"""Shared kg fixtures: the bundled sample ingested once, and excerpt lines by id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchplay.assets import bundled_sample_path
from searchplay.kg.store import GraphStore, ingest_dump


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> GraphStore:
    store_dir = tmp_path_factory.mktemp("sample_store")
    ingest_dump(bundled_sample_path(), store_dir)
    return GraphStore(store_dir)


@pytest.fixture(scope="session")
def excerpt_objects(wikidata_excerpt: Path) -> dict[str, dict]:
    """The excerpt's entity objects by id (each line parsed on its own, as a dump reader does)."""
    lines = wikidata_excerpt.read_text(encoding="utf-8").splitlines()[1:-1]
    return {obj["id"]: obj for obj in (json.loads(line.rstrip(",")) for line in lines)}
