"""Wikidata entities as plain records: what the graph store keeps from one dump line.

Only English terms, the enwiki sitelink and the main snak of each statement are kept (qualifiers
and references are not walked by Algorithm 1). Deprecated statements are dropped; preferred ones
are ordered before normal ones. Unknown keys and datatypes are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from searchplay.kg.values import render_datavalue

RANKS = {"preferred": 2, "normal": 1}  # deprecated statements are dropped
SNAK_TEXT = {"somevalue": "unknown value", "novalue": "no value"}


@dataclass
class Statement:
    """One main snak: ``target`` is an entity id, else ``value`` is the rendered literal."""

    subject: str
    property: str
    datatype: str
    rank: int
    snaktype: str = "value"
    target: str | None = None
    value: str | None = None
    unit: str | None = None


@dataclass
class Entity:
    """An item or a property with its English label, description, aliases and statements."""

    id: str
    kind: str  # "item" or "property"
    label: str | None = None
    description: str | None = None
    aliases: list[str] = field(default_factory=list)
    enwiki: str | None = None
    datatype: str | None = None  # properties only
    statements: list[Statement] = field(default_factory=list)


def _english(terms: Any) -> str | None:
    entry = terms.get("en") if isinstance(terms, dict) else None
    return entry.get("value") if isinstance(entry, dict) else None


def parse_statement(subject: str, claim: dict[str, Any]) -> Statement | None:
    """A claim -> ``Statement``; None for deprecated ones and values of an unknown type."""
    rank = RANKS.get(claim.get("rank", "normal"))
    snak = claim.get("mainsnak") or {}
    if rank is None or "property" not in snak:
        return None
    snaktype = snak.get("snaktype", "value")
    statement = Statement(subject, snak["property"], snak.get("datatype", "unknown"), rank, snaktype)
    if snaktype in SNAK_TEXT:
        statement.value = SNAK_TEXT[snaktype]
        return statement
    if snaktype != "value" or not isinstance(snak.get("datavalue"), dict):
        return None
    try:
        statement.target, statement.value, statement.unit = render_datavalue(snak["datavalue"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None  # a malformed value of a known type: skip this statement, keep the entity
    if statement.target is None and statement.value is None:
        return None
    return statement


def parse_entity(obj: dict[str, Any]) -> Entity:
    """One dump object -> ``Entity``; raises ``ValueError`` when it has no id or type."""
    entity_id, kind = obj.get("id"), obj.get("type")
    if not isinstance(entity_id, str) or kind not in {"item", "property", "lexeme", "mediainfo"}:
        raise ValueError(f"not a Wikidata entity (id={entity_id!r}, type={kind!r})")
    aliases = obj.get("aliases") or {}
    sitelink = (obj.get("sitelinks") or {}).get("enwiki") if isinstance(obj.get("sitelinks"), dict) else None
    entity = Entity(
        id=entity_id, kind=kind, label=_english(obj.get("labels")), description=_english(obj.get("descriptions")),
        aliases=[a["value"] for a in aliases.get("en", []) if isinstance(a, dict)] if isinstance(aliases, dict) else [],
        enwiki=sitelink.get("title") if isinstance(sitelink, dict) else None, datatype=obj.get("datatype"),
    )
    claims = obj.get("claims") or {}
    for group in claims.values() if isinstance(claims, dict) else []:
        for claim in group if isinstance(group, list) else []:
            statement = parse_statement(entity_id, claim) if isinstance(claim, dict) else None
            if statement is not None:
                entity.statements.append(statement)
    entity.statements.sort(key=lambda s: (s.property, -s.rank))
    return entity
