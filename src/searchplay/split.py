"""The three-way split of the KG subgraph pool (self-play seeds | warm-start demos | kg_heldout).

Every subgraph belongs to exactly one split, decided by a hash of the id it is given (the kg stage gives its
seed entity's, so every path from one seed lands in one split; it never moves between runs, machines or pool
sizes). The kg stage also drops a training path that walks through a held-out seed (``kg.heldout_isolation``):

* ``kg_heldout``: the evaluation benchmark; no model stage ever trains on it;
* ``warmstart``: the format warm-start's demos (``searchplay.warmstart``);
* ``selfplay``: the Proposer seeds of self-play.

The kg stage writes each record's split into ``subgraphs.jsonl`` and the counts into ``stats.json``
(checked by a Great Expectations expectation); the model stages only read the field. This module
lives below every stage because all of them share it (docs/architecture.md, "Package floors").
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

Split = Literal["selfplay", "warmstart", "kg_heldout"]
SPLITS: tuple[Split, ...] = ("selfplay", "warmstart", "kg_heldout")
SALT = "searchplay-kg-heldout"  # fixed: the held-out share keeps the ids it had before the three-way split


def hash_fraction(subgraph_id: str) -> float:
    """The first 8 bytes of sha256(salt:id) as a fraction in [0, 1)."""
    digest = hashlib.sha256(f"{SALT}:{subgraph_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_of(subgraph_id: str, heldout_share: float, warmstart_share: float) -> Split:
    """The split of one subgraph: [0, heldout) held out, [heldout, heldout + warmstart) warm-start, else self-play.

    >>> [split_of(i, 0.1, 0.4) for i in ("Q1", "Q3")], split_of("Q1", 0.0, 0.0)
    (['warmstart', 'selfplay'], 'selfplay')
    """
    if heldout_share < 0 or warmstart_share < 0 or heldout_share + warmstart_share > 1:
        raise ValueError(f"split shares must be >= 0 and sum to <= 1; got heldout {heldout_share}, "
                         f"warmstart {warmstart_share}")
    fraction = hash_fraction(subgraph_id)
    if fraction < heldout_share:
        return "kg_heldout"
    if fraction < heldout_share + warmstart_share:
        return "warmstart"
    return "selfplay"


def record_split(record: dict[str, Any], where: str = "subgraphs.jsonl") -> Split:
    """The ``split`` field of a subgraph record; a clear error for pools written before the split existed, and for
    a line that is no record at all."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a line holds {type(record).__name__} {str(record)[:40]!r}, not a subgraph "
                         "record; regenerate the pool with `searchplay kg extract`")
    split = record.get("split")
    if split not in SPLITS:
        raise ValueError(f"{where}: subgraph {record.get('id')!r} has split {split!r}, expected one of {SPLITS}; "
                         "regenerate the pool with `searchplay kg extract`")
    return split


def split_counts(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Subgraphs per split (every split named, zeros included), for ``stats.json``."""
    counts = Counter(record_split(r) for r in records)
    return {name: counts.get(name, 0) for name in SPLITS}


def majority_answer(records: Iterable[dict[str, Any]], splits: Iterable[str] = ("selfplay", "warmstart")) -> str | None:
    """The most common answer among the training splits' subgraphs (ties: the first seen); None if none.

    Always answering it is the floor any KG score must clear (the majority baseline of ``kg_heldout``).
    """
    wanted = set(splits)
    counts = Counter(str(r["answer"]) for r in records if record_split(r) in wanted)
    return counts.most_common(1)[0][0] if counts else None
