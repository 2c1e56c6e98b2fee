"""Named reward functions, so the self-play loop never branches on variant names.

Every Solver reward has ONE signature, ``fn(group: SolverGroup, params: Params) -> SolverRewards``;
every Proposer reward ``fn(outcome: ProposerOutcome, params: Params) -> float``. ``params`` is the whole
typed params.yaml (alpha: ``params.wcr.alpha``; spam limit: ``params.agent.max_answer_tags``).
A new variant (a recipe's, in its own folder; GDCR: step-level rewards in ``SolverRewards.step_rewards``) adds a
function and a registry entry (``register_solver_reward``). What a reward reads beyond the shared columns travels
in mappings, so a new signal needs no edit here: ``SolverGroup.rollouts`` (one mapping per rollout, the values of
the ``ROLLOUT_FIELDS`` its variant names, ``Variant.rollout_fields``), ``SolverGroup.record`` (the question's
record) and ``ProposerOutcome.record`` (what the recipe's step measured of a Proposer rollout).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from searchplay.rewards.coverage import waypoint_coverage
from searchplay.rewards.gdcr import contribution_scores, corrupt_graph, gdcr_step_rewards
from searchplay.rewards.outcome import answer_spam_guard, binary_rewards, proposer_reward, wcr_rewards

if TYPE_CHECKING:
    from searchplay.config import Params


@dataclass(frozen=True)
class SolverGroup:
    """The G Solver rollouts of one question (one value per rollout in each list) and its record.

    ``correct`` is the judge's verdict, ``valid`` the format validity z_i^val, ``think_texts`` the joined
    ``<think>`` spans. Question fields are optional: WCR needs ``waypoints``; GDCR the question's ``graph``
    (label triples, answer included), node ``aliases`` and each rollout's per-turn ``steps`` (thought,
    observation or None). A recipe's reward reads its own fields from ``rollouts`` (per rollout) and ``record``
    (the question's record, e.g. a gold evidence span).
    """

    correct: list[bool]
    valid: list[bool]
    think_texts: list[str] = field(default_factory=list)
    answer_tag_counts: list[int] = field(default_factory=list)
    predictions: list[str | None] = field(default_factory=list)
    steps: list[list[tuple[str, str | None]]] = field(default_factory=list)  # per rollout: (thought, observation)
    question: str = ""
    answer: str = ""
    waypoints: list[str] = field(default_factory=list)
    graph: list[tuple[str, str, str]] = field(default_factory=list)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    rollouts: list[Mapping[str, Any]] = field(default_factory=list)  # per rollout: its variant's rollout fields
    record: Mapping[str, Any] = field(default_factory=dict)  # the question's record (a recipe's fields)

    def __post_init__(self) -> None:
        size = len(self.correct)
        optional = {"valid": self.valid, "think_texts": self.think_texts, "answer_tag_counts": self.answer_tag_counts,
                    "predictions": self.predictions, "steps": self.steps, "rollouts": self.rollouts}
        wrong = {name: len(v) for name, v in optional.items() if (name == "valid" or v) and len(v) != size}
        if wrong:
            raise ValueError(f"SolverGroup: {size} rollouts in 'correct' but lengths {wrong}; "
                             "give one value per rollout (or leave optional columns empty)")

    @property
    def size(self) -> int:
        return len(self.correct)


@dataclass
class SolverRewards:
    """Per-rollout rewards of one group; ``step_rewards`` (per rollout, per turn) for step-level methods."""

    rewards: list[float]
    step_rewards: list[list[float]] | None = None
    details: dict[str, list[float]] = field(default_factory=dict)  # e.g. raw coverage, for tracking


@dataclass(frozen=True)
class ProposerOutcome:
    """One Proposer question: did it pass the filters, and how did its Solver rollouts do."""

    valid: bool
    solver_correct: list[bool] = field(default_factory=list)
    question: str = ""
    answer: str = ""
    record: Mapping[str, Any] = field(default_factory=dict)  # what a recipe's step measured of the rollout


ROLLOUT_FIELDS: dict[str, Callable[[Any], Any]] = {}  # name -> fn(trajectory): a per-rollout signal a reward reads
# from SolverGroup.rollouts; a recipe adds its own (register_rollout_field), a variant names those it needs


SolverRewardFn = Callable[[SolverGroup, "Params"], SolverRewards]
ProposerRewardFn = Callable[[ProposerOutcome, "Params"], float]


def _guarded(group: SolverGroup, rewards: list[float], params: Params) -> list[float]:
    if not group.answer_tag_counts:
        return rewards
    return answer_spam_guard(rewards, group.answer_tag_counts, params.agent.max_answer_tags)


def solver_binary(group: SolverGroup, params: Params) -> SolverRewards:
    """SSP Solver reward c_i (SSP Eq. 6), with the SSP code's answer-spam guard."""
    return SolverRewards(_guarded(group, binary_rewards(group.correct, group.valid), params))


def solver_wcr(group: SolverGroup, params: Params) -> SolverRewards:
    """WCR Solver reward (KG-paths paper Eq. 5-6); raw coverage is kept in ``details['coverage']``."""
    if len(group.think_texts) != group.size:
        raise ValueError(f"WCR needs the <think> text of every rollout; got {len(group.think_texts)} "
                         f"for {group.size} rollouts")
    casefold = params.wcr.casefold
    coverage = [waypoint_coverage(text, group.waypoints, casefold=casefold) for text in group.think_texts]
    rewards = wcr_rewards(group.correct, group.valid, coverage, alpha=params.wcr.alpha)
    return SolverRewards(_guarded(group, rewards, params), details={"coverage": coverage})


def solver_gdcr(group: SolverGroup, params: Params) -> SolverRewards:
    """Binary outcome reward (with the spam guard) plus GDCR step rewards per rollout (GDCR Eqs. 5-12).

    The step rewards feed the 'sapo' advantage estimator; ``details['gdcr']`` holds every step's r_{t,g}.
    A question without a graph (a plain-answer seed) gets zero step rewards, so SAPO falls back to GRPO.
    """
    if len(group.steps) != group.size:
        raise ValueError(f"GDCR needs the per-turn steps of every rollout; got {len(group.steps)} for {group.size}")
    cfg = params.gdcr
    rng = random.Random(f"{params.selfplay.seed}:{group.question}")  # the same corruption for every rollout
    graph, answer = corrupt_graph(group.graph, group.answer, cfg.graph_noise, cfg.noise_rate, rng)
    scores = contribution_scores(graph, answer, k=cfg.k) if graph else {}
    step_rewards = [gdcr_step_rewards(steps, scores, group.aliases, cfg.components) for steps in group.steps]
    rewards = _guarded(group, binary_rewards(group.correct, group.valid), params)
    return SolverRewards(rewards, step_rewards=step_rewards, details={"gdcr": [r for s in step_rewards for r in s]})


def solver_wcr_gdcr(group: SolverGroup, params: Params) -> SolverRewards:
    """WCR outcome reward (KG-paths Eq. 6) as SAPO's trajectory reward, with GDCR step rewards (GDCR Eq. 12)."""
    wcr, gdcr = solver_wcr(group, params), solver_gdcr(group, params)
    return SolverRewards(wcr.rewards, step_rewards=gdcr.step_rewards, details={**wcr.details, **gdcr.details})


def proposer_ssp(outcome: ProposerOutcome, params: Params) -> float:
    """SSP Proposer reward 1 - mean(c_i), 0 for an invalid question (SSP Eq. 7, KG-paths Eq. 2)."""
    return proposer_reward(outcome.solver_correct, valid=outcome.valid)


SOLVER_REWARDS: dict[str, SolverRewardFn] = {"binary": solver_binary, "wcr": solver_wcr, "gdcr": solver_gdcr,
                                             "wcr_gdcr": solver_wcr_gdcr}
PROPOSER_REWARDS: dict[str, ProposerRewardFn] = {"ssp": proposer_ssp}  # recipes add theirs (register_*)


def register_solver_reward(name: str, fn: SolverRewardFn) -> None:
    """Add a Solver reward under ``name`` (a recipe's, at import); the same function again is a no-op."""
    _register(SOLVER_REWARDS, name, fn, "Solver reward")


def register_proposer_reward(name: str, fn: ProposerRewardFn) -> None:
    """Add a Proposer reward under ``name`` (a recipe's, at import); the same function again is a no-op."""
    _register(PROPOSER_REWARDS, name, fn, "Proposer reward")


def register_rollout_field(name: str, fn: Callable[[Any], Any]) -> None:
    """Add a per-rollout signal ``fn(trajectory)`` under ``name`` (``Variant.rollout_fields`` names it; the step
    puts its value in each rollout's mapping of ``SolverGroup.rollouts``); the same function again is a no-op."""
    _register(ROLLOUT_FIELDS, name, fn, "rollout field")


def _register(registry: dict[str, Any], name: str, entry: Any, what: str) -> None:
    if registry.get(name, entry) is not entry:
        raise ValueError(f"{what} {name!r} is already registered as {registry[name]!r}")
    registry[name] = entry


def get_solver_reward(name: str) -> SolverRewardFn:
    """The registered Solver reward ``name``; an unknown name lists the known ones."""
    return _lookup(SOLVER_REWARDS, name, "Solver reward")


def get_proposer_reward(name: str) -> ProposerRewardFn:
    """The registered Proposer reward ``name``; an unknown name lists the known ones."""
    return _lookup(PROPOSER_REWARDS, name, "Proposer reward")


def _lookup(registry: dict[str, Any], name: str, what: str) -> Any:
    if name not in registry:
        raise KeyError(f"unknown {what} {name!r}; registered: {sorted(registry)}")
    return registry[name]
