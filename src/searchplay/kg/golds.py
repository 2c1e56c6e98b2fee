"""Every answer the KG gives to a path's question, and the rules that make ``kg_heldout`` a fair test.

A path e0 -r1-> e1 -r2-> ... -rK-> eK is asked as a template question that names e0 and the relation
chain r1..rK, not the waypoints. Where a hop is one-to-many (France *shares border with* eight
countries), the walk picked one value, but the question admits every entity the chain reaches:
``path_answers`` follows the chain from e0 through every truthy value (Wikidata's best rank per
property) and returns all of them. ``heldout_questions`` then keeps the held-out questions a single
answer can be scored on: at most ``max_golds`` correct answers each (more is not asked), and no
answer the gold of more than ``max_answer_share`` of the questions (the surplus is not asked).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from searchplay.kg.store import Edge, GraphStore


def truthy_values(edges: Iterable[Edge], property_id: str) -> list[Edge]:
    """The best-ranked values of ``property_id`` among ``edges`` (Wikidata's "truthy" statements).

    >>> e = lambda label, rank: Edge("P47", "shares border with", "wikibase-item", rank, "Q" + label, label, "")
    >>> [v.label for v in truthy_values([e("a", 1), e("b", 2), e("c", 2)], "P47")]
    ['b', 'c']
    """
    values = [edge for edge in edges if edge.property == property_id]
    if not values:
        return []
    best = max(edge.rank for edge in values)
    return [edge for edge in values if edge.rank == best]


def path_answers(store: GraphStore, seed_id: str, property_ids: list[str], limit: int = 64) -> list[str]:
    """Labels of every entity or literal that the relation chain reaches from ``seed_id``, in walk order.

    Each hop follows every truthy value of its property from every node of the frontier; literals end
    the walk. The frontier is cut at ``limit`` nodes (a question with that many answers is not asked).
    """
    frontier, answers = [seed_id], []
    for hop, property_id in enumerate(property_ids):
        last = hop == len(property_ids) - 1
        reached: dict[str, str] = {}
        for node_id in frontier:
            for edge in truthy_values(store.outgoing(node_id), property_id):
                key = edge.target or f"literal:{edge.label}"
                reached.setdefault(key, edge.label)
        if last:
            answers = list(dict.fromkeys(reached.values()))
        frontier = [key for key in reached if not key.startswith("literal:")][:limit]
        if not frontier and not last:
            return []
    return answers


def with_answers(store: GraphStore, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``answers``: its own ``answer`` first, then every other answer the KG gives."""
    found = path_answers(store, str(record["seed_id"]), [r["id"] for r in record["relations"]])
    return {**record, "answers": list(dict.fromkeys([str(record["answer"]), *found]))}


def cap_answer_share(records: list[dict[str, Any]], max_share: float) -> list[dict[str, Any]]:
    """The records, in order, without the surplus of any answer that golds more than ``max_share`` of them.

    A question counts once for each of its golds (``answers``). The cap is a share of the questions
    kept, so dropping repeats until it holds; a record is dropped when one of its golds is already at
    the cap. Deterministic: earlier records are kept first.

    >>> rs = [{"answers": [a]} for a in "EEEEABCDFGHIJ"]
    >>> [r["answers"][0] for r in cap_answer_share(rs, 0.1)]
    ['E', 'A', 'B', 'C', 'D', 'F', 'G', 'H', 'I', 'J']
    """
    kept = list(records)
    while True:
        limit = max(1, math.floor(max_share * len(kept) + 1e-9))
        counts: Counter[str] = Counter()
        survivors = []
        for record in kept:
            golds = set(record["answers"])
            if any(counts[gold] >= limit for gold in golds):
                continue
            counts.update(golds)
            survivors.append(record)
        if len(survivors) == len(kept):
            return kept
        kept = survivors


def heldout_questions(records: list[dict[str, Any]], max_golds: int,
                      max_answer_share: float) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The held-out records that are asked, and how many were not asked, by reason.

    Not asked: more than ``max_golds`` correct answers (a one-to-many chain that admits too many), then
    the surplus of an over-represented answer (``cap_answer_share``).
    """
    scorable = [r for r in records if len(r["answers"]) <= max_golds]
    kept = cap_answer_share(scorable, max_answer_share)
    return kept, {"too_many_golds": len(records) - len(scorable), "answer_share_cap": len(scorable) - len(kept)}


def answer_share(records: list[dict[str, Any]]) -> tuple[str | None, float]:
    """The answer that golds the most questions, and that share (each question counted once per gold)."""
    counts = Counter(gold for r in records for gold in set(r["answers"]))
    if not counts:
        return None, 0.0
    answer, count = counts.most_common(1)[0]
    return answer, count / len(records)
