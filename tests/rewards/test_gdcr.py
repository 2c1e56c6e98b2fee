"""GDCR (GDCR paper Eqs. 4-12, 16-17) on hand-computed cases: the paper's case-study graph (App. E)
and its worked trajectory (§4.5), first and final steps, entities never seen, unreachable nodes."""

from __future__ import annotations

import pytest

from searchplay.rewards import contribution_scores, gdcr_step_rewards, subgraph_triples
from searchplay.rewards.gdcr import (
    gdcr_trace,
    graph_distances,
    history_best,
    mentions,
    step_distances,
    subgraph_aliases,
)

SHINGLE = "Asphalt Shingle"
TEAM = "Argentina National Men's Football Team"
CASE_STUDY = [
    (SHINGLE, "Type", "New type of waterproof roofing material"),
    (SHINGLE, "Usage", "Waterproofing and decoration"),
    (SHINGLE, "Development Year", "1893"),
    ("1893", "Establishment Year", TEAM),
    (TEAM, "Associated Player", "Pablo Aimar"),
    (TEAM, "Current Captain", "Lionel Messi"),
]


def test_contribution_scores_on_the_case_study_graph():
    """Digest §2.6: undirected distances to the answer, c = 2^-d."""
    scores = contribution_scores(CASE_STUDY, SHINGLE)
    assert scores == {SHINGLE: 1.0, "New type of waterproof roofing material": 0.5,
                      "Waterproofing and decoration": 0.5, "1893": 0.5, TEAM: 0.25,
                      "Pablo Aimar": 0.125, "Lionel Messi": 0.125}


def test_unreachable_nodes_score_zero_for_every_k():
    triples = [("A", "r", "B"), ("C", "r", "D")]
    assert contribution_scores(triples, "A", k=2.0) == {"A": 1.0, "B": 0.5, "C": 0.0, "D": 0.0}
    assert contribution_scores(triples, "A", k=1.0) == {"A": 1.0, "B": 1.0, "C": 0.0, "D": 0.0}  # no 1^-inf
    assert contribution_scores(triples, "A", k=4.0)["B"] == 0.25
    assert contribution_scores(triples, "Z") == {"A": 0.0, "B": 0.0, "C": 0.0, "D": 0.0}  # answer not in graph
    with pytest.raises(ValueError, match="decay k"):
        contribution_scores(triples, "A", k=0)


def test_edges_count_in_both_directions():
    assert graph_distances([("Answer", "r", "B"), ("B", "r", "C")], "C") == {"C": 0, "B": 1, "Answer": 2}


def test_worked_trajectory_of_the_digest():
    """Digest §4.5: r_g = (0.875, 1.875, 1.0). Step 1 cannot cite; the final step retrieves nothing."""
    scores = contribution_scores(CASE_STUDY, SHINGLE)
    aliases = {"Lionel Messi": ["Messi"]}
    steps = [
        ("I should find the team first.", f"The {TEAM} was founded in 1893; its captain is Lionel Messi."),
        (f"So the {TEAM}, captained by Messi, dates from 1893.", f"{SHINGLE} was developed in 1893."),
        (f"The material is {SHINGLE}, from 1893, the year of Messi's team.", None),
    ]
    assert gdcr_step_rewards(steps, scores, aliases) == pytest.approx([0.875, 1.875, 1.0])
    trace = gdcr_trace(steps, scores, aliases)
    assert trace[0].cited == [] and trace[2].retrieved == []
    assert sorted(trace[1].cited) == sorted([TEAM, "1893", "Lionel Messi"]) and trace[1].retrieved == [SHINGLE]


def test_citing_before_retrieval_counts_only_later_and_only_once():
    scores = {"Paris": 1.0, "France": 0.5}
    steps = [("Maybe Paris.", "France is a country."),  # Paris named before it was seen: no cite
             ("France, and Paris again.", "Paris is the capital of France."),  # France cited; Paris retrieved
             ("Paris, France.", None)]  # Paris cited now; France already cited
    assert gdcr_step_rewards(steps, scores) == [0.5, 1.5, 1.0]


def test_entities_never_seen_earn_nothing_and_unknown_text_is_ignored():
    scores = {"Paris": 1.0}
    assert gdcr_step_rewards([("London?", "London is big."), ("Tokyo.", None)], scores) == [0.0, 0.0]
    assert gdcr_step_rewards([], scores) == []


@pytest.mark.parametrize(("components", "expected"), [("both", [0.5, 1.5]), ("cite", [0.0, 0.5]),
                                                       ("retrieve", [0.5, 1.0])])
def test_cite_only_and_retrieve_only_ablations(components, expected):
    steps = [("", "France"), ("France", "Paris")]
    assert gdcr_step_rewards(steps, {"Paris": 1.0, "France": 0.5}, components=components) == expected
    with pytest.raises(ValueError, match="components"):
        gdcr_step_rewards(steps, {}, components="neither")


@pytest.mark.parametrize(("text", "entity", "found"), [
    ("It borders north macedonia.", "North Macedonia", True),
    ("Romance-languages family", "Romance languages", True),
    ("Bernard Shaw", "Bern", False),  # whole words only
    ("", "Bern", False),
    ("Ｐａｒｉｓ", "Paris", True),  # NFKC
    ("It is a country in Europe.", "A", False),  # one character: the article, not an entity
    ("X is a letter", "X", False),
    ("The UK borders Ireland.", "UK", True),  # two characters still name one
])
def test_mentions_is_normalized_whole_word_matching(text, entity, found):
    assert mentions(text, entity) is found


def test_subgraph_triples_and_aliases_follow_the_record():
    record = {"path": [{"label": "Tirana", "aliases": ["Tiranë"]}, {"label": "Albania"}, {"label": "Europe"}],
              "relations": [{"label": "capital of"}, {"label": "continent"}],
              "distractors": [{"divergence_index": 1, "nodes": [{"label": "Greece"}, {"label": "Athens"}],
                               "relations": [{"label": "shares border with"}, {"label": "capital"}]}]}
    assert subgraph_triples(record) == [("Tirana", "capital of", "Albania"), ("Albania", "continent", "Europe"),
                                        ("Albania", "shares border with", "Greece"), ("Greece", "capital", "Athens")]
    assert subgraph_aliases(record) == {"Tirana": ["Tiranë"]}
    assert contribution_scores(subgraph_triples(record), "Europe")["Athens"] == 0.125


def test_step_distances_and_history_best():
    """GDCR Eqs. 16-17: the closest newly touched entity per step, and its running minimum."""
    distances = graph_distances(CASE_STUDY, SHINGLE)
    scores = contribution_scores(CASE_STUDY, SHINGLE)
    steps = [("", "Lionel Messi plays."), ("nothing new", "Lionel Messi again."), ("", f"{TEAM} in 1893")]
    d = step_distances(gdcr_trace(steps, scores), distances)
    assert d == [3.0, None, 1.0]
    assert history_best(d) == [3.0, 3.0, 1.0]


def test_corrupted_graphs_for_the_robustness_ablation():
    """GDCR Table 4's three corruptions: deleted nodes, injected edges, a moved answer node."""
    import random

    from searchplay.rewards.gdcr import corrupt_graph

    nodes = {name for s, _, o in CASE_STUDY for name in (s, o)}
    deleted, answer = corrupt_graph(CASE_STUDY, SHINGLE, "delete", 0.3, random.Random(0))
    left = {name for s, _, o in deleted for name in (s, o)}
    assert answer == SHINGLE and SHINGLE in left and len(nodes - left) >= 3  # ceil(0.3 * 7) = 3 deleted
    injected, _ = corrupt_graph(CASE_STUDY, SHINGLE, "inject", 0.3, random.Random(0))
    assert injected[:len(CASE_STUDY)] == CASE_STUDY and len(injected) == len(CASE_STUDY) + 3
    assert all(r == "injected noise" for _, r, _ in injected[len(CASE_STUDY):])
    _, moved = corrupt_graph(CASE_STUDY, SHINGLE, "answer", 1.0, random.Random(0))
    assert moved != SHINGLE and moved in nodes
    assert corrupt_graph(CASE_STUDY, SHINGLE, "answer", 0.0, random.Random(0)) == (CASE_STUDY, SHINGLE)
    assert corrupt_graph(CASE_STUDY, SHINGLE, "none", 0.3, random.Random(0)) == (CASE_STUDY, SHINGLE)
    with pytest.raises(ValueError, match="graph noise"):
        corrupt_graph(CASE_STUDY, SHINGLE, "shuffle", 0.3, random.Random(0))
