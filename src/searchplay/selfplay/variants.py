"""Self-play variants as registry entries: the loop looks everything up here and never branches on names.

A variant is: where its seeds come from, how its Proposer prompt is built, and the NAMES of its Solver
reward (``searchplay.rewards.SOLVER_REWARDS``), Solver advantage estimator and Proposer advantage
estimator (``searchplay.rl.ADVANTAGE_ESTIMATORS``). GDCR/SAPO is such an entry (a step-level reward and
advantage). A method with its own prompts, rewards, step function and phases is a recipe: a folder under
``searchplay.recipes`` that adds its entry with ``register_variant`` (and its prompt with
``register_proposer_prompt``) when ``searchplay.recipes.load_recipes`` imports it. Every name registered here is
also recorded in ``searchplay.model_paths.SELFPLAY_VARIANTS``, where evaluation and the CLI's params check read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from searchplay.agent.proposer_prompts import kg_proposer_messages, ssp_proposer_messages
from searchplay.model_paths import register_selfplay_variant
from searchplay.selfplay.seeds import Seed
from searchplay.templates import template_question

Messages = list[dict[str, str]]
SeedSource = str  # key of searchplay.selfplay.loop.SEED_SOURCES: 'kg', 'answers', or a recipe's
QuestionSource = Literal["proposer", "template"]


def ssp_proposer(seed: Seed) -> Messages:
    """SSP Proposer: the answer only, with the search count n = the seed's hop count (SSP App. D)."""
    return ssp_proposer_messages(seed.answer, seed.num_hops or 1)


def _kg_record(seed: Seed) -> dict:
    if seed.record is None:
        raise ValueError(f"seed {seed.seed_id!r} has no subgraph record; the KG Proposer needs KG seeds")
    return seed.record


def kg_proposer(seed: Seed) -> Messages:
    """KG Proposer: the subgraph as ONE JSON object plus correct_answer (KG-paths paper §3.2, Fig. 11-12)."""
    return kg_proposer_messages(_kg_record(seed))


def kg_draft_proposer(seed: Seed) -> Messages:
    """KG Proposer with the path's template question as a draft it may rewrite (the kg_draft control)."""
    record = _kg_record(seed)
    return kg_proposer_messages(record, draft=template_question(record))


PROPOSER_PROMPTS: dict[str, Callable[[Seed], Messages]] = {"ssp": ssp_proposer, "kg": kg_proposer,
                                                           "kg_draft": kg_draft_proposer}
PATH_PROMPTS = ("kg", "kg_draft")  # the Proposer prompts that show the seed's KG path


@dataclass(frozen=True)
class Variant:
    """One method of the README's variants table, as names into the prompt, reward and advantage registries."""

    name: str
    seeds: SeedSource  # 'kg': subgraph records; 'answers': ssp.seed_answers, else the KG answers; or the
    # name a recipe registered (searchplay.selfplay.loop.register_seed_source)
    proposer_prompt: str  # key of PROPOSER_PROMPTS
    solver_reward: str  # key of searchplay.rewards.SOLVER_REWARDS
    solver_advantage: str = "grpo"  # key of searchplay.rl.ADVANTAGE_ESTIMATORS (SSP Table 4)
    proposer_advantage: str = "reinforce"  # SSP Table 4: REINFORCE, 1 sample per seed
    proposer_reward: str = "ssp"  # key of searchplay.rewards.PROPOSER_REWARDS: 1 - mean(c_i), 0 if invalid
    questions: QuestionSource = "proposer"  # 'template': the Solver is asked the KG path's template question
    # (searchplay.templates) and the Proposer neither writes nor trains (the kg_template control)
    heldout_analysis: bool = False  # after training: step-level graph progress vs success on kg_heldout (GDCR RQ1)
    step: str = "joint"  # key of searchplay.selfplay.loop.STEP_FUNCTIONS: 'joint' (SSP Alg. 1) or a recipe's;
    # also the key of its phases in searchplay.selfplay.phases.PHASED, where it has several
    frozen_solver: bool = False  # the runtime keeps a frozen copy of the initial weights (a frozen Solver)
    warmstart: str = "shared"  # key of searchplay.model_paths.WARMSTARTS: the shared warm-start, or a recipe's
    rollout_fields: tuple[str, ...] = ()  # keys of searchplay.rewards.ROLLOUT_FIELDS: the per-rollout signals its
    # Solver reward reads from SolverGroup.rollouts (a recipe's, register_rollout_field)
    description: str = ""

    @property
    def proposer_sees_path(self) -> bool:
        """Whether the Proposer is shown the seed's KG path (its question can then be checked against it)."""
        return self.proposer_prompt in PATH_PROMPTS

    def proposer_messages(self, seed: Seed) -> Messages:
        return PROPOSER_PROMPTS[self.proposer_prompt](seed)


VARIANTS: dict[str, Variant] = {
    "ssp": Variant("ssp", seeds="answers", proposer_prompt="ssp", solver_reward="binary",
                   description="SSP: answer-only Proposer, binary Solver reward (SSP Alg. 1)"),
    "kg": Variant("kg", seeds="kg", proposer_prompt="kg", solver_reward="binary",
                  description="KG Proposer (subgraph JSON + answer), binary Solver reward (KG paper §3.2)"),
    "kg_wcr": Variant("kg_wcr", seeds="kg", proposer_prompt="kg", solver_reward="wcr",
                      description="KG Proposer + Waypoint Coverage Reward (KG paper §3.2-3.3, Eq. 6)"),
    "gdcr": Variant("gdcr", seeds="kg", proposer_prompt="kg", solver_reward="gdcr", solver_advantage="sapo",
                    heldout_analysis=True,
                    description="KG Proposer + GDCR step rewards with SAPO step advantages (GDCR paper §3.2-3.4)"),
    "kg_wcr_gdcr": Variant("kg_wcr_gdcr", seeds="kg", proposer_prompt="kg", solver_reward="wcr_gdcr",
                           solver_advantage="sapo", heldout_analysis=True,
                           description="WCR outcome reward as SAPO's A_o, plus GDCR step rewards "
                                       "(docs/decisions/rl.md)"),
    "kg_template": Variant("kg_template", seeds="kg", proposer_prompt="kg", solver_reward="wcr", questions="template",
                           description="control: kg_wcr's Solver on each path's template question, no Proposer "
                                       "(does the RL loop teach the Solver, apart from the Proposer's questions?)"),
    "gdcr_template": Variant("gdcr_template", seeds="kg", proposer_prompt="kg", solver_reward="gdcr",
                             solver_advantage="sapo", questions="template",
                             description="GDCR as its paper trains: the Solver alone on fixed questions that "
                                         "their graph answers (each path's template question, the subgraph as "
                                         "its ER graph), GDCR step rewards with SAPO (GDCR paper §3, §4.1)"),
    "kg_draft": Variant("kg_draft", seeds="kg", proposer_prompt="kg_draft", solver_reward="binary",
                        description="control: the kg variant with each path's template question in the Proposer's "
                                    "input as a draft (do answerable Proposer questions let the loop teach?)"),
    "ssp_kg_answers": Variant("ssp_kg_answers", seeds="kg", proposer_prompt="ssp", solver_reward="binary",
                              description="control: SSP Proposer seeded with the KG answers (KG paper Table 2)"),
}

for _variant in VARIANTS.values():  # the built-ins, where evaluation reads them (the recipes' by register_variant)
    register_selfplay_variant(_variant.name, _variant.warmstart)


LOOP_REGISTRIES: dict[str, Callable[[], dict[str, Any]]] = {}  # 'seeds', 'step': the loop's registries, read
# when a variant is registered (searchplay.selfplay.loop adds them at import; it imports this module)


def unregistered_names(variant: Variant) -> list[str]:
    """``field 'name'`` for each name ``variant`` points to that its registry does not hold."""
    from searchplay.model_paths import WARMSTARTS
    from searchplay.rewards import PROPOSER_REWARDS, ROLLOUT_FIELDS, SOLVER_REWARDS
    from searchplay.rl import ADVANTAGE_ESTIMATORS

    registries = {"proposer_prompt": PROPOSER_PROMPTS, "solver_reward": SOLVER_REWARDS,
                  "solver_advantage": ADVANTAGE_ESTIMATORS, "proposer_advantage": ADVANTAGE_ESTIMATORS,
                  "proposer_reward": PROPOSER_REWARDS, "warmstart": WARMSTARTS,
                  **{key: registry() for key, registry in LOOP_REGISTRIES.items()}}
    missing = [f"{key} {getattr(variant, key)!r} (registered: {sorted(registry)})"
               for key, registry in registries.items() if getattr(variant, key) not in registry]
    return missing + [f"rollout_fields {name!r} (registered: {sorted(ROLLOUT_FIELDS)})"
                      for name in variant.rollout_fields if name not in ROLLOUT_FIELDS]


def register_variant(variant: Variant) -> None:
    """Add ``variant`` under its name (a recipe's, at import, after the parts it names); the same declaration again
    is a no-op. A name it points to that no registry holds is an error of one line, raised here, before any run."""
    if VARIANTS.get(variant.name, variant) != variant:
        raise ValueError(f"self-play variant {variant.name!r} is already registered, differently")
    missing = unregistered_names(variant)
    if missing:
        raise ValueError(f"self-play variant {variant.name!r} names what is not registered: {'; '.join(missing)}; "
                         "register those first (a recipe registers its variant last)")
    VARIANTS[variant.name] = variant
    register_selfplay_variant(variant.name, variant.warmstart)


def register_proposer_prompt(name: str, build: Callable[[Seed], Messages]) -> None:
    """Add a Proposer prompt builder under ``name`` (``Variant.proposer_prompt``)."""
    if PROPOSER_PROMPTS.get(name, build) is not build:
        raise ValueError(f"Proposer prompt {name!r} is already registered")
    PROPOSER_PROMPTS[name] = build


def get_variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown self-play variant {name!r}; registered: {sorted(VARIANTS)}") from None
