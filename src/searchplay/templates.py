"""Template questions from KG paths: the kg_heldout benchmark's questions and the warm-start's demos.

A path e0 -r1-> e1 -r2-> e2 becomes "What is <r2 phrase of <r1 phrase of e0>>?", e.g. "What is the
continent of the country of Ravenna?". Each Wikidata property gets an English phrase that names the
tail from the head ("capital of": "the territory whose capital is X", never "the capital of of X");
properties without an entry fall back to "the <label> of X" with the label's own trailing
preposition dropped. Questions are deterministic, so evaluation and demos never move between runs.
"""

from __future__ import annotations

import re
from typing import Any

# Phrases for the properties of the bundled sample (docs/kg_sample.md) and the most common in the dump.
RELATION_PHRASES: dict[str, str] = {
    "country": "the country of {x}",
    "shares border with": "a country bordering {x}",
    "continent": "the continent of {x}",
    "located in or next to body of water": "the body of water next to {x}",
    "located in the administrative territorial entity": "the administrative region containing {x}",
    "subclass of": "the broader class of {x}",
    "instance of": "the kind of thing {x} is",
    "official language": "the official language of {x}",
    "member of": "an organization that {x} is a member of",
    "capital": "the capital of {x}",
    "capital of": "the territory whose capital is {x}",
    "place of birth": "the birthplace of {x}",
    "place of death": "the place where {x} died",
    "mouth of the watercourse": "the body of water that {x} flows into",
    "author": "the author of {x}",
    "location": "the location of {x}",
    "part of": "the larger whole that {x} is part of",
    "has part(s)": "a part of {x}",
    "notable work": "a notable work of {x}",
    "student of": "the teacher of {x}",
    "educated at": "the institution where {x} was educated",
    "award received": "an award received by {x}",
    "country of citizenship": "the country of citizenship of {x}",
    "currency": "the currency of {x}",
    "founded by": "the founder of {x}",
    "language of work or name": "the language of {x}",
    "creator": "the creator of {x}",
    "location of formation": "the place where {x} was formed",
    "highest point": "the highest point of {x}",
    "headquarters location": "the headquarters location of {x}",
    "director": "the director of {x}",
    "spouse": "the spouse of {x}",
    "father": "the father of {x}",
    "mother": "the mother of {x}",
    "child": "a child of {x}",
    "sibling": "a sibling of {x}",
    "employer": "the employer of {x}",
    "genre": "the genre of {x}",
    "occupation": "the occupation of {x}",
    "inception": "the date when {x} was founded",
    "date of birth": "the date of birth of {x}",
    "date of death": "the date of death of {x}",
    "population": "the population of {x}",
}

_TRAILING_PREPOSITION = re.compile(r"\s+(of|in|from|for|by|at|to|on|with)$", re.IGNORECASE)
_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)$")


def relation_phrase(label: str, inner: str) -> str:
    """The noun phrase naming the tail of ``label`` whose head is ``inner``.

    >>> relation_phrase("capital of", "Lima"), relation_phrase("mayor of", "Lima")
    ('the territory whose capital is Lima', 'the mayor of Lima')
    """
    label = " ".join(label.split())
    template = RELATION_PHRASES.get(label.casefold())
    if template is not None:
        return template.format(x=inner)
    noun = _TRAILING_PREPOSITION.sub("", label) or label
    return f"the {noun} of {inner}"


def entity_name(label: str) -> str:
    """A node label without a trailing disambiguation in parentheses: "Georgia (country)" -> "Georgia"."""
    return _DISAMBIGUATION.sub("", label).strip() or label


def template_question(subgraph: dict[str, Any]) -> str:
    """An English question whose answer is the path's last node, nesting each hop's relation phrase.

    >>> template_question({"path": [{"label": "Ravenna"}],
    ...                    "relations": [{"label": "country"}, {"label": "continent"}]})
    'What is the continent of the country of Ravenna?'
    """
    phrase = entity_name(str(subgraph["path"][0]["label"]))
    for relation in subgraph["relations"]:
        phrase = relation_phrase(str(relation["label"]), phrase)
    return f"What is {phrase}?"
