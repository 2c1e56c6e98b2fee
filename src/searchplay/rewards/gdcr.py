"""Graph-Distance Contribution Reward (GDCR paper §3.2-3.3, Eqs. 4-12): step rewards from the answer graph.

Every step t of a Solver trajectory earns the contribution c(v) = k^(-d(v, answer)) of each graph entity it
newly retrieves (first seen in this step's observation) and of each entity it newly cites (named in this
step's thought, seen in an earlier observation, not cited before). The graph is the question's KG subgraph
(target path plus distractor branches), read undirected; unreachable nodes score 0. Matching an entity in
text is normalized whole-word matching of its label or any alias (docs/decisions/rl.md "GDCR").
"""

from __future__ import annotations

import math
import random
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Triple = tuple[str, str, str]
Step = tuple[str, str | None]  # (thought of step t, observation o_t or None: the final step has none)
Components = Literal["both", "cite", "retrieve"]


def subgraph_triples(record: Mapping[str, Any]) -> list[Triple]:
    """(subject, relation, object) label triples of a KG subgraph record: the path and every distractor branch.

    A distractor with ``divergence_index`` i leaves the path at node i and chains through its own nodes.
    """
    path, relations = record.get("path") or [], record.get("relations") or []
    triples = [(path[i]["label"], relations[i]["label"], path[i + 1]["label"])
               for i in range(min(len(relations), len(path) - 1))]
    for branch in record.get("distractors") or []:
        previous = path[branch["divergence_index"]]["label"]
        for node, relation in zip(branch["nodes"], branch["relations"], strict=False):
            triples.append((previous, relation["label"], node["label"]))
            previous = node["label"]
    return triples


def subgraph_aliases(record: Mapping[str, Any]) -> dict[str, list[str]]:
    """Node label -> its Wikidata aliases, where the record's nodes carry them (``aliases`` lists)."""
    nodes = [*(record.get("path") or []), *(n for b in record.get("distractors") or [] for n in b["nodes"])]
    return {node["label"]: list(node["aliases"]) for node in nodes if node.get("aliases")}


GraphNoise = Literal["none", "delete", "inject", "answer"]


def corrupt_graph(triples: Sequence[Triple], answer: str, noise: GraphNoise, rate: float,
                  rng: random.Random) -> tuple[list[Triple], str]:
    """A corrupted copy of the answer graph for the robustness ablation (GDCR paper §4.4, Table 4).

    ``delete``: ceil(rate * nodes) non-answer nodes go, with their edges. ``inject``: ceil(rate * nodes)
    random edges between nodes that were not linked (noisy shortcuts; the paper does not define its
    injection, docs/decisions/rl.md). ``answer``: with probability ``rate`` the answer node is moved to a
    random other node (GDCR's distances then point at the wrong node; the outcome reward still uses the
    true answer). ``none`` returns the graph unchanged.

    >>> corrupt_graph([("A", "r", "B"), ("B", "r", "C")], "C", "delete", 0.3, random.Random(1))
    ([('B', 'r', 'C')], 'C')
    """
    triples = list(triples)
    nodes = list(dict.fromkeys(name for subject, _, obj in triples for name in (subject, obj)))
    count = math.ceil(rate * len(nodes))
    if noise == "none" or not triples or rate <= 0:
        return triples, answer
    if noise == "delete":
        gone = set(rng.sample([n for n in nodes if n != answer], min(count, len(nodes) - 1)))
        return [t for t in triples if t[0] not in gone and t[2] not in gone], answer
    if noise == "inject":
        linked = {frozenset((subject, obj)) for subject, _, obj in triples}
        free = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1:] if frozenset((a, b)) not in linked]
        return triples + [(a, "injected noise", b) for a, b in rng.sample(free, min(count, len(free)))], answer
    if noise == "answer":
        others = [n for n in nodes if n != answer]
        return triples, (rng.choice(others) if others and rng.random() < rate else answer)
    raise ValueError(f"GDCR graph noise {noise!r}: expected 'none', 'delete', 'inject' or 'answer'")


def graph_distances(triples: Iterable[Triple], answer: str) -> dict[str, int]:
    """d(v, answer) in hops on the undirected graph (GDCR Eq. 4); nodes that cannot reach the answer are absent.

    >>> graph_distances([("A", "r", "B"), ("B", "r", "C"), ("X", "r", "Y")], "C")
    {'C': 0, 'B': 1, 'A': 2}
    """
    import networkx as nx

    graph = nx.Graph()
    graph.add_edges_from((subject, obj) for subject, _, obj in triples)
    if answer not in graph:
        return {}
    return dict(nx.single_source_shortest_path_length(graph, answer))


def contribution_scores(triples: Sequence[Triple], answer: str, k: float = 2.0) -> dict[str, float]:
    """c(v) = k^(-d(v, answer)) for every graph node (GDCR Eq. 5); unreachable nodes get 0.

    k = 1 gives every reachable node 1 (the paper's "no distance" ablation) and still 0 when unreachable.

    >>> contribution_scores([("Asphalt Shingle", "year", "1893"), ("1893", "founded", "Argentina team"),
    ...                      ("X", "r", "Y")], "Asphalt Shingle")
    {'Asphalt Shingle': 1.0, '1893': 0.5, 'Argentina team': 0.25, 'X': 0.0, 'Y': 0.0}
    """
    if k <= 0:
        raise ValueError(f"GDCR decay k must be positive (paper: 2; ablations 1 and 4), got {k}")
    distances = graph_distances(triples, answer)
    nodes = dict.fromkeys(name for subject, _, obj in triples for name in (subject, obj))
    return {node: float(k) ** -distances[node] if node in distances else 0.0 for node in nodes}


def normalize_mention(text: str) -> str:
    """NFKC, casefold, every non-alphanumeric run to one space (so 'Romance-languages' matches 'romance languages')."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " " + re.sub(r"[\W_]+", " ", text).strip() + " "


def mentions(text: str, entity: str, aliases: Sequence[str] = ()) -> bool:
    """Does ``text`` name ``entity`` (its label or an alias) as whole words, after ``normalize_mention``?

    A name of one character after normalizing ("A", "X", "-") matches nothing: as a whole word it would be the
    article "a" or any lone letter, which names no entity.

    >>> mentions("Lionel Messi captained Argentina.", "Argentina"), mentions("Argentine team", "Argentina")
    (True, False)
    >>> mentions("Messi scored", "Lionel Messi", aliases=["Messi"]), mentions("a capital of a country", "A")
    (True, False)
    """
    haystack = normalize_mention(text)
    return any(len(needle.strip()) > 1 and needle in haystack
               for needle in map(normalize_mention, [entity, *aliases]))


@dataclass
class GDCRStep:
    """One step's newly cited and newly retrieved entities and its reward r_{t,g} (GDCR Eqs. 8-12)."""

    cited: list[str] = field(default_factory=list)
    retrieved: list[str] = field(default_factory=list)
    cite_reward: float = 0.0
    retrieve_reward: float = 0.0

    @property
    def reward(self) -> float:
        return self.cite_reward + self.retrieve_reward


def gdcr_trace(steps: Sequence[Step], scores: Mapping[str, float], aliases: Mapping[str, Sequence[str]] | None = None,
               components: Components = "both") -> list[GDCRStep]:
    """Per step: the entities newly cited (thought stage) then newly retrieved (observation stage), Eqs. 6-12.

    T_t accumulates entities named in a thought that were in O_{t-1}; O_t accumulates entities in the
    observations. Step 1 cannot cite (O_0 is empty); the final step has no observation. ``components``
    'cite' or 'retrieve' drops the other term (the paper's Table 3 ablation).
    """
    if components not in ("both", "cite", "retrieve"):
        raise ValueError(f"GDCR components {components!r}: expected 'both', 'cite' or 'retrieve'")
    aliases = aliases or {}
    observed: set[str] = set()
    cited: set[str] = set()
    trace = []
    for thought, observation in steps:
        step = GDCRStep()
        step.cited = [v for v in scores
                      if v in observed and v not in cited and mentions(thought, v, aliases.get(v, ()))]
        cited.update(step.cited)
        if observation is not None:
            step.retrieved = [v for v in scores if v not in observed and mentions(observation, v, aliases.get(v, ()))]
            observed.update(step.retrieved)
        if components != "retrieve":
            step.cite_reward = sum(scores[v] for v in step.cited)
        if components != "cite":
            step.retrieve_reward = sum(scores[v] for v in step.retrieved)
        trace.append(step)
    return trace


def gdcr_step_rewards(steps: Sequence[Step], scores: Mapping[str, float],
                      aliases: Mapping[str, Sequence[str]] | None = None,
                      components: Components = "both") -> list[float]:
    """GDCR r_{t,g} = r_t^cite + r_t^ret for each step of one trajectory (GDCR Eq. 12).

    ``steps`` = [(thought, observation or None)], one per assistant turn; ``scores`` from ``contribution_scores``.

    >>> scores = {"Shingle": 1.0, "1893": 0.5, "Argentina": 0.25}
    >>> gdcr_step_rewards([("", "Argentina in 1893"), ("Argentina, 1893", "Shingle"), ("so Shingle", None)], scores)
    [0.75, 1.75, 1.0]
    """
    return [step.reward for step in gdcr_trace(steps, scores, aliases, components)]


def step_distances(trace: Sequence[GDCRStep], distances: Mapping[str, int]) -> list[float | None]:
    """d_t = min distance to the answer over the step's newly retrieved or cited entities (GDCR Eq. 16).

    None where the step touched no graph entity that can reach the answer.
    """
    out: list[float | None] = []
    for step in trace:
        reached = [distances[v] for v in [*step.cited, *step.retrieved] if v in distances]
        out.append(float(min(reached)) if reached else None)
    return out


def history_best(values: Sequence[float | None]) -> list[float | None]:
    """d_t^best = min over s <= t of d_s (GDCR Eq. 17); None until the first defined d_s.

    >>> history_best([None, 3.0, 4.0, 1.0])
    [None, 3.0, 3.0, 1.0]
    """
    best: float | None = None
    out = []
    for value in values:
        if value is not None:
            best = value if best is None else min(best, value)
        out.append(best)
    return out
