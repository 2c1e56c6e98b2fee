"""EVE-Agent's optional corpus selector: a cluster bandit and a task-type bandit (Arai & Ichikawa 2026, §3.3, App. F).

The default EVE run samples source documents uniformly (Algorithm 1); this selector can replace that draw.
Documents are clustered in embedding space into K_t = K_0 + floor(alpha t) clusters (Eqs. 22/29). Two UCB1
bandits (Eq. 30) pick a topic cluster and a question type; a document is then drawn inside the cluster,
favouring the cluster boundary and rarely used documents (Eq. 31). Between self-evolution iterations both
bandits are fed R_sel = -log(N_k / N_tot + eps) + lambda_u (r_i - rbar_k) per generated sample (Eqs. 32-33).

The choices the paper leaves open are in the decisions record ("Corpus selector (Eqs. 22, 29-33)"); in short:
embeddings are the retrieval index's own passage vectors (``passage_embeddings``), lengths in Eq. 32 are
characters, rbar_k is the arm's running mean of r_i (not of R_sel), a batch of n > 1 arms is drawn from
softmax(U / std(U)), and pull counts grow only when feedback arrives. Everything here is plain numpy; the
only side effects are the k-means fit and, in ``passage_embeddings``, reading the LanceDB table.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from searchplay.recipes.eve.rewards import LAMBDA_B, LAMBDA_E, LAMBDA_V

K0 = 10  # initial cluster count K_0 (Eq. 29)
ALPHA = 0.0  # cluster growth per round; not given in the paper, 0 keeps the clustering fixed (§11 U10)
BETA = 1.0  # UCB exploration weight (Eq. 30, "beta = 1 throughout")
LAMBDA_U = 0.5  # utility weight in Eq. 33
EPS = 1e-8  # log smoothing in Eq. 33
TASK_TYPES = ("factual", "comparison", "causal", "temporal", "aggregation")  # the task-type bandit's arms (App. F)
Q_LEN_WINDOW, Q_LEN_PENALTY = (20, 220), 0.65  # q_len in Eq. 32; |q| in characters (paper silent on the unit)
Q_ANS_WINDOW, Q_ANS_PENALTY = (1, 80), 0.55  # q_ans in Eq. 32; |a| in characters
PROPOSER_REWARD_MAX = 0.5 + 1.0 + LAMBDA_V + LAMBDA_B  # Eq. 16 with F_fmt = R_DZ = V = B = 1: 2.1
SOLVER_REWARD_MAX = 1.0 + LAMBDA_E  # Eq. 19 with EM = F1 = 1: 1.3
FIT_SAMPLE = 200_000  # documents the k-means is fitted on; every document is then assigned to its nearest centroid
KMEANS_N_INIT = 3  # k-means++ restarts of MiniBatchKMeans
LABEL_CHUNK = 65_536  # rows per nearest-centroid step (bounded memory on a 21M-passage corpus)
TASK_TYPE_QUESTIONS = {
    "factual": "ask for a single fact (a name, place, date or number) stated in the sources",
    "comparison": "ask which of two or more entities is larger, earlier, older or otherwise different",
    "causal": "ask why something happened or what it caused",
    "temporal": "ask when something happened or what came before or after it",
    "aggregation": "ask for a count, total or combination of several facts",
}


# --- the two bandits (Eq. 30) --------------------------------------------------------------------------------


def ucb1_scores(sums: Sequence[float] | np.ndarray, counts: Sequence[float] | np.ndarray,
                beta: float = BETA) -> np.ndarray:
    """U_k = S_k / max(N_k, 1) + beta sqrt(log max(N_tot, 1) / max(N_k, 1)), N_tot = sum_j N_j (Eq. 30).

    The function is Eq. 30 as written, on the counts it is given. The paper's "one virtual pull and zero
    virtual reward" per arm lives in the counts themselves: ``UCB1Bandit.new`` starts every arm at N_k = 1,
    S_k = 0, so two fresh arms score sqrt(log 2) each.

    >>> [round(float(u), 4) for u in ucb1_scores([0.0, 0.0], [1, 1])]
    [0.8326, 0.8326]
    >>> [round(float(u), 4) for u in ucb1_scores([3.0, 0.0], [3, 1])]
    [1.6798, 1.1774]
    """
    sums, counts = np.asarray(sums, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    pulls = np.maximum(counts, 1.0)
    total = max(float(counts.sum()), 1.0)
    return sums / pulls + beta * np.sqrt(math.log(total) / pulls)


def std_softmax(scores: np.ndarray) -> np.ndarray:
    """softmax(U_k / std(U)): the batch-selection distribution of App. F ("rescaled by the empirical standard
    deviation of the U-values"; population std). Equal scores, std 0, give the uniform distribution.

    >>> std_softmax(np.array([1.0, 1.0])).tolist()
    [0.5, 0.5]
    """
    scores = np.asarray(scores, dtype=np.float64)
    spread = float(scores.std())
    if not math.isfinite(spread) or spread <= 0.0:
        return np.full(len(scores), 1.0 / len(scores))
    weights = np.exp((scores - scores.max()) / spread)
    return weights / weights.sum()


@dataclass
class UCB1Bandit:
    """UCB1 arms with reward sums S_k and pull counts N_k (App. F; Auer et al. 2002). Counts include the
    virtual pull each arm starts with."""

    sums: np.ndarray
    counts: np.ndarray
    beta: float = BETA

    @classmethod
    def new(cls, n_arms: int, beta: float = BETA) -> UCB1Bandit:
        """Every arm starts with one virtual pull and zero virtual reward (App. F)."""
        if n_arms < 1:
            raise ValueError(f"UCB1Bandit needs at least one arm, got {n_arms}")
        return cls(np.zeros(n_arms), np.ones(n_arms, dtype=np.int64), beta)

    @property
    def n_arms(self) -> int:
        return len(self.counts)

    def scores(self) -> np.ndarray:
        return ucb1_scores(self.sums, self.counts, self.beta)

    def choose(self, rng: np.random.Generator) -> int:
        """argmax_k U_k (Eq. 30), ties broken uniformly at random."""
        scores = self.scores()
        best = np.flatnonzero(np.isclose(scores, scores.max(), rtol=0.0, atol=1e-12))
        return int(rng.choice(best))

    def choose_batch(self, n: int, rng: np.random.Generator) -> list[int]:
        """n arms: the argmax for n = 1, else n iid draws from softmax(U / std(U)) (App. F)."""
        if n == 1:
            return [self.choose(rng)]
        return [int(arm) for arm in rng.choice(self.n_arms, size=n, p=std_softmax(self.scores()))]

    def update(self, arm: int, reward: float) -> None:
        self.counts[arm] += 1
        self.sums[arm] += reward

    def to_state(self) -> dict[str, Any]:
        return {"sums": [float(s) for s in self.sums], "counts": [int(c) for c in self.counts], "beta": self.beta}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> UCB1Bandit:
        return cls(np.asarray(state["sums"], dtype=np.float64), np.asarray(state["counts"], dtype=np.int64),
                   float(state["beta"]))


@dataclass
class ArmMeans:
    """Per-arm running mean of the per-sample reward r_i: rbar_k in Eq. 33 (0 before an arm's first sample)."""

    sums: np.ndarray
    counts: np.ndarray

    @classmethod
    def new(cls, n_arms: int) -> ArmMeans:
        return cls(np.zeros(n_arms), np.zeros(n_arms, dtype=np.int64))

    def means(self) -> np.ndarray:
        return np.divide(self.sums, self.counts, out=np.zeros(len(self.sums)), where=self.counts > 0)

    def add(self, arm: int, value: float) -> None:
        self.counts[arm] += 1
        self.sums[arm] += value

    def to_state(self) -> dict[str, Any]:
        return {"sums": [float(s) for s in self.sums], "counts": [int(c) for c in self.counts]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ArmMeans:
        return cls(np.asarray(state["sums"], dtype=np.float64), np.asarray(state["counts"], dtype=np.int64))


# --- clusters (Eqs. 22/29, 31) --------------------------------------------------------------------------------


def cluster_count(t: int, k0: int = K0, alpha: float = ALPHA) -> int:
    """K_t = K_0 + floor(alpha t) (Eqs. 22/29).

    >>> cluster_count(0), cluster_count(7, k0=10, alpha=0.5), cluster_count(3, k0=4, alpha=1.0)
    (10, 13, 7)
    """
    if k0 < 1 or alpha < 0:
        raise ValueError(f"cluster_count needs k0 >= 1 and alpha >= 0, got k0={k0}, alpha={alpha}")
    return k0 + math.floor(alpha * t)


def nearest_centroids(points: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the nearest centroid (Euclidean) for each row of ``points``; ties go to the lower index."""
    centroids = np.asarray(centroids, dtype=np.float64)
    squared = (centroids**2).sum(axis=1)
    labels = np.empty(len(points), dtype=np.int64)
    for start in range(0, len(points), LABEL_CHUNK):
        chunk = np.asarray(points[start:start + LABEL_CHUNK], dtype=np.float64)
        labels[start:start + len(chunk)] = np.argmin(squared - 2.0 * chunk @ centroids.T, axis=1)
    return labels


def inherit_statistics(parents: Sequence[int] | np.ndarray, sums: np.ndarray, counts: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Split arm statistics across a re-clustering (App. F, "inherit the bandit statistics").

    ``parents[i]`` is the old cluster nearest to new centroid i. An old cluster j with n children, count N_j
    and reward sum S_j gives each child max(floor(N_j / n), 1) pulls and S_j / n reward. Statistics are
    never reset; an old cluster that no new centroid is nearest to has no child, and its pulls leave N_tot.

    >>> new_sums, new_counts = inherit_statistics([0, 0, 1], np.array([3.0, 0.6]), np.array([5, 1]))
    >>> new_sums.tolist(), new_counts.tolist()
    ([1.5, 1.5, 0.6], [2, 2, 1])
    """
    parents = np.asarray(parents, dtype=np.int64)
    children = np.bincount(parents, minlength=len(counts))[parents]
    new_counts = np.maximum(np.asarray(counts, dtype=np.int64)[parents] // children, 1)
    return np.asarray(sums, dtype=np.float64)[parents] / children, new_counts


def inherit_means(parents: Sequence[int] | np.ndarray, means: ArmMeans) -> ArmMeans:
    """Carry each old arm's rbar to its children (mean kept, sample count split as in ``inherit_statistics``)."""
    parents = np.asarray(parents, dtype=np.int64)
    children = np.bincount(parents, minlength=len(means.counts))[parents]
    parent_counts = means.counts[parents]
    counts = np.where(parent_counts > 0, np.maximum(parent_counts // children, 1), 0)
    return ArmMeans(means.means()[parents] * counts, counts.astype(np.int64))


def within_cluster_probabilities(distances: np.ndarray, usage: np.ndarray) -> np.ndarray:
    """P[d | k] proportional to ||z_d - mu_k||_2 / (1 + u_d) over the cluster's documents (Eq. 31).

    ``distances`` are the members' distances to their centroid, ``usage`` u_d how often each was drawn
    before. If every score is 0 (e.g. all members sit on the centroid) the draw is uniform (App. F).

    >>> within_cluster_probabilities(np.array([2.0, 2.0, 4.0]), np.array([0, 1, 3])).tolist()
    [0.5, 0.25, 0.25]
    """
    scores = np.asarray(distances, dtype=np.float64) / (1.0 + np.asarray(usage, dtype=np.float64))
    total = float(scores.sum())
    if not math.isfinite(total) or total <= 0.0:
        return np.full(len(scores), 1.0 / len(scores))
    return scores / total


# --- the feedback reward (Eqs. 32-33) ------------------------------------------------------------------------


def _window(length: int, window: tuple[int, int], penalty: float) -> float:
    return 1.0 if window[0] <= length <= window[1] else penalty


def sample_quality(question: str, answer: str, duplicates: int) -> float:
    """Q_i = q_len(|q_i|) q_ans(|a_i|) / sqrt(max(D_i, 1)) (Eq. 32); lengths in characters, stripped.

    q_len is 1 for 20..220 characters else 0.65; q_ans is 1 for 1..80 characters else 0.55; D_i is how many
    samples in the batch share the prompt string.

    >>> sample_quality("Which river flows through Bern?", "Aare", 1), round(sample_quality("Too short?", "", 4), 6)
    (1.0, 0.17875)
    """
    quality = _window(len(question.strip()), Q_LEN_WINDOW, Q_LEN_PENALTY)
    quality *= _window(len(answer.strip()), Q_ANS_WINDOW, Q_ANS_PENALTY)
    return quality / math.sqrt(max(duplicates, 1))


def sample_rewards(questions: Sequence[str], answers: Sequence[str], run_reward: float) -> list[float]:
    """r_i = R_run Q_i for one batch of generated samples (Eq. 32); D_i counts identical (stripped) questions.

    >>> rewards = sample_rewards(["Which river flows through Bern?"] * 2 + ["Who was Alan Turing, in one word?"],
    ...                          ["Aare", "Aare", "mathematician"], 0.5)
    >>> [round(r, 6) for r in rewards]  # the duplicated question: 0.5 / sqrt(2)
    [0.353553, 0.353553, 0.5]
    """
    if not 0.0 <= run_reward <= 1.0:
        raise ValueError(f"R_run must lie in [0, 1] (App. F), got {run_reward}; "
                         "build it with run_summary_reward(proposer_mean, solver_mean)")
    duplicates = Counter(question.strip() for question in questions)
    return [run_reward * sample_quality(q, a, duplicates[q.strip()]) for q, a in zip(questions, answers, strict=True)]


def selector_reward(arm_count: float, total_count: float, sample_reward: float, arm_mean_before: float,
                    lambda_u: float = LAMBDA_U, eps: float = EPS) -> float:
    """R_sel = -log(N_k / N_tot + eps) + lambda_u (r_i - rbar_k^prev) (Eq. 33), pre-update counts and mean.

    >>> round(selector_reward(2, 10, 0.6, 0.2), 6)  # -log(0.2) + 0.5 * 0.4
    1.809438
    """
    return float(-math.log(arm_count / total_count + eps) + lambda_u * (sample_reward - arm_mean_before))


def run_summary_reward(proposer_mean: float, solver_mean: float) -> float:
    """R_run in [0, 1]: the mean of the latest Proposer and Solver mean rewards (App. F), each first divided
    by its maximum (R_pro <= 2.1, Eq. 16; R_sol <= 1.3, Eq. 19) and the result clipped to [0, 1] (§11 U10).

    >>> round(run_summary_reward(1.05, 0.65), 6)
    0.5
    """
    mean = 0.5 * (proposer_mean / PROPOSER_REWARD_MAX + solver_mean / SOLVER_REWARD_MAX)
    return min(1.0, max(0.0, mean))


def task_type_instruction(task_type: str) -> str:
    """The one prompt line that asks the Proposer for the chosen task type (the paper does not say how).

    >>> task_type_instruction("causal")
    'Question type: causal (ask why something happened or what it caused).'
    """
    if task_type not in TASK_TYPE_QUESTIONS:
        raise ValueError(f"unknown task type {task_type!r}; expected one of {', '.join(TASK_TYPES)}")
    return f"Question type: {task_type} ({TASK_TYPE_QUESTIONS[task_type]})."


# --- the selector ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectorSample:
    """One generated sample fed back to the selector: the arms that produced it and its (q, a)."""

    cluster_id: int
    task_type: str
    question: str
    answer: str


@dataclass
class Clustering:
    """Centroids mu_k, each document's cluster and its distance ||z_d - mu_k||_2 to that centroid."""

    centroids: np.ndarray
    labels: np.ndarray
    distances: np.ndarray
    members: list[np.ndarray] = field(repr=False)

    @classmethod
    def assign(cls, embeddings: np.ndarray, centroids: np.ndarray) -> Clustering:
        centroids = np.asarray(centroids, dtype=np.float32)
        labels = nearest_centroids(embeddings, centroids)
        distances = np.empty(len(embeddings))
        for start in range(0, len(embeddings), LABEL_CHUNK):
            chunk = np.asarray(embeddings[start:start + LABEL_CHUNK], dtype=np.float64)
            offsets = chunk - centroids[labels[start:start + len(chunk)]].astype(np.float64)
            distances[start:start + len(chunk)] = np.linalg.norm(offsets, axis=1)
        members = [np.flatnonzero(labels == k) for k in range(len(centroids))]
        return cls(centroids, labels, distances, members)


def fit_centroids(embeddings: np.ndarray, n_clusters: int, seed: int, fit_sample: int = FIT_SAMPLE) -> np.ndarray:
    """Mini-batch k-means centroids (App. F), fitted on at most ``fit_sample`` documents drawn with ``seed``."""
    from sklearn.cluster import MiniBatchKMeans

    rows = embeddings
    if len(embeddings) > fit_sample:
        rows = embeddings[np.sort(np.random.default_rng(seed).choice(len(embeddings), fit_sample, replace=False))]
    kmeans = MiniBatchKMeans(n_clusters=n_clusters, random_state=seed, n_init=KMEANS_N_INIT)
    return kmeans.fit(np.asarray(rows, dtype=np.float32)).cluster_centers_.astype(np.float32)


def _check_embeddings(ids: Sequence[str], embeddings: np.ndarray) -> np.ndarray:
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if embeddings.ndim != 2 or len(embeddings) != len(ids) or len(ids) == 0:
        raise ValueError(f"CorpusSelector needs a [n, D] embedding matrix for n = {len(ids)} document ids, "
                         f"got shape {embeddings.shape}")
    norms = np.linalg.norm(embeddings, axis=1)
    if not np.allclose(norms, 1.0, atol=1e-2):
        raise ValueError(f"CorpusSelector expects L2-normalized embeddings; row norms span "
                         f"[{norms.min():.3f}, {norms.max():.3f}]. Divide each row by its norm first")
    return embeddings


class CorpusSelector:
    """The cluster bandit + task-type bandit document selector (§3.3, App. F).

    ``pick`` re-clusters when K_t grows (Eqs. 22/29), then draws one cluster arm and one task-type arm per
    document (Eq. 30) and the document inside the cluster (Eq. 31). ``feedback`` applies Eqs. 32-33 to
    both bandits once per self-evolution iteration. The random generator is the caller's (and its state is
    the caller's to checkpoint); ``to_state`` holds everything else.
    """

    def __init__(self, ids: Sequence[str], embeddings: np.ndarray, k0: int = K0, alpha: float = ALPHA,
                 beta: float = BETA, lambda_u: float = LAMBDA_U, eps: float = EPS, seed: int = 0,
                 fit_sample: int = FIT_SAMPLE, centroids: np.ndarray | None = None):
        if beta <= 0 or lambda_u < 0 or eps <= 0:
            raise ValueError(f"CorpusSelector needs beta > 0, lambda_u >= 0, eps > 0; got {beta}, {lambda_u}, {eps}")
        self.ids = list(ids)
        self.embeddings = _check_embeddings(self.ids, embeddings)
        self.k0, self.alpha, self.beta, self.lambda_u, self.eps = k0, alpha, beta, lambda_u, eps
        self.seed, self.fit_sample = seed, fit_sample
        if centroids is None:
            centroids = fit_centroids(self.embeddings, self._capped(cluster_count(0, k0, alpha)), seed, fit_sample)
        self.clustering = Clustering.assign(self.embeddings, centroids)
        self.cluster_bandit = UCB1Bandit.new(self.num_clusters, beta)
        self.task_bandit = UCB1Bandit.new(len(TASK_TYPES), beta)
        self.cluster_means = ArmMeans.new(self.num_clusters)
        self.task_means = ArmMeans.new(len(TASK_TYPES))
        self.usage = np.zeros(len(self.ids), dtype=np.int64)

    @property
    def num_clusters(self) -> int:
        return len(self.clustering.centroids)

    def _capped(self, k: int) -> int:
        return min(k, len(self.ids))

    def recluster(self, n_clusters: int) -> None:
        """Re-fit with ``n_clusters`` centroids and split the arm statistics across the children (App. F)."""
        centroids = fit_centroids(self.embeddings, n_clusters, self.seed, self.fit_sample)
        parents = nearest_centroids(centroids, self.clustering.centroids)
        self.cluster_bandit.sums, self.cluster_bandit.counts = inherit_statistics(
            parents, self.cluster_bandit.sums, self.cluster_bandit.counts)
        self.cluster_means = inherit_means(parents, self.cluster_means)
        self.clustering = Clustering.assign(self.embeddings, centroids)

    def draw_document(self, cluster: int, rng: np.random.Generator) -> int:
        """A document of ``cluster`` by Eq. 31; an empty cluster falls back to a uniform draw over the corpus."""
        members = self.clustering.members[cluster]
        if len(members) == 0:
            return int(rng.integers(len(self.ids)))
        probabilities = within_cluster_probabilities(self.clustering.distances[members], self.usage[members])
        return int(members[rng.choice(len(members), p=probabilities)])

    def pick(self, t: int, batch_size: int, rng: np.random.Generator) -> list[tuple[int, int, str]]:
        """``batch_size`` (document index, cluster id, task type) triples for round t; u_d grows per draw."""
        wanted = self._capped(cluster_count(t, self.k0, self.alpha))
        if wanted > self.num_clusters:
            self.recluster(wanted)
        clusters = self.cluster_bandit.choose_batch(batch_size, rng)
        tasks = self.task_bandit.choose_batch(batch_size, rng)
        picks = []
        for cluster, task in zip(clusters, tasks, strict=True):
            document = self.draw_document(cluster, rng)
            self.usage[document] += 1
            picks.append((document, cluster, TASK_TYPES[task]))
        return picks

    def feedback(self, rows: Sequence[SelectorSample], run_reward: float) -> dict[str, list[float]]:
        """Feed one iteration's generated samples to both bandits (Eqs. 32-33); returns the R_sel values.

        Every R_sel uses the counts and rbar from before this call (the paper's "pre-update"); then each row
        adds one pull and its R_sel to its cluster arm and to its task-type arm, and its r_i to rbar.
        """
        for row in rows:
            if not 0 <= row.cluster_id < self.num_clusters or row.task_type not in TASK_TYPES:
                raise ValueError(f"feedback row {row} names no arm: cluster ids are 0..{self.num_clusters - 1} "
                                 f"and task types {TASK_TYPES}; feed back before the next pick re-clusters")
        rewards = sample_rewards([row.question for row in rows], [row.answer for row in rows], run_reward)
        cluster_arms = [row.cluster_id for row in rows]
        task_arms = [TASK_TYPES.index(row.task_type) for row in rows]
        return {"cluster": self._feed(self.cluster_bandit, self.cluster_means, cluster_arms, rewards),
                "task": self._feed(self.task_bandit, self.task_means, task_arms, rewards)}

    def _feed(self, bandit: UCB1Bandit, means: ArmMeans, arms: list[int], rewards: list[float]) -> list[float]:
        counts, total, before = bandit.counts.copy(), float(bandit.counts.sum()), means.means()
        selector_rewards = [selector_reward(counts[arm], total, r, before[arm], self.lambda_u, self.eps)
                            for arm, r in zip(arms, rewards, strict=True)]
        for arm, r, r_sel in zip(arms, rewards, selector_rewards, strict=True):
            bandit.update(arm, r_sel)
            means.add(arm, r)
        return selector_rewards

    def to_state(self) -> dict[str, Any]:
        """Everything but the embeddings and the caller's RNG, as plain JSON-able values."""
        return {"k0": self.k0, "alpha": self.alpha, "beta": self.beta, "lambda_u": self.lambda_u, "eps": self.eps,
                "seed": self.seed, "fit_sample": self.fit_sample, "n_documents": len(self.ids),
                "centroids": self.clustering.centroids.astype(np.float64).tolist(),
                "cluster_bandit": self.cluster_bandit.to_state(), "task_bandit": self.task_bandit.to_state(),
                "cluster_means": self.cluster_means.to_state(), "task_means": self.task_means.to_state(),
                "usage": {self.ids[i]: int(self.usage[i]) for i in np.flatnonzero(self.usage)}}

    @classmethod
    def from_state(cls, state: dict[str, Any], ids: Sequence[str], embeddings: np.ndarray) -> CorpusSelector:
        """Resume from ``to_state``: the same centroids re-assign the same labels, so picks continue exactly."""
        if state["n_documents"] != len(ids):
            raise ValueError(f"selector state was saved over {state['n_documents']} documents, got {len(ids)} ids; "
                             "resume with the document set the checkpoint was made on")
        selector = cls(ids, embeddings, state["k0"], state["alpha"], state["beta"], state["lambda_u"], state["eps"],
                       state["seed"], state["fit_sample"], centroids=np.asarray(state["centroids"], dtype=np.float32))
        selector.cluster_bandit = UCB1Bandit.from_state(state["cluster_bandit"])
        selector.task_bandit = UCB1Bandit.from_state(state["task_bandit"])
        selector.cluster_means = ArmMeans.from_state(state["cluster_means"])
        selector.task_means = ArmMeans.from_state(state["task_means"])
        position = {doc_id: i for i, doc_id in enumerate(selector.ids)}
        missing = [doc_id for doc_id in state["usage"] if doc_id not in position]
        if missing:
            raise ValueError(f"selector state counts uses of {len(missing)} unknown document ids, e.g. {missing[:3]}")
        for doc_id, uses in state["usage"].items():
            selector.usage[position[doc_id]] = uses
        return selector


# --- embeddings from the retrieval index ----------------------------------------------------------------------


def passage_embeddings(index_dir: str | Path, table: str, ids: Sequence[str], batch_size: int = 65_536
                       ) -> np.ndarray:
    """The index's stored passage vectors for ``ids``, in that order, L2-normalized ([len(ids), D] float32).

    The selector re-uses the retrieval embedder's vectors (App. F uses a frozen E5-base-v2; the embedded
    default index holds all-MiniLM-L6-v2, 384-d) instead of loading a second encoder. The table is only
    read, one batch of ``id``/``vector`` columns at a time, so memory holds the result, not the table.
    """
    from searchplay.retrieval.index import RetrievalIndexError, open_table, read_manifest

    dimension = int(read_manifest(index_dir)["dimension"])
    wanted = {doc_id: i for i, doc_id in enumerate(ids)}
    vectors = np.zeros((len(ids), dimension), dtype=np.float32)
    found = np.zeros(len(ids), dtype=bool)
    reader = open_table(index_dir, table).search().select(["id", "vector"]).limit(None).to_batches(batch_size)
    for batch in reader:
        rows = batch.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(-1, dimension)
        for row, doc_id in enumerate(batch.column("id").to_pylist()):
            position = wanted.get(doc_id)
            if position is not None:
                vectors[position], found[position] = rows[row], True
    if not found.all():
        missing = [ids[i] for i in np.flatnonzero(~found)[:3]]
        raise RetrievalIndexError(f"{int((~found).sum())} document ids are not in {index_dir}/{table}, e.g. "
                                  f"{missing}; rebuild the index over the same corpus (`searchplay index build`)")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)
