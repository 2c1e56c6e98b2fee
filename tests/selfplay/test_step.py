"""One self-play step on the scripted backend + fake search, with the real rollout loop, judge, rewards,
advantages and (slow tests) the real PolicyTrainer on a tiny random-init model shared per module."""

import math
import random

import pytest

from searchplay.intervals import wilson_interval
from searchplay.selfplay.loop import check_trained_roles
from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeds import SeedCursor, load_kg_seeds
from searchplay.selfplay.step import (
    LoopState,
    Slot,
    complete_batch,
    filter_and_verify,
    fixed_role,
    propose,
    run_step,
    solve,
    trained_samples,
)
from searchplay.selfplay.variants import get_variant
from tests.selfplay.conftest import make_runtime
from tests.selfplay.selfplay_fakes import ScriptedBackend, question_for, write_kg_pool


@pytest.fixture()
def setup(params_factory, tokenizer, tmp_path):
    """``build(...) -> params, backend, runtime, state, variant``; pass ``trainer`` for a full step."""
    def build(variant="kg_wcr", proposer_mode="good", verifier_mode="good", trainer=None, **selfplay):
        params = params_factory(**selfplay)
        records = write_kg_pool(tmp_path / "kg", 6)
        backend = ScriptedBackend(tokenizer, [r["answer"] for r in records],
                                  {r["answer"]: r["waypoints"] for r in records}, proposer_mode, verifier_mode)
        state = LoopState(0, SeedCursor(load_kg_seeds(tmp_path / "kg")), ReplayBuffer(), random.Random(0))
        return params, backend, make_runtime(params, backend, trainer=trainer), state, get_variant(variant)
    return build


# --- fast: no trainer ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("verifier_mode", "reason"), [("good", None), ("wrong", "rag_wrong_answer"),
                                                        ("garbage", "rag_no_answer"), ("error", "rag_verifier_error")])
def test_rag_verification_fails_closed(setup, verifier_mode, reason):
    params, backend, runtime, state, variant = setup(verifier_mode=verifier_mode)
    proposals = propose(runtime, variant, state.cursor.next_batch(3))
    filter_and_verify(runtime, proposals, params, state.rng)
    assert [p.reason for p in proposals] == [reason] * 3
    assert backend.verifier_calls == (1 if verifier_mode == "error" else 3)  # one batched call raised
    assert all(len(p.trajectory.search_queries) == 2 for p in proposals)


@pytest.mark.parametrize(("proposer_mode", "reason"), [("one_search", "too_few_searches"),
                                                        ("leak", "answer_in_question"), ("no_question", "no_question")])
def test_rule_filter_rejects_before_the_verifier(setup, proposer_mode, reason):
    params, backend, runtime, state, variant = setup(proposer_mode=proposer_mode)
    proposals = propose(runtime, variant, state.cursor.next_batch(3))
    filter_and_verify(runtime, proposals, params, state.rng)
    assert [p.reason for p in proposals] == [reason] * 3 and backend.verifier_calls == 0


def test_batch_completion_strategies():
    rng = random.Random(0)
    fresh = [Slot(question_for("A"), "A", ["W"], "sg-a", "fresh", 0)]
    replay = ReplayBuffer([{"question": question_for("B"), "answer": "B", "waypoints": [], "seed_id": "sg-b"}])
    assert [s.source for s in complete_batch(fresh, 3, "replay", replay, rng)] == ["fresh", "replay", "replay"]
    assert [s.answer for s in complete_batch([], 2, "reuse", replay, rng)] == ["B", "B"]
    assert complete_batch([], 2, "replay", ReplayBuffer(), rng) == []  # no dummy problem
    replicated = complete_batch(fresh, 2, "resample", replay, rng)
    assert [(s.source, s.answer, s.proposer_index) for s in replicated] == [("fresh", "A", 0), ("replicate", "A", None)]
    assert complete_batch(fresh, 3, "none", replay, rng) == fresh


def with_frozen_opponent(runtime, params, frozen, trained_roles):
    """``runtime`` as ``loop.build_runtime`` makes it for ``selfplay.trained_roles``: the fixed role on ``frozen``."""
    from searchplay.agent.rollout import run_rollouts
    from tests.selfplay.selfplay_fakes import FakeSearchTool

    search_tool = FakeSearchTool()
    runtime.frozen = frozen
    runtime.frozen_rollouts = lambda ids, role, cfg: run_rollouts(frozen, search_tool, ids, role, cfg,
                                                                  top_k=params.search.top_k)
    runtime.fixed_role = fixed_role(trained_roles)
    return runtime


@pytest.mark.parametrize("trained_roles", ["solver", "proposer"])
def test_the_fixed_opponent_plays_with_the_frozen_backend_and_the_trained_role_with_the_policy(
        setup, tokenizer, trained_roles):
    params, backend, runtime, state, variant = setup("kg", trained_roles=trained_roles)
    frozen = ScriptedBackend(tokenizer, list(backend.by_code.values()), proposer_mode="one_search")
    with_frozen_opponent(runtime, params, frozen, trained_roles)
    proposals = propose(runtime, variant, state.cursor.next_batch(3))
    searches = {p.trajectory.num_searches for p in proposals}
    assert searches == ({1} if trained_roles == "solver" else {2})  # the frozen backend's Proposer searches once
    slots = [Slot(question_for(a), a, [], "s", "fresh") for a in list(backend.by_code.values())[:2]]
    solve(runtime, slots, group_size=2)
    policy_solved, frozen_solved = backend.solver_count, frozen.solver_count
    assert (policy_solved, frozen_solved) == ((4, 0) if trained_roles == "solver" else (0, 4))


def test_a_fixed_opponent_without_a_frozen_backend_is_an_error(setup):
    _, _, runtime, state, variant = setup("kg")
    runtime.fixed_role = "proposer"
    with pytest.raises(RuntimeError, match="no frozen backend"):
        propose(runtime, variant, state.cursor.next_batch(1))


def test_trained_roles_leave_the_fixed_opponents_samples_out_of_the_update():
    proposer, solver = ["p1", "p2"], ["s1"]
    assert trained_samples(fixed_role("both"), proposer, solver) == (proposer, solver)
    assert trained_samples(fixed_role("solver"), proposer, solver) == ([], solver)
    assert trained_samples(fixed_role("proposer"), proposer, solver) == (proposer, [])
    assert [fixed_role(r) for r in ("both", "solver", "proposer")] == [None, "proposer", "solver"]


def test_a_trained_role_must_sample_at_the_temperature_its_log_probs_are_taken():
    """pi_old and pi are taken at temperature 1: a trained role sampling at 0.8 would train off-policy unseen."""
    from searchplay.config import Params
    from searchplay.selfplay.loop import SelfplayError, check_rollout_temperatures, run_selfplay

    check_rollout_temperatures(Params())
    cooler = Params.model_validate({"selfplay": {"proposer_temperature": 0.8}})
    with pytest.raises(ValueError, match=r"selfplay\.proposer_temperature=0\.8: self-play trains the proposer"):
        check_rollout_temperatures(cooler)
    check_rollout_temperatures(cooler.model_copy(update={"selfplay": cooler.selfplay.model_copy(
        update={"trained_roles": "solver"})}))  # a frozen Proposer may sample as it likes
    with pytest.raises(SelfplayError, match=r"agent\.temperature=0\.5"):  # before anything loads
        run_selfplay(Params.model_validate({"agent": {"temperature": 0.5}}), "kg_wcr", 1)


def test_fixed_opponent_runs_need_the_joint_step_and_a_proposer():
    check_trained_roles(get_variant("kg_draft"), "solver")
    check_trained_roles(get_variant("kg_template"), "both")
    with pytest.raises(ValueError, match="has no Proposer"):
        check_trained_roles(get_variant("kg_template"), "proposer")
    from searchplay.recipes import load_recipes

    load_recipes()
    with pytest.raises(ValueError, match="needs the joint self-play step"):
        check_trained_roles(get_variant("eve"), "solver")


# --- slow: the real PolicyTrainer --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_valid_batch_trains_both_roles(setup, trainer):
    params, backend, runtime, state, variant = setup(trainer=trainer)
    result = run_step(runtime, variant, params, state)
    m = result.metrics
    assert m["filter/valid_rate_rule"] == 1.0 and m["filter/valid_rate_rag"] == 1.0
    assert m["batch/fresh"] == 3 and m["batch/replayed"] == 0 and m["solver/rollouts"] == 9
    assert 0 < m["solver/accuracy"] < 1 and m["proposer/reward_mean"] > 0
    assert m["solver/fresh_rollouts"] == 9 and m["solver/fresh_accuracy"] == m["solver/accuracy"]  # all fresh
    assert m["solver/fresh_accuracy_ci_low"] < m["solver/fresh_accuracy"] < m["solver/fresh_accuracy_ci_high"]
    assert m["train/samples_proposer"] == 3 and m["train/samples_solver"] == 9
    assert m["train/groups_nonzero_advantage"] >= 1 and m["train/weights_changed"] == 1.0
    # the SSP code's schedule: a Proposer update (1 step), then a Solver update (2 mini-batch steps)
    steps = (m["train/proposer/optimizer_steps"], m["train/solver/optimizer_steps"], m["train/optimizer_steps"])
    assert steps == (1, 2, 3)
    assert m["train/proposer/grad_norm"] > 0 and m["train/solver/grad_norm"] > 0
    assert m["solver/wcr_process_reward"] > 0  # waypoint titles in <think> of wrong rollouts earn credit
    assert m["coverage/mean_incorrect"] > 0 and "coverage/spearman_rho" in m
    assert backend.updates == 1 and state.cursor.position == 3 and len(state.replay) == 3
    assert len(result.samples["proposer"]) == 3 and "<question>" in result.samples["proposer"][0]["response"]
    assert m["format/proposer_valid_rate"] == 1.0 and m["format/verifier_format_rate"] == 1.0
    assert m["format/solver_valid_rate"] == 1.0
    # the shared trainer has drifted over earlier tests too; the distance to the KL anchor only grows from 0
    assert m["train/weight_delta_l2_from_start"] > 0


@pytest.mark.slow
def test_a_question_whose_solver_group_met_a_judge_error_is_left_out_of_the_update(setup, trainer):
    """A judge error is no verdict: counted as wrong it would push the Solver away from an answer nobody judged and
    raise the Proposer's reward (1 - accuracy). The question's group and its Proposer sample are left out."""
    from types import SimpleNamespace

    params, _, runtime, state, variant = setup(trainer=trainer)
    judge = runtime.judge

    class FailsOnce:  # the Solver's first rollout of the step is not judged (RAG verification judges 3 items)
        def judge_many(self, items):
            verdicts = judge.judge_many(items)
            if len(items) > 3:
                verdicts[0] = SimpleNamespace(correct=False, method="error", judge_model="judge")
            return verdicts

    runtime.judge = FailsOnce()
    m = run_step(runtime, variant, params, state).metrics
    assert m["solver/judge_errors"] == 1 and m["batch/fresh"] == 3
    assert m["train/samples_proposer"] == 2 and m["train/samples_solver"] == 6  # one question of 3 left out


@pytest.mark.slow
def test_the_template_control_trains_the_solver_on_template_questions_without_a_proposer(setup, trainer):
    params, backend, runtime, state, variant = setup("kg_template", trainer=trainer)
    result = run_step(runtime, variant, params, state)
    m = result.metrics
    assert m["proposer/proposals"] == 0 and m["train/samples_proposer"] == 0 and "train/proposer/grad_norm" not in m
    assert m["batch/fresh"] == 3 and m["solver/rollouts"] == 9 and 0 < m["solver/accuracy"] < 1
    assert m["train/samples_solver"] == 9 and m["train/weights_changed"] == 1.0
    assert m["train/solver/grad_norm"] > 0  # a gradient, not the weight decay alone, moved the weights
    assert math.isnan(m["filter/gold_checked_rate"])  # no Proposer question to check
    assert all(q["question"].startswith("What is the relation 2 of") for q in result.questions)
    assert backend.verifier_calls == 0 and result.samples["proposer"] == []


@pytest.mark.slow
def test_the_draft_control_shows_its_proposer_the_template_question_and_trains_it(setup, trainer):
    params, backend, runtime, state, variant = setup("kg_draft", trainer=trainer)
    seen: list[str] = []
    generate = backend.generate

    def recording(prompts, sampling):
        seen.extend(backend.tokenizer.decode(list(p)) for p in prompts)
        return generate(prompts, sampling)

    backend.generate = recording
    m = run_step(runtime, variant, params, state).metrics
    proposer_prompts = [text for text in seen if "question creator" in text]
    assert len(proposer_prompts) >= 3  # a prompt per turn of each of the 3 proposals
    assert all('"draft_question": "What is the relation 2 of' in text for text in proposer_prompts)
    assert m["proposer/proposals"] == 3 and m["train/samples_proposer"] == 3
    assert not math.isnan(m["filter/gold_checked_rate"])  # a Proposer shown the path: its questions are checked


@pytest.mark.slow
def test_binary_variant_has_no_process_reward_and_the_buffer_resets(setup, trainer):
    params, _, runtime, state, variant = setup("kg", trainer=trainer, replay_reset_every=1)
    m = run_step(runtime, variant, params, state).metrics
    assert m["solver/wcr_process_reward"] == 0.0 and m["batch/fresh"] == 3
    assert len(state.replay) == 0 and m["replay/size"] == 0  # cleared after step 1 of a 1-step period


@pytest.mark.slow
def test_rag_rejections_are_refilled_from_replay_with_zero_proposer_reward(setup, trainer):
    params, _, runtime, state, variant = setup(verifier_mode="wrong", trainer=trainer)
    state.replay.add([{"question": question_for("Answer0"), "answer": "Answer0", "waypoints": ["Seed0"],
                       "seed_id": "sg-0"}])
    m = run_step(runtime, variant, params, state).metrics
    assert m["filter/valid_rate_rule"] == 1.0 and m["filter/valid_rate_rag"] == 0.0
    assert m["filter/rejected_rag_wrong_answer"] == 3 and m["format/verifier_format_rate"] == 1.0
    assert m["batch/replayed"] == 3 and m["train/samples_solver"] == 9
    assert m["solver/fresh_rollouts"] == 0 and math.isnan(m["solver/fresh_accuracy"])  # replayed ones do not count
    assert math.isnan(m["solver/fresh_accuracy_ci_low"]) and not math.isnan(m["solver/accuracy"])
    assert m["proposer/reward_mean"] == 0.0  # replayed slots: the Proposer keeps 0


@pytest.mark.slow
def test_no_valid_question_and_empty_buffer_skips_the_solver_update(setup, trainer):
    params, backend, runtime, state, variant = setup(proposer_mode="one_search", trainer=trainer)
    m = run_step(runtime, variant, params, state).metrics
    assert m["filter/rejected_too_few_searches"] == 3 and backend.verifier_calls == 0
    assert m["batch/solver_update_skipped"] == 1.0 and m["train/samples_solver"] == 0
    assert m["train/samples_proposer"] == 3 and m["proposer/reward_mean"] == 0.0
    assert m["train/optimizer_steps"] == 1 and "train/solver/grad_norm" not in m


@pytest.mark.slow
def test_combine_update_takes_one_step_over_both_roles(setup, trainer):
    params, _, runtime, state, variant = setup(trainer=trainer, combine_update=True)
    m = run_step(runtime, variant, params, state).metrics
    assert m["train/optimizer_steps"] == 1 and "train/proposer/grad_norm" not in m


@pytest.mark.slow
@pytest.mark.parametrize("trained_roles", ["solver", "proposer"])
def test_a_fixed_opponent_run_updates_on_the_trained_roles_samples_only(setup, tokenizer, trainer, trained_roles):
    params, backend, runtime, state, variant = setup("kg", trainer=trainer, trained_roles=trained_roles)
    frozen = ScriptedBackend(tokenizer, list(backend.by_code.values()))
    with_frozen_opponent(runtime, params, frozen, trained_roles)
    m = run_step(runtime, variant, params, state).metrics
    assert m["proposer/proposals"] == 3 and m["solver/rollouts"] == 9 and m["proposer/reward_mean"] > 0
    trained, fixed = ("solver", "proposer") if trained_roles == "solver" else ("proposer", "solver")
    assert m[f"train/samples_{trained}"] > 0 and m[f"train/samples_{fixed}"] == 0
    assert m[f"train/{trained}/grad_norm"] > 0 and f"train/{fixed}/grad_norm" not in m  # > 0: not decay alone
    assert m["train/weights_changed"] == 1.0 and backend.updates == 1 and frozen.updates == 0


@pytest.mark.slow
@pytest.mark.parametrize(("variant_name", "trained_roles"), [("kg", "solver"), ("kg_template", "both")])
def test_an_iteration_with_nothing_to_train_on_takes_no_step_and_logs_no_loss(setup, tokenizer, trainer,
                                                                              variant_name, trained_roles):
    """Solver-Only, or the template control (no Proposer), when no Solver group has a signal: no update at all."""
    params, backend, runtime, state, variant = setup(variant_name, trainer=trainer, trained_roles=trained_roles,
                                                     dynamic_sampling=True, dynamic_sampling_max_rounds=1)
    backend.solver_correct_every, backend.waypoints = 10**6, {}  # all wrong, no waypoint credit (kg_template: WCR)
    if trained_roles == "solver":
        with_frozen_opponent(runtime, params, ScriptedBackend(tokenizer, list(backend.by_code.values())), "solver")
    before = trainer.global_step
    m = run_step(runtime, variant, params, state).metrics
    assert m["train/groups_nonzero_advantage"] == 0 and m["batch/solver_update_skipped"] == 1.0
    assert m["train/optimizer_steps"] == 0 and m["train/weights_changed"] == 0.0 and trainer.global_step == before
    assert math.isnan(m["train/loss"]) and m["train/samples_proposer"] == 0 and m["train/samples_solver"] == 0


@pytest.mark.slow
def test_resample_draws_more_seeds_then_replicates(setup, trainer):
    params, _, runtime, state, variant = setup(proposer_mode="leak", batch_completion="resample",
                                               resample_max_rounds=2, trainer=trainer)
    m = run_step(runtime, variant, params, state).metrics
    assert m["proposer/resample_rounds"] == 2 and m["proposer/proposals"] == 9
    assert m["filter/rejected_answer_in_question"] == 9 and m["batch/questions"] == 0


@pytest.mark.slow
def test_dynamic_sampling_solves_more_seeds_until_a_group_has_a_signal_and_drops_the_rest(setup, trainer):
    params, backend, runtime, state, variant = setup("kg", trainer=trainer, dynamic_sampling=True)
    backend.solver_correct_every = 12  # rollouts 1-9 (round 1) all wrong; rollout 12 (round 2) right
    m = run_step(runtime, variant, params, state).metrics
    assert m["batch/dynamic_sampling_rounds"] == 1 and m["proposer/proposals"] == 6 and m["train/groups"] == 6
    assert m["train/groups_nonzero_advantage"] == 1 and m["train/groups_dropped_no_signal"] == 5
    assert m["train/samples_solver"] == 3 and m["train/samples_proposer"] == 6 and m["solver/rollouts"] == 18
    assert state.cursor.position == 6 and "train/solver/grad_norm" in m
    assert m["filter/valid_rate_rag"] == 1.0 and m["batch/fresh"] == 6  # the extra round's questions count
    assert m["solver/fresh_rollouts"] == 18 and m["solver/fresh_accuracy"] == pytest.approx(1 / 18)
    assert (m["solver/fresh_accuracy_ci_low"], m["solver/fresh_accuracy_ci_high"]) == wilson_interval(1, 18)


@pytest.mark.slow
def test_dynamic_sampling_gives_up_after_its_rounds_and_skips_the_solver_update(setup, trainer):
    params, backend, runtime, state, variant = setup("kg", trainer=trainer, dynamic_sampling=True,
                                                     dynamic_sampling_max_rounds=2)
    backend.solver_correct_every = 10**6
    m = run_step(runtime, variant, params, state).metrics
    assert m["batch/dynamic_sampling_rounds"] == 2 and m["train/groups"] == 9
    assert m["train/groups_nonzero_advantage"] == 0 and m["train/samples_solver"] == 0
    assert m["batch/solver_update_skipped"] == 1.0 and m["train/samples_proposer"] == 9


@pytest.mark.slow
def test_without_dynamic_sampling_groups_without_signal_stay_in_the_update(setup, trainer):
    params, backend, runtime, state, variant = setup("kg", trainer=trainer)
    backend.solver_correct_every = 10**6
    m = run_step(runtime, variant, params, state).metrics
    assert m["batch/dynamic_sampling_rounds"] == 0 and m["train/groups_dropped_no_signal"] == 0
    assert m["train/samples_solver"] == 9


# --- GDCR / SAPO: step-level credit through the same loop -------------------------------------------------


class GraphSearchTool:
    """Every search returns one document naming each path node of the pool (so GDCR sees retrievals)."""

    def __init__(self, records):
        self.text = " ".join(node["label"] for r in records for node in r["path"])

    def search(self, queries, top_k=3):
        from searchplay.retrieval.types import Document

        return [[Document("doc-0", "Doc 0", self.text, 1.0)] for _ in queries]


def _gdcr_setup(params_factory, tokenizer, tmp_path, trainer=None, **selfplay):
    params = params_factory(**selfplay)
    records = write_kg_pool(tmp_path / "kg", 6)
    backend = ScriptedBackend(tokenizer, [r["answer"] for r in records],
                              {r["answer"]: r["waypoints"] for r in records})
    runtime = make_runtime(params, backend, search_tool=GraphSearchTool(records), trainer=trainer)
    state = LoopState(0, SeedCursor(load_kg_seeds(tmp_path / "kg")), ReplayBuffer(), random.Random(0))
    return params, runtime, state


def test_gdcr_groups_get_sapo_token_advantages(params_factory, tokenizer, tmp_path):
    """The 'gdcr' variant's Solver tokens carry SAPO step advantages (GDCR Eq. 14), built from the slot's
    subgraph and each rollout's turns; at lambda 0 they equal GRPO's."""
    from searchplay.rewards import contribution_scores, gdcr_step_rewards
    from searchplay.rl import sapo_advantages
    from searchplay.selfplay.step import filter_and_verify, fresh_slots, judge_groups, score_groups, solve
    from searchplay.selfplay.turns import trajectory_steps

    params, runtime, state = _gdcr_setup(params_factory, tokenizer, tmp_path)
    variant = get_variant("gdcr")
    proposals = propose(runtime, variant, state.cursor.next_batch(3))
    filter_and_verify(runtime, proposals, params, state.rng)
    slots = fresh_slots(proposals)
    assert slots and all(slot.graph for slot in slots)
    groups = solve(runtime, slots, params.selfplay.group_size)
    correct, *_ = judge_groups(runtime, slots, groups)
    scored = score_groups(variant, params, slots, groups, correct)
    slot, group, c = slots[0], groups[0], correct[0]
    scores = contribution_scores(slot.graph, slot.answer)
    steps = [gdcr_step_rewards(trajectory_steps(t), scores) for t in group]
    assert any(r > 0 for s in steps for r in s)  # the first search retrieves graph nodes
    expected = sapo_advantages([float(x) for x in c], steps, lam=0.5, eps=params.selfplay.adv_eps)
    for trajectory, sample, per_step in zip(group, scored.samples[0], expected, strict=True):
        first = trajectory.turns[0]
        assert sample.advantages[first.start] == pytest.approx(per_step[0])
        assert sample.advantages[trajectory.turns[-1].start] == pytest.approx(per_step[-1])
    assert len(scored.step_rewards) == len(scored.step_advantages) == sum(len(t.turns) for g in groups for t in g)

    grpo_params, _, _ = _gdcr_setup(params_factory, tokenizer, tmp_path / "l0", **{"gdcr.sapo_lambda": 0.0})
    flat = score_groups(variant, grpo_params, slots, groups, correct)
    binary = score_groups(get_variant("kg"), grpo_params, slots, groups, correct)
    for sapo_group, grpo_group in zip(flat.group_advantages, binary.group_advantages, strict=True):
        assert sapo_group == pytest.approx(grpo_group)


@pytest.mark.slow
def test_gdcr_step_logs_step_credit_and_trains(params_factory, tokenizer, tmp_path, trainer):
    params, runtime, state = _gdcr_setup(params_factory, tokenizer, tmp_path, trainer=trainer)
    m = run_step(runtime, get_variant("gdcr"), params, state).metrics
    assert m["gdcr/step_reward_mean"] > 0 and m["gdcr/steps"] > 0
    assert 0 < m["gdcr/positive_step_advantage_share"] < 1
    assert m["train/groups_nonzero_advantage"] >= 1 and m["train/weights_changed"] == 1.0


def test_gdcr_on_template_questions_scores_its_steps_on_each_paths_graph(params_factory, tokenizer, tmp_path):
    """'gdcr_template' (GDCR as its paper trains: fixed questions with their ER graphs) asks the template
    questions with every KG answer as gold, and its groups carry GDCR step rewards on that path's subgraph."""
    from searchplay.selfplay.step import judge_groups, score_groups, solve, template_slots

    params, runtime, state = _gdcr_setup(params_factory, tokenizer, tmp_path)
    variant = get_variant("gdcr_template")
    assert variant.questions == "template" and variant.solver_reward == "gdcr" and variant.solver_advantage == "sapo"
    slots = template_slots(state.cursor.next_batch(3))
    assert len(slots) == 3 and all(slot.graph and slot.question.startswith("What is the") for slot in slots)
    groups = solve(runtime, slots, params.selfplay.group_size)
    correct, *_ = judge_groups(runtime, slots, groups)
    scored = score_groups(variant, params, slots, groups, correct)
    assert len(scored.step_rewards) == sum(len(t.turns) for g in groups for t in g)
    assert any(r > 0 for r in scored.step_rewards)  # searches retrieve the path's nodes


@pytest.mark.slow
def test_gdcr_on_template_questions_trains_the_solver_without_a_proposer(params_factory, tokenizer, tmp_path,
                                                                          trainer):
    params, runtime, state = _gdcr_setup(params_factory, tokenizer, tmp_path, trainer=trainer)
    m = run_step(runtime, get_variant("gdcr_template"), params, state).metrics
    assert m["proposer/proposals"] == 0 and m["train/samples_proposer"] == 0
    assert m["gdcr/steps"] > 0 and m["batch/fresh"] == 3


def _proposal(question: str, answers: list[str], reason: str | None = None):
    from searchplay.agent.trajectory import Trajectory
    from searchplay.selfplay.seeds import Seed
    from searchplay.selfplay.step import Proposal

    record = {"path": [{"label": "France", "aliases": ["French Republic"]}, {"label": "Paris"}], "answers": answers,
              "relations": [{"label": "capital"}], "distractors": []}
    trajectory = Trajectory(role="proposer", prompt_ids=[1], response_ids=[2], loss_mask=[1], turns=[],
                            question=question)
    return Proposal(Seed("s", answers[0], ("France",), 1, record), trajectory, reason)


def test_a_kg_slot_accepts_every_answer_its_path_gives_and_an_answer_only_slot_does_not():
    from searchplay.selfplay.step import fresh_slots

    proposals = [_proposal("Which city is the capital of the French Republic?", ["Paris", "Lutetia"])]
    kg_slot, = fresh_slots(proposals, path_golds=True)
    assert kg_slot.golds == ["Paris", "Lutetia"]
    assert Slot.from_entry(kg_slot.to_entry(), "replay").golds == ["Paris", "Lutetia"]  # replayed with them
    answer_slot, = fresh_slots(proposals)
    assert answer_slot.golds == ["Paris"]


def test_the_gold_check_rates_count_accepted_questions_that_name_the_head_and_ask_the_last_relation():
    from searchplay.selfplay.step import gold_check_metrics

    proposals = [_proposal("Which city is the capital of the French Republic?", ["Paris"]),
                 _proposal("Which river flows through the French Republic, in the west?", ["Paris"]),
                 _proposal("What is the capital of the country of Romania?", ["Paris"]),
                 _proposal("What is the capital of Italy, a country?", ["Paris"], reason="too_few_searches")]
    rates = gold_check_metrics(proposals)
    assert rates["filter/head_named_rate"] == pytest.approx(2 / 3)
    assert rates["filter/gold_checked_rate"] == pytest.approx(1 / 3)  # only the first asks for the capital
    assert all(math.isnan(v) for v in gold_check_metrics(proposals[3:]).values())


def test_template_slots_ask_each_path_as_its_template_question_with_every_kg_answer():
    from searchplay.selfplay.seeds import Seed
    from searchplay.selfplay.step import template_slots

    record = {"path": [{"label": "Ravenna"}, {"label": "Italy"}, {"label": "Europe"}], "answers": ["Europe", "Asia"],
              "relations": [{"label": "country"}, {"label": "continent"}], "distractors": []}
    slot, = template_slots([Seed("sg", "Europe", ("Ravenna", "Italy"), 2, record), Seed("plain", "Paris")])
    assert slot.question == "What is the continent of the country of Ravenna?"
    assert slot.golds == ["Europe", "Asia"] and slot.source == "fresh" and slot.proposer_index is None


def test_the_head_entity_rule_rejects_a_question_about_another_entity(params_factory):
    from searchplay.agent.trajectory import Turn
    from searchplay.retrieval.types import Document

    params = params_factory(rag_verification=False, require_head_entity=True)
    turns = [Turn(text=f"<search>{q}</search>", start=0, end=1, action="search", search_queries=[q],
                  documents=[Document("d", "T", "text")]) for q in ("capital of Romania", "Romania river")]
    proposals = [_proposal("What is the capital city of the country called Romania in Europe?", ["Paris"]),
                 _proposal("What is the capital city of the country called France in Europe?", ["Bern"])]
    for proposal in proposals:
        proposal.trajectory.turns = turns
    filter_and_verify(None, proposals, params, random.Random(0), sees_path=True)
    assert [p.reason for p in proposals] == ["no_head_entity", None]
    filter_and_verify(None, proposals, params_factory(rag_verification=False), random.Random(0), sees_path=True)
    assert [p.reason for p in proposals] == [None, None]  # off: the papers' rule filter
    filter_and_verify(None, proposals, params, random.Random(0))
    assert [p.reason for p in proposals] == [None, None]  # an answer-only Proposer has no path to check


def test_the_last_relation_rule_rejects_a_question_that_asks_for_something_else(params_factory):
    from searchplay.agent.trajectory import Turn
    from searchplay.retrieval.types import Document

    params = params_factory(rag_verification=False, require_last_relation=True)
    turns = [Turn(text=f"<search>{q}</search>", start=0, end=1, action="search", search_queries=[q],
                  documents=[Document("d", "T", "text")]) for q in ("capital of France", "France river")]
    proposals = [_proposal("Which river runs through the country called France in Europe?", ["Paris"]),
                 _proposal("What is the capital city of the country called France in Europe?", ["Bern"])]
    for proposal in proposals:
        proposal.trajectory.turns = turns
    filter_and_verify(None, proposals, params, random.Random(0), sees_path=True)
    assert [p.reason for p in proposals] == ["no_last_relation", None]


def test_the_step_reads_coverage_from_the_reward_and_step_advantages_from_the_estimator(setup, monkeypatch):
    """What a reward and an estimator return is what the statistics count: nothing is measured a second time."""
    from searchplay.rewards import SOLVER_REWARDS, SolverRewards
    from searchplay.rl import ADVANTAGE_ESTIMATORS
    from searchplay.selfplay.step import fresh_slots, judge_groups, score_groups

    params, _, runtime, state, variant = setup()
    proposals = propose(runtime, variant, state.cursor.next_batch(3))
    filter_and_verify(runtime, proposals, params, state.rng)
    slots = fresh_slots(proposals)
    groups = solve(runtime, slots, params.selfplay.group_size)
    correct, *_ = judge_groups(runtime, slots, groups)

    def reward(group, params):
        return SolverRewards([0.0] * group.size, step_rewards=[[1.0, 0.0]] * group.size,
                             details={"coverage": [0.25] * group.size})

    def estimator(rewards, masks, params, details=None, **_):
        details["step_advantages"] = [[0.5, -0.5]] * len(rewards)
        return [[0.0] * len(mask) for mask in masks]

    monkeypatch.setitem(SOLVER_REWARDS, "wcr", reward)
    monkeypatch.setitem(ADVANTAGE_ESTIMATORS, "grpo", estimator)
    scored = score_groups(variant, params, slots, groups, correct)
    rollouts = sum(len(g) for g in groups)
    assert scored.coverage == [0.25] * rollouts and scored.details["coverage"] == [0.25] * rollouts
    assert scored.step_advantages == [0.5, -0.5] * rollouts and scored.step_rewards == [1.0, 0.0] * rollouts
