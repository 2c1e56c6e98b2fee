"""EVE-Agent's corpus selector (§3.3, App. F): hand-computed Eqs. 22/29-33, inheritance, resume, learning.

Small synthetic unit vectors only; no model is loaded. The LanceDB test builds a real index with the
project's ``build_index`` and a fixed-vector fake embedder.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from searchplay.io import write_jsonl
from searchplay.recipes.eve.corpus_selector import (
    TASK_TYPES,
    ArmMeans,
    CorpusSelector,
    SelectorSample,
    UCB1Bandit,
    cluster_count,
    inherit_means,
    inherit_statistics,
    passage_embeddings,
    run_summary_reward,
    sample_quality,
    sample_rewards,
    selector_reward,
    std_softmax,
    task_type_instruction,
    ucb1_scores,
    within_cluster_probabilities,
)


@pytest.fixture(autouse=True)
def single_threaded_kmeans():
    """MiniBatchKMeans on 36 points: ~0.7 s per fit with the OpenMP pool on a busy 2-core machine, ~10 ms on one."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


GOOD_QUESTION = "Which river flows through the city of Bern?"  # 43 characters, inside [20, 220]


def unit_circle_groups(per_group: int = 12, centres=(0.0, 2.1, 4.2), spread: float = 0.15, seed: int = 0):
    """Three well-separated groups of 2-D unit vectors (angles around ``centres``), ids "d0".."dN"."""
    rng = np.random.default_rng(seed)
    angles = np.concatenate([centre + rng.uniform(-spread, spread, per_group) for centre in centres])
    embeddings = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    return [f"d{i}" for i in range(len(angles))], embeddings


# --- Eq. 30 ---------------------------------------------------------------------------------------------------


def test_ucb1_scores_by_hand_with_the_virtual_pull():
    fresh = UCB1Bandit.new(3)
    assert fresh.counts.tolist() == [1, 1, 1] and fresh.sums.tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(fresh.scores(), [math.sqrt(math.log(3))] * 3)
    # S = (2, 0.5, 0), N = (4, 2, 1) -> N_tot = 7
    expected = [2 / 4 + math.sqrt(math.log(7) / 4), 0.5 / 2 + math.sqrt(math.log(7) / 2), math.sqrt(math.log(7))]
    np.testing.assert_allclose(ucb1_scores([2.0, 0.5, 0.0], [4, 2, 1]), expected)
    half_beta = ucb1_scores([2.0, 0.5, 0.0], [4, 2, 1], beta=0.5)[0]
    assert half_beta == pytest.approx(0.5 + 0.5 * math.sqrt(math.log(7) / 4))


def test_ucb1_scores_guard_zero_counts_with_max_one():
    # N_k = 0 is read as 1 in both places; N_tot = 0 as 1, so the bonus is sqrt(log 1) = 0
    np.testing.assert_allclose(ucb1_scores([0.3, 0.0], [0, 0]), [0.3, 0.0])


def test_choose_breaks_ties_at_random_and_otherwise_takes_the_argmax():
    bandit = UCB1Bandit.new(4)
    rng = np.random.default_rng(0)
    assert {bandit.choose(rng) for _ in range(200)} == {0, 1, 2, 3}
    bandit.update(2, 5.0)
    assert {bandit.choose(rng) for _ in range(50)} == {2}


def test_batch_draws_follow_the_std_rescaled_softmax():
    scores = np.array([0.0, 1.0, 2.0])
    spread = scores.std()
    expected = np.exp(scores / spread) / np.exp(scores / spread).sum()
    np.testing.assert_allclose(std_softmax(scores), expected)
    assert std_softmax(np.array([3.0, 3.0, 3.0, 3.0])).tolist() == [0.25] * 4
    bandit = UCB1Bandit.new(3)
    assert len(bandit.choose_batch(7, np.random.default_rng(1))) == 7


def test_bandit_learns_to_prefer_the_rewarded_arm():
    bandit, rng = UCB1Bandit.new(4), np.random.default_rng(3)
    for _ in range(400):
        arm = bandit.choose(rng)
        bandit.update(arm, 1.0 if arm == 2 else 0.0)
    assert int(np.argmax(bandit.counts)) == 2 and bandit.counts[2] > 0.8 * bandit.counts.sum()


def test_bandit_state_is_plain_json_and_round_trips():
    bandit = UCB1Bandit.new(3, beta=0.7)
    bandit.update(1, 0.25)
    state = json.loads(json.dumps(bandit.to_state()))
    assert state == {"sums": [0.0, 0.25, 0.0], "counts": [1, 2, 1], "beta": 0.7}
    restored = UCB1Bandit.from_state(state)
    np.testing.assert_array_equal(restored.scores(), bandit.scores())


# --- Eqs. 22/29 and the inheritance rule ----------------------------------------------------------------------


def test_cluster_count_schedule():
    assert cluster_count(0) == 10 and cluster_count(50) == 10  # alpha = 0: fixed clustering
    assert [cluster_count(t, k0=10, alpha=0.4) for t in range(6)] == [10, 10, 10, 11, 11, 12]
    with pytest.raises(ValueError, match="alpha >= 0"):
        cluster_count(1, alpha=-0.1)


def test_inheritance_splits_counts_and_sums_across_children():
    # old 0: N=5, S=3, two children -> 2 pulls and 1.5 each; old 1: N=1, S=0.9, three children -> 1 pull, 0.3 each
    sums, counts = inherit_statistics([0, 1, 0, 1, 1], np.array([3.0, 0.9]), np.array([5, 1]))
    assert counts.tolist() == [2, 1, 2, 1, 1]
    np.testing.assert_allclose(sums, [1.5, 0.3, 1.5, 0.3, 0.3])


def test_inheritance_drops_a_childless_parent_and_keeps_single_children_whole():
    sums, counts = inherit_statistics([1, 2], np.array([4.0, 2.0, 1.0]), np.array([6, 3, 2]))
    assert counts.tolist() == [3, 2] and sums.tolist() == [2.0, 1.0]


def test_utility_baseline_keeps_each_parents_mean():
    means = ArmMeans(np.array([1.2, 0.0]), np.array([4, 0]))
    children = inherit_means([0, 0, 1], means)
    np.testing.assert_allclose(children.means(), [0.3, 0.3, 0.0])
    assert children.counts.tolist() == [2, 2, 0]


def test_recluster_inherits_statistics_from_the_nearest_old_centroid():
    ids, embeddings = unit_circle_groups()
    selector = CorpusSelector(ids, embeddings, k0=2, alpha=1.0, seed=0)
    old_centroids = selector.clustering.centroids.copy()
    selector.cluster_bandit.counts[:] = [7, 3]
    selector.cluster_bandit.sums[:] = [1.4, 0.6]
    selector.recluster(3)
    parents = [int(np.argmin(np.linalg.norm(old_centroids - c, axis=1))) for c in selector.clustering.centroids]
    children = np.bincount(parents, minlength=2)
    for arm, parent in enumerate(parents):
        assert selector.cluster_bandit.counts[arm] == max([7, 3][parent] // children[parent], 1)
        assert selector.cluster_bandit.sums[arm] == pytest.approx([1.4, 0.6][parent] / children[parent])


# --- Eq. 31 ---------------------------------------------------------------------------------------------------


def test_within_cluster_probabilities_on_a_tiny_2d_cluster():
    # centroid (0, 0); documents at distances 1, 2 and 3, used 0, 1 and 2 times -> scores 1, 1, 1
    centroid = np.array([0.0, 0.0])
    members = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])
    distances = np.linalg.norm(members - centroid, axis=1)
    np.testing.assert_allclose(within_cluster_probabilities(distances, np.array([0, 1, 2])), [1 / 3] * 3)
    # unused: proportional to the distance alone, 1:2:3
    np.testing.assert_allclose(within_cluster_probabilities(distances, np.zeros(3)), [1 / 6, 2 / 6, 3 / 6])


def test_within_cluster_probabilities_fall_back_to_uniform_when_all_scores_are_zero():
    assert within_cluster_probabilities(np.zeros(4), np.array([0, 3, 1, 0])).tolist() == [0.25] * 4


def test_an_empty_cluster_draws_uniformly_from_the_corpus():
    ids, embeddings = unit_circle_groups()
    selector = CorpusSelector(ids, embeddings, k0=3, seed=0)
    selector.clustering.members[1] = np.array([], dtype=np.int64)
    draws = {selector.draw_document(1, np.random.default_rng(s)) for s in range(60)}
    assert len(draws) > 10 and draws <= set(range(len(ids)))


# --- Eqs. 32-33 -----------------------------------------------------------------------------------------------


def test_sample_quality_windows_and_duplicates():
    assert sample_quality(GOOD_QUESTION, "Aare", 1) == 1.0
    assert sample_quality("x" * 19, "Aare", 1) == 0.65 and sample_quality("x" * 221, "Aare", 1) == 0.65
    assert sample_quality("x" * 20, "a", 1) == 1.0 and sample_quality("x" * 220, "a" * 80, 1) == 1.0
    assert sample_quality(GOOD_QUESTION, "", 1) == 0.55 and sample_quality(GOOD_QUESTION, "a" * 81, 1) == 0.55
    assert sample_quality(GOOD_QUESTION, "Aare", 4) == 0.5
    assert sample_quality(GOOD_QUESTION, "Aare", 0) == 1.0  # max(D_i, 1)


def test_sample_rewards_count_duplicate_prompts_in_the_batch():
    rewards = sample_rewards([GOOD_QUESTION, GOOD_QUESTION + " ", "short?"], ["Aare", "Aare", "x"], 0.8)
    np.testing.assert_allclose(rewards, [0.8 / math.sqrt(2), 0.8 / math.sqrt(2), 0.8 * 0.65])
    with pytest.raises(ValueError, match="R_run must lie in"):
        sample_rewards([GOOD_QUESTION], ["Aare"], 1.3)


def test_selector_reward_by_hand():
    # N_k = 3, N_tot = 12, r = 0.9, rbar = 0.5: -log(0.25 + 1e-8) + 0.5 * 0.4
    assert selector_reward(3, 12, 0.9, 0.5) == pytest.approx(math.log(4) + 0.2, abs=1e-7)
    assert selector_reward(3, 12, 0.9, 0.5, lambda_u=0.0, eps=0.0) == pytest.approx(math.log(4))
    assert selector_reward(12, 12, 0.1, 0.5) == pytest.approx(-0.2, abs=1e-7)  # only arm: no diversity credit


def test_run_summary_reward_normalizes_and_clips():
    assert run_summary_reward(2.1, 1.3) == pytest.approx(1.0)
    assert run_summary_reward(0.0, 0.0) == 0.0 and run_summary_reward(-0.375, 0.0) == 0.0
    assert run_summary_reward(1.05, 0.0) == pytest.approx(0.25)


def test_feedback_uses_pre_update_counts_and_means():
    ids, embeddings = unit_circle_groups()
    selector = CorpusSelector(ids, embeddings, k0=3, seed=0)
    rows = [SelectorSample(0, "causal", GOOD_QUESTION, "Aare"), SelectorSample(0, "factual", "short?", "Aare")]
    rewards = selector.feedback(rows, run_reward=0.6)
    assert all(type(value) is float for values in rewards.values() for value in values)  # loggable as is
    # fresh cluster arms: N_k / N_tot = 1/3 for both rows; rbar = 0; r = 0.6 and 0.6 * 0.65
    expected = [-math.log(1 / 3 + 1e-8) + 0.5 * 0.6, -math.log(1 / 3 + 1e-8) + 0.5 * 0.39]
    np.testing.assert_allclose(rewards["cluster"], expected)
    # task arms: 5 fresh arms, N_k / N_tot = 1/5
    np.testing.assert_allclose(rewards["task"], [math.log(5) + 0.3, math.log(5) + 0.195], atol=1e-7)
    assert selector.cluster_bandit.counts.tolist() == [3, 1, 1]
    assert selector.cluster_bandit.sums[0] == pytest.approx(sum(expected))
    assert selector.cluster_means.means()[0] == pytest.approx((0.6 + 0.39) / 2)
    task = TASK_TYPES.index("causal")
    assert selector.task_bandit.counts[task] == 2 and selector.task_means.means()[task] == pytest.approx(0.6)
    # the next round compares r_i with the arm's previous mean of r
    (second,) = selector.feedback([SelectorSample(0, "causal", GOOD_QUESTION, "Aare")], run_reward=0.6)["cluster"]
    assert second == pytest.approx(-math.log(3 / 5 + 1e-8) + 0.5 * (0.6 - 0.495))


def test_feedback_rejects_rows_that_name_no_arm():
    ids, embeddings = unit_circle_groups()
    selector = CorpusSelector(ids, embeddings, k0=3, seed=0)
    with pytest.raises(ValueError, match="names no arm"):
        selector.feedback([SelectorSample(3, "factual", GOOD_QUESTION, "Aare")], 0.5)
    with pytest.raises(ValueError, match="names no arm"):
        selector.feedback([SelectorSample(0, "trivia", GOOD_QUESTION, "Aare")], 0.5)


def test_task_type_instruction_is_one_line_per_type():
    lines = [task_type_instruction(task) for task in TASK_TYPES]
    assert all(task in line and "\n" not in line for task, line in zip(TASK_TYPES, lines, strict=True))
    with pytest.raises(ValueError, match="unknown task type"):
        task_type_instruction("multi-hop")


# --- the selector end to end ----------------------------------------------------------------------------------


def test_clusters_follow_the_groups_and_picks_update_usage():
    ids, embeddings = unit_circle_groups()
    selector = CorpusSelector(ids, embeddings, k0=3, seed=0)
    labels = selector.clustering.labels
    assert [len(set(labels[g * 12:(g + 1) * 12].tolist())) for g in range(3)] == [1, 1, 1]
    picks = selector.pick(0, 8, np.random.default_rng(0))
    assert len(picks) == 8 and all(labels[doc] == cluster and task in TASK_TYPES for doc, cluster, task in picks)
    assert selector.usage.sum() == 8


def test_pick_reclusters_when_k_grows():
    ids, embeddings = unit_circle_groups()
    selector = CorpusSelector(ids, embeddings, k0=2, alpha=0.5, seed=0)
    rng = np.random.default_rng(0)
    selector.pick(1, 4, rng)
    assert selector.num_clusters == 2
    selector.pick(2, 4, rng)
    assert selector.num_clusters == 3 and selector.cluster_bandit.n_arms == 3
    assert selector.usage.sum() == 8  # document usage survives re-clustering


def test_embeddings_must_be_normalized_and_match_the_ids():
    ids, embeddings = unit_circle_groups()
    with pytest.raises(ValueError, match="L2-normalized"):
        CorpusSelector(ids, embeddings * 2, k0=3)
    with pytest.raises(ValueError, match="embedding matrix"):
        CorpusSelector(ids[:-1], embeddings, k0=3)


def test_state_round_trip_gives_identical_subsequent_picks():
    ids, embeddings = unit_circle_groups()
    selector = CorpusSelector(ids, embeddings, k0=2, alpha=0.5, seed=4)
    rng = np.random.default_rng(11)
    for t in range(3):
        picks = selector.pick(t, 5, rng)
        selector.feedback([SelectorSample(cluster, task, GOOD_QUESTION + f" {doc}", "Aare")
                           for doc, cluster, task in picks], run_reward=0.7)
    state = json.loads(json.dumps(selector.to_state()))
    restored = CorpusSelector.from_state(state, ids, embeddings)
    assert restored.to_state() == state
    rng_a, rng_b = np.random.default_rng(99), np.random.default_rng(99)
    for t in range(3, 7):  # crosses two more re-clusterings (K = 3 at t = 2, 4 at t = 4, 5 at t = 6)
        picks_a, picks_b = selector.pick(t, 5, rng_a), restored.pick(t, 5, rng_b)
        assert picks_a == picks_b
        rows = [SelectorSample(cluster, task, GOOD_QUESTION, "Aare") for _, cluster, task in picks_a]
        assert selector.feedback(rows, 0.5) == restored.feedback(rows, 0.5)
    assert selector.to_state() == restored.to_state()


def test_from_state_rejects_another_document_set():
    ids, embeddings = unit_circle_groups()
    state = CorpusSelector(ids, embeddings, k0=3).to_state()
    with pytest.raises(ValueError, match="saved over 36 documents"):
        CorpusSelector.from_state(state, ids[:-1], embeddings[:-1])


# --- embeddings read from the retrieval index -----------------------------------------------------------------


class FixedVectorEmbedder:
    """A test fake for ``build_index``: passage "title\\ntext" -> a fixed vector read from the text."""

    name = "test-fixed"
    dimension = 4
    e5_prefixes = False

    def encode_passages(self, passages, show_progress=False):
        return np.array([[float(x) for x in p.split()[-4:]] for p in passages], dtype=np.float32)


def test_passage_embeddings_reads_the_index_vectors_in_the_requested_order(tmp_path):
    from searchplay.retrieval.index import RetrievalIndexError, build_index

    vectors = {"a": [1, 0, 0, 0], "b": [0, 3, 0, 4], "c": [0, 0, 1, 0]}
    passages = [{"id": key, "title": key.upper(), "text": " ".join(str(x) for x in vector)}
                for key, vector in vectors.items()]
    write_jsonl(tmp_path / "passages.jsonl", passages)
    build_index(tmp_path / "passages.jsonl", tmp_path / "index", "passages", FixedVectorEmbedder(),
                ann_threshold=1_000_000, fts=False, show_progress=False)
    got = passage_embeddings(tmp_path / "index", "passages", ["c", "a", "b"], batch_size=2)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [[0, 0, 1, 0], [1, 0, 0, 0], [0, 0.6, 0, 0.8]], atol=1e-7)
    with pytest.raises(RetrievalIndexError, match="not in"):
        passage_embeddings(tmp_path / "index", "passages", ["a", "zzz"])
