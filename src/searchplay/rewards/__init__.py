"""Pure reward functions of search self-play (SSP, KG-paths WCR, GDCR, EVE) and their registries."""

from searchplay.rewards.coverage import extract_think_text, waypoint_coverage
from searchplay.rewards.eve import (
    brevity_bonus,
    drzero_difficulty,
    eve_proposer_reward,
    eve_solver_reward,
    evidence_verifier,
    is_verbatim,
)
from searchplay.rewards.gdcr import contribution_scores, gdcr_step_rewards, subgraph_triples
from searchplay.rewards.outcome import answer_spam_guard, binary_rewards, proposer_reward, wcr_rewards
from searchplay.rewards.registry import (
    PROPOSER_REWARDS,
    SOLVER_REWARDS,
    ProposerOutcome,
    ProposerRewardFn,
    SolverGroup,
    SolverRewardFn,
    SolverRewards,
    get_proposer_reward,
    get_solver_reward,
)
from searchplay.rewards.stats import accuracy_by_coverage, coverage_correctness_spearman, mean_coverage_by_outcome

__all__ = [
    "PROPOSER_REWARDS",
    "SOLVER_REWARDS",
    "ProposerOutcome",
    "ProposerRewardFn",
    "SolverGroup",
    "SolverRewardFn",
    "SolverRewards",
    "accuracy_by_coverage",
    "answer_spam_guard",
    "binary_rewards",
    "brevity_bonus",
    "contribution_scores",
    "coverage_correctness_spearman",
    "drzero_difficulty",
    "eve_proposer_reward",
    "eve_solver_reward",
    "evidence_verifier",
    "extract_think_text",
    "gdcr_step_rewards",
    "get_proposer_reward",
    "get_solver_reward",
    "is_verbatim",
    "mean_coverage_by_outcome",
    "proposer_reward",
    "subgraph_triples",
    "waypoint_coverage",
    "wcr_rewards",
]
