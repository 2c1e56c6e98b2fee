from __future__ import annotations

from searchplay.config import KGConfig
from searchplay.kg.relations import DEFAULT_BLOCKLIST, RelationFilter
from searchplay.kg.store import Edge


def _edge(prop="P17", datatype="wikibase-item", target="Q1"):
    return Edge(prop, prop, datatype, 1, target, "x", "")


def test_default_filter_blocks_ids_media_generic_and_internal():
    f = RelationFilter.from_config(KGConfig())
    assert f.allows(_edge("P17"))
    assert not f.allows(_edge("P31"))  # instance of: generic
    assert not f.allows(_edge("P910"))  # topic's main category: Wikimedia-internal
    assert not f.allows(_edge("P214", "external-id", None))
    assert not f.allows(_edge("P18", "commonsMedia", None))
    assert f.allows(_edge("P569", "time", None)) and f.allows(_edge("P2044", "quantity", None))
    assert not f.allows(_edge("P1448", "monolingualtext", None))
    assert not f.allows(_edge("P395", "string", None))  # strings are codes, not answers (literal_datatypes)
    assert {"P279", "P361", "P527"}.isdisjoint(DEFAULT_BLOCKLIST)  # B.3's top relations stay walkable


def test_params_blocklist_allowlist_and_default_toggle():
    f = RelationFilter.from_config(KGConfig(relation_blocklist=["P17"], relation_allowlist=["P17", "P36"]))
    assert not f.allows(_edge("P17")) and f.allows(_edge("P36")) and not f.allows(_edge("P47"))
    assert RelationFilter.from_config(KGConfig(use_default_blocklist=False)).allows(_edge("P31"))
