"""SPARQL/REST reader for small online pulls around given seeds (never used at run time by default).

Entities come from the Wikibase REST-style ``Special:EntityData/<id>.json`` (the same JSON as a dump
line, so ``parse_entity`` reads them); the SPARQL endpoint finds the seeds' out-neighbours so the
pull can grow ``hops`` steps. Tests use recorded responses (respx), never the live service.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from searchplay.kg.entities import Entity, parse_entity
from searchplay.kg.readers import DumpError, ReadReport
from searchplay.kg.store import STORE_FILE, _index, write_entities

ENTITY_DATA = "https://www.wikidata.org/wiki/Special:EntityData/{id}.json"
NEIGHBOURS = "SELECT DISTINCT ?o WHERE {{ VALUES ?s {{ {values} }} ?s ?p ?o . FILTER(STRSTARTS(STR(?o), " \
             "\"http://www.wikidata.org/entity/Q\")) }} LIMIT {limit}"
USER_AGENT = "searchplay/0.1 (https://github.com/searchplay; research use)"


class SparqlReader:
    """Pull the seeds, their out-neighbours up to ``hops`` away, and the properties used."""

    def __init__(self, endpoint: str, seeds: list[str], hops: int = 2, max_entities: int = 2000,
                 entity_url: str = ENTITY_DATA, client=None):
        import httpx

        if not seeds:
            raise DumpError("kg.source=sparql needs kg.sparql_seeds (item ids such as Q42)")
        self.endpoint, self.seeds, self.hops, self.max_entities = endpoint, seeds, hops, max_entities
        self.entity_url = entity_url
        self.client = client or httpx.Client(headers={"User-Agent": USER_AGENT}, timeout=60.0)
        self.report = ReadReport(source=endpoint)

    def neighbours(self, ids: list[str], limit: int) -> list[str]:
        """Item ids that ``ids`` point to (one SPARQL query)."""
        query = NEIGHBOURS.format(values=" ".join(f"wd:{i}" for i in ids), limit=limit)
        response = self.client.get(self.endpoint, params={"query": query, "format": "json"},
                                   headers={"Accept": "application/sparql-results+json"})
        response.raise_for_status()
        return [b["o"]["value"].rsplit("/", 1)[-1] for b in response.json()["results"]["bindings"]]

    def fetch(self, entity_id: str) -> Entity | None:
        """One entity from Special:EntityData; a failed or malformed response is counted as bad."""
        self.report.lines += 1
        response = self.client.get(self.entity_url.format(id=entity_id))
        try:
            response.raise_for_status()
            entities = response.json()["entities"]
            entity = parse_entity(entities.get(entity_id) or next(iter(entities.values())))
        except Exception as exc:  # any bad response is skipped and reported
            self.report.bad(self.report.lines, response.content, type(exc).__name__)
            return None
        self.report.entities += 1
        return entity

    def entities(self) -> Iterator[Entity]:
        seen, frontier, properties = set(), list(self.seeds), set()
        for hop in range(self.hops + 1):
            next_frontier = []
            for entity_id in frontier:
                if entity_id in seen or len(seen) >= self.max_entities:
                    continue
                seen.add(entity_id)
                entity = self.fetch(entity_id)
                if entity is None:
                    continue
                properties.update(s.property for s in entity.statements)
                yield entity
            if hop < self.hops and frontier:
                next_frontier = [i for i in self.neighbours(frontier, self.max_entities) if i not in seen]
            frontier = next_frontier
        for prop in sorted(properties - seen):
            entity = self.fetch(prop)
            if entity is not None:
                yield entity


def ingest_source(source, store_dir: str | Path, batch_size: int = 5000) -> ReadReport:
    """Write any ``EntitySource`` into ``store_dir`` (same layout and overwrite rule as ``ingest_dump``)."""
    final = Path(store_dir) / STORE_FILE
    final.parent.mkdir(parents=True, exist_ok=True)
    final.unlink(missing_ok=True)
    try:
        write_entities(final, source.entities(), batch_size)
        if source.report.entities == 0:
            raise DumpError(f"{source.report.source}: no usable entity was pulled; {source.report.summary()}",
                            retryable=True)  # an endpoint that is down or rate-limits answers nothing, and may recover
    except BaseException:
        final.unlink(missing_ok=True)
        raise
    _index(final)
    return source.report
