"""SPARQL/EntityData reader with recorded responses (respx); never the live service."""

from __future__ import annotations

import httpx
import pytest
import respx

from searchplay.kg.readers import DumpError
from searchplay.kg.sparql import SparqlReader, ingest_source
from searchplay.kg.store import GraphStore

ENDPOINT = "https://query.wikidata.org/sparql"
ENTITY_URL = "https://www.wikidata.org/wiki/Special:EntityData/{id}.json"


@respx.mock
def test_pull_around_seed_into_store(tmp_path, excerpt_objects):
    for entity_id in ["Q42", "Q145", "Q84", "P31"]:
        respx.get(ENTITY_URL.format(id=entity_id)).mock(
            return_value=httpx.Response(200, json={"entities": {entity_id: excerpt_objects[entity_id]}}))
    respx.get(ENTITY_URL.format(id="Q350")).mock(return_value=httpx.Response(404, text="not found"))
    bindings = [{"o": {"type": "uri", "value": f"http://www.wikidata.org/entity/{q}"}} for q in ["Q145", "Q350"]]
    respx.get(ENDPOINT).mock(return_value=httpx.Response(200, json={"head": {"vars": ["o"]},
                                                                    "results": {"bindings": bindings}}))
    respx.get(url__regex=r"https://www\.wikidata\.org/wiki/Special:EntityData/P\d+\.json").mock(
        return_value=httpx.Response(404))
    reader = SparqlReader(ENDPOINT, ["Q42"], hops=1)
    report = ingest_source(reader, tmp_path)
    store = GraphStore(tmp_path)
    assert {"Q42", "Q145"} <= {i for i, _l, _w in store.items()}
    assert report.entities == 3 and report.bad_lines >= 1  # Q42, Q145 and property P31; Q350 404 counted
    query = respx.calls[1].request.url.params["query"]
    assert "wd:Q42" in query


@respx.mock
def test_nothing_pulled_is_a_clear_error(tmp_path):
    respx.get(url__regex=r".*Special:EntityData.*").mock(return_value=httpx.Response(500))
    respx.get(ENDPOINT).mock(return_value=httpx.Response(200, json={"results": {"bindings": []}}))
    with pytest.raises(DumpError, match="no usable entity"):
        ingest_source(SparqlReader(ENDPOINT, ["Q1"], hops=1), tmp_path)
    with pytest.raises(DumpError, match="sparql_seeds"):
        SparqlReader(ENDPOINT, [])
