"""LLM-guided subgraph extraction: Algorithm 1 of the KG-paths paper (§3.2, App. B.1, B.4).

Stage 1 expands a target path from each seed: at step t the filtered outgoing edges of v_t give at
most ``max_candidates`` candidates (one value per property), the selector picks one or stops.
Choices recorded in docs/decisions/kg.md: a target length L ~ U{min_hops..max_hops} per seed (B.3's
near-uniform hop histogram), no node revisited (nor a label repeated), a literal value only as the
final hop, seeds that stop before ``min_hops`` are discarded and replaced by fresh seeds.
Stage 2 adds 1-3 distractor branches from v_k, k ~ U(1, K-1), 1-2 hops each, never through a
target-path node. Many seeds advance together: one ``selector.select`` call per step.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from searchplay.kg.relations import RelationFilter
from searchplay.kg.selectors import RelationSelector, SelectionRequest
from searchplay.kg.store import Edge, GraphStore

HUMAN = "Q5"
LOCATION_CLASSES = {"Q515", "Q6256", "Q3624078", "Q5107", "Q4022", "Q1549591", "Q1637706", "Q486972", "Q5119",
                    "Q23442", "Q8502", "Q165", "Q9430", "Q23397", "Q35657", "Q82794", "Q2221906", "Q1620908"}
ORGANIZATION_CLASSES = {"Q43229", "Q3918", "Q4830453", "Q902104", "Q875538", "Q4671277", "Q783794", "Q163740",
                        "Q7278", "Q484652", "Q2385804", "Q31855", "Q15911314", "Q327333", "Q1664720"}


@dataclass
class PathState:
    """One seed's target path under construction."""

    seed_id: str
    target_length: int
    nodes: list[dict[str, Any]]  # {id, label, description}; literals have id None
    relations: list[dict[str, str]] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    invalid_replies: int = 0
    done: bool = False
    answer_datatype: str = "wikibase-item"

    @property
    def hops(self) -> int:
        return len(self.relations)

    def visited(self) -> tuple[set[str], set[str]]:
        return {n["id"] for n in self.nodes if n["id"]}, {n["label"].casefold() for n in self.nodes}


@dataclass
class ExtractionStats:
    seeds_tried: int = 0
    discarded_short: int = 0
    discarded_no_distractor: int = 0
    discarded_duplicate: int = 0
    selector_calls: int = 0
    invalid_replies: int = 0
    invalid_stops: int = 0


def can_continue(store: GraphStore, node_id: str, relation_filter: RelationFilter, exclude_ids: set[str]) -> bool:
    """True when ``node_id`` has a walkable outgoing edge to an entity not in ``exclude_ids``."""
    return any(not edge.is_literal and edge.target not in exclude_ids and relation_filter.allows(edge)
               for edge in store.outgoing(node_id))


def candidate_edges(store: GraphStore, node_id: str, relation_filter: RelationFilter, rng: random.Random,
                    exclude_ids: set[str], exclude_labels: set[str], allow_literals: bool,
                    max_candidates: int, need_continuation: bool = False) -> list[Edge]:
    """E_cand(v): filtered outgoing edges, one value per property (best rank first), at most ``max_candidates``.

    Algorithm 1 line 5; "up to 10 candidate relations per step" (B.1). A property's value is drawn
    at random among its best-ranked admissible values; properties are sampled when there are more.
    With ``need_continuation`` (the path must grow further) dead-end targets are left out.
    """
    by_property: dict[str, list[Edge]] = {}
    for edge in store.outgoing(node_id):
        if not relation_filter.allows(edge) or (edge.is_literal and not allow_literals):
            continue
        if edge.target in exclude_ids or edge.label.casefold() in exclude_labels:
            continue
        if need_continuation and not can_continue(store, edge.target, relation_filter, exclude_ids | {node_id}):
            continue
        by_property.setdefault(edge.property, []).append(edge)
    chosen = []
    for edges in by_property.values():
        best = max(e.rank for e in edges)
        chosen.append(rng.choice([e for e in edges if e.rank == best]))
    if len(chosen) > max_candidates:
        chosen = rng.sample(chosen, max_candidates)
    return chosen


def _node(edge: Edge) -> dict[str, Any]:
    return {"id": edge.target, "label": edge.label, "description": edge.description}


def expand_paths(store: GraphStore, states: list[PathState], selector: RelationSelector,
                 relation_filter: RelationFilter, rng: random.Random, max_candidates: int,
                 stats: ExtractionStats) -> None:
    """Stage 1 of Algorithm 1 for many seeds at once: one selector call per step."""
    while active := [s for s in states if not s.done]:
        requests, owners = [], []
        for state in active:
            ids, labels = state.visited()
            final_hop = state.hops + 1 == state.target_length
            candidates = candidate_edges(store, state.nodes[-1]["id"], relation_filter, rng, ids, labels,
                                         allow_literals=final_hop, max_candidates=max_candidates,
                                         need_continuation=not final_hop)
            if not candidates:  # lines 6-7: E_cand(v_t) empty
                state.done = True
                continue
            requests.append(SelectionRequest([n["label"] for n in state.nodes],
                                             [r["label"] for r in state.relations],
                                             state.nodes[-1]["description"] or "", candidates))
            owners.append(state)
        if not requests:
            break
        stats.selector_calls += len(requests)
        for state, request, selection in zip(owners, requests, selector.select(requests), strict=True):
            state.replies += selection.replies
            state.invalid_replies += len(selection.replies) - (1 if selection.replies and not selection.invalid else 0)
            stats.invalid_stops += selection.invalid
            if selection.choice == 0:  # lines 10-11: the LLM rejects all candidates
                state.done = True
                continue
            edge = request.candidates[selection.choice - 1]
            state.relations.append({"id": edge.property, "label": edge.relation})
            state.nodes.append(_node(edge))
            state.answer_datatype = edge.datatype
            state.done = edge.is_literal or state.hops >= state.target_length


def sample_distractors(store: GraphStore, state: PathState, relation_filter: RelationFilter, rng: random.Random,
                       count: int, max_hops: int, max_candidates: int) -> list[dict[str, Any]]:
    """Stage 2: ``count`` branches from v_k, k ~ U(1, K-1), each 1..max_hops random hops (our reading: the paper
    leaves the branching open).

    A branch never passes through a target-path node or a node of an earlier branch; its first edge
    differs from the on-path edge (r_{k+1}, v_{k+1}), preferring the same relation ("locally plausible").
    """
    path_ids, path_labels = state.visited()
    used_ids, used_labels = set(path_ids), set(path_labels)
    branches = []
    for _ in range(count):
        k = rng.randint(1, state.hops - 1)
        if state.nodes[k]["id"] is None:
            continue
        branch_nodes, branch_relations, current = [], [], state.nodes[k]["id"]
        for hop in range(rng.randint(1, max_hops)):
            candidates = candidate_edges(store, current, relation_filter, rng, used_ids, used_labels,
                                         allow_literals=True, max_candidates=max_candidates)
            if hop == 0:
                on_path = state.relations[k]["id"]
                same = [e for e in candidates if e.property == on_path]
                candidates = same or candidates
            if not candidates:
                break
            edge = rng.choice(candidates)
            branch_nodes.append(_node(edge))
            branch_relations.append({"id": edge.property, "label": edge.relation})
            used_labels.add(edge.label.casefold())
            if edge.is_literal:
                break
            used_ids.add(edge.target)
            current = edge.target
        if branch_nodes:
            branches.append({"divergence_index": k, "nodes": branch_nodes, "relations": branch_relations})
    return branches


def answer_type(store: GraphStore, state: PathState) -> str:
    """B.3's answer categories: Date, Number, Person, Organization, Location, Other (from P31 / P625)."""
    if state.answer_datatype == "time":
        return "Date"
    if state.answer_datatype == "quantity":
        return "Number"
    answer_id = state.nodes[-1]["id"]
    if answer_id is None:
        return "Other"
    rows = store.statements(answer_id)
    classes = {row[5] for row in rows if row[1] in {"P31", "P279"}}
    if HUMAN in classes:
        return "Person"
    if classes & ORGANIZATION_CLASSES:
        return "Organization"
    if classes & LOCATION_CLASSES or any(row[1] == "P625" for row in rows):
        return "Location"
    return "Other"


MAX_ALIASES = 8  # per node: enough for GDCR's mention matcher, small enough for the record


def with_aliases(store: GraphStore, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes, each entity (not a literal) with its English Wikidata aliases where it has any.

    GDCR's matcher names a node by its label or an alias (``searchplay.rewards.gdcr.subgraph_aliases``);
    no prompt shows them.
    """
    out = []
    for node in nodes:
        entity = store.node(node["id"]) if node.get("id") else None
        aliases = [a for a in (entity.aliases if entity else []) if a and a != node["label"]][:MAX_ALIASES]
        out.append({**node, "aliases": aliases} if aliases else node)
    return out


def subgraph_record(store: GraphStore, state: PathState, distractors: list[dict[str, Any]],
                    selector: RelationSelector) -> dict[str, Any]:
    """The output record of the KG contract (helper_brief: KG); entity nodes carry their aliases."""
    num_nodes = len(state.nodes) + sum(len(d["nodes"]) for d in distractors)
    distractors = [{**branch, "nodes": with_aliases(store, branch["nodes"])} for branch in distractors]
    return {
        "id": f"{state.seed_id}-{state.hops}h-{'-'.join(r['id'] for r in state.relations)}",
        "seed_id": state.seed_id,
        "answer": state.nodes[-1]["label"],
        "answer_type": answer_type(store, state),
        "path": with_aliases(store, state.nodes),
        "relations": state.relations,
        "waypoints": [n["label"] for n in state.nodes[:-1]],
        "distractors": distractors,
        "num_hops": state.hops,
        "num_nodes": num_nodes,
        "selector": selector.name,
        "selector_model": selector.model,
        "selector_replies": state.replies,
    }


def extract_subgraphs(store: GraphStore, seeds: list[str], selector: RelationSelector,
                      relation_filter: RelationFilter, config, num_subgraphs: int, rng: random.Random,
                      progress: Callable[[int], None] | None = None) -> tuple[list[dict[str, Any]], ExtractionStats]:
    """Run Algorithm 1 over ``seeds`` (in order) until ``num_subgraphs`` paths of >= min_hops hops exist.

    At most ``num_subgraphs * config.max_seed_factor`` seeds are tried, so a selector that often
    stops early yields a smaller pool instead of walking every eligible seed.

    Seeds go in waves of ``config.selector_batch_size``; the pool is sorted by num_nodes descending
    (the paper's curriculum, Table 10), ties broken by id for determinism.
    """
    stats, records, queue = ExtractionStats(), [], iter(seed_walks(seeds, num_subgraphs, config))
    seen_ids: set[str] = set()
    while len(records) < num_subgraphs:
        wave = _next_wave(store, queue, min(config.selector_batch_size, num_subgraphs - len(records)), config, rng)
        if not wave:
            break
        stats.seeds_tried += len(wave)
        expand_paths(store, wave, selector, relation_filter, rng, config.max_candidates, stats)
        for state in wave:
            stats.invalid_replies += state.invalid_replies
            if state.hops < config.min_hops:
                stats.discarded_short += 1
                continue
            count = rng.randint(config.min_distractors, config.max_distractors)
            distractors = sample_distractors(store, state, relation_filter, rng, count, config.max_distractor_hops,
                                             config.max_candidates)
            if len(distractors) < config.min_distractors:
                stats.discarded_no_distractor += 1
                continue
            record = subgraph_record(store, state, distractors, selector)
            if record["id"] in seen_ids:  # another walk from the same seed took the same relations
                stats.discarded_duplicate += 1
                continue
            seen_ids.add(record["id"])
            records.append(record)
            if progress is not None:
                progress(1)
            if len(records) >= num_subgraphs:
                break
    records.sort(key=lambda r: (-r["num_nodes"], r["id"]))
    return records, stats


def seed_walks(seeds: list[str], num_subgraphs: int, config) -> list[str]:
    """The seeds to walk from, in order: every seed once, then every seed again, ``kg.paths_per_seed`` passes.

    At most ``num_subgraphs * kg.max_seed_factor`` walks. Walks from one seed differ by their random
    target length and choices; a walk that repeats an earlier one's relations is discarded.

    >>> from types import SimpleNamespace
    >>> seed_walks(["a", "b"], 3, SimpleNamespace(paths_per_seed=2, max_seed_factor=1))
    ['a', 'b', 'a']
    """
    walks = list(seeds) * config.paths_per_seed
    return walks[: num_subgraphs * config.max_seed_factor]


def _next_wave(store: GraphStore, queue: Iterable[str], size: int, config, rng: random.Random) -> list[PathState]:
    wave = []
    for seed_id in queue:
        node = store.node(seed_id)
        wave.append(PathState(seed_id, rng.randint(config.min_hops, config.max_hops),
                              [{"id": seed_id, "label": node.label, "description": node.description or ""}]))
        if len(wave) >= size:
            break
    return wave


def pool_stats(records: list[dict[str, Any]], stats: ExtractionStats) -> dict[str, Any]:
    """stats.json, comparable to the paper's B.3: hop histogram, answer types, relation statistics."""
    hops = Counter(r["num_hops"] for r in records)
    relation_counts = Counter(rel["label"] for r in records for rel in r["relations"])
    per_subgraph = [len({rel["id"] for rel in r["relations"]}) for r in records]
    total_edges = sum(relation_counts.values())
    top_relation, top_count = relation_counts.most_common(1)[0] if relation_counts else ("", 0)
    n = max(len(records), 1)
    return {
        "subgraphs": len(records),
        "hop_histogram": {str(k): hops[k] for k in sorted(hops)},
        "hop_share": {str(k): round(hops[k] / n, 4) for k in sorted(hops)},
        "mean_hops": round(sum(r["num_hops"] for r in records) / n, 3),
        "answer_types": dict(Counter(r["answer_type"] for r in records).most_common()),
        "unique_relations": len(relation_counts),
        "relations_per_subgraph_mean": round(sum(per_subgraph) / n, 3),
        "largest_relation": top_relation,
        "largest_relation_share": round(top_count / max(total_edges, 1), 4),
        "top_relations": dict(relation_counts.most_common(15)),
        "mean_num_nodes": round(sum(r["num_nodes"] for r in records) / n, 3),
        "mean_distractors": round(sum(len(r["distractors"]) for r in records) / n, 3),
        "extraction": vars(stats),
    }
