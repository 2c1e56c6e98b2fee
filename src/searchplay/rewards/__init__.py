"""Pure reward functions of search self-play (SSP, KG-paths WCR, GDCR) and their registries; a recipe's own
rewards live in its folder and register here (``searchplay.recipes``)."""

from searchplay.rewards.coverage import extract_think_text, waypoint_coverage
from searchplay.rewards.gdcr import contribution_scores, gdcr_step_rewards, subgraph_triples
from searchplay.rewards.outcome import answer_spam_guard, binary_rewards, proposer_reward, wcr_rewards
from searchplay.rewards.registry import (
    PROPOSER_REWARDS,
    ROLLOUT_FIELDS,
    SOLVER_REWARDS,
    ProposerOutcome,
    ProposerRewardFn,
    SolverGroup,
    SolverRewardFn,
    SolverRewards,
    get_proposer_reward,
    get_solver_reward,
    register_proposer_reward,
    register_rollout_field,
    register_solver_reward,
)
from searchplay.rewards.stats import accuracy_by_coverage, coverage_correctness_spearman, mean_coverage_by_outcome

__all__ = [
    "PROPOSER_REWARDS",
    "ROLLOUT_FIELDS",
    "SOLVER_REWARDS",
    "ProposerOutcome",
    "ProposerRewardFn",
    "SolverGroup",
    "SolverRewardFn",
    "SolverRewards",
    "accuracy_by_coverage",
    "answer_spam_guard",
    "binary_rewards",
    "contribution_scores",
    "coverage_correctness_spearman",
    "extract_think_text",
    "gdcr_step_rewards",
    "get_proposer_reward",
    "get_solver_reward",
    "mean_coverage_by_outcome",
    "proposer_reward",
    "register_proposer_reward",
    "register_rollout_field",
    "register_solver_reward",
    "subgraph_triples",
    "waypoint_coverage",
    "wcr_rewards",
]
