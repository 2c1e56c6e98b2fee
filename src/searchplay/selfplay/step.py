"""One self-play step (SSP Algorithm 1 with the KG-paths changes, KG paper §3).

propose (1 rollout per seed, with search) -> rule filter -> RAG verification -> batch completion ->
G Solver rollouts per question -> judge -> rewards and advantages from the variant's registry entries
-> (``selfplay.dynamic_sampling``: more rounds until a group has a signal; groups without one leave the
Solver update, DAPO §3.2) -> ONE policy update on Solver (GRPO) and Proposer (REINFORCE) samples of the
shared weights -> the rollout backend takes the new weights. Nothing here branches on a variant's name.
``selfplay.trained_roles`` gives SSP Table 2's fixed-opponent ablations: Solver-Only or Proposer-Only trains one
role while the other plays with the frozen start weights.

Entry point: ``run_step`` (the section "the step"), a short driver over ``gather_questions``,
``solve_and_score``, ``sample_more``, ``proposer_training``, ``apply_update`` and ``step_metrics``; the
sections above it hold the pieces (propose and filter, solve and score).
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchplay.agent.prompts import solver_messages
from searchplay.agent.proposer_prompts import (
    RAG_MAX_TOKENS,
    RAG_TEMPERATURE,
    parse_rag_answer,
    rag_verification_messages,
)
from searchplay.agent.trajectory import Trajectory
from searchplay.config import Params
from searchplay.llm.backend import SamplingParams
from searchplay.question_rules import REJECT_REASONS, FilterRules, asks_relation, names_entity, rule_filter
from searchplay.retrieval.types import Document
from searchplay.rewards import (
    PROPOSER_REWARDS,
    ROLLOUT_FIELDS,
    SOLVER_REWARDS,
    ProposerOutcome,
    SolverGroup,
    waypoint_coverage,
)
from searchplay.rewards.gdcr import subgraph_aliases, subgraph_triples
from searchplay.rl import ADVANTAGE_ESTIMATORS, TrainingSample
from searchplay.rl.drift import local_shards
from searchplay.rl.trainer import combine_stats
from searchplay.selfplay import metrics as m
from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeds import Seed, SeedCursor
from searchplay.selfplay.turns import token_turns, trajectory_steps
from searchplay.selfplay.variants import Variant
from searchplay.templates import template_question

log = logging.getLogger(__name__)

Rollouts = Callable[[list[list[int]], str, Any], list[Trajectory]]  # (prompt ids, role, config) -> trajectories
RAG_REJECT_REASONS = ("rag_verifier_error", "rag_no_answer", "rag_judge_error", "rag_wrong_answer")


@dataclass
class Runtime:
    """Everything a step talks to. The CLI builds the real ones (``loop.build_runtime``); tests inject fakes."""

    backend: Any  # PolicyBackend (rollouts; gets the new weights after each update)
    verifier: Any  # PolicyBackend answering RAG verification (the policy itself or a frozen copy)
    judge: Any  # searchplay.llm.judge.Judge
    trainer: Any  # searchplay.rl.PolicyTrainer
    rollouts: Rollouts  # run_rollouts bound to the backend and the search tool
    solver_config: Any  # agent RolloutConfig for Solver rollouts
    proposer_config: Any  # the same with the Proposer temperature
    encode: Callable[[list[dict]], list[int]]  # chat messages -> prompt token ids
    format_documents: Callable[[Sequence[Document]], str]  # Search-R1 document block
    # a variant with ``Variant.frozen_solver`` (its Solver stays at the initial weights): built by loop.build_runtime
    frozen: Any = None  # PolicyBackend with the initial weights, never updated
    frozen_rollouts: Rollouts | None = None  # run_rollouts bound to ``frozen``
    recipe: Any = None  # a recipe's own per-run objects, set by its phases' prepare hook (searchplay.selfplay.phases)
    # the fixed opponent, 'proposer' or 'solver' (``fixed_role(selfplay.trained_roles)``, set by loop.build_runtime):
    # it plays with ``frozen_rollouts`` and its samples leave the update
    fixed_role: str | None = None

    def rollouts_of(self, role: str) -> Rollouts:
        """The rollouts ``role`` plays with: the frozen initial weights' for the fixed opponent, else the policy's."""
        if role != self.fixed_role:
            return self.rollouts
        if self.frozen_rollouts is None:
            raise RuntimeError(f"the {role} is the fixed opponent but the runtime has no frozen backend")
        return self.frozen_rollouts


@dataclass
class LoopState:
    """What a checkpoint must restore to continue exactly: step count, curriculum cursor, replay, RNG."""

    iteration: int
    cursor: SeedCursor
    replay: ReplayBuffer
    rng: random.Random
    history: list[dict[str, float]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # a variant's own state (a phased recipe's plan, its sets)


@dataclass
class Slot:
    """A question the Solver will attempt: fresh from this step's Proposer or replayed from the buffer."""

    question: str
    answer: str
    waypoints: list[str]
    seed_id: str
    source: str  # 'fresh', 'replay' or 'replicate'
    proposer_index: int | None = None  # which Proposer trajectory wrote it (fresh only)
    graph: list[tuple[str, str, str]] = field(default_factory=list)  # the seed subgraph's label triples (GDCR)
    aliases: dict[str, list[str]] = field(default_factory=dict)  # node label -> aliases, where the record has them
    other_answers: list[str] = field(default_factory=list)  # every other answer the KG gives to the path's chain
    record: dict[str, Any] = field(default_factory=dict)  # a recipe's fields of the question (SolverGroup.record)

    @property
    def golds(self) -> list[str]:
        """What the judge accepts: a* and, for a KG path through a one-to-many hop, the chain's other ends."""
        return [self.answer, *self.other_answers]

    def to_entry(self) -> dict[str, Any]:
        entry = {"question": self.question, "answer": self.answer, "waypoints": list(self.waypoints),
                 "seed_id": self.seed_id, "graph": [list(t) for t in self.graph], "aliases": dict(self.aliases),
                 "other_answers": list(self.other_answers)}
        return {**entry, "record": dict(self.record)} if self.record else entry

    @classmethod
    def from_entry(cls, entry: dict[str, Any], source: str) -> Slot:
        return cls(entry["question"], entry["answer"], list(entry.get("waypoints", [])), entry.get("seed_id", ""),
                   source, graph=[tuple(t) for t in entry.get("graph", [])], aliases=dict(entry.get("aliases", {})),
                   other_answers=list(entry.get("other_answers", [])), record=dict(entry.get("record", {})))


@dataclass
class Proposal:
    """One Proposer trajectory, its seed and what the filters said (``reason`` None = valid question)."""

    seed: Seed
    trajectory: Trajectory
    reason: str | None = None
    rag_answer: str | None = None


@dataclass
class StepResult:
    metrics: dict[str, float]
    samples: dict[str, Any]  # decoded trajectories for the MLflow artifact
    questions: list[dict[str, Any]] = field(default_factory=list)  # the question pool the Solver attempted


# --- propose, filter, verify ---------------------------------------------------------------------------


def propose(runtime: Runtime, variant: Variant, seeds: list[Seed]) -> list[Proposal]:
    """One Proposer rollout per seed, with the variant's prompt and the search tool (SSP Alg. 1 line 3)."""
    prompts = [runtime.encode(variant.proposer_messages(seed)) for seed in seeds]
    trajectories = runtime.rollouts_of("proposer")(prompts, "proposer", runtime.proposer_config)
    return [Proposal(seed, trajectory) for seed, trajectory in zip(seeds, trajectories, strict=True)]


def unique_documents(trajectory: Trajectory) -> list[Document]:
    """The trajectory's retrieved documents in order, each once (by id)."""
    seen, docs = set(), []
    for doc in trajectory.documents:
        if doc.id not in seen:
            seen.add(doc.id)
            docs.append(doc)
    return docs


def verification_materials(own: list[Document], others: list[list[Document]], noisy_docs: int, unit: str,
                           rng: random.Random, fmt: Callable[[Sequence[Document]], str]) -> str:
    """RAG materials (SSP §3.3): the Proposer's own documents plus ``noisy_docs`` noise from OTHER
    trajectories of the batch, shuffled. ``unit='document'`` samples single documents (the paper's
    "documents"); ``'block'`` samples whole other-trajectory blocks (the SSP code)."""
    own_ids = {d.id for d in own}
    if unit == "block":
        other_blocks = [fmt(b) for b in others if b]
        blocks = [fmt(own), *rng.sample(other_blocks, min(noisy_docs, len(other_blocks)))]
        rng.shuffle(blocks)
        return "\n\n".join(blocks)
    pool = {d.id: d for block in others for d in block if d.id not in own_ids}
    noise = rng.sample(sorted(pool.values(), key=lambda d: d.id), min(noisy_docs, len(pool)))
    docs = own + noise
    rng.shuffle(docs)
    return fmt(docs)


def rag_verify(runtime: Runtime, proposals: list[Proposal], params: Params, rng: random.Random) -> None:
    """RAG verification (SSP §3.2-3.3; KG-paths App. B.2): answer each rule-valid question from its own
    retrieved documents plus noise WITHOUT tools; keep it only if the judge accepts the answer.

    Fail closed: a verifier or judge error rejects (the SSP code accepts on exceptions; we do not).
    """
    candidates = [p for p in proposals if p.reason is None]
    if not candidates:
        return
    docs = [unique_documents(p.trajectory) for p in proposals]
    prompts = []
    for proposal in candidates:
        index = proposals.index(proposal)
        others = [d for j, d in enumerate(docs) if j != index]
        materials = verification_materials(docs[index], others, params.selfplay.noisy_docs,
                                           params.selfplay.noise_unit, rng, runtime.format_documents)
        prompts.append(runtime.encode(rag_verification_messages(materials, proposal.trajectory.question or "")))
    sampling = SamplingParams(max_new_tokens=RAG_MAX_TOKENS, temperature=RAG_TEMPERATURE,
                              seed=rng.randrange(2**31))
    try:
        replies = [c.text for c in runtime.verifier.generate(prompts, sampling)]
    except Exception:
        log.exception("RAG verifier failed; rejecting %d candidate questions (fail closed)", len(candidates))
        for proposal in candidates:
            proposal.reason = "rag_verifier_error"
        return
    parsed = [parse_rag_answer(reply) for reply in replies]
    items = [(p.trajectory.question or "", a, [p.seed.answer]) for p, a in zip(candidates, parsed, strict=True)]
    judged = [i for i, a in enumerate(parsed) if a is not None]
    try:
        verdicts = dict(zip(judged, runtime.judge.judge_many([items[i] for i in judged]), strict=True))
    except Exception:
        log.exception("judge failed during RAG verification; rejecting (fail closed)")
        verdicts = {}
    for i, proposal in enumerate(candidates):
        proposal.rag_answer = parsed[i]
        verdict = verdicts.get(i)
        if parsed[i] is None:
            proposal.reason = "rag_no_answer"
        elif verdict is None or verdict.method == "error":
            proposal.reason = "rag_judge_error"
        elif not verdict.correct:
            proposal.reason = "rag_wrong_answer"


def head_names(seed: Seed) -> list[str] | None:
    """The label and aliases of the head entity of the seed's KG path, or None for a seed without a path."""
    path = (seed.record or {}).get("path") or []
    if not path or not path[0].get("label"):
        return None
    return [str(path[0]["label"]), *(str(a) for a in path[0].get("aliases") or [])]


def last_relation(seed: Seed) -> str | None:
    """The label of the last hop of the seed's KG path (the relation its gold answers), None without a path."""
    relations = (seed.record or {}).get("relations") or []
    label = str(relations[-1].get("label") or "") if relations else ""
    return label or None


def filter_and_verify(runtime: Runtime, proposals: list[Proposal], params: Params, rng: random.Random,
                      sees_path: bool = False) -> None:
    """Rule filter, then RAG verification of the survivors; sets each proposal's ``reason``.

    For a Proposer shown the KG path (``sees_path``), ``selfplay.require_head_entity`` rejects a question that
    does not name the path's head and ``selfplay.require_last_relation`` one that does not mention its last
    relation (rules beyond the papers', docs/decisions/selfplay.md)."""
    cfg = params.selfplay
    rules = FilterRules.of(cfg)
    for proposal in proposals:
        heads = head_names(proposal.seed) if sees_path and cfg.require_head_entity else None
        relation = last_relation(proposal.seed) if sees_path and cfg.require_last_relation else None
        proposal.reason = rule_filter(proposal.trajectory, proposal.seed.answer, rules, heads, relation)
    if cfg.rag_verification:
        rag_verify(runtime, proposals, params, rng)


def path_checks(proposals: list[Proposal]) -> list[tuple[bool, bool]]:
    """(names the path's head, mentions its last relation) for each accepted question with a KG path."""
    checks = []
    for p in proposals:
        heads, relation = head_names(p.seed), last_relation(p.seed)
        if p.reason is None and p.trajectory.question and heads is not None:
            question = p.trajectory.question
            checks.append((names_entity(question, heads), relation is None or asks_relation(question, relation)))
    return checks


def gold_check_metrics(proposals: list[Proposal]) -> dict[str, float]:
    """How far the KG vouches for the golds of the accepted questions: the share that name their path's head
    (``filter/head_named_rate``) and the share that also mention its last relation
    (``filter/gold_checked_rate``: the question asks for what the path's end is). NaN with none."""
    checks = path_checks(proposals)
    return {"filter/head_named_rate": m.rate(sum(h for h, _ in checks), len(checks)),
            "filter/gold_checked_rate": m.rate(sum(h and r for h, r in checks), len(checks))}


def fresh_slots(proposals: list[Proposal], offset: int = 0, path_golds: bool = False) -> list[Slot]:
    """The accepted questions as Solver slots; ``path_golds`` (a Proposer shown the path) also accepts every
    other answer the KG gives to the path's relation chain."""
    return [Slot(p.trajectory.question.strip(), p.seed.answer, list(p.seed.waypoints), p.seed.seed_id, "fresh",
                 offset + i, **seed_graph(p.seed, path_golds)) for i, p in enumerate(proposals)
            if p.reason is None and p.trajectory.question]


def template_slots(seeds: list[Seed]) -> list[Slot]:
    """The seeds' KG paths asked as their template questions (``searchplay.templates``), with every answer
    the KG gives to the path as gold: the ``kg_template`` control's questions, written by no Proposer."""
    return [Slot(template_question(seed.record), seed.answer, list(seed.waypoints), seed.seed_id, "fresh",
                 **seed_graph(seed, path_golds=True)) for seed in seeds if seed.record is not None]


def seed_graph(seed: Seed, path_golds: bool = False) -> dict[str, Any]:
    """The seed's KG subgraph as label triples and node aliases (empty for a plain-answer seed), and with
    ``path_golds`` the other answers of its relation chain (the record's ``answers`` besides a*)."""
    if seed.record is None:
        return {}
    graph = {"graph": subgraph_triples(seed.record), "aliases": subgraph_aliases(seed.record)}
    if path_golds:
        graph["other_answers"] = [str(a) for a in seed.record.get("answers") or [] if str(a) != seed.answer]
    return graph


def complete_batch(slots: list[Slot], batch_size: int, strategy: str, replay: ReplayBuffer,
                   rng: random.Random) -> list[Slot]:
    """Fill the slots of rejected questions (SSP App. B.2). 'replay'/'reuse': uniform draws from past valid
    questions; 'resample' (after its extra Proposer rounds): replicate this step's valid questions; 'none'."""
    missing = batch_size - len(slots)
    if missing <= 0 or strategy == "none":
        return slots
    if strategy in ("replay", "reuse"):
        return slots + [Slot.from_entry(e, "replay") for e in replay.sample(missing, rng)]
    if strategy == "resample" and slots:
        return slots + [Slot(**{**vars(rng.choice(slots)), "source": "replicate", "proposer_index": None})
                        for _ in range(missing)]
    return slots


# --- solve, score ----------------------------------------------------------------------------------------


def solve(runtime: Runtime, slots: list[Slot], group_size: int) -> list[list[Trajectory]]:
    """G Solver rollouts per question, all advancing together (SSP Alg. 1 line 6)."""
    if not slots:
        return []
    style = runtime.solver_config.question_format
    prompts = [runtime.encode(solver_messages(slot.question, style)) for slot in slots for _ in range(group_size)]
    flat = runtime.rollouts_of("solver")(prompts, "solver", runtime.solver_config)
    return [flat[k * group_size:(k + 1) * group_size] for k in range(len(slots))]


def judge_groups(runtime: Runtime, slots: list[Slot], groups: list[list[Trajectory]]
                 ) -> tuple[list[list[bool]], int, list[bool]]:
    """c_i per rollout: the judge's verdict on the last ``<answer>``; no answer or a judge error is 0. Also the
    judge errors, and per group whether one of its verdicts is an error (the group then has no outcome to train
    on: ``run_step`` leaves it and its Proposer out of the update)."""
    items = [(slot.question, t.answer, slot.golds) for slot, group in zip(slots, groups, strict=True) for t in group]
    verdicts = runtime.judge.judge_many(items) if items else []
    failed = [v.method == "error" for v in verdicts]
    flat = [bool(v.correct and not error and t.answer is not None)
            for v, error, t in zip(verdicts, failed, [t for g in groups for t in g], strict=True)]
    size = len(groups[0]) if groups else 0
    spans = [range(k * size, (k + 1) * size) for k in range(len(groups))]
    return [flat[span.start:span.stop] for span in spans], sum(failed), [any(failed[i] for i in span) for span in spans]


def rollout_valid(trajectory: Trajectory) -> bool:
    """z_i^val: follows the format and holds a parseable answer (KG-paths Eq. 6)."""
    return bool(trajectory.valid and trajectory.answer is not None)


@dataclass
class ScoredGroups:
    """Rewards, advantages and training samples of Solver groups, one entry per group where it is a list of lists."""

    samples: list[list[TrainingSample]] = field(default_factory=list)
    group_advantages: list[list[float]] = field(default_factory=list)  # every token advantage of the group
    rewards: list[float] = field(default_factory=list)  # per rollout, flat
    process: list[float] = field(default_factory=list)  # WCR partial credit per rollout (0 when correct)
    coverage: list[float] = field(default_factory=list)  # g_i of rollouts on questions with waypoints
    coverage_correct: list[bool] = field(default_factory=list)
    step_rewards: list[float] = field(default_factory=list)  # every step's r_{t,g} of step-level rewards (GDCR)
    step_advantages: list[float] = field(default_factory=list)  # every step's A_{t,g} (GDCR Eq. 13)
    rollouts: list[Mapping[str, Any]] = field(default_factory=list)  # per rollout: its variant's rollout fields
    details: dict[str, list[Any]] = field(default_factory=dict)  # the rewards' details, each key's lists joined

    def signal_groups(self) -> int:
        return m.nonzero_advantage_groups(self.group_advantages)

    def extend(self, other: ScoredGroups) -> None:
        for name in ("samples", "group_advantages", "rewards", "process", "coverage", "coverage_correct",
                     "step_rewards", "step_advantages", "rollouts"):
            getattr(self, name).extend(getattr(other, name))
        for key, values in other.details.items():
            self.details.setdefault(key, []).extend(values)


def solver_group(variant: Variant, slot: Slot, group: list[Trajectory], correct: list[bool]) -> SolverGroup:
    """What the Solver reward reads of one question's rollouts: the shared columns, each rollout's fields that the
    variant names (``Variant.rollout_fields``) and the question's record."""
    return SolverGroup(
        correct=correct, valid=[rollout_valid(t) for t in group], think_texts=[t.think_text for t in group],
        answer_tag_counts=[t.answer_tag_count for t in group], predictions=[t.answer for t in group],
        steps=[trajectory_steps(t) for t in group], question=slot.question, answer=slot.answer,
        waypoints=slot.waypoints, graph=slot.graph, aliases=slot.aliases,
        rollouts=[{name: ROLLOUT_FIELDS[name](t) for name in variant.rollout_fields} for t in group]
        if variant.rollout_fields else [], record=slot.record)


def score_groups(variant: Variant, params: Params, slots: list[Slot], groups: list[list[Trajectory]],
                 correct: list[list[bool]]) -> ScoredGroups:
    """Each group's rewards and advantages from the variant's registry entries (SSP Eq. 4; KG Eq. 5-7). The
    statistics read what the reward and the estimator returned: WCR's coverage (``details['coverage']``; measured
    here only for a reward that does not give it), the step advantages A_{t,g} of a step-level estimator."""
    out = ScoredGroups()
    for slot, group, c in zip(slots, groups, correct, strict=True):
        inputs = solver_group(variant, slot, group, c)
        scored = SOLVER_REWARDS[variant.solver_reward](inputs, params)
        estimated: dict[str, Any] = {}
        advantages = ADVANTAGE_ESTIMATORS[variant.solver_advantage](
            scored.rewards, [t.loss_mask for t in group], params, step_rewards=scored.step_rewards,
            token_steps=[token_turns(t) for t in group], details=estimated)
        if scored.step_rewards is not None:
            out.step_rewards += [r for steps in scored.step_rewards for r in steps]
            out.step_advantages += [a for steps in estimated.get("step_advantages", []) for a in steps]
        out.group_advantages.append([a for adv in advantages for a in adv])
        out.rewards += scored.rewards
        out.rollouts += inputs.rollouts
        for key, values in scored.details.items():
            out.details.setdefault(key, []).extend(values)
        out.process += [0.0 if (ci and zi) else r for ci, zi, r in zip(c, inputs.valid, scored.rewards, strict=True)]
        if slot.waypoints:
            out.coverage += scored.details.get("coverage") or [
                waypoint_coverage(t.think_text, slot.waypoints, casefold=params.wcr.casefold) for t in group]
            out.coverage_correct += c
        out.samples.append([TrainingSample(t.prompt_ids, t.response_ids, t.loss_mask, adv, "solver")
                            for t, adv in zip(group, advantages, strict=True)])
    return out


# --- the step --------------------------------------------------------------------------------------------


FIXED_OPPONENT = {"both": None, "solver": "proposer", "proposer": "solver"}  # trained_roles -> the frozen role


def fixed_role(trained_roles: str) -> str | None:
    """The role that plays with the frozen start weights and never trains (SSP Table 2's fixed opponent):
    the Proposer under Solver-Only, the Solver under Proposer-Only, none in self-play."""
    return FIXED_OPPONENT[trained_roles]


def trained_samples(fixed: str | None, proposer_samples: list[TrainingSample],
                    solver_samples: list[TrainingSample]) -> tuple[list[TrainingSample], list[TrainingSample]]:
    """(Proposer, Solver) samples the update trains on: the ``fixed`` opponent's are left out (SSP Table 2)."""
    return ([] if fixed == "proposer" else proposer_samples), ([] if fixed == "solver" else solver_samples)


def update_policy(trainer: Any, proposer_samples: list[TrainingSample], solver_samples: list[TrainingSample],
                  cfg: Any) -> dict[str, dict[str, float]]:
    """The iteration's policy update, per role: the SSP code's Proposer update then Solver update, each with
    its own pi_old and ``*_mini_batches`` optimizer steps; or one combined step (``combine_update``)."""
    if cfg.combine_update:
        return {"all": trainer.update(proposer_samples + solver_samples, 1)}
    schedule = (("proposer", proposer_samples, cfg.proposer_mini_batches),
                ("solver", solver_samples, cfg.solver_mini_batches))
    return {role: trainer.update(samples, mini_batches) for role, samples, mini_batches in schedule if samples}


def propose_and_filter(runtime: Runtime, variant: Variant, params: Params, seeds: list[Seed], rng: random.Random,
                       clock: Counter) -> list[Proposal]:
    """One Proposer round on ``seeds``, then the rule filter and RAG verification; times both in ``clock``."""
    tic = time.perf_counter()
    proposals = propose(runtime, variant, seeds)
    clock["propose"] += time.perf_counter() - tic
    tic = time.perf_counter()
    filter_and_verify(runtime, proposals, params, rng, sees_path=variant.proposer_sees_path)
    clock["verify"] += time.perf_counter() - tic
    return proposals


def next_questions(runtime: Runtime, variant: Variant, params: Params, seeds: list[Seed], rng: random.Random,
                   clock: Counter, offset: int = 0) -> tuple[list[Proposal], list[Slot]]:
    """A round of questions on ``seeds``: the Proposer's accepted ones, or the template questions of a variant
    whose questions come from the KG (``Variant.questions == 'template'``, no Proposer rollouts)."""
    if variant.questions == "template":
        return [], template_slots(seeds)
    proposals = propose_and_filter(runtime, variant, params, seeds, rng, clock)
    return proposals, fresh_slots(proposals, offset=offset, path_golds=variant.proposer_sees_path)


def run_step(runtime: Runtime, variant: Variant, params: Params, state: LoopState) -> StepResult:
    """One self-play step on the next ``batch_size`` seeds; updates ``state`` (cursor, replay buffer)."""
    cfg = params.selfplay
    batch = gather_questions(runtime, variant, params, state)
    solve_and_score(runtime, variant, params, batch, batch.slots)
    while (cfg.dynamic_sampling and batch.scored.signal_groups() < cfg.dynamic_sampling_min_groups
           and batch.sampling_rounds < cfg.dynamic_sampling_max_rounds):
        sample_more(runtime, variant, params, state, batch)
    kept = [k for k, advs in enumerate(batch.scored.group_advantages) if not batch.unjudged[k]
            and (not cfg.dynamic_sampling or m.nonzero_advantage_groups([advs]))]  # a judge error is no outcome
    solver_samples = [sample for k in kept for sample in batch.scored.samples[k]]
    proposer_rewards, proposer_samples = proposer_training(variant, params, batch)
    proposer_samples, solver_samples = trained_samples(runtime.fixed_role, proposer_samples, solver_samples)
    update = apply_update(runtime, cfg, proposer_samples, solver_samples, batch.clock)

    state.replay.add([slot.to_entry() for slot in batch.slots])
    if cfg.batch_completion == "replay" and (state.iteration + 1) % cfg.replay_reset_every == 0:
        state.replay.clear()

    metrics = step_metrics(variant, params, batch, update, proposer_rewards, solver_samples, proposer_samples,
                           dropped=len(batch.groups) - len(kept) - sum(batch.unjudged), replay_size=len(state.replay))
    samples = sample_trajectories(runtime, batch.first_round, batch.slots, batch.groups, batch.correct,
                                  cfg.sample_trajectories)
    questions = [{"question": slot.question, "answer": slot.answer, "seed_id": slot.seed_id, "source": slot.source,
                  "solver_accuracy": sum(c) / len(c) if c else 0.0}
                 for slot, c in zip(batch.slots, batch.correct, strict=True)]
    return StepResult(metrics, samples, questions)


@dataclass
class StepBatch:
    """What a step has gathered so far: its Proposer rounds, the Solver's questions, groups and verdicts."""

    proposals: list[Proposal]
    first_round: list[Proposal]  # the first Proposer round (decoded into the samples artifact)
    slots: list[Slot]
    fresh_count: int  # questions written this step (before batch completion adds replayed ones)
    resample_rounds: int
    clock: Counter
    groups: list[list[Trajectory]] = field(default_factory=list)
    correct: list[list[bool]] = field(default_factory=list)
    unjudged: list[bool] = field(default_factory=list)  # per group: a judge error, so no outcome to train on
    scored: ScoredGroups = field(default_factory=ScoredGroups)
    judge_errors: int = 0
    sampling_rounds: int = 0


def gather_questions(runtime: Runtime, variant: Variant, params: Params, state: LoopState) -> StepBatch:
    """The step's questions: a Proposer round on the next seeds, ``resample`` rounds for rejected ones, then
    batch completion (SSP App. B.2)."""
    cfg, rng, clock = params.selfplay, state.rng, Counter()
    proposals, slots = next_questions(runtime, variant, params, state.cursor.next_batch(cfg.batch_size), rng, clock)
    first_round, rounds = list(proposals), 0
    while cfg.batch_completion == "resample" and len(slots) < cfg.batch_size and rounds < cfg.resample_max_rounds:
        rounds += 1
        extra, extra_slots = next_questions(runtime, variant, params,
                                            state.cursor.next_batch(cfg.batch_size - len(slots)), rng, clock,
                                            offset=len(proposals))
        slots += extra_slots
        proposals += extra
    fresh_count = len(slots)
    slots = complete_batch(slots, cfg.batch_size, cfg.batch_completion, state.replay, rng)
    log.info("proposed %d questions (%.0f s), %d verified (%.0f s); solving %d (%d replayed) x %d rollouts",
             len(proposals), clock["propose"], fresh_count, clock["verify"], len(slots), len(slots) - fresh_count,
             cfg.group_size)
    return StepBatch(proposals, first_round, slots, fresh_count, rounds, clock)


def solve_and_score(runtime: Runtime, variant: Variant, params: Params, batch: StepBatch, slots: list[Slot]) -> None:
    """G Solver rollouts per question of ``slots``, judged and scored, appended to ``batch``."""
    tic = time.perf_counter()
    groups = solve(runtime, slots, params.selfplay.group_size)
    batch.clock["solve"] += time.perf_counter() - tic
    correct, errors, unjudged = judge_groups(runtime, slots, groups)
    batch.scored.extend(score_groups(variant, params, slots, groups, correct))
    batch.groups += groups
    batch.correct += correct
    batch.unjudged += unjudged
    batch.judge_errors += errors


def sample_more(runtime: Runtime, variant: Variant, params: Params, state: LoopState, batch: StepBatch) -> None:
    """One round of DAPO dynamic sampling (SSP App. B.2 cites it): questions on more seeds, solved and scored."""
    batch.sampling_rounds += 1
    extra, extra_slots = next_questions(runtime, variant, params, state.cursor.next_batch(params.selfplay.batch_size),
                                        state.rng, batch.clock, offset=len(batch.proposals))
    batch.proposals += extra
    batch.fresh_count += len(extra_slots)
    batch.slots = batch.slots + extra_slots
    solve_and_score(runtime, variant, params, batch, extra_slots)
    log.info("dynamic sampling round %d: %d more questions, %d of %d groups with a signal", batch.sampling_rounds,
             len(extra_slots), batch.scored.signal_groups(), len(batch.groups))


def proposer_training(variant: Variant, params: Params, batch: StepBatch) -> tuple[list[float], list[TrainingSample]]:
    """Each Proposer trajectory's reward from the Solver's outcomes on its question (SSP Eq. 3; 0 if rejected),
    its advantage by the variant's estimator, and the training samples; a question whose Solver group met a
    judge error has no outcome (an error is no verdict), so its Proposer trajectory is left out."""
    fresh = [(slot, c, u) for slot, c, u in zip(batch.slots, batch.correct, batch.unjudged, strict=True)
             if slot.source == "fresh"]
    unjudged = {slot.proposer_index for slot, _, u in fresh if u}
    outcome_of = {slot.proposer_index: c for slot, c, u in fresh if not u}
    kept = [(i, p) for i, p in enumerate(batch.proposals) if i not in unjudged]
    proposals = [p for _, p in kept]
    rewards = [PROPOSER_REWARDS[variant.proposer_reward](ProposerOutcome(
        valid=i in outcome_of, solver_correct=outcome_of.get(i, []), question=p.trajectory.question or "",
        answer=p.seed.answer), params) for i, p in kept]
    masks = [p.trajectory.loss_mask for p in proposals]
    advantages = ADVANTAGE_ESTIMATORS[variant.proposer_advantage](rewards, masks, params)
    return rewards, [TrainingSample(p.trajectory.prompt_ids, p.trajectory.response_ids, p.trajectory.loss_mask,
                                    adv, "proposer") for p, adv in zip(proposals, advantages, strict=True)]


@dataclass
class UpdateResult:
    role_stats: dict[str, dict[str, float]]
    train_stats: dict[str, Any]
    delta: float  # largest fingerprinted weight change of this update
    distance: float  # ||theta - theta_0||_2 since self-play started


def apply_update(runtime: Runtime, cfg: Any, proposer_samples: list[TrainingSample],
                 solver_samples: list[TrainingSample], clock: Counter) -> UpdateResult:
    """The policy update (``update_policy``), then the rollout backend takes the new weights."""
    tic = time.perf_counter()
    before = weight_fingerprint(runtime.trainer.model)
    if proposer_samples or solver_samples:
        runtime.backend.release_memory()  # the update's gradients and AdamW moments take the rollouts' memory
    role_stats = update_policy(runtime.trainer, proposer_samples, solver_samples, cfg)
    runtime.backend.update_weights(runtime.trainer.model)
    delta = weight_delta(before, runtime.trainer.model, getattr(runtime.trainer, "accelerator", None))
    result = UpdateResult(role_stats, combine_stats(list(role_stats.values())), delta,
                          distance_from_start(runtime.trainer))
    clock["update"] += time.perf_counter() - tic
    log.info("solved in %.0f s; updated on %d samples in %.0f s", clock["solve"],
             len(proposer_samples) + len(solver_samples), clock["update"])
    return result


def filter_metrics(variant: Variant, params: Params, batch: StepBatch) -> dict[str, float]:
    """How the Proposer's questions fared: the rule filter and RAG verification rates, each rejection reason's
    count, the verifier's format rate and the KG gold check."""
    proposals = batch.proposals
    n_props = len(proposals)
    rejected = Counter(p.reason for p in proposals if p.reason is not None)
    rule_passed = n_props - sum(rejected[r] for r in REJECT_REASONS)
    verified = rule_passed - rejected["rag_verifier_error"] if params.selfplay.rag_verification else 0
    metrics = {"filter/valid_rate_rule": m.rate(rule_passed, n_props),
               "filter/valid_rate_rag": m.rate(batch.fresh_count, n_props),
               "filter/rag_accept_rate": m.rate(batch.fresh_count, rule_passed),
               "format/verifier_format_rate": (m.rate(verified - rejected["rag_no_answer"], verified) if verified
                                               else m.NAN)}
    metrics.update({f"filter/rejected_{r}": float(rejected[r]) for r in (*REJECT_REASONS, *RAG_REJECT_REASONS)})
    metrics.update(gold_check_metrics(proposals) if variant.proposer_sees_path else
                   {"filter/head_named_rate": m.NAN, "filter/gold_checked_rate": m.NAN})
    return metrics


def step_metrics(variant: Variant, params: Params, batch: StepBatch, update: UpdateResult,
                 proposer_rewards: list[float], solver_samples: list[TrainingSample],
                 proposer_samples: list[TrainingSample], dropped: int, replay_size: int) -> dict[str, float]:
    """The iteration's flat metrics (SSP App. B.1 curves, the filter's reasons, coverage, step credit, update)."""
    proposals, slots, groups, correct, clock = batch.proposals, batch.slots, batch.groups, batch.correct, batch.clock
    scored = batch.scored
    solver_trajs = [t for g in groups for t in g]
    generated = sum(t.generated_token_count for t in solver_trajs) + sum(
        p.trajectory.generated_token_count for p in proposals)
    rollout_seconds = clock["propose"] + clock["verify"] + clock["solve"]
    trained = update_metrics(update, proposer_samples, solver_samples)  # its keys keep their places below
    metrics = {
        "solver/reward_mean": m.mean(scored.rewards),
        "solver/accuracy": m.mean([float(c) for g in correct for c in g]),
        "solver/wcr_process_reward": m.mean(scored.process),
        "solver/judge_errors": float(batch.judge_errors),
        "solver/rollouts": float(len(solver_trajs)),
        "proposer/reward_mean": m.mean(proposer_rewards),
        "proposer/proposals": float(len(proposals)),
        "proposer/resample_rounds": float(batch.resample_rounds),
        "batch/questions": float(len(slots)),
        "batch/fresh": float(batch.fresh_count),
        "batch/replayed": float(sum(s.source != "fresh" for s in slots)),
        "batch/solver_update_skipped": trained["batch/solver_update_skipped"],
        "replay/size": float(replay_size),
        "rollout/searches_solver": m.mean([t.num_searches for t in solver_trajs]),
        "rollout/searches_proposer": m.mean([p.trajectory.num_searches for p in proposals]),
        "rollout/response_tokens_solver": m.mean([t.generated_token_count for t in solver_trajs]),
        "rollout/response_tokens_proposer": m.mean([p.trajectory.generated_token_count for p in proposals]),
        "rollout/solver_answered_rate": m.mean([float(t.answer is not None) for t in solver_trajs]),
        "train/groups": float(len(groups)),
        "train/groups_nonzero_advantage": float(m.nonzero_advantage_groups(scored.group_advantages)),
        "train/groups_dropped_no_signal": float(dropped),
        "batch/dynamic_sampling_rounds": float(batch.sampling_rounds),
        **{k: trained[k] for k in ("train/samples_solver", "train/samples_proposer", "train/weights_changed",
                                   "train/weight_delta_max", "train/weight_delta_l2_from_start")},
        "format/proposer_valid_rate": m.mean([float(p.trajectory.valid and p.trajectory.question is not None)
                                              for p in proposals]),
        "format/solver_valid_rate": m.mean([float(rollout_valid(t)) for t in solver_trajs]),
        "time/propose_s": clock["propose"], "time/verify_s": clock["verify"],
        "time/solve_s": clock["solve"], "time/update_s": clock["update"],
        "throughput/tokens_per_s": m.rate(generated, rollout_seconds) if rollout_seconds > 0 else m.NAN,
    }
    metrics.update(filter_metrics(variant, params, batch))
    metrics.update(m.fresh_accuracy(correct, [slot.source for slot in slots]))
    metrics.update(m.coverage_statistics(scored.coverage, scored.coverage_correct))
    metrics.update(m.step_credit_statistics(scored.step_rewards, scored.step_advantages))
    metrics.update(trained)
    return metrics


def update_metrics(update: UpdateResult, proposer_samples: list[TrainingSample],
                   solver_samples: list[TrainingSample]) -> dict[str, float]:
    """The update's metrics: samples per role, whether and how far the weights moved, the trainer's statistics
    (``train/*``) and each role's gradient norm, optimizer steps and loss (``train/<role>/*``)."""
    metrics = {"train/samples_proposer": float(len(proposer_samples)),
               "train/samples_solver": float(len(solver_samples)),
               "batch/solver_update_skipped": float(not solver_samples),
               "train/weights_changed": float(update.delta > 0), "train/weight_delta_max": update.delta,
               "train/weight_delta_l2_from_start": update.distance}
    metrics.update({f"train/{k}": float(v) for k, v in update.train_stats.items() if isinstance(v, int | float)})
    for role, stats in update.role_stats.items():
        if role != "all":
            metrics.update({f"train/{role}/{k}": float(stats[k]) for k in ("grad_norm", "optimizer_steps", "pg_loss")})
    return metrics


# --- bookkeeping -----------------------------------------------------------------------------------------

FINGERPRINT_ELEMENTS = 4096  # leading elements of every parameter tensor compared before/after the update


def weight_fingerprint(model: Any) -> list[Any]:
    """A copy of the first elements of every parameter of this process's shards (enough to see whether an update
    moved them; under FSDP each process's own slice, so nothing is gathered)."""
    return [p.detach().flatten()[:FINGERPRINT_ELEMENTS].clone() for p in local_shards(model.parameters())]


def weight_delta(before: list[Any], model: Any, accelerator: Any = None) -> float:
    """Largest absolute change among the fingerprinted elements of every process (0.0: the weights did not
    change); ``accelerator`` gathers the processes' figures where there are several."""
    import torch

    deltas = [(p.detach().flatten()[:FINGERPRINT_ELEMENTS] - b).abs().max().item()
              for b, p in zip(before, local_shards(model.parameters()), strict=True) if b.numel()]
    largest = float(max(deltas, default=0.0))
    if accelerator is None or accelerator.num_processes == 1:
        return largest
    return float(accelerator.gather(torch.tensor([largest], device=accelerator.device)).max())


def distance_from_start(trainer: Any) -> float:
    """L2 norm of the weight change since self-play started, ||theta - theta_0||_2 over every parameter.

    theta_0 is the frozen reference model (the KL anchor: the weights self-play started from, the
    warm-start checkpoint by default); NaN without one (``selfplay.kl_beta: 0``) or for a trainer without
    ``start_distance`` (test fakes).
    """
    measure = getattr(trainer, "start_distance", None)  # PolicyTrainer, wherever its reference waits
    return float(measure()) if callable(measure) else float("nan")


def evaluated_change_share(trainer: Any) -> float:
    """Share of all parameters whose value in the rollout/evaluation dtype (bf16 where rollouts use it) differs
    from the start of self-play (``PolicyTrainer.start_change_share``): 0 means no update so far changed an
    answer, however far the fp32 weights moved. NaN for a trainer without start weights (test fakes)."""
    share = getattr(trainer, "start_change_share", None)
    return float(share()) if callable(share) else float("nan")


def _decode(runtime: Runtime, ids: list[int]) -> str:
    return runtime.backend.tokenizer.decode(ids, skip_special_tokens=False)


def sample_trajectories(runtime: Runtime, proposals: list[Proposal], slots: list[Slot],
                        groups: list[list[Trajectory]], correct: list[list[bool]], limit: int) -> dict[str, Any]:
    """Decoded Proposer and Solver trajectories (the first ``limit`` of each) for the MLflow artifact."""
    proposer = [{"seed_id": p.seed.seed_id, "answer": p.seed.answer, "question": p.trajectory.question,
                 "rejected": p.reason, "rag_answer": p.rag_answer, "searches": p.trajectory.search_queries,
                 "response": _decode(runtime, p.trajectory.response_ids)} for p in proposals[:limit]]
    solver = [{"question": slot.question, "answer": slot.answer, "source": slot.source, "prediction": t.answer,
               "correct": c, "searches": t.search_queries, "response": _decode(runtime, t.response_ids)}
              for slot, group, cs in zip(slots, groups, correct, strict=True)
              for t, c in zip(group, cs, strict=True)][:limit]
    return {"proposer": proposer, "solver": solver}
