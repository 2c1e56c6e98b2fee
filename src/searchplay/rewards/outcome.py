"""Sequence-level rewards of search self-play: SSP binary rewards, the Proposer reward, and WCR.

Every function takes one group (the G Solver rollouts of one question) and returns plain floats.
A rollout counts as correct only if it is also valid (SSP App. A.2: malformed responses get zero).
"""

from __future__ import annotations

from collections.abc import Sequence

# SSP code (quark_score.py): a response with more than `max_answer_tags` <answer> tags has its score / 4.
ANSWER_SPAM_DIVISOR = 4.0


def binary_rewards(correct: Sequence[bool], valid: Sequence[bool]) -> list[float]:
    """SSP Solver reward c_i = 1(answer judged correct) (SSP Eq. 6; KG-paths paper Eq. 1).

    Invalid rollouts (no parseable answer, broken format) get 0 even if judged correct.

    >>> binary_rewards([True, True, False], [True, False, True])
    [1.0, 0.0, 0.0]
    """
    _same_length(correct=correct, valid=valid)
    return [float(bool(c) and bool(z)) for c, z in zip(correct, valid, strict=True)]


def wcr_rewards(correct: Sequence[bool], valid: Sequence[bool], coverage: Sequence[float],
                alpha: float = 0.3) -> list[float]:
    """Waypoint Coverage Reward for one group of Solver rollouts (KG-paths paper, Eq. 5-6).

    R_i = c_i + alpha * (1 - c_i) * z_i * g~_i with g~_i = g_i / max_j g_j over the WHOLE group
    (correct and invalid rollouts included, §3.3), and g~ = 0 when every coverage is 0. A correct
    rollout gets 1, an invalid one 0, a valid incorrect one alpha * g~_i in [0, alpha].

    >>> wcr_rewards([True, False], [True, True], [0.5, 0.25])
    [1.0, 0.15]
    """
    _same_length(correct=correct, valid=valid, coverage=coverage)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1] (KG-paths paper: 0.3); got {alpha}")
    if any(not 0.0 <= g <= 1.0 for g in coverage):
        raise ValueError(f"coverage values must lie in [0, 1] (Eq. 5 is a share); got {list(coverage)}")
    g_max = max(coverage, default=0.0)
    rewards = []
    for c, z, g in zip(binary_rewards(correct, valid), valid, coverage, strict=True):
        g_norm = g / g_max if g_max > 0 else 0.0
        rewards.append(c + alpha * (1.0 - c) * float(bool(z)) * g_norm)
    return rewards


def proposer_reward(correct: Sequence[bool], valid: bool = True) -> float:
    """Proposer reward R_p = 1 - (1/G) sum_i c_i (SSP Eq. 7; KG-paths paper Eq. 2 / Eq. 8).

    Always computed from binary Solver correctness, never from WCR. An invalid question (rule filter
    or RAG verification failed) gets 0, never a penalty (SSP App. B.3: -0.1 collapses training).

    >>> proposer_reward([True, False, False, False, False])
    0.8
    >>> proposer_reward([], valid=False)
    0.0
    """
    if not valid:
        return 0.0
    if not correct:
        raise ValueError("proposer_reward: a valid question needs at least one Solver rollout (got none); "
                         "pass valid=False for a question that was filtered out")
    return 1.0 - sum(bool(c) for c in correct) / len(correct)


def answer_spam_guard(rewards: Sequence[float], answer_tag_counts: Sequence[int], max_answer_tags: int) -> list[float]:
    """Divide the reward of a rollout with more than ``max_answer_tags`` <answer> tags by 4 (SSP code).

    >>> answer_spam_guard([1.0, 1.0], [1, 11], max_answer_tags=10)
    [1.0, 0.25]
    """
    _same_length(rewards=rewards, answer_tag_counts=answer_tag_counts)
    return [r / ANSWER_SPAM_DIVISOR if n > max_answer_tags else float(r)
            for r, n in zip(rewards, answer_tag_counts, strict=True)]


def _same_length(**columns: Sequence) -> None:
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"one value per rollout expected in every column; got lengths {lengths}")
