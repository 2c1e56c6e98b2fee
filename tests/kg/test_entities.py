"""Datavalue rendering, ranks and snak types on real dump lines (the Wikidata test excerpt beside the repository)."""

from __future__ import annotations

from collections import Counter

from searchplay.kg.entities import parse_entity


def _values(entity, prop):
    return [s.value or s.target for s in entity.statements if s.property == prop]


def test_every_datatype_rendered_on_real_lines(excerpt_objects):
    adams = parse_entity(excerpt_objects["Q42"])
    assert adams.label == "Douglas Adams" and adams.enwiki == "Douglas Adams"
    assert "Douglas Noël Adams" in adams.aliases or adams.aliases
    assert _values(adams, "P569") == ["11 March 1952"]  # time, day precision
    assert _values(adams, "P27") == ["Q145"]  # wikibase-item
    assert _values(adams, "P1477") == ["Douglas Noel Adams"]  # monolingualtext
    assert _values(adams, "P856") == ["http://douglasadams.com/"]  # url
    assert "Douglas adams portrait cropped.jpg" in _values(adams, "P18")  # commonsMedia
    height = next(s for s in adams.statements if s.property == "P2048")  # quantity with unit
    assert (height.value, height.unit) == ("1.96", "Q11573")
    datatypes = Counter(s.datatype for e in excerpt_objects.values() for s in parse_entity(e).statements)
    for datatype in ["wikibase-item", "time", "quantity", "monolingualtext", "string", "external-id", "url",
                     "commonsMedia", "globe-coordinate"]:
        assert datatypes[datatype] > 0, datatype
    berlin = parse_entity(excerpt_objects["Q64"])
    coordinate = next(s for s in berlin.statements if s.property == "P625")
    assert coordinate.value.endswith("°E") and "°N" in coordinate.value


def test_somevalue_and_novalue_kept_as_text(excerpt_objects):
    belgium = parse_entity(excerpt_objects["Q31"])
    somevalue = [s for s in belgium.statements if s.property == "P1589"]
    assert somevalue and somevalue[0].snaktype == "somevalue" and somevalue[0].value == "unknown value"
    novalue = [s for s in parse_entity(excerpt_objects["Q35"]).statements if s.property == "P3238"]
    assert novalue and novalue[0].snaktype == "novalue" and novalue[0].target is None


def test_deprecated_dropped_and_preferred_first(excerpt_objects):
    kept = sum(len(parse_entity(o).statements) for o in excerpt_objects.values())
    raw = [c for o in excerpt_objects.values() for g in o.get("claims", {}).values() for c in g]
    assert sum(c["rank"] == "deprecated" for c in raw) == 15
    assert kept <= len(raw) - 15
    for obj in excerpt_objects.values():
        entity = parse_entity(obj)
        assert all(s.rank in (1, 2) for s in entity.statements)
        for prop in {s.property for s in entity.statements}:
            ranks = [s.rank for s in entity.statements if s.property == prop]
            assert ranks == sorted(ranks, reverse=True)
    with_preferred = [s for o in excerpt_objects.values() for s in parse_entity(o).statements if s.rank == 2]
    assert len(with_preferred) == 85


def test_unknown_keys_and_datatypes_ignored(excerpt_objects):
    obj = dict(excerpt_objects["Q42"], future_key={"x": 1})
    obj["claims"] = dict(obj["claims"], P9999=[{"rank": "normal", "mainsnak": {
        "snaktype": "value", "property": "P9999", "datatype": "entity-schema-2030",
        "datavalue": {"type": "brand-new-type", "value": {"x": 1}}}}])
    entity = parse_entity(obj)
    assert entity.label == "Douglas Adams"
    assert not [s for s in entity.statements if s.property == "P9999"]


def test_property_entity_carries_label_and_datatype(excerpt_objects):
    prop = parse_entity(excerpt_objects["P31"])
    assert (prop.kind, prop.label, prop.datatype) == ("property", "instance of", "wikibase-item")
