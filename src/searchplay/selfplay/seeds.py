"""Proposer seeds: KG subgraph records (curriculum order) or SSP seed answers (shuffled), served from a cursor.

KG-paths paper §4.1 / App. D.5: subgraphs are presented in descending node count |V_sub| (the KG
stage writes them sorted; we keep that order, stably). SSP draws answers from a pre-defined answer set
(SSP §3.2); our embedded default has no separate SSP answer set, so the SSP Proposer is seeded with
the KG pool's answers unless ``ssp.seed_answers`` names a JSONL file (docs/decisions/selfplay.md).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchplay.io import InputError, read_jsonl
from searchplay.split import record_split

log = logging.getLogger(__name__)

KG_REQUIRED_FIELDS = ("id", "answer", "path", "relations", "waypoints", "num_nodes")


class SeedError(InputError, ValueError):
    """A seed file that cannot be used; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Seed:
    """One Proposer seed: the target answer a*, the KG waypoints (empty for plain answers), the record."""

    seed_id: str
    answer: str
    waypoints: tuple[str, ...] = ()
    num_hops: int | None = None  # SSP prompt's search count n (KG: the path's hop count K)
    record: dict[str, Any] | None = field(default=None, compare=False, repr=False)


def load_kg_seeds(kg_out_dir: str | Path, split: str | None = None) -> list[Seed]:
    """Subgraph records of ``<kg.out_dir>/subgraphs.jsonl`` as seeds, in descending ``num_nodes``.

    ``split`` keeps only that split's records (``searchplay.split``: self-play trains on ``'selfplay'``
    and never sees the warm-start or kg_heldout subgraphs); None keeps every record.
    """
    path = Path(kg_out_dir) / "subgraphs.jsonl"
    if not path.exists():
        raise SeedError(f"{path}: no KG subgraph pool; run `searchplay kg` first (or set kg.out_dir)")
    try:
        records = list(read_jsonl(path))
    except ValueError as exc:  # a line that does not parse: a cut or hand-edited pool
        raise SeedError(f"{exc}; regenerate the pool with `searchplay kg extract` (`dvc repro kg`)") from None
    seeds = []
    for number, record in enumerate(records, start=1):
        missing = [key for key in KG_REQUIRED_FIELDS if key not in record]
        if missing:
            raise SeedError(f"{path}:{number}: subgraph record lacks {missing}; regenerate with `searchplay kg`")
        seeds.append(Seed(seed_id=str(record["id"]), answer=str(record["answer"]),
                          waypoints=tuple(str(w) for w in record["waypoints"]),
                          num_hops=int(record.get("num_hops") or len(record["relations"])), record=record))
    if not seeds:
        raise SeedError(f"{path}: the subgraph pool is empty; run `searchplay kg` with more seeds")
    ordered = sorted(seeds, key=lambda s: -int(s.record["num_nodes"]))  # stable: ties keep file order
    if ordered != seeds:
        log.warning("%s is not sorted by num_nodes descending; sorting it for the curriculum", path)
    try:
        kept = [s for s in ordered if split is None or record_split(s.record, str(path)) == split]
    except ValueError as exc:
        raise SeedError(str(exc)) from None
    if not kept:
        raise SeedError(f"{path}: no subgraph in the {split!r} split of {len(ordered)}; raise kg.num_seeds or "
                        "lower kg.heldout_share / kg.warmstart_share")
    if len(kept) < len(ordered):
        log.info("%s: %d of %d subgraphs are in the %s split", path, len(kept), len(ordered), split)
    return kept


def load_answer_seeds(path: str | Path, default_hops: int) -> list[Seed]:
    """SSP seed answers: JSONL with ``answer`` (or SSP's ``ground_truth``) and optional ``search_turns``."""
    path = Path(path)
    if not path.exists():
        raise SeedError(f"ssp.seed_answers: {path} does not exist; give a JSONL of answers or null")
    seeds = []
    for number, record in enumerate(read_jsonl(path), start=1):
        answer = record.get("answer", record.get("ground_truth"))
        if not isinstance(answer, str) or not answer.strip():
            raise SeedError(f"{path}:{number}: expected a non-empty string field 'answer' (or 'ground_truth')")
        hops = record.get("search_turns", record.get("num_hops", default_hops))
        seeds.append(Seed(seed_id=str(record.get("id", f"answer-{number}")), answer=answer.strip(),
                          num_hops=int(hops)))
    if not seeds:
        raise SeedError(f"{path}: no seed answers")
    return seeds


def distinct_answers(seeds: list[Seed]) -> list[Seed]:
    """One seed per distinct answer, the first in pool order: KG subgraphs as SSP's answer *set*.

    The KG pool repeats answers (on the embedded default 'Europe' ends a sixth of the paths); SSP draws
    from a set of answers (SSP §3.2).
    """
    seen: set[str] = set()
    kept = []
    for seed in seeds:
        if seed.answer not in seen:
            seen.add(seed.answer)
            kept.append(seed)
    return kept


def shuffled(seeds: list[Seed], seed: int) -> list[Seed]:
    """SSP's order: answers sampled from the set at random (its code shuffles the dataset), fixed by ``seed``."""
    order = list(seeds)
    random.Random(seed).shuffle(order)
    return order


@dataclass
class SeedCursor:
    """Serves seeds in order, wrapping to the start after the last one (a new epoch). ``position`` counts
    seeds consumed since the start, so it alone restores the curriculum on resume."""

    seeds: list[Seed]
    position: int = 0

    def next_batch(self, size: int) -> list[Seed]:
        batch = [self.seeds[(self.position + k) % len(self.seeds)] for k in range(size)]
        self.position += size
        return batch

    @property
    def epoch(self) -> int:
        return self.position // len(self.seeds)
