"""Shared kg fixtures: the bundled sample ingested once, excerpt lines by id, a tiny synthetic dump."""

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


TINY_DUMP_ITEMS = 50


@pytest.fixture(scope="session")
def tiny_dump() -> bytes:
    """A Wikidata-format dump of 50 labelled items with enwiki sitelinks, each linking to the next (P50).

    Laid out as Wikidata's own: ``[`` first, one entity per line ending in ``,``, ``]`` last.
    """
    def item(n: int) -> bytes:
        target = {"type": "wikibase-entityid", "value": {"id": f"Q{(n + 1) % TINY_DUMP_ITEMS + 1}"}}
        claim = {"mainsnak": {"snaktype": "value", "property": "P50", "datatype": "wikibase-item",
                              "datavalue": target}, "rank": "normal"}
        label = {"en": {"language": "en", "value": f"Item {n}"}}
        return json.dumps({"type": "item", "id": f"Q{n + 1}", "labels": label,
                           "sitelinks": {"enwiki": {"site": "enwiki", "title": f"Item {n}"}},
                           "claims": {"P50": [claim]}}).encode()

    return b"[\n" + b",\n".join(item(n) for n in range(TINY_DUMP_ITEMS)) + b"\n]\n"
