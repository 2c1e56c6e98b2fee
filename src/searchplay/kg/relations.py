"""Relation filter (Algorithm 1 line 5: "filtering outgoing edges of v_t via blocklist and allowlist").

The paper's lists are lost (§3.2 names none), so the defaults are ours, recorded in
docs/decisions/kg.md: datatypes that are identifiers, media or Wikimedia-internal are blocked
(``kg.blocked_datatypes``), plus the properties below (``kg.relation_blocklist`` adds to them,
``kg.use_default_blocklist: false`` drops them). "has part", "part of", "subclass of" stay walkable:
they are among the paper's top relations (B.3).
"""

from __future__ import annotations

from dataclasses import dataclass

from searchplay.kg.store import Edge

DEFAULT_BLOCKLIST: dict[str, str] = {
    # generic class membership: every item has one; "X is an instance of human/city" is a dead end
    "P31": "instance of",
    "P21": "sex or gender",
    # Wikimedia-internal: categories, portals, templates, lists, project maintenance
    "P910": "topic's main category", "P1151": "topic's main Wikimedia portal", "P1424": "topic's main template",
    "P301": "category's main topic", "P971": "category combines topics", "P4224": "category contains",
    "P1204": "Wikimedia portal's main topic", "P360": "is a list of", "P2354": "has list",
    "P1754": "category related to list", "P7084": "related category", "P3876": "category for alumni",
    "P1792": "category of associated people", "P1464": "category for people born here",
    "P1465": "category for people who died here", "P1791": "category of people buried here",
    "P1740": "category for films shot at this location", "P5008": "on focus list of Wikimedia project",
    "P6104": "maintained by WikiProject", "P5125": "Wikimedia outline", "P1687": "Wikidata property",
    "P2959": "permanent duplicated item", "P1343": "described by source", "P373": "Commons category",
    "P935": "Commons gallery", "P8687": "social media followers",
    # topic articles and disambiguation links: they point to pages about the node itself
    "P2184": "history of topic", "P2633": "geography of topic", "P8744": "economy of topic",
    "P1889": "different from", "P460": "said to be the same as", "P1659": "related properties",
    # names of the node itself: repeat its label, so they would leak the answer or be trivial
    "P1448": "official name", "P1705": "native label", "P1477": "birth name", "P1559": "name in native language",
    "P1813": "short name", "P1449": "nickname", "P2561": "name",
}


@dataclass(frozen=True)
class RelationFilter:
    """Which outgoing edges may be walked: datatype and property blocklists, optional allowlist."""

    blocked_properties: frozenset[str]
    blocked_datatypes: frozenset[str]
    allowed_properties: frozenset[str]  # empty: every property not blocked
    literal_datatypes: frozenset[str]  # literals of these datatypes may end a path

    @classmethod
    def from_config(cls, config) -> RelationFilter:
        blocked = set(config.relation_blocklist) | (set(DEFAULT_BLOCKLIST) if config.use_default_blocklist else set())
        return cls(frozenset(blocked), frozenset(config.blocked_datatypes), frozenset(config.relation_allowlist),
                   frozenset(config.literal_datatypes))

    def allows(self, edge: Edge) -> bool:
        if edge.property in self.blocked_properties or edge.datatype in self.blocked_datatypes:
            return False
        if self.allowed_properties and edge.property not in self.allowed_properties:
            return False
        return not edge.is_literal or edge.datatype in self.literal_datatypes
