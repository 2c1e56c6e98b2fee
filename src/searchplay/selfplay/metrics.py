"""Per-iteration self-play statistics, as flat ``name -> float`` dicts (pure functions).

Besides the SSP training-dynamics curves (SSP App. B.1: in-game rewards, valid-question rate,
search calls, lengths, entropy), these answer the review of the KG paper (seed 001, major comment 1):
mean waypoint coverage of correct vs. incorrect Solver rollouts, the Spearman correlation between
coverage and correctness (KG paper Fig. 4b) and accuracy binned by coverage (Fig. 4c); the statistics
themselves are ``searchplay.rewards.stats``. Undefined values (e.g. no correct rollout) are NaN, so
every variant logs the same metric names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from searchplay.intervals import first_against_last, wilson_interval
from searchplay.rewards.stats import (
    DEFAULT_COVERAGE_BINS,
    accuracy_by_coverage,
    coverage_correctness_spearman,
    mean_coverage_by_outcome,
)

NAN = math.nan


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else NAN


def coverage_statistics(coverage: Sequence[float], correct: Sequence[bool]) -> dict[str, float]:
    """Raw coverage g_i (KG Eq. 5) of correct vs. incorrect rollouts, Spearman, accuracy per coverage bin."""
    by_outcome = mean_coverage_by_outcome(coverage, correct)
    rho, p_value = coverage_correctness_spearman(coverage, correct)
    stats = {"coverage/mean": mean(coverage), "coverage/mean_correct": by_outcome["correct"],
             "coverage/mean_incorrect": by_outcome["incorrect"], "coverage/spearman_rho": rho,
             "coverage/spearman_p": p_value}
    for row in accuracy_by_coverage(coverage, correct, DEFAULT_COVERAGE_BINS):
        label = f"{row['lo']:.2f}_{row['hi']:.2f}"
        stats[f"coverage/accuracy_bin_{label}"] = row["accuracy"]
        stats[f"coverage/count_bin_{label}"] = float(row["n"])
    return stats


def fresh_accuracy(correct: Sequence[Sequence[bool]], sources: Sequence[str]) -> dict[str, float]:
    """Solver accuracy on the iteration's fresh questions: the share of correct rollouts over the groups whose
    question the Proposer wrote this iteration (``source == 'fresh'``; replayed and replicated ones are left
    out), their count, and its Wilson 95% interval. NaN (skipped and counted by the loop) with no fresh rollout.

    >>> fresh_accuracy([[True, False], [True, True]], ["fresh", "replay"])["solver/fresh_accuracy"]
    0.5
    """
    flat = [c for group, source in zip(correct, sources, strict=True) if source == "fresh" for c in group]
    n, hits = len(flat), sum(flat)
    low, high = wilson_interval(hits, n) if n else (NAN, NAN)
    return {"solver/fresh_accuracy": rate(hits, n), "solver/fresh_rollouts": float(n),
            "solver/fresh_accuracy_ci_low": low, "solver/fresh_accuracy_ci_high": high}


def fresh_accuracy_trend(history: Sequence[dict[str, float]]) -> dict[str, float]:
    """Does the Solver's fresh-question accuracy rise over the run? Its pooled accuracy over the first and the
    last third of the iterations (each ``len(history) // 3`` iterations, at least one) and the one-sided
    Fisher exact p that the last third is higher (``searchplay.intervals``). Rollouts of one question are
    not independent, so the p is optimistic; NaN with fewer than 3 iterations or no fresh rollout in a third.

    >>> rows = [{"solver/fresh_accuracy": a, "solver/fresh_rollouts": 20.0} for a in (0.1, 0.1, 0.2, 0.6)]
    >>> trend = fresh_accuracy_trend(rows)
    >>> trend["trend/fresh_accuracy_first_third"], trend["trend/fresh_accuracy_last_third"]
    (0.1, 0.6)
    """
    third = len(history) // 3
    out = {"trend/fresh_accuracy_first_third": NAN, "trend/fresh_accuracy_last_third": NAN,
           "trend/fresh_accuracy_p": NAN, "trend/iterations_per_third": float(third)}
    if third < 1:
        return out
    first, last, p = first_against_last(history, third)
    if not math.isnan(p):  # NaN: a third without a fresh rollout
        out.update({"trend/fresh_accuracy_first_third": first.rate, "trend/fresh_accuracy_last_third": last.rate,
                    "trend/fresh_accuracy_p": p})
    return out


def step_credit_statistics(step_rewards: Sequence[float], step_advantages: Sequence[float]) -> dict[str, float]:
    """GDCR per step (GDCR Eq. 12) and the share of steps whose step advantage A_{t,g} (Eq. 13) is positive.

    NaN (skipped and counted by the loop) for variants without step-level rewards.
    """
    return {"gdcr/step_reward_mean": mean(step_rewards), "gdcr/steps": float(len(step_rewards)),
            "gdcr/positive_step_advantage_share": mean([float(a > 0) for a in step_advantages]),
            "gdcr/steps_with_reward_share": mean([float(r > 0) for r in step_rewards])}


def nonzero_advantage_groups(group_advantages: Sequence[Sequence[float]], tol: float = 1e-12) -> int:
    """How many Solver groups carry any learning signal (some advantage differs from zero)."""
    return sum(1 for group in group_advantages if any(abs(a) > tol for a in group))


def rate(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else NAN
